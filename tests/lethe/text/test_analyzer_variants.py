"""The analysis variants of the in-memory BM25 (seed 004's tokenization study): each leaves out exactly its step,
checked on a hand-written sentence, and the BM25 index and method use the variant they are given."""

from __future__ import annotations

import pytest

from baselines.bm25_memory import InMemoryBM25
from lethe.core.protocol import Doc, Query
from lethe.retrieval.bm25 import BM25Index
from lethe.text.analyzer import ANALYZERS, analyze, get_analyzer

TEXT = "The runners' shoes weren't running; Lena's API-key v2.1 is in the config."


def test_each_variant_by_hand():
    # english: UAX#29 words (a trailing apostrophe is not part of one; "weren't" and "v2.1" are one word each),
    # possessive 's dropped, lowercased, stopwords (the, is, in) dropped, Porter (runners -> runner, key -> kei)
    assert analyze(TEXT) == ["runner", "shoe", "weren't", "run", "lena", "api", "kei", "v2.1", "config"]
    assert get_analyzer("no_stem")(TEXT) == [
        "runners",
        "shoes",
        "weren't",
        "running",
        "lena",
        "api",
        "key",
        "v2.1",
        "config",
    ]
    assert get_analyzer("no_stopwords")(TEXT) == [
        "the",
        "runner",
        "shoe",
        "weren't",
        "run",
        "lena",
        "api",
        "kei",
        "v2.1",
        "is",
        "in",
        "the",
        "config",
    ]
    assert get_analyzer("simple")(TEXT) == [
        "the",
        "runners",
        "shoes",
        "weren",
        "t",
        "running",
        "lena",
        "s",
        "api",
        "key",
        "v2",
        "1",
        "is",
        "in",
        "the",
        "config",
    ]
    assert get_analyzer("whitespace")(TEXT) == [
        "the",
        "runners'",
        "shoes",
        "weren't",
        "running;",
        "lena's",
        "api-key",
        "v2.1",
        "is",
        "in",
        "the",
        "config.",
    ]
    assert get_analyzer("english") is analyze
    assert sorted(ANALYZERS) == ["english", "no_stem", "no_stopwords", "simple", "whitespace"]
    with pytest.raises(ValueError, match="known"):
        get_analyzer("porter2")


def test_bm25_uses_its_analyzer():
    docs = ["The keys are running out", "A key runs"]
    stem = BM25Index(analyzer="english").fit(docs)
    exact = BM25Index(analyzer="no_stem").fit(docs)
    assert (stem.score("key") > 0).tolist() == [True, True]  # keys and key share the stem
    assert (exact.score("key") > 0).tolist() == [False, True]  # only the exact word matches
    m = InMemoryBM25(analyzer="simple")
    m.index([Doc("a", "the the the cat", 0), Doc("b", "a dog", 1)])
    assert [d for d, _ in m.search(Query("the"), 5).ranking] == ["a"]  # no stopwords: "the" is a term
    assert m.describe()["analyzer"] == "simple"
