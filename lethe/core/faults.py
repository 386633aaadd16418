"""Named crash points for the fault-injection test (``tests/experiments/test_faults.py``).

Setting ``LETHE_KILL_AT=<point>[:<n>]`` makes the process kill itself with SIGKILL (no cleanup, no
``finally``, exactly like ``kill -9`` or the kernel's OOM killer) the ``n``-th time (1 by default) it
passes :func:`kill_point` with that name. ``<point>:<n>:<SIGNAL>`` sends that signal instead (e.g.
``searching:3:SIGTERM``, a polite stop, ``tests/experiments/test_stopping.py``). Unset,
:func:`kill_point` costs one environment lookup.

Points (where each sits, and what a crash there must not damage):

- ``build_data``: a processed dataset's files are half written in its temporary folder;
- ``model_built``: a model prerequisite was just built in a worker process, others may still be training in theirs
  (which must end with this process and must not be trained again after a resume);
- ``embedding``: a chunk of document vectors was just written to the embedding cache, more are to come;
- ``searching``: a query was just answered, the run's results exist only in memory;
- ``writing_folder``: a results folder's rankings are written, its metrics, manifest and DONE are not;
- ``writing_report``: the report's tables are written, its figures and ``report.md`` are not.

A point names a place in the process the variable is set for: the worker processes ``experiments.reproduce``
spawns drop it (:func:`disarm`), so a worker passing a point never kills itself in that process's stead.
"""

from __future__ import annotations

import os
import signal

ENV = "LETHE_KILL_AT"
POINTS = frozenset({"build_data", "model_built", "embedding", "searching", "writing_folder", "writing_report"})
SIGNALS = {s.name: s for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}

_passes: dict[str, int] = {}


def parse(spec: str) -> tuple[str, int, int]:
    """``"point[:n[:SIGNAL]]"`` -> (point, n, signal number; SIGKILL by default); raises ValueError naming
    the variable on a bad value."""
    point, _, rest = spec.partition(":")
    n, _, sig = rest.partition(":")
    if point not in POINTS or not (n == "" or (n.isdigit() and int(n) >= 1)) or not (sig == "" or sig in SIGNALS):
        raise ValueError(
            f"{ENV}={spec!r}: expected <point>[:<n>[:<signal>]] with point one of {sorted(POINTS)}, "
            f"n >= 1 and signal one of {sorted(SIGNALS)}"
        )
    return point, int(n or 1), int(SIGNALS[sig or "SIGKILL"])


def kill_point(name: str) -> None:
    """Signal this process (SIGKILL unless ``LETHE_KILL_AT`` names another) if ``LETHE_KILL_AT`` names
    ``name`` and this is its n-th pass."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, n, signum = parse(spec)
    if name not in POINTS:
        raise ValueError(f"kill_point({name!r}) is not one of {sorted(POINTS)}")
    if point != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] == n:
        os.kill(os.getpid(), signum)


def disarm() -> None:
    """Forget ``LETHE_KILL_AT`` in this process (a worker's initializer: kill points belong to its parent)."""
    os.environ.pop(ENV, None)
    _passes.clear()
