"""Stopping a long command cleanly: SIGTERM and SIGHUP (``kill``, a scheduler's time limit, a closed
terminal) end it the way Ctrl-C does, by raising in Python code, so that every ``finally`` and context
manager runs: the run in flight releases its lock and leaves no results folder, a study's subprocess is
killed, model workers are stopped, and finished work is kept for the same command to resume.

This only works while no library has taken the signals: the embedded JVM would (its shutdown handler
exits the process while Python goes on calling into it), so ``baselines.pyserini_jvm`` starts it with
``-Xrs``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Iterator

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """The process received ``signum``; a KeyboardInterrupt, so ``except Exception`` never swallows it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def stop_reason(exc: KeyboardInterrupt) -> tuple[str, int]:
    """(signal name, process exit code 128 + signal number) of a stop; Ctrl-C is SIGINT."""
    signum = exc.signum if isinstance(exc, Stopped) else int(signal.SIGINT)
    return signal.Signals(signum).name, 128 + signum


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = SIGNALS) -> Iterator[None]:
    """Within the block, ``signals`` raise :class:`Stopped` in the main thread; the old handlers come back after."""

    def handler(signum: int, frame: object) -> None:
        for s in signals:  # a second signal while cleaning up kills at once, as the user insists
            signal.signal(s, signal.SIG_DFL)
        raise Stopped(signum)

    old = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int) -> None:
    """Initializer of a worker process: it gets SIGTERM (and ends) when its parent ``parent_pid`` dies, however the
    parent dies (``kill -9`` included), so no orphan goes on training. Linux: ``prctl(PR_SET_PDEATHSIG)``; elsewhere
    a daemon thread checks the parent every second."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl")
    except (OSError, AttributeError):

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(1.0)
            os._exit(128 + int(signal.SIGTERM))

        threading.Thread(target=watch, name="die-with-parent", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(128 + int(signal.SIGTERM))
