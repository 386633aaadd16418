"""``make bench`` section ``reproduce``: cold against warm wall time of ``make reproduce`` on three LoCoMo runs of
the core tier, with fresh data, cache and results folders (target: warm < 1/4 of cold)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from lethe.core.paths import PROJECT_ROOT


def bench_reproduce(scratch: Path) -> dict[str, Any]:
    """Wall time of `make reproduce` restricted to three LoCoMo runs of the core tier (window, BM25,
    vector) from empty data/cache/results folders, then again (warm: everything is skipped)."""
    args = (
        f"select=[locomo/window,locomo/bm25,locomo/vector] data.processed={scratch / 'processed'} "
        f"cache_dir={scratch / 'cache'} results_dir={scratch / 'results'} run.progress=false "
        f"out_dir.reference={scratch / 'out'}"
    )
    env = {**os.environ, "REPRODUCE_ARGS": args}
    times, verified = [], []
    for _ in ("cold", "warm"):
        t0 = time.perf_counter()
        r = subprocess.run(["make", "reproduce"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        summary = [line for line in r.stdout.splitlines() if " values: " in line]
        if r.returncode != 0 and not summary:  # a verification FAIL still times the command; a crash does not
            raise RuntimeError(f"make reproduce failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        verified.append(summary[-1] if summary else None)
    return {
        "cold_s": times[0],
        "warm_s": times[1],
        "warm_over_cold": times[1] / times[0],
        "target": "< 0.25",
        "verification": verified,
    }


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_reproduce(scratch)


def show(r: dict[str, Any]) -> None:
    print(
        f"make reproduce: cold {r['cold_s']:.1f} s, warm {r['warm_s']:.1f} s, warm/cold {r['warm_over_cold']:.3f} (target < 0.25)"
    )
