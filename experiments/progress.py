"""Progress across a sweep: one line per finished job with jobs done / total, elapsed time and an ETA.

:class:`Progress` is used by ``experiments.reproduce`` (estimates from the expected-scores file's
recorded durations) and, through :class:`SweepProgressCallback` (registered in ``conf/config.yaml``),
by every ``python -m experiments.run -m ...`` sweep, where the estimate is the mean duration of the
sweep's finished jobs. The callback keeps its count in ``<sweep dir>/progress.jsonl`` so it also
works when a launcher runs jobs in other processes (joblib).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lethe.core.overrides import override_key, override_keys

MIN_SPEED_JOBS = 3  # finished jobs with an estimate before the ETA scales estimates by this machine's speed


def fmt_seconds(s: float | None) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min'; '?' when unknown."""
    if s is None or not math.isfinite(s):
        return "?"
    s = float(round(max(0.0, float(s))))
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def eta_seconds(remaining: Sequence[float | None], finished: Sequence[tuple[float | None, float]]) -> float | None:
    """Estimated seconds for the ``remaining`` jobs (each with a recorded estimate or None).

    ``finished`` holds (estimate, actual seconds) of the jobs computed so far (skipped ones excluded).
    Known estimates are scaled by this machine's speed against them: the median of actual / estimated
    over the finished jobs that have one, once there are ``MIN_SPEED_JOBS`` of them (before that the
    estimates are taken as they are). The median, not a ratio of sums, because one job that found its
    work cached (a warm embedding cache) must not make every other job look many times faster. Unknown
    estimates count as the mean actual duration so far. None while nothing informs it.
    """
    ratios = [a / e for e, a in finished if e]
    speed = statistics.median(ratios) if len(ratios) >= MIN_SPEED_JOBS else 1.0
    mean = sum(a for _, a in finished) / len(finished) if finished else None
    total = 0.0
    for e in remaining:
        if e is not None:
            total += e * speed
        elif mean is not None:
            total += mean
        else:
            return None
    return total


class Progress:
    """Counts finished jobs and prints ``[done/total] name: status in X · elapsed Y · ETA Z``."""

    def __init__(
        self,
        names: Sequence[str],
        estimates: Sequence[float | None] | None = None,
        out: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.names = list(names)
        self.estimates = list(estimates) if estimates is not None else [None] * len(self.names)
        if len(self.estimates) != len(self.names):
            raise ValueError("one estimate per job")
        self.out, self.clock = out, clock
        self.start = clock()
        self.finished: list[tuple[float | None, float]] = []
        self.n_done = 0

    def done(self, index: int, seconds: float, status: str = "done") -> str:
        """Record job ``index`` as finished (status: done, skipped, FAILED or stopped) and print its line."""
        self.n_done += 1
        if status != "skipped":
            self.finished.append((self.estimates[index], seconds))
        remaining = [e for i, e in enumerate(self.estimates) if i > index]
        eta = eta_seconds(remaining, self.finished) if self.n_done < len(self.names) else 0.0
        line = (
            f"[{self.n_done}/{len(self.names)}] {self.names[index]}: {status} in {fmt_seconds(seconds)} · "
            f"elapsed {fmt_seconds(self.clock() - self.start)} · ETA {fmt_seconds(eta)}"
        )
        self.out(line)
        return line


def sweep_size(task_overrides: Sequence[str], sweeper_params: dict[str, Any] | None = None) -> tuple[int, list[str]]:
    """(number of jobs, swept keys) of a basic/joblib sweep: the product of every sweep override's
    length (command-line overrides replace ``hydra.sweeper.params`` of the same key). A glob over a
    config group (``dataset=glob(*,exclude=[custom,beir])``) counts the group's configs it matches in ``conf/``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob

    from lethe.core.paths import CONF_DIR

    parser = OverridesParser.create()
    by_key = {k: f"{k}={v}" for k, v in (sweeper_params or {}).items()}
    for o in parser.parse_overrides(list(task_overrides)):
        by_key[o.get_key_element()] = o.input_line
    n, swept = 1, []
    for o in parser.parse_overrides(list(by_key.values())):
        if o.is_sweep_override():
            key = override_key(o)
            if isinstance(o.value(), Glob):
                options = sorted(p.stem for p in (CONF_DIR / key.split("@", 1)[0]).glob("*.yaml"))
                n *= len(o.value().filter(options))
            else:
                n *= len(list(o.sweep_string_iterator()))
            swept.append(key)
    return n, swept


try:  # Hydra is always installed with the harness; the guard keeps Progress importable on its own
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object  # type: ignore[misc,assignment]


class SweepProgressCallback(Callback):  # type: ignore[misc]
    """Hydra callback: a progress line with ETA after every job of a multirun sweep."""

    FILE = "progress.jsonl"

    def __init__(self) -> None:
        self._job_start: float | None = None

    def _file(self, config: Any) -> Path:
        return Path(str(config.hydra.sweep.dir)) / self.FILE

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        params = config.hydra.sweeper.get("params") if "sweeper" in config.hydra else None
        total, swept = sweep_size(list(config.hydra.overrides.task), dict(params) if params else None)
        path = self._file(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"total": total, "swept": swept, "start": time.time()}) + "\n")

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        self._job_start = time.time()

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.get().mode != RunMode.MULTIRUN:
            return
        path = self._file(config)
        if not path.is_file():
            return
        seconds = time.time() - (self._job_start or time.time())
        value = getattr(job_return, "_return_value", None)
        failed = getattr(getattr(job_return, "status", None), "name", "") == "FAILED"
        skipped = isinstance(value, dict) and bool(value.get("skipped"))
        status = "FAILED" if failed else "skipped" if skipped else "done"
        path_lines = path.read_text().splitlines()
        swept = set(json.loads(path_lines[0]).get("swept") or [])
        given = list(getattr(job_return, "overrides", None) or [])
        name = (
            " ".join(o for o, k in zip(given, override_keys(given), strict=True) if k in swept)
            or " ".join(given)
            or "job"
        )
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:  # one small append per job: atomic, so parallel workers never interleave lines
            os.write(fd, (json.dumps({"name": name, "seconds": seconds, "status": status}) + "\n").encode())
        finally:
            os.close(fd)
        lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        head, jobs = lines[0], lines[1:]
        computed = [(None, j["seconds"]) for j in jobs if j["status"] != "skipped"]
        remaining = [None] * max(0, int(head["total"]) - len(jobs))
        eta = eta_seconds(remaining, computed) if remaining else 0.0
        print(
            f"[{len(jobs)}/{head['total']}] {name}: {status} in {fmt_seconds(seconds)} · "
            f"elapsed {fmt_seconds(time.time() - float(head['start']))} · ETA {fmt_seconds(eta)}",
            flush=True,
        )
