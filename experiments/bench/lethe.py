"""``make bench`` section ``lethe``: Lethe iterations 1-3 on full LoCoMo, warm P50/P95 per query (target P95 < 50 ms)
and the share of the mean latency spent per stage (iteration 3 needs its fusion model: ``make fusion-models``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.config import load_config
from lethebench.runs import RunFolder


def bench_lethe(methods: list[str], scratch: Path) -> dict[str, Any]:
    """Full-LoCoMo runs of the Lethe iterations; per-stage mean ms and share of the mean latency."""
    from experiments.runner import run_experiment

    out = {}
    for m in methods:
        cfg = load_config([f"method={m}", f"results_dir={scratch}", "run.progress=false", "run.print_summary=false"])
        res = RunFolder(run_experiment(cfg))
        met = res.metrics
        stages = res.timings().fillna(0.0)
        total = float(res.per_query["latency_ms"].mean())
        out[m] = {
            "queries": met["queries"]["evaluated"],
            "p50_ms": met["latency_ms"]["p50"],
            "p95_ms": met["latency_ms"]["p95"],
            "mean_ms": total,
            "ndcg@10": met["means"]["ndcg@10"],
            "stage_mean_ms": {c: float(stages[c].mean()) for c in stages.columns},
            "stage_share": {c: float(stages[c].mean()) / total for c in stages.columns},
            "unattributed_share": 1.0 - float(stages.sum(axis=1).mean()) / total,
            "load_average": res.manifest["load_average"],
        }
    return out


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_lethe(list(cfg.lethe), scratch / "runs")


def show(lethe: dict[str, Any]) -> None:
    for m, r in lethe.items():
        shares = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r["stage_share"].items(), key=lambda x: -x[1]))
        print(
            f"{m} on LoCoMo ({r['queries']} queries): P50 {r['p50_ms']:.2f} ms, P95 {r['p95_ms']:.2f} ms "
            f"(target < 50), nDCG@10 {r['ndcg@10']:.4f}; stages: {shares}, other {r['unattributed_share']:.0%}"
        )
