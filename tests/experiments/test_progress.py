"""Sweep progress: ETA arithmetic, formatting, one line per finished job and the size of a Hydra sweep."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from omegaconf import OmegaConf

from experiments import progress as progress_mod
from experiments.progress import Progress, SweepProgressCallback, eta_seconds, fmt_seconds, sweep_size
from lethe.core.paths import CONF_DIR


def test_eta_scales_known_estimates_by_the_median_speed_once_three_jobs_inform_it():
    # three jobs ran at twice their estimates: the 10 + 20 s left become 60 s
    assert eta_seconds([10.0, 20.0], [(5.0, 10.0), (4.0, 8.0), (1.0, 2.0)]) == pytest.approx(60.0)
    # speed is the median of actual / estimated: ratios 0.5, 2, 3 -> 2
    assert eta_seconds([9.0], [(4.0, 2.0), (5.0, 10.0), (1.0, 3.0)]) == pytest.approx(18.0)
    # finished jobs without an estimate do not change the speed
    assert eta_seconds([10.0], [(5.0, 10.0), (None, 100.0), (2.0, 4.0), (1.0, 2.0)]) == pytest.approx(20.0)
    # nothing finished yet: the recorded estimates are taken as they are
    assert eta_seconds([10.0, 20.0], []) == pytest.approx(30.0)


def test_eta_takes_recorded_estimates_as_they_are_until_three_jobs_inform_the_speed():
    assert eta_seconds([10.0, 20.0], [(5.0, 10.0)]) == pytest.approx(30.0)
    assert eta_seconds([10.0, 20.0], [(5.0, 10.0), (4.0, 8.0)]) == pytest.approx(30.0)


def test_one_job_that_found_its_work_cached_does_not_collapse_the_eta():
    # a warm cache: one job took 20 s of its recorded 800 s, the others their recorded time; the ratio of
    # sums would scale the 1000 s left down to about 700 s, the median keeps it at 1000 s
    finished = [(800.0, 20.0), (1000.0, 1000.0), (660.0, 660.0)]
    assert eta_seconds([600.0, 400.0], finished) == pytest.approx(1000.0)


def test_eta_of_unknown_estimates_is_the_mean_duration_so_far():
    assert eta_seconds([None, None], [(None, 4.0), (None, 10.0)]) == pytest.approx(14.0)
    # mixed: known ones at the recorded estimate (one job informs no speed), unknown at the mean of all
    # finished jobs ((10 + 4) / 2)
    assert eta_seconds([10.0, None], [(5.0, 10.0), (None, 4.0)]) == pytest.approx(17.0)


def test_eta_is_none_when_nothing_informs_it():
    assert eta_seconds([None], []) is None
    assert eta_seconds([10.0, None], []) is None
    assert eta_seconds([], []) == 0.0


@pytest.mark.parametrize(
    "seconds, text",
    [
        (None, "?"),
        (math.nan, "?"),
        (math.inf, "?"),
        (-3.0, "0 s"),
        (0, "0 s"),
        (42.4, "42 s"),
        (60, "1 min 00 s"),
        (185, "3 min 05 s"),
        (3599.9, "1 h 00 min"),
        (3600, "1 h 00 min"),
        (3720, "1 h 02 min"),
        (90061, "25 h 01 min"),
    ],
)
def test_fmt_seconds(seconds, text):
    assert fmt_seconds(seconds) == text


def test_fmt_seconds_just_below_a_minute_stays_consistent():
    assert fmt_seconds(59.6) in ("59 s", "1 min 00 s")


def _clock(*values: float):
    it = iter(values)
    return lambda: next(it)


def test_progress_lines_with_a_fake_clock():
    lines: list[str] = []
    p = Progress(
        ["a", "b", "c", "d", "e"],
        [10.0, 10.0, 10.0, 20.0, 30.0],
        out=lines.append,
        clock=_clock(0.0, 5.0, 10.0, 15.0, 40.0, 70.0),
    )
    # one or two jobs do not yet scale the recorded estimates
    assert p.done(0, 5.0) == "[1/5] a: done in 5 s · elapsed 5 s · ETA 1 min 10 s"
    assert p.done(1, 5.0) == "[2/5] b: done in 5 s · elapsed 10 s · ETA 1 min 00 s"
    # the third: all ran twice as fast as recorded, so the 20 + 30 s left become 25 s
    third = p.done(2, 5.0)
    assert third == "[3/5] c: done in 5 s · elapsed 15 s · ETA 25 s"
    # a skipped job does not count as computed: the speed stays 0.5 (it would be 1.0 if it counted)
    assert p.done(3, 25.0, "skipped") == "[4/5] d: skipped in 25 s · elapsed 40 s · ETA 15 s"
    assert p.done(4, 40.0) == "[5/5] e: done in 40 s · elapsed 1 min 10 s · ETA 0 s"
    assert lines[2:] == [
        third,
        "[4/5] d: skipped in 25 s · elapsed 40 s · ETA 15 s",
        "[5/5] e: done in 40 s · elapsed 1 min 10 s · ETA 0 s",
    ]
    assert p.finished == [(10.0, 5.0), (10.0, 5.0), (10.0, 5.0), (30.0, 40.0)]


def test_progress_without_estimates_uses_the_mean_and_counts_failures():
    lines: list[str] = []
    p = Progress(["x", "y", "z", "w"], out=lines.append, clock=_clock(100.0, 110.0, 130.0, 135.0))
    p.done(0, 10.0)
    p.done(1, 20.0, "FAILED")  # a failed job was computed: it informs the mean
    p.done(2, 0.0, "skipped")
    assert lines == [
        "[1/4] x: done in 10 s · elapsed 10 s · ETA 30 s",
        "[2/4] y: FAILED in 20 s · elapsed 30 s · ETA 30 s",
        "[3/4] z: skipped in 0 s · elapsed 35 s · ETA 15 s",
    ]


def test_progress_unknown_eta_before_any_computed_job():
    lines: list[str] = []
    p = Progress(["a", "b"], out=lines.append, clock=_clock(0.0, 1.0))
    p.done(0, 0.0, "skipped")
    assert lines == ["[1/2] a: skipped in 0 s · elapsed 1 s · ETA ?"]


def test_progress_needs_one_estimate_per_job():
    with pytest.raises(ValueError, match="one estimate per job"):
        Progress(["a", "b"], [1.0], out=lambda s: None, clock=lambda: 0.0)


def test_sweep_size_from_overrides():
    assert sweep_size(["method=a,b,c", "dataset=x,y", "run.k=5"]) == (6, ["method", "dataset"])
    assert sweep_size(["run.seed=range(0,4)", "dataset.scopes=[conv-26,conv-30]"]) == (4, ["run.seed"])
    assert sweep_size(["method=bm25"]) == (1, [])
    assert sweep_size([]) == (1, [])


def test_sweep_size_with_sweeper_params_replaced_by_the_command_line():
    params = {"method": "a,b", "run.seed": "1,2,3"}
    assert sweep_size([], params) == (6, ["method", "run.seed"])
    # the command line's method=a,b,c replaces the params' method=a,b (Hydra's basic sweeper does the same)
    assert sweep_size(["method=a,b,c"], params) == (9, ["method", "run.seed"])
    # and a single value on the command line pins it
    assert sweep_size(["method=a", "dataset=x,y"], params) == (6, ["run.seed", "dataset"])


class _Clock:
    def __init__(self, now: float):
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture
def sweep(tmp_path, monkeypatch):
    """A callback on a temp sweep dir with a settable wall clock and Hydra in multirun mode."""
    clock = _Clock(1000.0)
    monkeypatch.setattr(progress_mod, "time", clock)
    mode = SimpleNamespace(mode=RunMode.MULTIRUN)
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: mode))

    def start(task: list[str], params: dict | None = None) -> SweepProgressCallback:
        hydra = {"sweep": {"dir": str(tmp_path / "sweep")}, "overrides": {"task": task}}
        if params is not None:
            hydra["sweeper"] = {"params": params}
        cb = SweepProgressCallback()
        cb.on_multirun_start(OmegaConf.create({"hydra": hydra}))
        return cb

    def job(cb, overrides, seconds, status=JobStatus.COMPLETED, value=None):
        cfg = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}})
        cb.on_job_start(cfg)
        clock.now += seconds
        cb.on_job_end(cfg, JobReturn(overrides=overrides, status=status, _return_value=value))

    return SimpleNamespace(start=start, job=job, clock=clock, mode=mode, file=tmp_path / "sweep" / "progress.jsonl")


def test_callback_writes_progress_jsonl_and_prints_lines(sweep, capsys):
    cb = sweep.start(["method=a,b", "run.k=5"], {"run.seed": "1,2"})
    head = json.loads(sweep.file.read_text().splitlines()[0])
    assert head == {"total": 4, "swept": ["run.seed", "method"], "start": 1000.0}
    sweep.job(cb, ["method=a", "run.k=5", "run.seed=1"], 10.0, value={"folder": "f", "skipped": False})
    sweep.job(cb, ["method=b", "run.k=5", "run.seed=1"], 2.0, value={"folder": "f", "skipped": True})
    sweep.job(cb, ["method=a", "run.k=5", "run.seed=2"], 20.0, status=JobStatus.FAILED, value=RuntimeError("x"))
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "[1/4] method=a run.seed=1: done in 10 s · elapsed 10 s · ETA 30 s",
        "[2/4] method=b run.seed=1: skipped in 2 s · elapsed 12 s · ETA 20 s",
        "[3/4] method=a run.seed=2: FAILED in 20 s · elapsed 32 s · ETA 15 s",
    ]
    jobs = [json.loads(x) for x in sweep.file.read_text().splitlines()[1:]]
    assert [(j["name"], j["seconds"], j["status"]) for j in jobs] == [
        ("method=a run.seed=1", 10.0, "done"),
        ("method=b run.seed=1", 2.0, "skipped"),
        ("method=a run.seed=2", 20.0, "FAILED"),
    ]


def test_callback_does_nothing_outside_multirun_or_without_its_file(sweep, capsys):
    cb = sweep.start(["method=a,b"])
    sweep.mode.mode = RunMode.RUN
    sweep.job(cb, ["method=a"], 1.0)
    assert len(sweep.file.read_text().splitlines()) == 1
    sweep.mode.mode = RunMode.MULTIRUN
    sweep.file.unlink()
    sweep.job(cb, ["method=a"], 1.0)
    assert not sweep.file.exists()
    assert capsys.readouterr().out == ""


def test_callback_names_a_job_by_an_appended_swept_key(sweep, capsys):
    cb = sweep.start(["method=a,b", "+ablation=x,y"])
    sweep.job(cb, ["method=a", "+ablation=x"], 1.0)
    assert capsys.readouterr().out.startswith("[1/4] method=a +ablation=x: done")


def test_sweep_size_counts_a_glob_over_a_config_group():
    datasets = sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml"))
    assert sweep_size(["dataset=glob(*,exclude=custom)"]) == (len(datasets) - 1, ["dataset"])
    ultra = [d for d in datasets if d.startswith("ultradomain_")]  # cs, mix, and seed 003's agriculture and legal
    assert len(ultra) == 4
    assert sweep_size(["dataset=glob(ultradomain_*)", "method=bm25,vector"]) == (2 * len(ultra), ["dataset", "method"])
