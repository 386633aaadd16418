"""No orphaned or duplicated work (issue 36, item 5): ``kill -9`` of ``experiments.reproduce`` during the model
prerequisites left its spawned workers training for minutes, and with no lock the resumed reproduction trained
the same models again beside them. Workers now end with their parent, and every model build holds a lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from experiments import synthetic_queries as SQ
from lethe.core.paths import PROJECT_ROOT
from tests.experiments.test_synthetic_queries import SETTINGS, ScriptedLLM, _dataset
from tests.support.processes import alive

PARENT = """
import os, sys, time
from experiments.prerequisites import worker_pool

pool = worker_pool(2)
pids = {pool.submit(os.getpid).result() for _ in range(8)}
for _ in range(2):
    pool.submit(time.sleep, 600)
print(" ".join(map(str, sorted(pids))), flush=True)
time.sleep(600)
"""


def test_workers_end_when_their_parent_is_killed():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert workers and all(alive(p) for p in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p for p in workers if alive(p)] == []
    finally:
        parent.kill()
        parent.wait()


def test_two_builds_of_one_set_make_it_once(tmp_path):
    """Two processes (here threads, which the lock also keeps apart) asking for the same label-free question set:
    the second waits for the first and reads its set; the model answers each document once."""

    class SlowLLM(ScriptedLLM):
        def chat(self, messages, decoding, timeout_s=None):
            time.sleep(0.05)
            return super().chat(messages, decoding, timeout_s)

    llm = SlowLLM(['{"question": "which port failed?"}'])
    folders: list[Path] = []
    builders = [
        threading.Thread(
            target=lambda: folders.append(SQ.generate(_dataset(), "k", SETTINGS, tmp_path, progress=False, llm=llm))
        )
        for _ in range(2)
    ]
    for b in builders:
        b.start()
    for b in builders:
        b.join(timeout=120)
    assert len(folders) == 2 and folders[0] == folders[1]
    assert len(llm.calls) == SETTINGS["docs"]  # once per document, not twice
