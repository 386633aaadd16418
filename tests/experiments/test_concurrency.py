"""Jobs at the same time share caches and data safely (issue 15, case 8): two identical jobs compute once
(the second waits on the run's lock, then skips), two different jobs both compute, every folder is
complete and no temporary debris stays behind."""

from __future__ import annotations

import subprocess
import sys

from lethe.core.paths import PROJECT_ROOT
from lethebench.runs import RunFolder
from tests.conftest import DATA_ROOT

SCRIPT = """
import sys
from experiments.config import load_config
from experiments.runner import run_job
out = run_job(load_config(sys.argv[1:]))
print("SKIPPED" if out.skipped else "COMPUTED", out.folder)
"""


def test_identical_and_different_jobs_at_once(tmp_path):
    common = [
        f"data.root={DATA_ROOT}",
        f"data.processed={tmp_path / 'processed'}",
        f"cache_dir={tmp_path / 'cache'}",
        f"results_dir={tmp_path / 'results'}",
        "run.progress=false",
        "run.print_summary=false",
        "dataset=locomo",
        "dataset.scopes=[conv-26]",
    ]
    jobs = [["method=window"], ["method=window"], ["method=bm25_memory"], ["method=window", "run.k=5"]]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, *common, *j],
            cwd=PROJECT_ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for j in jobs
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    lines = [o.strip().splitlines()[-1].split() for o, _ in outs]
    same = sorted(l[0] for l in lines[:2])
    assert same == ["COMPUTED", "SKIPPED"] and lines[0][1] == lines[1][1]  # one computation, one folder
    assert [l[0] for l in lines[2:]] == ["COMPUTED", "COMPUTED"]
    folders = {l[1] for l in lines}
    assert len(folders) == 3
    for f in folders:
        m = RunFolder(f).metrics
        assert m["queries"]["evaluated"] > 0
    debris = [p for p in tmp_path.rglob("*") if p.name.endswith((".tmp", ".old"))]
    assert debris == []
