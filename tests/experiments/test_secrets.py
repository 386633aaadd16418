"""An LLM API key never reaches a file a run writes, nor its config hash (issue 15, case 5): it used to be
resolved into the config (four copies in manifest.json) and hashed, so rotating it reran every LLM job."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from experiments.config import load_config
from experiments.runner import run_experiment
from lethe.llm.backends import make_llm
from tests.conftest import overrides_for

PLANTED = "sk-planted-0123456789abcdef"


class _Chat(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/chat/completions that answers '[]' and records the Authorization headers."""

    seen: list[str | None] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Chat.seen.append(self.headers.get("Authorization"))
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "[]"}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def chat_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _Chat.seen = []
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_the_key_is_sent_but_never_written_or_hashed(tmp_path, monkeypatch, chat_server):
    work = {"processed": tmp_path / "processed", "cache": tmp_path / "cache", "results": tmp_path / "results"}
    run = overrides_for(work, "dataset=locomo", "dataset.scopes=[conv-26]", "dataset.sample=8",
                        "method=lethe_iter2_llm", "llm=server", f"llm.base_url={chat_server}", "llm.stream=false")
    monkeypatch.setenv("LETHE_LLM_API_KEY", PLANTED)
    folder = run_experiment(load_config(run))
    assert (folder / "DONE").is_file()
    assert _Chat.seen and set(_Chat.seen) == {f"Bearer {PLANTED}"}   # the server got the key on every call
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert leaked == []
    monkeypatch.setenv("LETHE_LLM_API_KEY", "sk-rotated")
    assert run_experiment(load_config(run)) == folder        # same config hash: a rotated key reruns nothing


def test_a_key_in_the_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match="environment variable named by llm.api_key_env"):
        make_llm({"kind": "openai_compatible", "base_url": "http://127.0.0.1:9", "api_key": PLANTED}, tmp_path)
