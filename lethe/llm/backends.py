"""Language-model backends: llama.cpp in-process, or any OpenAI-compatible chat server.

Both implement :class:`lethe.llm.base.LLMBackend` (``chat``, ``describe``, ``close``) and share:

- **Response cache** (when ``cache_dir`` is given): :class:`lethe.llm.cache.ResponseCache` under
  ``<cache_dir>/llm_responses/``, keyed by model-file sha256 + messages + decoding + backend kind.
  A hit returns ``cached=True`` (with the original generation's timings) without touching the model
  or server. Timed-out or failed calls are never stored.
- **Hard timeout**: ``chat(..., timeout_s=T)`` (``None`` = the backend's ``timeout_s``, whose default
  ``None`` means no limit) raises :class:`LLMTimeout` once ``T`` seconds of wall-clock time have
  passed, after stopping the generation; callers count it per query.
- **Token counts** (``prompt_tokens``/``completion_tokens``), ``finish_reason``, per-token
  ``token_logprobs`` when available, and ``timings_ms`` (``total``, plus ``prompt``/``generation``).

:class:`LlamaCppBackend` runs ``llama_cpp.Llama`` in this process, loaded lazily on the first
uncached call (``verbose=False``). Decoding is deterministic: every call starts from an empty KV
cache (``llm.reset()``), so a response depends only on (model, messages, decoding), never on the
calls before it. **Prefix reuse** (``reuse_prompt_cache=True``): the KV cache is kept between calls
and llama-cpp-python's ``Llama.generate`` compares the new prompt's tokens with the ones it holds,
drops the cells after the longest common prefix (``kv_cache_seq_rm``, ~0.03 ms) and evaluates only
the rest, so calls that share an instruction and a query (a pointwise reranker) pay for their own
tokens only. A call stopped at its deadline keeps what it evaluated (tokens and cells are appended
chunk by chunk, so the cache stays consistent) and the next call goes on from there; any other
failure resets the cache. Reused cells were computed in other batches than a fresh evaluation
would use, so logits differ by rounding: on real reranking prompts the same answer token and the
answer's logprob and p(yes) within 0.05 (measured max |p(yes) difference| on 100 LetheBench queries
in ``make bench``: SmolLM2 0.010, Qwen2.5-Coder-0.5B 0.033; tests/lethe/llm/test_prefix_reuse.py). The alternative, restoring a saved prefix state per call
(``save_state``/``load_state``), measured ~10-25 ms per ``load_state`` here against ~0.03 ms for the
prefix match. The response-cache key carries ``reuse_prompt_cache`` when it is on. Counters (in
``describe``), over the calls whose prompt was evaluated whole: ``prompt_tokens_seen`` (their prompt
tokens) and ``prompt_tokens_evaluated`` (those llama.cpp evaluated; the rest came from the cache).
``tokenize``/``detokenize`` expose the model's tokenizer (no BOS, special tokens as text). The
timeout is enforced by a ``StoppingCriteriaList`` entry that returns True once the deadline has
passed, checked after every sampled token, so generation really stops there (llama-cpp-python's
``create_chat_completion`` takes no ``stopping_criteria``; the backend injects it into the inner
``create_completion`` call for the duration of one call). **Prompt evaluation** is one blocking C
call per batch; when a call has a deadline, the prompt is fed to llama.cpp in chunks of
``interrupt_tokens`` tokens (default 64; 32 costs ~20% more prompt time here, 64 ~9%) and the deadline is checked between chunks, so a call
overruns its deadline by at most one chunk's evaluation (plus one token); without a deadline the
prompt goes in batches of ``n_batch`` as usual. (Chunking only splits the same computation into
smaller batches; logits can differ from the unchunked ones in the last floating-point bits.) ``token_logprobs`` are the model's raw log-probabilities (log-softmax of the logits,
before temperature or penalties) of each generated token, read from the context's logits right after
each token is sampled (so no ``logits_all`` n_ctx x vocab buffer is needed).
``timings_ms``: ``total`` (wall clock), ``prompt`` and ``generation`` (llama.cpp's own counters:
prompt-batch evaluation and per-token decoding; tokens/s = tokens / ms * 1000). ``n_threads=None``
uses every physical core for both generation and prompt batches (:func:`default_threads`; ``make bench`` section llm
compares thread counts). Set ``n_threads`` when other jobs share the
machine: llama.cpp's OpenMP threads spin-wait on a busy core, which collapses throughput.

AMX note: llama.cpp builds compiled for CPUs with AMX (Sapphire Rapids and later) repack weights
into an "AMX" buffer, and on some machines (this project's among them) the first matrix product
then segfaults in ``ggml_backend_amx_mul_mat`` (llama.cpp issue #20824). ``use_extra_bufts=None``
(the default) therefore turns llama.cpp's extra buffer types (weight repacking) off when the loaded
library reports ``AMX_INT8 = 1`` and leaves them on otherwise; ``True``/``False`` force it.
:func:`llama_server_command` starts ``llama_cpp.server`` with the same guard.

:class:`OpenAICompatibleBackend` POSTs ``{base_url}/v1/chat/completions`` with ``requests``
(model, messages, max_tokens, temperature, top_p, seed, stop, ``logprobs: true``, and
``repeat_penalty: 1.0``, which llama.cpp servers read and others ignore, so that a server decodes
like the in-process backend: llama_cpp.server would otherwise apply 1.1; with a
``Decoding.json_schema``, ``response_format``: ``{"type": "json_object", "schema": ...}`` as llama.cpp
servers and llama_cpp.server read it, or OpenAI's ``{"type": "json_schema", ...}`` with
``schema_format="json_schema"``), streamed by
default (``stream=True``): the client then sees every token, enforces the wall-clock deadline between
them, and on timeout closes the connection, which makes llama.cpp-style servers stop generating
(a non-streamed request would keep the server busy until it finishes). Socket reads are bounded by
requests' (connect, read) timeout set to the remaining time, and by ``read_timeout_s`` (the longest silence
from the server, the wait for the first token included), so a server that accepts a connection and never answers
fails the call (``LLMTimeout``) even when the call has no deadline. Optional fields a server rejects
(HTTP 400/422) are dropped once and the request retried (remembered for later calls). Usage comes
from the server when it sends it (``stream_options.include_usage``), else ``completion_tokens``
counts streamed content chunks (one per token on llama.cpp servers) and ``prompt_tokens`` is None.
``timings_ms``: ``total``; ``prompt`` = time to the first token and ``generation`` = the rest (or
the server's own ``timings.prompt_ms``/``predicted_ms`` when it reports them). Set
``model_sha256`` (or a ``gguf`` spec in the config) so cached responses are tied to the served
weights; without it they are keyed by base_url + model name.

:func:`make_llm` builds a backend from a config mapping (conf/llm/*.yaml).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from lethe.core.model_types import ResolvedModel
from lethe.core.models import resolve_model
from lethe.core.secrets import refuse_secrets
from lethe.core.typed_config import plain_values
from lethe.llm.base import Decoding, LLMError, LLMResponse, LLMTimeout, Message
from lethe.llm.cache import ResponseCache, messages_as_dicts

KINDS = ("llamacpp", "openai_compatible")

_PARAMS_LOCK = threading.Lock()


# ----------------------------------------------------------------------------- llama.cpp helpers


def llama_cpp_system_info() -> str | None:
    """The CPU features the installed llama.cpp library was built with and detects (``AVX2 = 1 | AVX512 = 1 |
    ...``): they pick its quantized matmul kernels, so two builds that differ here can give different tokens."""
    import llama_cpp

    with contextlib.suppress(Exception):
        return llama_cpp.llama_print_system_info().decode(errors="replace").strip()
    return None


def llama_cpp_has_amx() -> bool:
    """True if the installed llama.cpp library was built with, and detects, AMX (see module docstring)."""
    return "AMX_INT8 = 1" in (llama_cpp_system_info() or "")


def _extra_bufts(use_extra_bufts: bool | None) -> bool:
    return (not llama_cpp_has_amx()) if use_extra_bufts is None else bool(use_extra_bufts)


@contextlib.contextmanager
def _model_params(use_extra_bufts: bool) -> Iterator[None]:
    """While active, ``llama_cpp.Llama(...)`` builds its model params with ``use_extra_bufts`` set
    (``Llama`` has no argument for it, so its default-params factory is wrapped)."""
    import llama_cpp.llama_cpp as C

    with _PARAMS_LOCK:
        orig = C.llama_model_default_params

        def patched():
            p = orig()
            p.use_extra_bufts = use_extra_bufts
            return p

        C.llama_model_default_params = patched
        try:
            yield
        finally:
            C.llama_model_default_params = orig


_SERVER_BOOTSTRAP = """\
import contextlib, runpy
from lethe.llm.backends import _model_params
with _model_params(False) if {disable} else contextlib.nullcontext():
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def llama_server_command(
    model_path: str | os.PathLike,
    host: str = "127.0.0.1",
    port: int = 8000,
    n_threads: int | None = None,
    n_ctx: int | None = None,
    use_extra_bufts: bool | None = None,
    extra_args: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """argv that starts the real ``llama_cpp.server`` (``python -m llama_cpp.server ...``) with the
    AMX guard of this module applied first (equivalent to ``-m llama_cpp.server`` otherwise)."""
    disable = not _extra_bufts(use_extra_bufts)
    argv = [
        python or sys.executable,
        "-c",
        _SERVER_BOOTSTRAP.format(disable=disable),
        "--model",
        str(model_path),
        "--host",
        host,
        "--port",
        str(port),
    ]
    if n_threads is not None:
        argv += ["--n_threads", str(n_threads), "--n_threads_batch", str(n_threads)]
    if n_ctx is not None:
        argv += ["--n_ctx", str(n_ctx)]
    return argv + list(extra_args)


# ----------------------------------------------------------------------------- in-process llama.cpp


class _DeadlinePassed(Exception):
    """Raised between prompt chunks once a call's deadline has passed (becomes LLMTimeout)."""


class _CachedChat:
    """``chat`` for both backends: the response cache around the backend's own ``_call``."""

    kind: str
    cache: Any
    timeout_s: float | None

    def _key_extra(self) -> dict[str, Any] | None:
        return None

    def _cache_model_id(self) -> str:
        raise NotImplementedError

    def _cache_request(self) -> dict[str, Any]:
        raise NotImplementedError

    def _call(self, msgs: list[dict[str, str]], decoding: Decoding, timeout: float | None) -> LLMResponse:
        raise NotImplementedError

    def chat(
        self, messages: Sequence[Message], decoding: Decoding = Decoding(), timeout_s: float | None = None
    ) -> LLMResponse:
        """One chat completion (cached if ``cache_dir``); raises LLMTimeout / LLMError."""
        msgs = messages_as_dicts(messages)
        timeout = self.timeout_s if timeout_s is None else timeout_s
        key = None
        if self.cache is not None:
            key = self.cache.key(self._cache_model_id(), msgs, decoding, self.kind, self._key_extra())
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        resp = self._call(msgs, decoding, timeout)
        if key is not None:
            self.cache.put(
                key, resp, request={"backend": self._cache_request(), "messages": msgs, "decoding": decoding.as_dict()}
            )
        return resp


_THREAD_BUDGET: int | None = None  # set_default_threads: this process's share of the machine, if it has one


def set_default_threads(n: int | None) -> int | None:
    """Make ``n`` llama.cpp's thread count in this process wherever a config leaves ``n_threads`` null (None: the
    physical cores again); returns the previous setting. A worker that shares the machine with other workers sets
    its budget here, as it sets torch's (OpenMP threads spin-wait on a busy core)."""
    global _THREAD_BUDGET
    if n is not None and (isinstance(n, bool) or int(n) < 1):
        raise ValueError(f"a thread budget is an integer >= 1 or None, got {n!r}")
    previous, _THREAD_BUDGET = _THREAD_BUDGET, None if n is None else int(n)
    return previous


def default_threads() -> int:
    """llama.cpp's thread count when a config leaves ``n_threads`` null: the process's budget
    (:func:`set_default_threads`) if it has one, else the physical cores (hyper-threads share a core's arithmetic
    units, so they add nothing to matrix products), at least 1."""
    if _THREAD_BUDGET is not None:
        return _THREAD_BUDGET
    import psutil

    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)


