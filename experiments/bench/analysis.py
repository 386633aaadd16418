"""``make bench`` section ``analysis``: wall time of the report over the finished declared runs (target < 60 s)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig


def bench_analysis() -> dict[str, Any]:
    """Wall time of the whole report (tables, figures, report.md) over the finished declared runs."""
    from analysis.report import build_report, load_cfg
    from experiments import reproduce as R

    refs = R.refs_for("reference", R.load())
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        build_report(load_cfg([f"out_dir={out}"]), refs)
        return {"seconds": time.perf_counter() - t0, "declared_runs": len(refs), "target": "< 60"}


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_analysis()


def show(a: dict[str, Any]) -> None:
    print(f"analysis of all finished runs: {a['seconds']:.1f} s (target < 60 s)")
