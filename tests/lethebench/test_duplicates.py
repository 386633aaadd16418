"""lethebench/duplicates.py: duplicated sources on TechQA's real technotes, their qrels, the build key, and refusals."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.config import load_config
from experiments.datasets import dataset_build_key
from lethebench.duplicates import SUFFIX, duplicate_params, inject_duplicates
from lethebench.loaders.techqa import load_techqa
from lethebench.schema import DatasetError, SourceDataset
from tests.conftest import DATA_ROOT


@pytest.fixture(scope="module")
def techqa():
    return load_techqa(DATA_ROOT / "techqa" / "techqa_rag_eval_sample_480.jsonl")


def test_a_share_of_real_technotes_is_ingested_twice_with_its_relevance(techqa):
    out = inject_duplicates(techqa, 0.5, 0)
    before = techqa.sources.set_index("source_id")
    copies = out.sources[out.sources["source_id"].str.endswith(SUFFIX)]
    assert len(copies) == round(0.5 * len(before)) and len(out.sources) == len(before) + len(copies)
    assert (copies["doc_id"] == copies["source_id"]).all()
    orig = before.loc[copies["source_id"].str.removesuffix(SUFFIX)]
    assert list(copies["text"]) == list(orig["text"]) and list(copies["scope_id"]) == list(orig["scope_id"])
    copied = set(orig.index)
    gained = 0
    for q, rel in techqa.qrels.items():
        want = {**rel, **{s + SUFFIX: g for s, g in rel.items() if s in copied}}
        assert out.qrels[q] == want
        gained += len(want) > len(rel)
    assert gained > 50  # many questions' gold technote has a copy: deduplication has something to remove
    assert out.card["duplicates"]["copies"] == len(copies) and techqa.card.get("duplicates") is None
    assert out.queries is techqa.queries


def test_the_copies_are_seeded(techqa):
    def chosen(seed):
        s = inject_duplicates(techqa, 0.2, seed).sources["source_id"]
        return set(s[s.str.endswith(SUFFIX)])

    assert chosen(0) == chosen(0) and chosen(0) != chosen(1)


def test_duplicates_give_a_dataset_its_own_build_key():
    plain = dataset_build_key(load_config(["dataset=techqa"]))
    dup = load_config(["dataset=techqa_dup"])
    assert dup.dataset.name == "techqa_dup" and dataset_build_key(dup) != plain
    assert dataset_build_key(load_config(["dataset=techqa_dup", "dataset.duplicates.seed=1"])) != dataset_build_key(dup)


@pytest.mark.parametrize(
    "section, message",
    [
        ({"share": 0.0}, "share must be a number in (0, 1]"),
        ({"share": 1.5}, "share must be a number in (0, 1]"),
        ({"share": True}, "share must be a number"),
        ({"share": 0.5, "seed": "x"}, "seed must be an integer"),
        ({"share": 0.5, "copies": 2}, "unknown key(s) ['copies']"),
    ],
)
def test_a_bad_section_names_the_dataset_and_the_key(section, message):
    with pytest.raises(ValueError, match="dataset mine: duplicates") as err:
        duplicate_params(section, "mine")
    assert message in str(err.value)
    assert duplicate_params(None, "mine") is None and duplicate_params({"share": 1, "seed": 3}, "mine") == (1.0, 3)


def test_a_loader_that_grades_chunks_is_refused():
    src = SourceDataset(
        "ud",
        pd.DataFrame({"source_id": ["a"], "doc_id": ["a"], "scope_id": ["s"], "text": ["t"]}),
        pd.DataFrame(),
        {},
        {},
        chunk_qrels=lambda corpus, m: {},
    )
    with pytest.raises(DatasetError, match="dataset ud: duplicates need relevance on sources"):
        inject_duplicates(src, 0.5, 0)
