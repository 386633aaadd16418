"""Cluster launchers (issue 17): a sweep through submitit's local executor runs, resumes and records where
each job ran; the Slurm launcher refuses a machine without Slurm before submitting anything."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from experiments.launchers import launch_info
from lethe.core.paths import PROJECT_ROOT
from tests.conftest import DATA_ROOT


def _sweep(tmp_path: Path, *args: str, sweep: str = "sweep1") -> subprocess.CompletedProcess:
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
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.run(cmd, cwd=PROJECT_ROOT, text=True, capture_output=True, timeout=900, env=env)


@contextlib.contextmanager
def _busy_cores(n: int = 2) -> Iterator[None]:
    """``n`` busy-loop processes for the duration: the launcher must not race on a loaded machine."""
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
