"""Bounded exits (issue 36, item 6): against an LLM server that accepts connections and never answers, a call
without a deadline waited forever, a run with per-call deadlines paid every query's timeout before RunFailed
(197 queries x 2 s = 7 min 16 s on LoCoMo conv-26 with hyde), and the process had to end by itself. Now the
server backend's ``read_timeout_s`` bounds every call, a run stops at the query that makes its failure certain,
and SIGTERM ends a run blocked in a call at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from experiments.config import load_config
from experiments.runner import RunFailed, run_experiment
from lethe.core.paths import PROJECT_ROOT
from lethe.llm.backends import Decoding, LLMTimeout, OpenAICompatibleBackend
from tests.conftest import overrides_for
from tests.support.silent_server import SilentServer

LOCOMO6 = (
    "dataset=locomo",
    "dataset.scopes=[conv-26]",
    "dataset.sample=6",
    "method=lethe_iter2_llm",
    "llm=server",
    "llm.cache=false",
)


def _call(backend: OpenAICompatibleBackend, limit_s: float = 60.0) -> BaseException | None:
    """The exception of one chat call, run in a thread so that a call that never ends fails the test instead of
    hanging it."""
    got: list[BaseException | None] = []

    def call() -> None:
        try:
            backend.chat([{"role": "user", "content": "hello"}], Decoding(max_tokens=8))
            got.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            got.append(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(timeout=limit_s)
    assert got, f"the call without a deadline was still waiting after {limit_s:g} s"
    return got[0]


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_without_a_deadline_ends_at_the_read_timeout(stream):
    with SilentServer().running() as srv:
        exc = _call(OpenAICompatibleBackend(srv.url, stream=stream, timeout_s=None, read_timeout_s=0.5))
    assert isinstance(exc, LLMTimeout) and "0.5s read timeout (read_timeout_s: the server sent nothing)" in str(exc)


def test_a_stream_that_stalls_after_its_first_token_ends_at_the_read_timeout():
    with SilentServer(first_token=True).running() as srv:
        exc = _call(OpenAICompatibleBackend(srv.url, stream=True, timeout_s=None, read_timeout_s=0.5))
    assert isinstance(exc, LLMTimeout) and "stalled: nothing for 0.5s (read_timeout_s) after 1 tokens" in str(exc)


def test_the_server_config_bounds_every_call_by_default():
    cfg = load_config(["llm=server"])
    assert cfg.llm.timeout_s is None and cfg.llm.read_timeout_s == 600


def test_a_run_stops_at_the_query_that_makes_its_failure_certain(tmp_path, work):
    """max_error_share=0: the first query whose LLM call failed decides the run; the other five are not searched."""
    with SilentServer().running() as srv, pytest.raises(RunFailed) as err:
        run_experiment(
            load_config(
                overrides_for(
                    work,
                    *LOCOMO6,
                    f"llm.base_url={srv.url}",
                    "method.stages.query_understanding.options.timeout_s=0.3",
                    f"results_dir={tmp_path / 'results'}",
                )
            )
        )
    assert "1 of 6 queries had an LLM call fail without an answer" in str(err.value)
    assert "after 1 searched" in str(err.value) and "stopped early" in str(err.value)
    assert not list((tmp_path / "results").rglob("DONE"))


def test_a_share_the_rest_could_still_meet_is_not_stopped_early(tmp_path, work):
    """max_error_share=0.5 of 6 queries allows 3: with every call failing, the run stops at the fourth."""
    with SilentServer().running() as srv, pytest.raises(RunFailed, match="4 of 6 queries .* after 4 searched"):
        run_experiment(
            load_config(
                overrides_for(
                    work,
                    *LOCOMO6,
                    f"llm.base_url={srv.url}",
                    "run.max_error_share=0.5",
                    "method.stages.query_understanding.options.timeout_s=0.3",
                    f"results_dir={tmp_path / 'results'}",
                )
            )
        )


def test_sigterm_ends_a_run_blocked_in_a_call_without_any_limit(tmp_path, work):
    """No deadline and no read timeout: the run waits on the server until SIGTERM, then ends at once and leaves no
    finished run."""
    with SilentServer().running() as srv:
        cmd = [
            sys.executable,
            "-m",
            "experiments.run",
            *overrides_for(
                work,
                *LOCOMO6,
                f"llm.base_url={srv.url}",
                "llm.read_timeout_s=null",
                "method.stages.query_understanding.options.timeout_s=null",
                f"results_dir={tmp_path / 'r'}",
                f"hydra.run.dir={tmp_path / 'hydra'}",
            ),
        ]
        proc = subprocess.Popen(
            cmd,
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        )
        try:
            deadline = time.monotonic() + 300
            while srv.accepted == 0 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert srv.accepted >= 1, f"the run never called the server: {proc.stdout.read() if proc.poll() else ''}"
            time.sleep(1.0)
            assert proc.poll() is None  # still waiting on the silent server
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)  # a run that ignores the stop fails here, not in minutes
        finally:
            proc.kill()
    assert proc.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM), out[-2000:]
    assert not list((tmp_path / "r").rglob("DONE"))
