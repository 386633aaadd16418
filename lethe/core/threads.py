"""Thread settings of this process: what is in force (for manifests) and one switch to set them for a run."""

from __future__ import annotations

import os
from typing import Any

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM")


def thread_settings() -> dict[str, Any]:
    """The thread settings in force in this process: torch intra-/inter-op threads, each native thread pool
    threadpoolctl finds (BLAS, OpenMP: library, API, threads) and the environment variables that set them.
    Latencies are comparable only between runs with equal settings and load (docs/running.md, "Threads and latency")."""
    out: dict[str, Any] = {"env": {k: os.environ.get(k) for k in THREAD_ENV}}
    try:
        import torch

        out["torch"] = {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    except ImportError:
        out["torch"] = None
    try:
        from threadpoolctl import threadpool_info

        out["pools"] = sorted(
            (
                {"user_api": p.get("user_api"), "internal_api": p.get("internal_api"), "threads": p.get("num_threads")}
                for p in threadpool_info()
            ),
            key=lambda p: (str(p["user_api"]), str(p["internal_api"])),
        )
    except ImportError:
        out["pools"] = None
    return out


def set_threads(n: int) -> None:
    """Use ``n`` threads from now on in torch's intra-op pool and in every BLAS/OpenMP pool threadpoolctl
    can reach (ONNX Runtime sessions created afterwards follow torch's count unless configured)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"run.threads={n!r}: an integer >= 1, or null for the process's defaults")
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(n)
    threadpool_limits(limits=n)
