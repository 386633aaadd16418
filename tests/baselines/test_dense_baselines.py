"""Vector, hybrid, FAISS-IVF and MMR on real LoCoMo turns with the real model."""

from __future__ import annotations

import pytest

from baselines.faiss_ivf import FaissIVF
from baselines.hybrid import HybridSearch
from baselines.mmr import MMRSearch
from baselines.vector import VectorSearch
from lethe.core.protocol import Query

QUERIES = [
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint?",
    "What is Caroline's identity?",
    "Where did Melanie go camping?",
]


@pytest.fixture(scope="module")
def docs(conv26_docs):
    return conv26_docs


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    """The real model with a cache of this module's own: each method below indexes conv-26 anew, and the doc vectors
    are computed once (the cache is keyed by content, so every index reads the same vectors; no other test's run reads
    vectors this module wrote)."""
    from experiments.config import load_config
    from lethe.retrieval.embedder import Embedder

    cache = tmp_path_factory.mktemp("dense_cache")
    return Embedder(dict(load_config([]).embedder), cache_dir=cache, show_progress=False)


@pytest.fixture(scope="module")
def vector(docs, embedder):
    v = VectorSearch(embedder)
    v.index(docs)
    return v


def test_faiss_with_all_lists_probed_equals_exact(docs, embedder, vector):
    f = FaissIVF(embedder, nlist=8, nprobe=8)
    f.index(docs)
    assert f.nlist_used == 8
    for q in QUERIES:
        exact = vector.search(Query(q), 20).ranking
        approx = f.search(Query(q), 20).ranking
        assert [d for d, _ in approx] == [d for d, _ in exact]
        assert [s for _, s in approx] == pytest.approx([s for _, s in exact], abs=1e-5)


def test_faiss_small_scope_uses_fewer_lists(docs, embedder):
    f = FaissIVF(embedder, nlist=64, nprobe=8)
    f.index(docs[:100])
    res = f.search(Query(QUERIES[0]), 10)
    assert f.nlist_used == 2 and res.flags["nlist_used"] == 2 and res.flags["nprobe_used"] == 2


def test_hybrid_without_lexical_match_follows_cosine(docs, embedder, vector):
    h = HybridSearch(embedder, alpha=0.5)
    h.index(docs)
    q = Query("zzqx wvvk")  # no BM25 match: BM25 list empty, fusion must fall back to cosine order
    res = h.search(q, 10)
    assert res.flags["bm25_matches"] == 0
    assert [d for d, _ in res.ranking] == [d for d, _ in vector.search(q, 10).ranking]


def test_hybrid_alpha_extremes(docs, embedder, vector):
    h1 = HybridSearch(embedder, alpha=1.0)
    h1.index(docs)
    top = h1.search(Query(QUERIES[0]), 5).ranking
    assert top[0][1] == pytest.approx(1.0)  # the best BM25 doc gets minmax 1
    h0 = HybridSearch(embedder, alpha=0.0)
    h0.index(docs)
    assert [d for d, _ in h0.search(Query(QUERIES[1]), 10).ranking] == [
        d for d, _ in vector.search(Query(QUERIES[1]), 10).ranking
    ]
    rrf = HybridSearch(embedder, fusion="rrf")
    rrf.index(docs)
    assert len(rrf.search(Query(QUERIES[2]), 10).ranking) == 10
    with pytest.raises(ValueError):
        HybridSearch(embedder, fusion="max")


def test_mmr_reorders_only_the_candidates(docs, embedder, vector):
    m = MMRSearch(embedder, lam=0.7, candidates=50)
    m.index(docs)
    for q in QUERIES:
        res = m.search(Query(q), 100).ranking
        base = [d for d, _ in vector.search(Query(q), 100).ranking]
        ids = [d for d, _ in res]
        assert ids[0] == base[0]  # the first pick is the most similar doc
        assert sorted(ids[:50]) == sorted(base[:50]) and ids[50:] == base[50:]
        assert [s for _, s in res] == sorted((s for _, s in res), reverse=True)
