"""An LLM API key never reaches a file a run writes, nor its config hash (issue 15, case 5): it used to be
resolved into the config (four copies in manifest.json) and hashed, so rotating it reran every LLM job."""

from __future__ import annotations

import pytest

from experiments.config import load_config
from experiments.runner import run_experiment
from lethe.llm.backends import make_llm
from tests.conftest import overrides_for
from tests.support.chat_server import ChatServer

PLANTED = "sk-planted-0123456789abcdef"


def test_the_key_is_sent_but_never_written_or_hashed(tmp_path, monkeypatch):
    work = {"processed": tmp_path / "processed", "cache": tmp_path / "cache", "results": tmp_path / "results"}
    with ChatServer().running() as srv:
        run = overrides_for(
            work,
            "dataset=locomo",
            "dataset.scopes=[conv-26]",
            "dataset.sample=8",
            "method=lethe_iter2_llm",
            "llm=server",
            f"llm.base_url={srv.url}",
            "llm.stream=false",
        )
        monkeypatch.setenv("LETHE_LLM_API_KEY", PLANTED)
        folder = run_experiment(load_config(run))
        assert (folder / "DONE").is_file()
        assert srv.auth and set(srv.auth) == {f"Bearer {PLANTED}"}  # the server got the key on every call
        leaked = [p for p in tmp_path.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
        assert leaked == []
        monkeypatch.setenv("LETHE_LLM_API_KEY", "sk-rotated")
        assert run_experiment(load_config(run)) == folder  # same config hash: a rotated key reruns nothing


def test_a_key_in_the_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match="environment variable named by llm.api_key_env"):
        make_llm({"kind": "openai_compatible", "base_url": "http://127.0.0.1:9", "api_key": PLANTED}, tmp_path)
