"""``make bench`` section ``methods``: queries/s and warm P50/P95 latency per baseline (full LoCoMo runs into a
scratch folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.config import load_config
from lethebench.runs import RunFolder


def bench_methods(methods: list[str], scratch: Path) -> dict[str, Any]:
    """Full-LoCoMo runs of each method into a scratch folder (doc embeddings from the project cache;
    queries are never cached by default, so latency includes encoding them)."""
    from experiments.runner import run_experiment

    out = {}
    for m in methods:
        cfg = load_config([f"method={m}", f"results_dir={scratch}", "run.progress=false", "run.print_summary=false"])
        res = RunFolder(run_experiment(cfg))
        met = res.metrics
        out[m] = {
            "qps": met["qps"],
            "p50_ms": met["latency_ms"]["p50"],
            "p95_ms": met["latency_ms"]["p95"],
            "queries": met["queries"]["evaluated"],
            "ndcg@10": met["means"]["ndcg@10"],
            "index_build_s": res.manifest["index_build_seconds"],
        }
    return out


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_methods(list(cfg.methods), scratch / "runs")


def show(methods: dict[str, Any]) -> None:
    print(f"{'method':14} {'queries':>7} {'QPS':>9} {'P50 ms':>8} {'P95 ms':>8} {'index s':>8} {'nDCG@10':>8}")
    for m, r in methods.items():
        print(
            f"{m:14} {r['queries']:7d} {r['qps']:9.1f} {r['p50_ms']:8.2f} {r['p95_ms']:8.2f} {r['index_build_s']:8.2f} {r['ndcg@10']:8.4f}"
        )