class LlamaCppBackend(_CachedChat):
    """llama.cpp in this process (see module docstring); thread-safe (one call at a time)."""

    kind = "llamacpp"

    def __init__(
        self,
        model: ResolvedModel | Mapping[str, Any],
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        cache_dir: str | os.PathLike | None = None,
        chat_format: str | None = None,
        *,
        name: str | None = None,
        use_extra_bufts: bool | None = None,
        timeout_s: float | None = None,
        n_batch: int = 512,
        reuse_prompt_cache: bool = False,
        interrupt_tokens: int = 64,
        n_gpu_layers: int = 0,
    ):
        self.model = (
            model
            if isinstance(model, ResolvedModel)
            else resolve_model({**model, "format": "gguf"}, cache_dir=cache_dir)
        )
        if isinstance(n_gpu_layers, bool) or not isinstance(n_gpu_layers, int) or n_gpu_layers < -1:
            raise ValueError(f"llm.n_gpu_layers={n_gpu_layers!r}: an integer >= 0, or -1 for every layer")
        self.n_gpu_layers = n_gpu_layers  # layers offloaded to a GPU (a llama.cpp build with CUDA/Metal); 0 = CPU only
        self.name = name or self.model.name
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads) if n_threads else None
        self.seed = int(seed)
        self.chat_format = chat_format
        self.use_extra_bufts = use_extra_bufts
        self.timeout_s = timeout_s
        self.n_batch = int(n_batch)
        if int(interrupt_tokens) < 1:
            raise ValueError(f"interrupt_tokens must be >= 1, got {interrupt_tokens}")
        self.interrupt_tokens = int(interrupt_tokens)
        self.reuse_prompt_cache = bool(reuse_prompt_cache)
        self.cache = ResponseCache(cache_dir) if cache_dir else None
        self.model_calls = 0  # generations actually run (cache hits excluded)
        self.prompt_tokens_seen = 0  # prompt tokens of the calls whose prompt was evaluated whole
        self.prompt_tokens_evaluated = 0  # of which llama.cpp evaluated (the rest came from the KV cache)
        self.load_ms: float | None = None
        self._llm: Any = None
        self._extra_bufts_used: bool | None = None
        self._lock = threading.Lock()

    # -- loading

    def _ensure_loaded(self) -> Any:
        if self._llm is None:
            import llama_cpp

            extra = _extra_bufts(self.use_extra_bufts)
            kwargs: dict[str, Any] = dict(
                model_path=str(self.model.path),
                n_ctx=self.n_ctx,
                n_batch=self.n_batch,
                seed=self.seed,
                chat_format=self.chat_format,
                verbose=False,
                n_gpu_layers=self.n_gpu_layers,
            )
            threads = self.n_threads or default_threads()  # also for prompt batches (see docstring)
            kwargs.update(n_threads=threads, n_threads_batch=threads)
            t0 = time.perf_counter()
            with _model_params(extra):
                try:
                    self._llm = llama_cpp.Llama(**kwargs)
                except Exception as exc:
                    raise LLMError(f"llama.cpp could not load {self.model.path}: {exc}") from exc
            self.load_ms = (time.perf_counter() - t0) * 1000
            self._extra_bufts_used = extra
        return self._llm

    # -- calls

    def _key_extra(self) -> dict[str, Any] | None:
        extra: dict[str, Any] = {}
        if self.chat_format:
            extra["chat_format"] = self.chat_format
        if self.reuse_prompt_cache:  # reused cells can move logits in the last bits (module docstring)
            extra["reuse_prompt_cache"] = True
        return extra or None

    def _cache_model_id(self) -> str:
        return self.model.sha256

    def tokenize(self, text: str) -> list[int]:
        """The model's tokens of ``text`` (no BOS; special-token text is not parsed as special)."""
        with self._lock:
            return list(self._ensure_loaded().tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of ``tokens``; a multi-byte character cut at the end is dropped."""
        with self._lock:
            raw = self._ensure_loaded().detokenize(list(tokens))
        return raw.decode("utf-8", errors="ignore")

    def _cache_request(self) -> dict[str, Any]:
        return self.describe_model()

    def _call(self, msgs: list[dict[str, str]], decoding: Decoding, timeout: float | None) -> LLMResponse:
        with self._lock:
            return self._generate(msgs, decoding, timeout)

    def _generate(self, msgs: list[dict[str, str]], decoding: Decoding, timeout: float | None) -> LLMResponse:
        import llama_cpp
        import numpy as np

        llm = self._ensure_loaded()
        t0 = time.monotonic()
        deadline = None if timeout is None else t0 + float(timeout)
        state = {"fired": False, "logprobs_ok": True, "prompt_done": False, "evaluated": 0}
        logprobs: list[float] = []
        n_vocab = llm.n_vocab()

        def past_deadline(_input_ids: Any, _logits: Any) -> bool:
            if deadline is not None and time.monotonic() >= deadline:
                state["fired"] = True
                return True
            return False

        orig_completion, orig_sample, orig_eval = llm.create_completion, llm.sample, llm.eval
        chunk = self.interrupt_tokens

        def eval_counted(tokens: Any) -> None:
            # the first eval of a call is the prompt (what prefix reuse left of it); later ones are
            # generated tokens fed back. With a deadline it goes in chunks, the deadline checked between them.
            first = not state["prompt_done"]
            state["prompt_done"] = True
            if not len(tokens):
                orig_eval(tokens)  # (the whole prompt was cached)
                return
            step = chunk if deadline is not None else len(tokens)
            for i in range(0, len(tokens), step):
                if deadline is not None and past_deadline(None, None):
                    raise _DeadlinePassed()
                orig_eval(tokens[i : i + step])
                if first:
                    state["evaluated"] += len(tokens[i : i + step])

        def create_completion(*args: Any, **kw: Any) -> Any:
            kw["stopping_criteria"] = llama_cpp.StoppingCriteriaList(
                [*(kw.get("stopping_criteria") or []), past_deadline]
            )
            return orig_completion(*args, **kw)

        def sample(*args: Any, **kw: Any) -> int:
            token = orig_sample(*args, **kw)
            if state["logprobs_ok"]:
                try:
                    idx = kw.get("idx")
                    ridx = idx - llm.n_tokens if idx is not None else -1
                    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, ridx)
                    row = np.ctypeslib.as_array(ptr, shape=(n_vocab,))
                    top = float(row.max())
                    lse = top + float(np.log(np.exp(row - top, dtype=np.float64).sum()))
                    logprobs.append(float(row[token]) - lse)
                except Exception:  # noqa: BLE001 - logprobs are optional; never fail the call for them
                    state["logprobs_ok"] = False
            return token

        if not self.reuse_prompt_cache:
            llm.reset()  # a response depends only on its request, not on earlier calls
        with contextlib.suppress(Exception):
            llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
        llm.create_completion, llm.sample = create_completion, sample  # instance attributes, this call only
        llm.eval = eval_counted
        try:
            out = llm.create_chat_completion(
                messages=msgs,
                temperature=decoding.temperature,
                top_p=decoding.top_p,
                seed=decoding.seed,
                max_tokens=decoding.max_tokens,
                stop=list(decoding.stop),
                logprobs=True,
                response_format=None if decoding.json_schema is None else _json_object_format(decoding.json_schema),
            )
        except _DeadlinePassed:
            if not self.reuse_prompt_cache:
                llm.reset()  # (with prefix reuse the evaluated chunks stay valid for the next call)
            raise LLMTimeout(
                f"{self.name}: prompt evaluation stopped at the {timeout:g}s deadline after "
                f"{time.monotonic() - t0:.2f}s"
            ) from None
        except Exception as exc:
            llm.reset()
            raise LLMError(f"llama.cpp generation failed ({type(exc).__name__}: {exc})") from exc
        finally:
            for attr in ("create_completion", "sample", "eval"):
                vars(llm).pop(attr, None)
        elapsed = time.monotonic() - t0
        self.model_calls += 1
        timings = {"total": elapsed * 1000}
        with contextlib.suppress(Exception):
            perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
            timings.update(prompt=float(perf.t_p_eval_ms), generation=float(perf.t_eval_ms))
        usage = out.get("usage") or {}
        self.prompt_tokens_seen += int(usage.get("prompt_tokens") or 0)  # (calls whose prompt was evaluated whole)
        self.prompt_tokens_evaluated += int(state["evaluated"])
        if state["fired"] or (timeout is not None and elapsed > timeout):
            if not self.reuse_prompt_cache:
                llm.reset()
            raise LLMTimeout(
                f"{self.name}: generation stopped at the {timeout:g}s deadline after "
                f"{elapsed:.2f}s ({usage.get('completion_tokens', '?')} tokens generated)"
            )
        choice = out["choices"][0]
        n_completion = usage.get("completion_tokens")
        token_logprobs = None
        lp = choice.get("logprobs") or {}
        if isinstance(lp, dict) and lp.get("content"):
            token_logprobs = [float(t["logprob"]) for t in lp["content"]]
        elif state["logprobs_ok"] and n_completion is not None and len(logprobs) >= n_completion:
            token_logprobs = logprobs[:n_completion]
        return LLMResponse(
            text=choice["message"].get("content") or "",
            token_logprobs=token_logprobs,
            timings_ms=timings,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=n_completion,
            cached=False,
            finish_reason=choice.get("finish_reason"),
        )

    # -- provenance

    def describe_model(self) -> dict[str, Any]:
        """What determines outputs: model file, chat format, kind."""
        return {"kind": self.kind, "model": self.model.describe(), "chat_format": self.chat_format}

    def describe(self) -> dict[str, Any]:
        """Name, kind, model file (path, source, sha256), context/threads, cache stats, for manifests."""
        import llama_cpp

        d = {
            "name": self.name,
            "kind": self.kind,
            "model": self.model.describe(),
            "model_sha256": self.model.sha256,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "n_batch": self.n_batch,
            "n_gpu_layers": self.n_gpu_layers,
            "interrupt_tokens": self.interrupt_tokens,
            "seed": self.seed,
            "chat_format": self._llm.chat_format if self._llm is not None else self.chat_format,
            "use_extra_bufts": self._extra_bufts_used if self._llm is not None else self.use_extra_bufts,
            "reuse_prompt_cache": self.reuse_prompt_cache,
            "timeout_s": self.timeout_s,
            "llama_cpp_version": getattr(llama_cpp, "__version__", None),
            "system_info": llama_cpp_system_info(),
            "loaded": self._llm is not None,
            "load_ms": self.load_ms,
            "model_calls": self.model_calls,
            "prompt_tokens_seen": self.prompt_tokens_seen,
            "prompt_tokens_evaluated": self.prompt_tokens_evaluated,
            "cache": self.cache.stats() if self.cache is not None else None,
        }
        if self._llm is not None:
            d["n_threads_effective"] = self._llm.n_threads
        return d

    def close(self) -> None:
        """Free the model (it is reloaded on the next uncached call)."""
        if self._llm is not None:
            with contextlib.suppress(Exception):
                self._llm.close()
            self._llm = None


# ----------------------------------------------------------------------------- OpenAI-compatible server


def _is_read_timeout(exc: BaseException) -> bool:
    """Whether a ``requests`` error raised while reading a stream is a socket read timeout (requests wraps
    urllib3's ``ReadTimeoutError`` in a ``ConnectionError`` there)."""
    from urllib3.exceptions import ReadTimeoutError

    return any(isinstance(a, ReadTimeoutError) for a in exc.args)


class OpenAICompatibleBackend(_CachedChat):
    """A ``/v1/chat/completions`` server (llama.cpp, llama-cpp-python, vLLM, ...); see module docstring."""

    kind = "openai_compatible"
    OPTIONAL_FIELDS = ("seed", "logprobs", "stream_options", "repeat_penalty")

    def __init__(
        self,
        base_url: str,
        model: str = "local",
        api_key_env: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        model_sha256: str | None = None,
        *,
        name: str | None = None,
        stream: bool = True,
        timeout_s: float | None = None,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float | None = None,
        schema_format: str = "json_object",
    ):
        import requests

        if schema_format not in ("json_object", "json_schema"):
            raise ValueError(f"schema_format must be 'json_object' or 'json_schema', got {schema_format!r}")
        self.schema_format = schema_format
        refuse_secrets({"base_url": str(base_url)}, "the backend's arguments")
        self.base_url = str(base_url).rstrip("/")
        self.model = model
        self.model_sha256 = model_sha256
        self.name = name or f"{model}@{self.base_url}"
        self.stream = stream
        self.timeout_s = timeout_s
        self.connect_timeout_s = float(connect_timeout_s)
        self.read_timeout_s = None if read_timeout_s is None else float(read_timeout_s)
        self.cache = ResponseCache(cache_dir) if cache_dir else None
        self.model_calls = 0
        self._dropped: set[str] = set()  # optional request fields this server rejected
        self._session = requests.Session()
        self.api_key_env = api_key_env  # the key itself is read from the environment per request, never stored

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1/chat/completions"

    def _auth_header(self) -> dict[str, str] | None:
        """``Authorization: Bearer <key>`` from the environment variable ``api_key_env``, read at call time."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else None

    def _key_extra(self) -> dict[str, Any] | None:
        return None if self.model_sha256 else {"base_url": self.base_url, "model": self.model}

    def _cache_model_id(self) -> str:
        return self.model_sha256 or "unknown"

    def _cache_request(self) -> dict[str, Any]:
        return {"kind": self.kind, "base_url": self.base_url, "model": self.model, "model_sha256": self.model_sha256}

    def _call(self, msgs: list[dict[str, str]], decoding: Decoding, timeout: float | None) -> LLMResponse:
        return self._request(msgs, decoding, timeout)

    def _payload(self, msgs: list[dict[str, str]], decoding: Decoding) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": msgs,
            "max_tokens": decoding.max_tokens,
            "temperature": decoding.temperature,
            "top_p": decoding.top_p,
            "seed": decoding.seed,
            "logprobs": True,
            "stream": self.stream,
            "repeat_penalty": 1.0,
        }  # llama.cpp servers: no penalty (llama_cpp.server's default is 1.1)
        if decoding.stop:
            body["stop"] = list(decoding.stop)
        if decoding.json_schema is not None:  # never optional: a server that refuses it fails the call
            body["response_format"] = (
                _json_object_format(decoding.json_schema)
                if self.schema_format == "json_object"
                else {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": json.loads(decoding.json_schema), "strict": True},
                }
            )
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        for f in self._dropped:
            body.pop(f, None)
        return body

    def _request(self, msgs: list[dict[str, str]], decoding: Decoding, timeout: float | None) -> LLMResponse:
        import requests

        t0 = time.monotonic()
        deadline = None if timeout is None else t0 + float(timeout)
        for attempt in (0, 1):
            body = self._payload(msgs, decoding)
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            connect = self.connect_timeout_s if remaining is None else min(self.connect_timeout_s, remaining)
            read = min((x for x in (remaining, self.read_timeout_s) if x is not None), default=None)
            try:
                r = self._session.post(
                    self.url, json=body, stream=self.stream, timeout=(connect, read), headers=self._auth_header()
                )
            except requests.exceptions.Timeout as exc:
                if deadline is not None and time.monotonic() >= deadline - 0.05:
                    limit = f"{timeout:g}s deadline"
                elif isinstance(exc, requests.exceptions.ConnectTimeout):
                    limit = f"{self.connect_timeout_s:g}s connect timeout"
                else:
                    limit = f"{self.read_timeout_s:g}s read timeout (read_timeout_s: the server sent nothing)"
                raise LLMTimeout(f"{self.name}: no response within the {limit} ({type(exc).__name__})") from exc
            except requests.exceptions.RequestException as exc:
                raise LLMError(f"{self.name}: cannot reach {self.url} ({type(exc).__name__}: {exc})") from exc
            if r.status_code >= 400:
                excerpt = _excerpt(r)
                optional = [f for f in self.OPTIONAL_FIELDS if f in body]
                if attempt == 0 and r.status_code in (400, 422) and optional:
                    self._dropped.update(optional)  # tolerate servers that reject optional fields
                    continue
                raise LLMError(f"{self.name}: HTTP {r.status_code} from {self.url}: {excerpt}")
            try:
                if self.stream:
                    return self._read_stream(r, t0, deadline, timeout)
                return self._read_json(r, t0, deadline, timeout)
            finally:
                r.close()  # on a timeout this disconnects, and the server stops generating
        raise LLMError(f"{self.name}: request failed")  # not reached

    def _timeout(self, timeout: float | None, t0: float, n: int | None = None) -> LLMTimeout:
        got = f" after {n} tokens" if n is not None else ""
        return LLMTimeout(
            f"{self.name}: call exceeded its {timeout:g}s deadline{got} "
            f"({time.monotonic() - t0:.2f}s); connection closed"
        )

    def _read_json(self, r: Any, t0: float, deadline: float | None, timeout: float | None) -> LLMResponse:
        import requests

        try:
            data = r.json()
        except requests.exceptions.RequestException as exc:
            if deadline is not None and time.monotonic() >= deadline - 0.05:
                raise self._timeout(timeout, t0) from exc
            raise LLMError(f"{self.name}: reading the response failed ({exc})") from exc
        except ValueError as exc:
            raise LLMError(f"{self.name}: response is not JSON: {r.text[:300]!r}") from exc
        elapsed = time.monotonic() - t0
        if deadline is not None and elapsed > (deadline - t0):
            raise self._timeout(timeout, t0)
        self.model_calls += 1
        try:
            choice = data["choices"][0]
            text = (choice.get("message") or {}).get("content") or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.name}: unexpected response {json.dumps(data)[:300]}") from exc
        usage = data.get("usage") or {}
        timings = {"total": elapsed * 1000, **_server_timings(data)}
        return LLMResponse(
            text=text,
            token_logprobs=_logprobs(choice),
            timings_ms=timings,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
        )

    def _read_stream(self, r: Any, t0: float, deadline: float | None, timeout: float | None) -> LLMResponse:
        import requests

        parts: list[str] = []
        logprobs: list[float] = []
        have_logprobs = True
        n_chunks = 0
        first: float | None = None
        finish = None
        usage: dict[str, Any] = {}
        server_timings: dict[str, float] = {}
        try:
            for raw in r.iter_lines(chunk_size=None):
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._timeout(timeout, t0, n_chunks)
                line = raw.decode("utf-8", errors="replace").strip() if isinstance(raw, bytes) else str(raw).strip()
                if not line.startswith("data:"):
                    continue  # blank separators, comments/pings (":"), event names
                data_s = line[5:].strip()
                if data_s == "[DONE]":
                    break
                try:
                    chunk = json.loads(data_s)
                except ValueError as exc:
                    raise LLMError(f"{self.name}: bad stream chunk {data_s[:200]!r}") from exc
                if "error" in chunk and not chunk.get("choices"):
                    raise LLMError(f"{self.name}: server error in stream: {json.dumps(chunk['error'])[:300]}")
                usage = chunk.get("usage") or usage
                server_timings = _server_timings(chunk) or server_timings
                for choice in chunk.get("choices") or []:
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        if first is None:
                            first = time.monotonic()
                        parts.append(content)
                        n_chunks += 1
                        lp = _logprobs(choice)
                        if lp is None:
                            have_logprobs = False
                        else:
                            logprobs.extend(lp)
                    finish = choice.get("finish_reason") or finish
        except requests.exceptions.RequestException as exc:  # read timeouts surface as ConnectionError here
            if deadline is not None and time.monotonic() >= deadline - 0.05:
                raise self._timeout(timeout, t0, n_chunks) from exc
            if self.read_timeout_s is not None and _is_read_timeout(exc):
                raise LLMTimeout(
                    f"{self.name}: the stream stalled: nothing for {self.read_timeout_s:g}s "
                    f"(read_timeout_s) after {n_chunks} tokens; connection closed"
                ) from exc
            raise LLMError(f"{self.name}: stream broke ({type(exc).__name__}: {exc})") from exc
        end = time.monotonic()
        if deadline is not None and end > deadline:
            raise self._timeout(timeout, t0, n_chunks)
        self.model_calls += 1
        timings = {"total": (end - t0) * 1000}
        if server_timings:
            timings.update(server_timings)
        elif first is not None:
            timings.update(prompt=(first - t0) * 1000, generation=(end - first) * 1000)
        n_completion = usage.get("completion_tokens", n_chunks)
        token_logprobs = logprobs if (have_logprobs and logprobs and n_chunks) else None
        return LLMResponse(
            text="".join(parts),
            token_logprobs=token_logprobs,
            timings_ms=timings,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=n_completion,
            finish_reason=finish,
        )

    def describe(self) -> dict[str, Any]:
        """Name, kind, base_url, model, model sha256 (if known), cache stats, for manifests."""
        return {
            "name": self.name,
            "kind": self.kind,
            "base_url": self.base_url,
            "model": self.model,
            "model_sha256": self.model_sha256,
            "stream": self.stream,
            "timeout_s": self.timeout_s,
            "read_timeout_s": self.read_timeout_s,
            "dropped_fields": sorted(self._dropped),
            "schema_format": self.schema_format,
            "model_calls": self.model_calls,
            "api_key_env": self.api_key_env,
            "cache": self.cache.stats() if self.cache is not None else None,
        }

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()


def _json_object_format(json_schema: str) -> dict[str, Any]:
    """``response_format`` for a ``Decoding.json_schema`` as llama.cpp (in process or served) reads it."""
    return {"type": "json_object", "schema": json.loads(json_schema)}


def _excerpt(r: Any, n: int = 500) -> str:
    with contextlib.suppress(Exception):
        return r.text[:n].replace("\n", " ")
    return "<unreadable body>"


def _logprobs(choice: Mapping[str, Any]) -> list[float] | None:
    """OpenAI chat logprobs (``logprobs.content[*].logprob``) of one choice, or None."""
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping) or not lp.get("content"):
        return None
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return [float(t["logprob"]) for t in lp["content"]]
    return None


def _server_timings(data: Mapping[str, Any]) -> dict[str, float]:
    """llama.cpp server (``llama-server``) ``timings`` -> prompt/generation ms, if present."""
    t = data.get("timings")
    if isinstance(t, Mapping) and "prompt_ms" in t and "predicted_ms" in t:
        return {"prompt": float(t["prompt_ms"]), "generation": float(t["predicted_ms"])}
    return {}


# ----------------------------------------------------------------------------- factory


def make_llm(
    cfg: Mapping[str, Any], cache_dir: str | os.PathLike | None = None
) -> LlamaCppBackend | OpenAICompatibleBackend:
    """A backend from a conf/llm/*.yaml mapping; ``cache_dir`` holds joined GGUF files and, unless
    ``cache: false``, the response cache. Unknown ``kind`` -> ValueError listing the known ones."""
    c = plain_values(cfg)
    refuse_secrets(c, "the llm config")
    kind = c.get("kind")
    resp_cache = cache_dir if c.get("cache", True) else None
    if kind == "llamacpp":
        if not c.get("model"):
            raise ValueError(
                "llm config of kind 'llamacpp' needs a `model` spec (path / pypi_parts / pypi_find_spec / hub_id)"
            )
        model = resolve_model({**c["model"], "format": "gguf"}, cache_dir=cache_dir)
        return LlamaCppBackend(
            model,
            n_ctx=c.get("n_ctx") or 4096,
            n_threads=c.get("n_threads"),
            seed=c.get("seed") or 0,
            cache_dir=resp_cache,
            chat_format=c.get("chat_format"),
            name=c.get("name"),
            use_extra_bufts=c.get("use_extra_bufts"),
            timeout_s=c.get("timeout_s"),
            n_batch=c.get("n_batch") or 512,
            reuse_prompt_cache=bool(c.get("reuse_prompt_cache", False)),
            interrupt_tokens=int(c.get("interrupt_tokens") or 64),
            n_gpu_layers=c.get("n_gpu_layers") or 0,
        )
    if kind == "openai_compatible":
        if not c.get("base_url"):
            raise ValueError("llm config of kind 'openai_compatible' needs `base_url`")
        sha = c.get("model_sha256")
        if not sha and c.get("gguf"):
            sha = resolve_model({**c["gguf"], "format": "gguf"}, cache_dir=cache_dir).sha256
        return OpenAICompatibleBackend(
            c["base_url"],
            model=c.get("model") or "local",
            api_key_env=c.get("api_key_env") or None,
            cache_dir=resp_cache,
            model_sha256=sha,
            name=c.get("name"),
            stream=bool(c.get("stream", True)),
            timeout_s=c.get("timeout_s"),
            connect_timeout_s=c.get("connect_timeout_s") or 10.0,
            read_timeout_s=c.get("read_timeout_s"),
            schema_format=c.get("schema_format") or "json_object",
        )
    raise ValueError(f"unknown llm kind {kind!r}; known kinds: {', '.join(KINDS)}")
