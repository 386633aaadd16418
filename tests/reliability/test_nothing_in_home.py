"""Nothing is written outside cache_dir, results_dir, data.processed and the system temp folder (issue 36, item 8):
a run used to write matplotlib's font cache, ir_datasets' folders and ONNX Runtime's device id and usage database
under $HOME (read-only on many clusters)."""

from __future__ import annotations

import os
import subprocess
import sys

from lethe.core.paths import PROJECT_ROOT
from tests.conftest import DATA_ROOT


def test_a_run_writes_nothing_under_home(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    home.chmod(0o555)  # read-only (root writes all the same: the listing below is the check)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MPLCONFIGDIR", "IR_DATASETS_HOME", "ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")
    }
    env.update(HOME=str(home), PYTHONPATH=str(PROJECT_ROOT))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "dataset=locomo",
            "dataset.scopes=[conv-26]",
            "method=vector",
            f"data.root={DATA_ROOT}",
            f"data.processed={work / 'processed'}",
            f"cache_dir={work / 'cache'}",
            f"results_dir={work / 'results'}",
            "run.progress=false",
            "hydra.run.dir=" + str(work / "hydra"),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    home.chmod(0o755)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
    assert sorted(p.name for p in work.iterdir()) == ["cache", "hydra", "processed", "results"]
