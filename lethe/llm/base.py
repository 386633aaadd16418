"""The one small interface every language-model backend implements.

A backend takes chat messages (or a plain prompt, sent as one user message) and returns an
``LLMResponse``: text, per-token logprobs when the backend gives them, timings, and whether the
response came from the cache. Decoding is deterministic by default (temperature 0, fixed seed).
A call that exceeds ``timeout_s`` raises ``LLMTimeout`` after cancelling the generation; callers
count it per query (never a silent fallback).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


class LLMError(RuntimeError):
    """A backend failed (server error, bad response)."""


class LLMTimeout(LLMError):
    """A call exceeded its hard timeout and was cancelled."""


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Decoding:
    """Decoding parameters; part of the response-cache key.

    ``json_schema``: a JSON Schema (as JSON text) the output must follow, enforced while decoding
    (llama.cpp turns it into a grammar; HTTP servers get it as ``response_format``). ``as_dict``
    leaves it out when None, so unconstrained requests keep the keys they always had."""

    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = ()
    json_schema: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        if self.json_schema is None:
            del d["json_schema"]
        return d


@dataclass
class LLMResponse:
    """Generated text; ``token_logprobs``: one float per generated token (None if unavailable);
    ``timings_ms``: at least ``total``, and ``prompt``/``generation`` where the backend reports them;
    ``prompt_tokens``/``completion_tokens`` counts; ``cached``: served from the response cache."""

    text: str
    token_logprobs: list[float] | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached: bool = False
    finish_reason: str | None = None


@runtime_checkable
class LLMBackend(Protocol):
    """``chat`` is the only call; ``describe`` names the model (id, file sha256) for manifests."""

    name: str

    def chat(
        self, messages: Sequence[Message], decoding: Decoding = Decoding(), timeout_s: float | None = None
    ) -> LLMResponse: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
