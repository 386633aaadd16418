"""Processes for tests: which are alive, read from ``/proc`` (Linux), for tests that kill a process and look for what
it left; and one of the project's ``python -m`` commands run as a user would type it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lethe.core.paths import PROJECT_ROOT


def run_module(module: str, *args: str, cwd: Path = PROJECT_ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m <module> <args>`` from ``cwd`` with the checkout importable; its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        timeout=timeout,
    )


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, is not alive)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def with_environment(entry: str) -> list[int]:
    """Live processes whose environment holds ``entry`` (``"NAME=value"``); children inherit it."""
    needle = entry.encode()
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0") and alive(int(proc.name)):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids
