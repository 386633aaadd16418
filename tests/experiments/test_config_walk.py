"""Issue 59: the run config is resolved once and what a step needs is passed down, so following the whole config from
``runner.run_job`` visits few files. A real run (BM25 and Lethe iteration 2 on one LoCoMo conversation) is traced
with ``sys.setprofile``; every project function that receives the config or any part of it (the composed DictConfig or
any of its sections, the resolved dict, or the plan holding it) names its file."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import pytest
from omegaconf import DictConfig, ListConfig

from experiments.runner import RunPlan, run_job
from lethe.core.paths import PROJECT_ROOT

MAX_FILES = 12  # the bound: fewer than 12
PACKAGES = tuple(str(PROJECT_ROOT / d) + "/" for d in ("lethe", "lethebench", "baselines", "experiments", "analysis"))


def _of_the_config(value: Any) -> bool:
    """The run config or a part of it: any node of the composed config, the plan, or the resolved whole."""
    if isinstance(value, (DictConfig, ListConfig, RunPlan)):
        return True
    return isinstance(value, Mapping) and all(k in value for k in ("dataset", "method", "run", "results_dir"))


def files_given_the_config(cfg: DictConfig) -> set[str]:
    seen: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(PACKAGES):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if any(_of_the_config(frame.f_locals.get(n)) for n in names):
            seen.add(code.co_filename[len(str(PROJECT_ROOT)) + 1 :])

    sys.setprofile(profile)
    try:
        run_job(cfg)
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("method", ["bm25", "lethe_iter2"])
def test_the_run_config_visits_fewer_than_twelve_files(cfg_for, method, tmp_path):
    cfg = cfg_for(f"method={method}", "dataset=locomo", "dataset.scopes=[conv-26]", f"results_dir={tmp_path}")
    files = files_given_the_config(cfg)
    assert "experiments/runner.py" in files  # the tracer sees the walk
    assert len(files) < MAX_FILES, sorted(files)
