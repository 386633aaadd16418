"""Cluster launchers (issues 17 and 38): a sweep through submitit's local executor runs, resumes, records where
each job ran and prints a line per finished (or failed) job in the submitting terminal; the Slurm launcher refuses
a machine without Slurm before submitting anything, activates the project's environment on the nodes, and its dry
run prints what would be submitted without submitting."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from experiments.launchers import launch_info
from lethe.core.paths import PROJECT_ROOT
from tests.conftest import DATA_ROOT


def _sweep(
    tmp_path: Path, *args: str, sweep: str = "sweep1", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        *args,
        f"data.root={DATA_ROOT}",
        f"data.processed={tmp_path / 'processed'}",
        f"cache_dir={tmp_path / 'cache'}",
        f"results_dir={tmp_path / 'results'}",
        f"hydra.sweep.dir={tmp_path / sweep}",
        "run.progress=false",
        "run.print_summary=false",
        "dataset=locomo",
        "dataset.scopes=[conv-26]",
    ]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **(env or {})}
    return subprocess.run(cmd, cwd=PROJECT_ROOT, text=True, capture_output=True, timeout=900, env=env)


@contextlib.contextmanager
def _busy_cores(n: int = 1) -> Iterator[None]:
    """``n`` busy-loop processes for the duration: the launcher must not race on a loaded machine (one busy loop
    beside the three jobs keeps both cores of this machine loaded, and the suite's other worker adds its own load)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_local_submitit_sweep_runs_resumes_and_names_its_launcher(tmp_path):
    with _busy_cores():  # a job's log folder once had to exist before submitit made it: a race under load
        first = _sweep(tmp_path, "hydra/launcher=local", "method=window", "run.k=5,10,20")
    assert first.returncode == 0, first.stderr[-3000:]
    manifests = sorted((tmp_path / "results").rglob("manifest.json"))
    assert len(manifests) == 3
    for f in manifests:
        m = json.loads(f.read_text())
        assert m["launch"]["launcher"] == "local"
        assert m["launch"]["job_id"] and m["launch"]["node"]
        assert m["launch"]["concurrent"] is True and m["timing_valid"] is False  # jobs ran at the same time
        assert m["threads"]["torch"]["intra_op"] == 1  # run.threads=auto: one thread per concurrent job
    # the three concurrent jobs needed one dataset: it was built once
    assert len([p for p in (tmp_path / "processed").rglob("card.json")]) == 1
    stamps = {f: f.stat().st_mtime_ns for f in manifests}

    again = _sweep(tmp_path, "hydra/launcher=local", "method=window", "run.k=5,10,20", sweep="sweep2")
    assert again.returncode == 0, again.stderr[-3000:]
    logs = "".join(f.read_text() for f in (tmp_path / "sweep2" / ".submitit").rglob("*_log.out"))
    assert logs.count("[skip] locomo/window/") == 3, logs[-3000:]  # each job found its run done
    assert {f: f.stat().st_mtime_ns for f in manifests} == stamps  # nothing recomputed or rewritten


@pytest.mark.skipif(shutil.which("sbatch") is not None, reason="this machine has Slurm")
def test_the_slurm_launcher_fails_at_once_without_slurm(tmp_path):
    out = _sweep(tmp_path, "hydra/launcher=slurm", "method=window", "run.k=5,10")
    assert out.returncode != 0
    assert "needs Slurm: `sbatch` is not on PATH" in out.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("manifest.json"))
    assert not (tmp_path / "sweep1" / ".submitit").exists()  # nothing was submitted


def test_launch_info_outside_hydra_is_an_in_process_run():
    info = launch_info()
    assert info["launcher"] == "none" and info["concurrent"] is False and info["node"]


def test_auto_threads_are_one_per_concurrent_job_and_the_process_own_alone():
    from experiments.runner import run_threads

    assert run_threads("auto", concurrent=True) == 1
    assert run_threads("auto", concurrent=False) is None
    assert run_threads(None, concurrent=True) is None and run_threads(3, concurrent=False) == 3


def test_the_local_launcher_folder_exists_before_any_job_starts():
    """submitit's local controller opens <folder>/<its pid>_0_log.out as it starts; with %j (the pid) in the folder,
    that folder is made by the parent only after the child exists: a race that failed sweeps under load."""
    cfg = yaml.safe_load((PROJECT_ROOT / "conf" / "hydra" / "launcher" / "local.yaml").read_text())
    assert "%j" not in cfg["submitit_folder"] and "%" not in cfg["submitit_folder"].replace("${", "")


# ---- issue 38: progress in the submitting terminal, the environment on the nodes, the dry run ----

_LINE = r"\[(\d)/2\] {name}: {status}( in [0-9][^·]*)? · elapsed [0-9]"


def _progress_lines(stdout: str) -> list[str]:
    return [x for x in stdout.splitlines() if re.match(r"\[\d+/\d+\] ", x)]


