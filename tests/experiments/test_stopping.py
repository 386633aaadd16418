"""A polite stop (SIGTERM, SIGHUP, Ctrl-C) ends a reproduction cleanly: the job in flight is marked
``stopped``, not failed, leaves nothing behind, and the same command resumes (``experiments.stopping``).

The trap this guards: the embedded JVM (Pyserini's BM25) takes SIGTERM for its own shutdown unless started
with ``-Xrs``; a stopped reproduction then recorded all 384 queries of the BM25 run in flight as failed
(``std::bad_alloc``) before the JVM ended the process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments.stopping import Stopped, stop_on_signals, stop_reason
from lethe.core.faults import parse
from lethe.core.paths import PROJECT_ROOT
from lethebench.runs import finished_runs
from tests.conftest import DATA_ROOT
from tests.support.reproduce_process import reproduce_process, write_reference

TIER = {
    "description": "stopping (tests/experiments/test_stopping.py)",
    "report": "smoke",
    "runs": [{"datasets": ["locomo"], "overrides": ["dataset.scopes=[conv-26]"], "methods": ["bm25", "window"]}],
}


def test_a_signal_raises_stopped_once_then_the_old_handler_is_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Stopped) as caught, stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
    assert stop_reason(caught.value) == ("SIGTERM", 143)
    assert stop_reason(KeyboardInterrupt()) == ("SIGINT", 130)
    assert signal.getsignal(signal.SIGTERM) is before


def test_kill_points_take_a_signal():
    assert parse("searching:3:SIGTERM") == ("searching", 3, signal.SIGTERM)
    assert parse("searching") == ("searching", 1, signal.SIGKILL)
    with pytest.raises(ValueError, match="signal one of"):
        parse("searching:3:SIGSTOP")


def test_the_jvm_leaves_sigterm_to_python():
    """In a fresh process (one JVM per process): start the JVM as BM25 does, then SIGTERM; Python's handler must
    run. Without ``-Xrs`` the JVM's shutdown handler exits the process with 143 and Python's never runs."""
    code = textwrap.dedent("""
        import os, signal, sys
        from experiments.stopping import Stopped, stop_on_signals
        from baselines.pyserini_jvm import ensure_jvm
        with stop_on_signals():
            ensure_jvm()
            from jnius import autoclass
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(100):   # calls into the JVM, as a BM25 run would go on making
                    autoclass("java.lang.String")("lethe").toUpperCase()
            except Stopped:
                print("python stopped cleanly")
                sys.exit(7)
        print("signal lost")
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (7, "python stopped cleanly"), proc.stdout + proc.stderr


def _reproduce(base: Path, ref: Path, stop_at: str | None) -> subprocess.CompletedProcess:
    return reproduce_process(
        [
            f"reference_dir={ref}",
            f"expected_dir={ref / 'expected'}",
            f"data.root={DATA_ROOT}",
            f"data.processed={base / 'processed'}",
            f"cache_dir={base / 'cache'}",
            f"results_dir={base / 'results'}",
            "run.progress=false",
            "tier=stopping",
            "action=run",
            f"hydra.run.dir={base / 'hydra'}",
        ],
        stop_at,
    )


def test_sigterm_during_a_bm25_run_stops_cleanly_and_the_same_command_resumes(tmp_path):
    ref = write_reference(tmp_path / "reference", "stopping", TIER)

    stopped = _reproduce(tmp_path, ref, "searching:3:SIGTERM")  # after BM25's third query, the JVM running
    out = stopped.stdout + stopped.stderr
    assert stopped.returncode == 128 + signal.SIGTERM, out
    assert "locomo/bm25: stopped in" in stopped.stdout, out
    assert "stopped by SIGTERM" in stopped.stderr and "the same command resumes" in stopped.stderr, out
    assert "failed" not in out.lower() and "bad_alloc" not in out, out
    assert finished_runs(tmp_path / "results") == [], "a stopped run was filed"
    assert not [p for p in (tmp_path / "results").rglob("*") if ".tmp" in p.name], "debris left by the stop"

    resumed = _reproduce(tmp_path, ref, None)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert sorted(r.method for r in finished_runs(tmp_path / "results")) == ["bm25", "window"]
