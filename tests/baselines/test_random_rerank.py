"""random_rerank, the rerankers' sanity control, on real LoCoMo turns: BM25's top `candidates` in a seeded
random order that depends only on the seed and the query id; the tail in BM25 order; a real run records
its depth and seed and keeps BM25's Recall@10 while losing its order."""

from __future__ import annotations

from itertools import pairwise

import pytest

from baselines.bm25 import PyseriniBM25
from baselines.random_rerank import RandomRerank
from lethe.core.protocol import Query
from lethe.retrieval.ranking import canonical_order
from lethebench.runs import RunFolder
from tests.conftest import TWO_CONVS

QUERIES = [
    Query("When did Caroline go to the LGBTQ support group?", query_id="q-a"),
    Query("What did Melanie paint?", query_id="q-b"),
    Query("Where did Melanie go camping?", query_id="q-c"),
    Query("What is Caroline's identity?", query_id="q-d"),
]
FIRST = {"k1": 1.2, "b": 0.75}


@pytest.fixture(scope="module")
def docs(conv26_docs):
    return conv26_docs


@pytest.fixture(scope="module")
def bm25(docs, work):
    m = PyseriniBM25(**FIRST, cache_dir=work["cache"])
    m.index(docs)
    yield m
    m.close()


def _method(docs, work, candidates: int = 10, seed: int = 0) -> RandomRerank:
    m = RandomRerank(FIRST, candidates, seed, cache_dir=work["cache"])
    m.index(docs)
    return m


def test_head_is_a_permutation_of_bm25_top_and_tail_keeps_bm25_order(docs, work, bm25):
    m = _method(docs, work, candidates=10)
    shuffled = 0
    for q in QUERIES:
        ref = [d for d, _ in canonical_order(bm25.search(q, 30).ranking)]
        res = m.search(q, 30)
        got = [d for d, _ in res.ranking]
        assert len(ref) == 30 and sorted(got[:10]) == sorted(ref[:10]) and got[10:] == ref[10:]
        assert res.flags["candidates"] == 10 and set(res.timings_ms) == {"bm25", "rerank"}
        scores = [s for _, s in res.ranking]
        assert all(a > b for a, b in pairwise(scores))  # strictly decreasing: the runner keeps this order
        assert [d for d, _ in canonical_order(res.ranking)] == got
        shuffled += got[:10] != ref[:10]
    assert shuffled == len(QUERIES)  # 10! orders: BM25's own order back would be a bug
    m.close()


def test_order_depends_only_on_seed_and_query_id(docs, work):
    a, b, c = _method(docs, work), _method(docs, work), _method(docs, work, seed=1)
    first = {q.query_id: [d for d, _ in a.search(q, 10).ranking] for q in QUERIES}
    backwards = {q.query_id: [d for d, _ in b.search(q, 10).ranking] for q in reversed(QUERIES)}
    assert first == backwards  # same per query whatever came before
    other_seed = {q.query_id: [d for d, _ in c.search(q, 10).ranking] for q in QUERIES}
    assert all(first[k] != other_seed[k] for k in first)
    renamed = Query(QUERIES[0].text, query_id="q-z")
    assert [d for d, _ in a.search(renamed, 10).ranking] != first["q-a"]  # the id, not the text, seeds it
    assert a.describe()["candidates"] == 10 and a.describe()["seed"] == 0
    assert a.describe()["first_stage"]["k1"] == 1.2
    for m in (a, b, c):
        m.close()


def test_depth_one_is_bm25_order(docs, work, bm25):
    m = _method(docs, work, candidates=1)
    for q in QUERIES:
        assert [d for d, _ in m.search(q, 20).ranking] == [d for d, _ in canonical_order(bm25.search(q, 20).ranking)]
    with pytest.raises(ValueError, match="candidates must be >= 1"):
        RandomRerank(FIRST, 0, 0)
    m.close()


def test_a_real_run_records_its_depth_and_keeps_bm25_recall_at_10(cfg_for, locomo_path):
    from experiments.runner import run_experiment

    scope = f"dataset.scopes={TWO_CONVS}"
    bm25 = run_experiment(cfg_for("method=bm25", scope))
    rnd = run_experiment(cfg_for("method=random_rerank", "method.candidates=10", scope))
    man = RunFolder(rnd).manifest
    assert man["config"]["method"]["candidates"] == 10 and man["config"]["method"]["seed"] == 0
    assert man["method"]["candidates"] == 10 and man["method"]["first_stage"]["b"] == 0.75
    a = RunFolder(bm25).per_query.set_index("query_id").sort_index()
    b = RunFolder(rnd).per_query.set_index("query_id").sort_index()
    assert list(a.index) == list(b.index) and len(a) == 302
    # the same 10 docs on top: every set metric at 10 and the tail's recall are BM25's, the order is not
    for col in ("recall@10", "precision@10", "recall@50"):
        assert (a[col] - b[col]).abs().max() < 1e-12, col
    assert b["ndcg@10"].mean() < a["ndcg@10"].mean() and (a["ndcg@10"] != b["ndcg@10"]).sum() > 50
