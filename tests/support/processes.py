"""Which processes are alive, read from ``/proc`` (Linux), for tests that kill a process and look for what it left."""

from __future__ import annotations

from pathlib import Path


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
