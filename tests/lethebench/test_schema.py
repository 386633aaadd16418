"""Data model validation rejects bad input with a message that says what and where."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lethe.core import hashing
from lethebench.schema import (
    DatasetError,
    content_sha256,
    dataset_content_sha256,
    read_dataset,
    update_card_hashes,
    validate,
    write_dataset,
)
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


@pytest.mark.parametrize(
    "qrels, msg",
    [
        ({"nope": {"chat:1": 1}}, "query 'nope' is not in queries"),
        ({"q_early": {"ghost": 1}}, "names unknown doc 'ghost'"),
        ({"q_early": {"notes:0": 1}}, "of another scope"),
        ({"q_early": {"chat:1": 0}}, "grade must be an int >= 1"),
    ],
)
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


def test_queries_written_before_the_split_column_get_a_null_one(tmp_path):
    # since adb9c28 the split lives only in the column: one named in meta is not parsed from there
    folder = write_dataset(toy_dataset(), tmp_path / "toy")
    q = pd.read_parquet(folder / "queries.parquet").drop(columns=["split"])
    q["meta"] = [json.dumps({"split": "test", "x": 1}), "{}", json.dumps({"split": None}), json.dumps({"split": "dev"})]
    q.to_parquet(folder / "queries.parquet", index=False)
    update_card_hashes(folder)  # edited on purpose: record the new hashes
    back = read_dataset(folder)
    assert back.queries["split"].isna().all()
    assert back.queries["meta"].tolist() == q["meta"].tolist()  # meta is left as it is


# --- the files are checked against card.json (outputs_sha256) --------------------------------------------


def _edit_corpus(folder):
    c = pd.read_parquet(folder / "corpus.parquet")
    c.loc[0, "text"] = "edited in place"
    c.to_parquet(folder / "corpus.parquet", index=False)


def test_a_file_edited_in_place_is_an_error_not_a_reused_dataset(tmp_path):
    # used to be read as is: a custom dataset edited in place kept its identity and its runs were skipped
    folder = write_dataset(toy_dataset(), tmp_path / "toy")
    before = read_dataset(folder)
    assert before.content_sha256 == dataset_content_sha256(folder) == content_sha256(before.card["outputs_sha256"])
    _edit_corpus(folder)
    with pytest.raises(
        DatasetError,
        match=r"toy/corpus\.parquet: content changed after the dataset was written "
        r"\(sha256 [0-9a-f]{16}\.\.\., card\.json records [0-9a-f]{16}\.\.\.\)"
        r".*update_card_hashes",
    ):
        read_dataset(folder)
    with pytest.raises(DatasetError, match=r"corpus\.parquet: content changed"):
        dataset_content_sha256(folder)
    # recorded on purpose, the folder is another dataset: a new content hash, so runs get a new identity
    new = update_card_hashes(folder)
    after = read_dataset(folder)
    assert after.corpus.loc[0, "text"] == "edited in place"
    assert after.content_sha256 == new == dataset_content_sha256(folder) != before.content_sha256


def test_a_built_folder_says_rebuild(tmp_path):
    ds = toy_dataset()
    ds.card["build"] = {"key": "abc", "version": "2"}
    folder = write_dataset(ds, tmp_path / "toy")
    (folder / "qrels.trec").write_text("q_early 0 chat:1 1\n")
    with pytest.raises(DatasetError, match=r"toy/qrels\.trec: content changed .*rebuild it"):
        read_dataset(folder)


def test_missing_and_unlisted_data_files(tmp_path):
    ds = toy_dataset()
    ds.contradictions = pd.DataFrame({"query_id": ["q_late"], "stale_doc_id": ["chat:3"], "current_doc_id": ["chat:4"]})
    folder = write_dataset(ds, tmp_path / "toy")
    moved = folder.parent / "contradictions.parquet"
    (folder / "contradictions.parquet").rename(moved)
    with pytest.raises(DatasetError, match=r"toy/contradictions\.parquet: missing, but card\.json lists it"):
        read_dataset(folder)
    plain = write_dataset(toy_dataset(), tmp_path / "plain")
    moved.rename(plain / "contradictions.parquet")
    with pytest.raises(DatasetError, match=r"plain/contradictions\.parquet: data file not listed in card\.json"):
        read_dataset(plain)


def test_a_card_without_hashes_is_read_with_a_warning(tmp_path, caplog):
    folder = write_dataset(toy_dataset(), tmp_path / "toy")
    card = json.loads((folder / "card.json").read_text())
    files = card.pop("outputs_sha256")
    (folder / "card.json").write_text(json.dumps(card))
    with caplog.at_level("WARNING", logger="lethebench.schema"):
        ds = read_dataset(folder)
    assert "no outputs_sha256" in caplog.text and str(folder) in caplog.text
    assert ds.content_sha256 == content_sha256(files)  # the identity of the content, checked or not


def test_hashes_are_cached_by_size_and_mtime(tmp_path, monkeypatch):
    folder = write_dataset(toy_dataset(), tmp_path / "toy")
    calls = []
    real = hashing.sha256_file
    monkeypatch.setattr(hashing, "sha256_file", lambda p: calls.append(Path(p).name) or real(p))
    read_dataset(folder)
    read_dataset(folder)
    dataset_content_sha256(folder)
    assert sorted(calls) == ["corpus.parquet", "qrels.trec", "queries.parquet"]  # each file hashed once
    _edit_corpus(folder)
    with pytest.raises(DatasetError, match="corpus.parquet: content changed"):
        read_dataset(folder)
    assert sorted(calls) == ["corpus.parquet", "corpus.parquet", "qrels.trec", "queries.parquet"]


def test_non_integer_grade_names_file_and_line(tmp_path):
    # used to be a bare "invalid literal for int() with base 10: 'high'"
    folder = write_dataset(toy_dataset(), tmp_path / "toy")
    lines = (folder / "qrels.trec").read_text().splitlines()
    lines[2] = lines[2].rsplit(" ", 1)[0] + " high"
    (folder / "qrels.trec").write_text("\n".join(lines) + "\n")
    message = r"toy/qrels\.trec:3: grade 'high' is not an integer"
    with pytest.raises(DatasetError, match=message):
        update_card_hashes(folder)  # validates before recording anything
    card = json.loads((folder / "card.json").read_text())
    del card["outputs_sha256"]  # a folder assembled by hand: nothing to check the file against
    (folder / "card.json").write_text(json.dumps(card))
    with pytest.raises(DatasetError, match=message):
        read_dataset(folder)


def test_read_table_reads_one_table_as_read_dataset_does(tmp_path):
    from lethebench.schema import DatasetError, read_table

    pd.DataFrame({"doc_id": ["a", "b"], "entities": [["x", "y"], []], "text": ["t1", "t2"]}).to_parquet(
        tmp_path / "corpus.parquet", index=False
    )
    corpus = read_table(tmp_path, "corpus", ["doc_id", "entities"])
    assert list(corpus.columns) == ["doc_id", "entities"] and corpus["entities"].tolist() == [["x", "y"], []]
    assert read_table(tmp_path, "contradictions", optional=True) is None
    with pytest.raises(DatasetError, match="queries.parquet: missing; build the dataset"):
        read_table(tmp_path, "queries")
    (tmp_path / "queries.parquet").write_text("not parquet")
    with pytest.raises(DatasetError, match="cannot read it as parquet"):
        read_table(tmp_path, "queries")
    with pytest.raises(ValueError, match="table='qrels'"):
        read_table(tmp_path, "qrels")
