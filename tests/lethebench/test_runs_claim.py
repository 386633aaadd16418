"""RunFolder.claim: of two identical jobs started together, the second waits for the first and then
skips (the first one's folder is DONE); a first job that crashes or fails lets the second run; the
lock itself (lethe.core.locking) excludes other processes and threads and is reentrant."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from lethe.core.locking import Timeout, hold, lock_path
from lethe.core.paths import PROJECT_ROOT
from lethebench.runs import RunFolder, finished_runs, run_path

# one job as the runner would run it: claim, then (if fresh) work for a while and write the folder;
# prints two JSON lines: when it got the claim (fresh or not), then when it had written the folder
JOB = """
import json, os, signal, sys, time
import pandas as pd
from lethebench.runs import RunFolder
folder, work_seconds, end = sys.argv[1], float(sys.argv[2]), sys.argv[3]
written = None
with RunFolder(folder).claim() as fresh:
    claimed = time.time()
    print(json.dumps({"event": "claimed", "fresh": fresh, "at": claimed}), flush=True)
    if fresh:
        time.sleep(work_seconds)
        if end == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if end == "fail":
            raise SystemExit(3)
        RunFolder(folder).write({"q1": [("d1", 1.0)]}, {"q1": {"d1": 1}}, pd.DataFrame({"query_id": ["q1"]}),
                                {"pid": os.getpid()}, {}, tag="t")
        written = time.time()  # still holding the claim
print(json.dumps({"event": "done", "fresh": fresh, "written": written, "pid": os.getpid()}), flush=True)
"""


def _job(folder: Path, work_seconds: float, end: str = "write") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", JOB, str(folder), str(work_seconds), end],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _claimed(proc: subprocess.Popen) -> dict:
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return json.loads(line)


def _finish(proc: subprocess.Popen) -> tuple[int, list[dict]]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, [json.loads(line) for line in out.splitlines() if line.strip()] or [{"stderr": err}]


@pytest.fixture
def folder(tmp_path) -> Path:
    return run_path(tmp_path / "results", "toy", "bm25", "0123456789ab")


def test_an_identical_job_waits_for_the_first_then_skips(folder):
    first = _job(folder, work_seconds=1.0)
    assert _claimed(first)["fresh"] is True  # the first holds the claim before the second starts
    second = _job(folder, work_seconds=1.0)
    rc1, (done1,) = _finish(first)
    rc2, (claim2, done2) = _finish(second)
    assert rc1 == 0 and rc2 == 0
    assert claim2["fresh"] is False  # it found the first one's folder DONE ...
    assert claim2["at"] >= done1["written"]  # ... after waiting for the first to finish writing
    assert done2["written"] is None
    assert RunFolder(folder).is_done and RunFolder(folder).metrics["pid"] == done1["pid"]  # written once
    assert finished_runs(folder.parents[2]) == [RunFolder(folder)]  # the lock file is not a run
    assert sorted(p.name for p in folder.parent.iterdir()) == [".0123456789ab.lock", "0123456789ab"]


@pytest.mark.parametrize("end", ["crash", "fail"])
def test_a_job_that_dies_or_fails_lets_the_next_one_run(folder, end):
    first = _job(folder, work_seconds=0.5, end=end)
    assert _claimed(first)["fresh"] is True
    second = _job(folder, work_seconds=0.0)
    rc1, _ = _finish(first)
    assert rc1 == (-signal.SIGKILL if end == "crash" else 3)
    rc2, (claim2, done2) = _finish(second)
    assert rc2 == 0 and claim2["fresh"] is True  # nothing was written: the second runs the job
    assert RunFolder(folder).is_done and RunFolder(folder).metrics["pid"] == done2["pid"]


def test_claim_of_a_done_folder(folder):
    RunFolder(folder).write({}, {}, pd.DataFrame({"query_id": []}), {}, {}, tag="t")
    with RunFolder(folder).claim() as fresh:
        assert fresh is False
    with RunFolder(folder).claim(overwrite=True) as fresh:
        assert fresh is True  # run.overwrite: run again
    with RunFolder(run_path(folder.parents[2], "toy", "bm25", "ffffffffffff")).claim() as fresh:
        assert fresh is True


def test_the_lock_excludes_threads_and_is_reentrant(tmp_path):
    target = tmp_path / "x"
    got = {}

    def other() -> None:
        try:
            with hold(target, timeout=0.2):
                got["other"] = True
        except Timeout:
            got["other"] = False

    with hold(target) as waited:
        assert waited < 1.0
        with hold(target):  # the same thread again: no deadlock
            pass
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert got == {"other": False}
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert got == {"other": True}  # released
    assert lock_path(target) == tmp_path / ".x.lock"


def test_waiting_times_out_when_asked(folder):
    holder = _job(folder, work_seconds=2.0)
    try:
        assert _claimed(holder)["fresh"] is True
        t0 = time.monotonic()
        with pytest.raises(Timeout), RunFolder(folder).claim(timeout=0.3):
            pass
        assert time.monotonic() - t0 < 1.5
    finally:
        holder.kill()
        holder.communicate()