def test_a_local_sweep_prints_a_line_per_finished_job_in_the_submitting_terminal(tmp_path):
    out = _sweep(tmp_path, "hydra/launcher=local", "method=bm25,window")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = _progress_lines(out.stdout)
    assert len(lines) == 2, out.stdout  # the jobs' own output goes to their logs; these come from the launcher
    for name in ("method=bm25", "method=window"):
        assert any(re.match(_LINE.format(name=name, status="done"), x) for x in lines), out.stdout
    assert sorted(x[1] for x in lines) == ["1", "2"]  # counted as they end, whichever ends first
    assert "Submitted 2 job(s) to submitit's local executor" in out.stdout


def test_a_failed_job_shows_as_failed_and_the_others_still_report(tmp_path):
    """run.k=0 is refused inside its job (Hydra records the job FAILED); its sibling finishes and both are printed,
    then the sweep exits with the failure."""
    out = _sweep(tmp_path, "hydra/launcher=local", "method=window", "run.k=0,5")
    assert out.returncode != 0
    lines = _progress_lines(out.stdout)
    assert any(re.match(_LINE.format(name="run.k=0", status="FAILED"), x) for x in lines), out.stdout
    assert any(re.match(_LINE.format(name="run.k=5", status="done"), x) for x in lines), out.stdout
    failed_at = out.stdout.splitlines().index(next(x for x in lines if "FAILED" in x))
    detail = out.stdout.splitlines()[failed_at + 1]
    assert "run.k" in detail and "_log.err" in detail, out.stdout  # the error, and where its log is
    assert "run.k" in out.stderr  # the sweep still ends with the job's error


def test_a_job_killed_without_a_result_shows_as_failed(tmp_path):
    """A job killed (SIGKILL, like the OOM killer) leaves no result: submitit raises for it, the launcher prints it
    FAILED instead of stopping at it, and the sweep exits non-zero."""
    out = _sweep(tmp_path, "hydra/launcher=local", "method=bm25,window", env={"LETHE_KILL_AT": "searching"})
    assert out.returncode != 0
    lines = _progress_lines(out.stdout)
    assert len(lines) == 2 and all(": FAILED" in x for x in lines), out.stdout
    assert out.stdout.count("UncompletedJobError: the job ended without a result: it has not produced any output") == 2
    assert not any((tmp_path / "results").rglob("DONE"))


def _fake_commands(folder: Path, *names: str) -> Path:
    """Executables that record that they were called and fail: a dry run must call none of them."""
    folder.mkdir()
    for name in names:
        f = folder / name
        f.write_text(f'#!/bin/sh\necho "$0 $*" >> "{folder}/calls"\nexit 1\n')
        f.chmod(0o755)
    return folder


def test_the_slurm_dry_run_prints_the_settings_the_setup_and_the_jobs_and_submits_nothing(tmp_path):
    venv = PROJECT_ROOT / ".venv" / "bin" / "activate"
    assert venv.is_file(), "the harness runs from <project>/.venv (make install)"
    out = _sweep(
        tmp_path,
        "hydra/launcher=slurm",
        "hydra.launcher.dry_run=true",
        "hydra.launcher.partition=cpu",
        "hydra.launcher.gres=gpu:1",
        "method=window",
        "run.k=5,10",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "2 job(s) would be submitted to Slurm; nothing is submitted" in text
    for setting in ("partition: cpu", "cpus_per_task: 2", "mem_gb: 16", "timeout_min: 120", "gres: gpu:1"):
        assert f"\n  {setting}\n" in text, setting
    assert f"submitit_folder: {tmp_path / 'sweep1'}/.submitit/%j" in text
    assert f'    source "{PROJECT_ROOT}/.venv/bin/activate"\n' in text  # the default setup, resolved at launch
    jobs = [x for x in text.splitlines() if x.startswith("  #")]
    assert len(jobs) == 2 and "method=window" in jobs[0] and "run.k=5" in jobs[0] and "run.k=10" in jobs[1]
    # the sbatch script, rendered by submitit from the same settings
    for flag in ("--partition=cpu", "--gres=gpu:1", "--cpus-per-task=2", "--mem=16GB", "--time=120", "--array=0-1%2"):
        assert f"#SBATCH {flag}\n" in text, flag
    assert f'  | source "{PROJECT_ROOT}/.venv/bin/activate"\n' in text
    assert not (tmp_path / "sweep1" / ".submitit").exists() and not (tmp_path / "results").exists()
    if shutil.which("sbatch") is None:
        assert "`sbatch` is not on PATH here" in text


def test_the_slurm_dry_run_calls_neither_sbatch_nor_srun(tmp_path):
    fake = _fake_commands(tmp_path / "bin", "sbatch", "srun", "sacct", "scancel")
    path = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    out = _sweep(tmp_path, "hydra/launcher=slurm_gpu", "hydra.launcher.dry_run=true", "method=window", env=path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert not (fake / "calls").exists(), (fake / "calls").read_text()
    assert "#SBATCH --gpus-per-node=1\n" in out.stdout and "\n  cpus_per_task: 4\n" in out.stdout
    assert "`sbatch` is not on PATH" not in out.stdout


def test_a_setup_line_activating_a_missing_environment_stops_the_launch(tmp_path):
    fake = _fake_commands(tmp_path / "bin", "sbatch", "srun")
    missing = tmp_path / "nowhere" / ".venv"
    setup = f"hydra.launcher.setup=[module load python,source {missing}/bin/activate]"
    dry = _sweep(tmp_path, "hydra/launcher=slurm", "hydra.launcher.dry_run=true", setup, "method=window")
    assert dry.returncode != 0
    assert f"activates the virtual environment {missing}, which does not exist" in dry.stderr
    assert "    module load python\n" in dry.stdout  # the dry run still printed what it would submit
    path = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}  # a Slurm machine: the launch itself stops too
    real = _sweep(tmp_path, "hydra/launcher=slurm", setup, "method=window", sweep="sweep2", env=path)
    assert real.returncode != 0 and "which does not exist" in real.stderr
    assert not (fake / "calls").exists() and not (tmp_path / "sweep2" / ".submitit").exists()


def _launcher_params(*overrides: str) -> dict:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    GlobalHydra.instance().clear()
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)


