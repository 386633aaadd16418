"""A run started outside the checkout writes into its own folder, never into the checkout whose code it imports
(issue 37 item 4: a script once wrote into another clone's results/runs, because relative paths were read from the
package's install location)."""

from __future__ import annotations

import os
import random
import subprocess
import sys

from lethe.core.paths import PROJECT_ROOT, ROOT_ENV
from tests.conftest import DATA_ROOT


def _run(cwd, env_extra, seed):
    env = {
        k: v for k, v in os.environ.items() if k not in (ROOT_ENV, "LETHE_CACHE", "LETHE_RESULTS", "LETHE_PROCESSED")
    }
    env.update(PYTHONPATH=str(PROJECT_ROOT), **env_extra)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "dataset=locomo",
            "dataset.scopes=[conv-26]",
            "method=bm25_memory",
            f"data.root={DATA_ROOT}",
            f"run.seed={seed}",
            "run.progress=false",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_run_from_outside_the_checkout_writes_nothing_into_it(tmp_path):
    seed = random.randrange(10**6, 10**7)  # a config hash no run in the checkout has
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _run(elsewhere, {}, seed)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [done] = list((elsewhere / "results" / "runs" / "locomo" / "bm25_memory").glob("*/DONE"))
    assert not (PROJECT_ROOT / "results" / "runs" / "locomo" / "bm25_memory" / done.parent.name).exists()
    assert list((elsewhere / "data" / "processed" / "locomo").iterdir())  # its own processed build
    assert sorted(p.name for p in elsewhere.iterdir()) == ["data", "results"]
    assert sorted(p.name for p in (elsewhere / "results").iterdir()) == [".hydra", "runs"]  # Hydra's records too
    # told where to write: $LETHE_ROOT
    chosen = tmp_path / "chosen"
    proc = _run(elsewhere, {ROOT_ENV: str(chosen)}, seed)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (chosen / "results" / "runs" / "locomo" / "bm25_memory" / done.parent.name / "DONE").is_file()
