"""Kill a multirun mid-way, start it again: it completes without redoing finished jobs and
leaves no corrupt results folder or cache entry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from lethe.core.paths import PROJECT_ROOT
from lethebench.runs import RunFolder, finished_runs
from tests.conftest import DATA_ROOT


def _sweep(work: dict[str, Path]) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        "method=vector,window,bm25",
        "dataset.scopes=[conv-26]",
        f"data.root={DATA_ROOT}",
        f"data.processed={work['processed']}",
        f"cache_dir={work['cache']}",
        f"results_dir={work['results']}",
        "run.progress=false",
        f"hydra.sweep.dir={work['hydra']}",
    ]
    return subprocess.Popen(
        cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def test_kill_and_resume(tmp_path):
    work = {k: tmp_path / k for k in ("processed", "cache", "results", "hydra")}
    proc = _sweep(work)
    deadline = time.time() + 300
    # kill as soon as the vector job has persisted document embeddings (it is then mid-run)
    while time.time() < deadline and proc.poll() is None:
        if list((work["cache"] / "embeddings").glob("*/*.npz")):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "sweep ended before it could be killed:\n" + proc.stdout.read()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()

    finished_before = set(finished_runs(work["results"]))
    print("FINISHED_BEFORE", sorted(r.path.parent.name for r in finished_before))
    visible = [p for p in work["results"].glob("*/*/*") if not p.name.startswith(".")]
    assert all(RunFolder(p).is_done for p in visible), "a results folder without DONE is visible"
    for shard in work["cache"].glob("embeddings/*/*.npz"):
        with np.load(shard) as z:  # every visible cache entry is complete
            assert len(z["keys"]) == len(z["vecs"]) > 0

    proc = _sweep(work)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    done = set(finished_runs(work["results"]))
    assert {r.method for r in done} == {"vector", "window", "bm25"}
    assert out.count("[skip]") == len(finished_before)
    # documents embedded before the kill were not embedded again
    vec = next(r for r in done if r.method == "vector")
    if vec not in finished_before:
        emb = vec.manifest["method"]["embedder"]
        assert emb["cache"]["doc"]["misses"] == 0
