"""A fake ``LLMBackend`` for tests: records calls, sleeps like a slow model, cancels like a real one."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from lethe.llm.base import Decoding, LLMResponse, LLMTimeout, Message


class FakeLLM:
    """Call ``k`` sleeps ``delay(messages)`` (``delay_s`` unless overridden; when ``timeout_s`` is shorter it
    sleeps ``timeout_s`` and raises LLMTimeout, as a real backend cancels), then returns
    ``reply(messages, decoding, k)``: a ``(text, logprobs)`` pair, an ``LLMResponse``, or an exception
    instance to raise."""

    name = "fake"

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.calls: list[dict[str, Any]] = []

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        raise NotImplementedError

    def delay(self, messages: Sequence[Message]) -> float:
        """Seconds the call with ``messages`` takes."""
        return self.delay_s

    def record(self, messages: Sequence[Message], decoding: Decoding, timeout_s: float | None) -> dict[str, Any]:
        return {"messages": list(messages), "decoding": decoding, "timeout_s": timeout_s}

    def chat(
        self, messages: Sequence[Message], decoding: Decoding = Decoding(), timeout_s: float | None = None
    ) -> LLMResponse:
        k = len(self.calls)
        self.calls.append(self.record(messages, decoding, timeout_s))
        delay = self.delay(messages)
        if timeout_s is not None and timeout_s < delay:
            time.sleep(max(0.0, timeout_s))
            raise LLMTimeout(f"fake call {k} exceeded {timeout_s:.3f}s")
        time.sleep(delay)
        item = self.reply(messages, decoding, k)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, LLMResponse):
            return item
        text, lps = item
        return LLMResponse(text=text, token_logprobs=lps, timings_ms={"total": delay * 1000})

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        pass


class ScriptedLLM(FakeLLM):
    """Replies from a list, in call order (each item as :meth:`FakeLLM.reply` allows)."""

    def __init__(self, replies: Sequence[Any]):
        super().__init__()
        self.replies = list(replies)

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        return self.replies[k]
