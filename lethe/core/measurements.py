"""Summary of a sample of measurements (latencies in ms, durations in s): n, mean, P50, P95, max."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summarize(xs: Sequence[float], digits: int | None = None) -> dict[str, float | int | None]:
    """``{"n", "mean", "p50", "p95", "max"}`` of ``xs`` (numpy's linear percentiles); every value but
    ``n`` is None for an empty sample; ``digits`` rounds the values."""
    if len(xs) == 0:
        return {"n": 0, "mean": None, "p50": None, "p95": None, "max": None}
    a = np.asarray(xs, dtype=np.float64)
    out = {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }
    if digits is not None:
        out = {k: round(v, digits) for k, v in out.items()}
    return {"n": int(a.size), **out}
