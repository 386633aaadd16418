"""Data model validation rejects bad input with a message that says what and where."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lethebench.schema import DatasetError, read_dataset, validate, write_dataset
from tests.support.toy import toy_dataset


def test_toy_round_trip(tmp_path):
    ds = toy_dataset()
    folder = write_dataset(ds, tmp_path / "toy")
    back = read_dataset(folder)
    assert back.qrels == ds.qrels
    assert list(back.corpus["doc_id"]) == list(ds.corpus["doc_id"])
    assert set(back.card["outputs_sha256"]) == {"corpus.parquet", "queries.parquet", "qrels.trec"}
    assert (folder / "card.md").read_text().startswith("# Dataset card: toy")


def test_missing_column():
    ds = toy_dataset()
    ds.corpus = ds.corpus.drop(columns=["source_id"])
    with pytest.raises(DatasetError, match=r"toy/corpus: missing column\(s\) \['source_id'\]"):
        validate(ds)


def test_duplicate_ids():
    ds = toy_dataset()
    ds.corpus.loc[1, "doc_id"] = "chat:0"
    with pytest.raises(DatasetError, match="duplicate doc_id"):
        validate(ds)


def test_empty_text():
    ds = toy_dataset()
    ds.queries.loc[0, "text"] = "   "
    with pytest.raises(DatasetError, match=r"empty text for query_id \['q_early'\]"):
        validate(ds)


def test_wrong_type_names_row_and_column():
    ds = toy_dataset()
    ds.corpus["entities"] = [[] for _ in range(len(ds.corpus))]
    ds.corpus.at[3, "entities"] = ["ok", 5]
    with pytest.raises(DatasetError, match=r"row 3, column 'entities'"):
        validate(ds)


@pytest.mark.parametrize("qrels, msg", [
    ({"nope": {"chat:1": 1}}, "query 'nope' is not in queries"),
    ({"q_early": {"ghost": 1}}, "names unknown doc 'ghost'"),
    ({"q_early": {"notes:0": 1}}, "of another scope"),
    ({"q_early": {"chat:1": 0}}, "grade must be an int >= 1"),
])
def test_bad_qrels(qrels, msg):
    ds = toy_dataset()
    ds.qrels = qrels
    with pytest.raises(DatasetError, match=msg):
        validate(ds)


def test_invalid_dataset_is_not_written(tmp_path):
    ds = toy_dataset()
    ds.qrels = {"q_early": {"ghost": 1}}
    with pytest.raises(DatasetError):
        write_dataset(ds, tmp_path / "toy")
    assert not (tmp_path / "toy").exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_split_is_a_query_column(tmp_path):
    ds = toy_dataset()  # built without one: every query's split is null
    assert ds.queries["split"].isna().all()
    ds.queries["split"] = ["train", "dev", "test", None]
    back = read_dataset(write_dataset(ds, tmp_path / "toy"))
    assert back.queries["split"].fillna("-").tolist() == ["train", "dev", "test", "-"]
    ds.queries["split"] = ["train", 5, "test", None]
    with pytest.raises(DatasetError, match=r"row 1, column 'split'"):
        validate(ds)


def test_queries_written_before_the_split_column_take_it_from_meta(tmp_path):
    folder = write_dataset(toy_dataset(), tmp_path / "toy")
    q = pd.read_parquet(folder / "queries.parquet").drop(columns=["split"])
    q["meta"] = [json.dumps({"split": "test", "x": 1}), "{}", json.dumps({"split": None}), json.dumps({"split": "dev"})]
    q.to_parquet(folder / "queries.parquet", index=False)
    back = read_dataset(folder)
    assert back.queries["split"].fillna("-").tolist() == ["test", "-", "-", "dev"]
    assert back.queries["meta"].tolist() == q["meta"].tolist()  # meta is left as it is
