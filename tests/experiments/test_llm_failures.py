"""LLM failures are counted and fail the run (issue 15, case 2): with the LLM server's port closed, a server
that never answers in time, or output that never parses, lethe_iter2_llm used to exit 0 with fail=0 and
the rules fallback's nDCG filed under the LLM method's name."""

from __future__ import annotations

import socket

import pytest

from experiments.config import load_config
from experiments.runner import RunFailed, run_experiment
from lethebench.runs import RunFolder
from tests.conftest import overrides_for
from tests.support.chat_server import ChatServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, url: str, *extra: str):
    work = {"processed": tmp_path / "processed", "cache": tmp_path / "cache", "results": tmp_path / "results"}
    return run_experiment(
        load_config(
            overrides_for(
                work,
                "dataset=locomo",
                "dataset.scopes=[conv-26]",
                "dataset.sample=6",
                "method=lethe_iter2_llm",
                "llm=server",
                f"llm.base_url={url}",
                "llm.stream=false",
                "llm.cache=false",
                *extra,
            )
        )
    )


def test_a_closed_port_fails_the_run_without_done(tmp_path):
    with pytest.raises(
        RunFailed, match=r"1 of 6 queries had an LLM call fail without an answer .* after 1 searched.*stopped early"
    ):
        _run(tmp_path, f"http://127.0.0.1:{_free_port()}")
    assert not list((tmp_path / "results").rglob("DONE"))


def test_a_server_that_never_answers_in_time_fails_the_run(tmp_path):
    with ChatServer(delay_s=3.0).running() as srv, pytest.raises(RunFailed, match="LLM call fail"):
        _run(tmp_path, srv.url, "method.stages.query_understanding.options.timeout_s=0.3", "dataset.sample=2")


def test_a_tolerated_share_is_recorded(tmp_path):
    folder = _run(tmp_path, f"http://127.0.0.1:{_free_port()}", "run.max_error_share=1.0")
    llm = RunFolder(folder).metrics["llm"]
    assert llm["queries"] == 6 and llm["infra_failure_queries"] == 6 and llm["infra_failure_share"] == 1.0


def test_unparseable_output_marks_the_run_degraded(tmp_path):
    with ChatServer(reply="%%% not json %%%").running() as srv:
        folder = _run(tmp_path, srv.url)
    m = RunFolder(folder).metrics
    assert RunFolder(folder).is_done
    assert m["llm"]["infra_failure_queries"] == 0 and m["llm"]["parse_fallback_queries"] == 6
    assert m["llm"]["degraded"] is True and m["llm"]["parse_fallback_share"] == 1.0
