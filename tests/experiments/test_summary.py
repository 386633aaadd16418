"""python -m experiments.summary (conf/summary.yaml): one line per finished run under results_dir; the
command line itself (a Hydra app) runs from any folder without leaving outputs/ there or changing it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from experiments.config import load_config
from experiments.summary import summary
from lethe.core.paths import PROJECT_ROOT


def test_top_config_holds_the_run_configs_results_dir():
    assert load_config([], config_name="summary").results_dir == load_config([]).results_dir
    assert load_config(["results_dir=/x"], config_name="summary").results_dir == "/x"


def test_one_line_per_finished_run(work, e2e_runs):
    table = summary(load_config([f"results_dir={work['results']}"], config_name="summary"))
    assert table.splitlines()[0].split()[7:12] == ["nDCG@10", "R@10", "R@50", "RR@10", "P@10"]  # ir_measures names
    for method, folder in e2e_runs.items():
        assert any(f" {method} " in line and folder.name[:8] in line for line in table.splitlines())


def test_no_finished_runs_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no finished runs"):
        summary(load_config([f"results_dir={tmp_path}"], config_name="summary"))


def test_the_command_line_from_another_folder(tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.summary",
            f"results_dir={tmp_path / 'none'}",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        timeout=120,
    )
    assert r.returncode != 0 and "no finished runs under" in r.stderr + r.stdout
    assert list(cwd.iterdir()) == []  # no outputs/ folder, nothing else
    assert (tmp_path / "hydra" / ".hydra" / "config.yaml").is_file()  # Hydra's record of the resolved config
