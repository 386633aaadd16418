"""Inter-process locks on a path, so that two processes never do the same job at once.

A lock is the hidden file ``.<name>.lock`` beside the thing it guards (:func:`lock_path`), held
with :mod:`filelock` (``flock`` on Linux: the kernel drops it when its holder dies, however it
dies, so a crashed job never blocks the next one). The lock file stays after release: unlinking a
lock file that another process has open would split the waiters over two files and break the
exclusion. It is created with the process's umask, like every other file the harness writes.

Within one process the lock is reentrant per thread (one :class:`filelock.FileLock` per path) and
exclusive between threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

log = logging.getLogger(__name__)

__all__ = ["Timeout", "hold", "lock_path"]


def lock_path(target: str | os.PathLike) -> Path:
    """``<parent>/.<name>.lock``: the lock file that guards ``target`` (which need not exist)."""
    target = Path(target)
    return target.parent / f".{target.name}.lock"


@contextlib.contextmanager
def hold(target: str | os.PathLike, timeout: float | None = None) -> Iterator[float]:
    """Hold the lock of ``target`` for the block; yields the seconds spent waiting for it.

    Waits for another holder (logging once that it waits, and for what); ``timeout`` seconds at
    most when given, then raises :class:`filelock.Timeout`.
    """
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path, is_singleton=True)
    t0 = time.monotonic()
    try:
        lock.acquire(blocking=False)
    except Timeout:
        log.info("waiting for %s: another process holds %s", target, path)
        lock.acquire(timeout=-1 if timeout is None else timeout)
    try:
        yield time.monotonic() - t0
    finally:
        lock.release()