@pytest.mark.parametrize(
    "overrides", [["hydra/launcher=slurm"], ["hydra/launcher=slurm_gpu", "hydra.launcher.gres=gpu:a100:1"]]
)
def test_the_dry_run_script_is_the_one_submitit_would_submit(tmp_path, monkeypatch, overrides):
    """The dry run renders the sbatch script without Slurm; with a stand-in ``srun`` on PATH, submitit's own
    AutoExecutor, given the parameters the way hydra-submitit-launcher gives them, renders the same script."""
    import submitit
    from omegaconf import OmegaConf

    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from hydra_plugins.lethe_launchers import SlurmLauncher

    params = _launcher_params(*overrides, f"hydra.sweep.dir={tmp_path / 'sweep'}")
    target = params.pop("_target_")
    assert target == "hydra_plugins.lethe_launchers.SlurmLauncher"
    ours = SlurmLauncher(**params).sbatch_script(3)

    monkeypatch.setenv("PATH", f"{_fake_commands(tmp_path / 'bin', 'srun')}{os.pathsep}{os.environ['PATH']}")
    params.pop("dry_run")
    auto = submitit.AutoExecutor(
        folder=params["submitit_folder"], cluster="slurm", slurm_max_num_timeout=params["max_num_timeout"]
    )
    base = set(OmegaConf.structured(BaseQueueConf).keys())  # as hydra_submitit_launcher's launch
    auto.update_parameters(
        **{
            k if k in base else f"slurm_{k}": v
            for k, v in params.items()
            if k not in {"submitit_folder", "max_num_timeout"}
        }
    )
    ex = auto._executor
    ex.parameters["map_count"] = 3
    assert ours == ex._make_submission_file_text(ex._submitit_command_str, "x")
    assert f'source "{PROJECT_ROOT}/.venv/bin/activate"' in ours
    assert not (tmp_path / "sweep").exists()


def test_the_copied_launch_still_matches_the_installed_hydra_submitit_launcher():
    """_FollowingLauncher.launch is hydra-submitit-launcher 1.2.0's launch with a different ending: an upgrade that
    changes upstream's launch must be merged into it (then update this hash)."""
    import hashlib
    import inspect
    from importlib.metadata import version

    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

    source = inspect.getsource(BaseSubmititLauncher.launch)
    assert version("hydra-submitit-launcher") == "1.2.0"
    assert (
        hashlib.sha256(source.encode()).hexdigest()
        == "546875669010f80d6ceede740e8bf2d18088cf5bcce2eb4794c735fa3dc2fc0e"
    )


def test_job_names_keep_what_differs_and_times_read_as_the_sweep_progress():
    from experiments.progress import fmt_seconds as project_fmt
    from hydra_plugins.lethe_launchers import fmt_seconds, job_names

    jobs = [["method=bm25", "dataset=locomo", "hydra.x=1"], ["method=window", "dataset=locomo"], ["dataset=locomo"]]
    assert job_names(jobs) == ["method=bm25", "method=window", "dataset=locomo"]
    assert job_names([["a=1"], ["a=1"]]) == ["a=1", "a=1"] and job_names([[]]) == ["job 0"]
    for s in (None, float("nan"), 0, 4.4, 59.6, 61, 3599, 3600, 7384):
        assert fmt_seconds(s) == project_fmt(s)


def test_a_failed_job_is_summed_up_in_one_line():
    from submitit.core.utils import FailedJobError

    from hydra_plugins.lethe_launchers import error_summary

    trace = "Traceback (most recent call last):\n  File x\nMemoryError: no room"
    exc = FailedJobError(f"Job (task=0) failed during processing with trace:\n---\n{trace}\n---\nYou can check logs")
    assert error_summary(exc) == "FailedJobError: MemoryError: no room"
    assert error_summary(ValueError("run.k=0: bad\nmore")) == "ValueError: run.k=0: bad"
