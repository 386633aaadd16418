"""LLM query understanding: rewriting and decomposition by a language model, with visible fallbacks.

``LLMQueryUnderstanding`` implements ``lethe.stages.understanding.rules.QueryUnderstandingBackend``
(name ``"llm"``), so ``understand()`` and the Lethe pipeline use it like the rule backend. It is
built from an ``LLMBackend`` (``lethe.llm.base``; or its config, built with
``lethe.llm.backends.make_llm``), a per-call ``timeout_s``, a ``Decoding`` and a ``fallback``
backend (the rule backend with the same ``max_subqueries`` by default).

Per call (``rewrite`` or ``decompose``): render the prompt (``rewrite.v1`` / ``decompose.v1``,
``lethe/llm/prompts/``), ``llm.chat(messages, decoding, timeout_s)``, strict parse
(``lethe.llm.parsing``). The rules tuple returned says who answered:

- success: ``("llm:rewrite",)`` / ``("llm:decompose",)`` (also when the model left the query
  unchanged or returned it as its only part: the model decided);
- failure: ``("llm_fallback:<component>:<cause>", *rules of the fallback backend)`` with cause
  ``timeout`` (``LLMTimeout``), ``error`` (any other ``LLMError``) or ``parse`` (``ParseError``;
  the reason is counted in ``describe()``). The fallback backend's answer is returned, so each
  fallback is visible per query in the run flags (``qu_rules``) and never silent. Other exceptions
  are bugs and propagate.

The LLM is built only when a component uses it; ``close()`` closes it only when it was built here
from its config (a backend object passed in belongs to the caller).

Rewriting is attempted only when ``history`` has a non-blank turn: without history a query has
nothing to be resolved against, so it is returned unchanged with ``()`` and no LLM call (counted as
``skipped_no_history``), exactly like the rule backend. The model sees the last
``max_history_turns`` non-blank turns, each cut to ``max_turn_chars`` characters.

``components`` switches each component between ``"llm"`` and ``"rule"`` (the rules-vs-LLM
ablation): a ``"rule"`` component is answered by the fallback backend with its own rules and
no LLM call.

``describe()`` reports the components, timeout, decoding, prompts (name, version, sha256), the
LLM's own ``describe()``, the fallback's, and per-component counters: calls, cache hits,
timeouts, errors, parse failures (total and per reason), fallbacks, plus the wall-clock latency of
every LLM call (ms, failures included) and its summary. ``take_llm_ms()`` returns (and resets) the
LLM time spent since its last call, so a pipeline can report it per query as its own stage.

``CallStats`` and ``ask`` (one prompt -> chat -> parse round trip that never raises for LLM or
parse failures) are shared with the expansion methods (``lethe.methods.expansion``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lethe.core.measurements import summarize
from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMTimeout
from lethe.llm.parsing import ParseError, parse_rewrite, parse_subqueries
from lethe.llm.prompts import Prompt, load_prompt
from lethe.stages.understanding.base import DEFAULT_MAX_SUBQUERIES, QueryUnderstandingBackend
from lethe.stages.understanding.rules import RuleBasedBackend
from lethe.text.collapse import collapse

__all__ = ["LLMQueryUnderstanding", "CallStats", "Outcome", "ask", "build_llm", "as_decoding", "COMPONENTS"]

COMPONENTS = ("rewrite", "decompose")


def build_llm(llm: LLMBackend | Mapping[str, Any], cache_dir: str | Path | None = None) -> LLMBackend:
    """The backend given, or one built from its config by ``lethe.llm.backends.make_llm``."""
    if isinstance(llm, Mapping):
        from lethe.llm.backends import make_llm  # imported lazily: the real backends are optional

        return make_llm(dict(llm), cache_dir)
    if not callable(getattr(llm, "chat", None)):
        raise TypeError(f"llm must be an LLMBackend or its config mapping, got {type(llm).__name__}")
    return llm


def as_decoding(decoding: Decoding | Mapping[str, Any] | None, default: Decoding = Decoding()) -> Decoding:
    """A ``Decoding`` from itself, a mapping of its fields (``stop`` as a list) or None (``default``)."""
    if decoding is None:
        return default
    if isinstance(decoding, Decoding):
        return decoding
    d = dict(decoding)
    if "stop" in d:
        d["stop"] = tuple(d["stop"] or ())
    return Decoding(**d)


@dataclass
class CallStats:
    """Counters of one LLM-backed component."""

    calls: int = 0
    cache_hits: int = 0
    timeouts: int = 0
    errors: int = 0
    parse_failures: int = 0
    parse_reasons: dict[str, int] = field(default_factory=dict)
    fallbacks: int = 0
    latency_ms: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "timeouts": self.timeouts,
            "errors": self.errors,
            "parse_failures": self.parse_failures,
            "parse_reasons": dict(sorted(self.parse_reasons.items())),
            "fallbacks": self.fallbacks,
            "latency_ms_summary": summarize(self.latency_ms, digits=3),
            "latency_ms": [round(x, 3) for x in self.latency_ms],
        }


@dataclass
class Outcome:
    """One round trip: the parsed ``value`` (None on failure), the failure ``cause`` (``timeout``,
    ``error``, ``parse``) and ``reason`` (parse reason or error message), the raw ``text``, wall
    latency and whether the response came from the cache."""

    value: Any = None
    cause: str | None = None
    reason: str | None = None
    text: str | None = None
    latency_ms: float = 0.0
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.cause is None


def ask(
    llm: LLMBackend,
    prompt: Prompt,
    parse: Callable[[str], Any],
    decoding: Decoding,
    timeout_s: float | None,
    stats: CallStats,
    **values: Any,
) -> Outcome:
    """Render ``prompt`` with ``values``, chat, parse; LLM and parse failures are returned, counted."""
    messages = prompt.render(**values)
    stats.calls += 1
    t0 = time.perf_counter()
    try:
        resp = llm.chat(messages, decoding, timeout_s)
    except LLMTimeout as exc:
        stats.timeouts += 1
        return Outcome(cause="timeout", reason=str(exc) or "timeout", latency_ms=_lap(t0, stats))
    except LLMError as exc:
        stats.errors += 1
        return Outcome(cause="error", reason=f"{type(exc).__name__}: {exc}", latency_ms=_lap(t0, stats))
    ms = _lap(t0, stats)
    cached = bool(getattr(resp, "cached", False))
    stats.cache_hits += int(cached)
    try:
        value = parse(resp.text)
    except ParseError as exc:
        stats.parse_failures += 1
        stats.parse_reasons[exc.reason] = stats.parse_reasons.get(exc.reason, 0) + 1
        return Outcome(cause="parse", reason=exc.reason, text=resp.text, latency_ms=ms, cached=cached)
    return Outcome(value=value, text=resp.text, latency_ms=ms, cached=cached)


def _lap(t0: float, stats: CallStats) -> float:
    ms = (time.perf_counter() - t0) * 1e3
    stats.latency_ms.append(ms)
    return ms


class LLMQueryUnderstanding:
    """Rewriting and decomposition by an LLM, falling back per call (see the module docstring).

    Options (keyword-only): ``timeout_s`` (per call; None = the backend's own limit), ``decoding``
    (``Decoding`` or its fields), ``fallback`` (a backend, or a mapping ``{name: rule, ...options}``; the
    rule backend inherits ``max_subqueries`` unless given),
    ``components`` (``{rewrite: llm|rule, decompose: llm|rule}``), ``max_subqueries`` (4; also the
    most parts the model may return), ``max_history_turns`` (6), ``max_turn_chars`` (500),
    ``prompts`` (component -> prompt version, default v1), ``cache_dir`` (for an LLM built from
    its config).
    """

    name = "llm"

    def __init__(
        self,
        llm: LLMBackend | Mapping[str, Any],
        *,
        timeout_s: float | None = 20.0,
        decoding: Decoding | Mapping[str, Any] | None = None,
        fallback: QueryUnderstandingBackend | Mapping[str, Any] | None = None,
        components: Mapping[str, str] | None = None,
        max_subqueries: int = DEFAULT_MAX_SUBQUERIES,
        max_history_turns: int = 6,
        max_turn_chars: int = 500,
        prompts: Mapping[str, str] | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if max_subqueries < 1:
            raise ValueError(f"max_subqueries must be >= 1, got {max_subqueries}")
        if max_history_turns < 1 or max_turn_chars < 1:
            raise ValueError("max_history_turns and max_turn_chars must be >= 1")
        comps = {c: "llm" for c in COMPONENTS}
        for c, v in dict(components or {}).items():
            if c not in COMPONENTS or v not in ("llm", "rule"):
                raise ValueError(f"components: expected {{rewrite|decompose: llm|rule}}, got {c!r}: {v!r}")
            comps[c] = v
        self.components = comps
        self.max_subqueries = int(max_subqueries)
        self.max_history_turns, self.max_turn_chars = int(max_history_turns), int(max_turn_chars)
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        self.decoding = as_decoding(decoding)
        if fallback is None:
            fallback = RuleBasedBackend(max_subqueries=self.max_subqueries)
        elif isinstance(fallback, Mapping):
            opts = dict(fallback)
            fb_name = opts.pop("name", "rule")
            if fb_name != "rule":  # the fallback must not fail the way the LLM can
                raise ValueError(f"query-understanding fallback must be 'rule', got {fb_name!r}")
            opts.setdefault("max_subqueries", self.max_subqueries)
            fallback = RuleBasedBackend(**opts)
        self.fallback: QueryUnderstandingBackend = fallback
        versions = {c: "v1" for c in COMPONENTS}
        versions.update(dict(prompts or {}))
        self.prompts = {c: load_prompt(c, versions[c]) for c in COMPONENTS}
        needed = "llm" in comps.values()
        self._owns_llm = needed and isinstance(llm, Mapping)
        self.llm = build_llm(llm, cache_dir) if needed else None
        self.stats = {c: CallStats() for c in COMPONENTS}
        self.skipped_no_history = 0
        self._pending_llm_ms = 0.0

    def take_llm_ms(self) -> float:
        """Wall time (ms) of the LLM calls since the previous ``take_llm_ms()``, then reset: lets a
        caller report LLM time per query apart from the rest of query understanding."""
        ms, self._pending_llm_ms = self._pending_llm_ms, 0.0
        return ms

    def _history(self, history: Sequence[str]) -> list[str]:
        turns = [collapse(h) for h in history if h and h.strip()][-self.max_history_turns :]
        return [t if len(t) <= self.max_turn_chars else t[: self.max_turn_chars - 1] + "…" for t in turns]

    def _fallback(self, component: str, cause: str, fb: tuple[Any, tuple[str, ...]]) -> tuple[Any, tuple[str, ...]]:
        self.stats[component].fallbacks += 1
        value, rules = fb
        return value, (f"llm_fallback:{component}:{cause}", *rules)

    def rewrite(self, query: str, history: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        """Standalone form of ``query`` given ``history`` (oldest first); see the module docstring."""
        if self.components["rewrite"] == "rule":
            return self.fallback.rewrite(query, history)
        shown = self._history(history)
        if not query.strip() or not shown:
            self.skipped_no_history += int(not shown)
            return query, ()
        assert self.llm is not None
        out = ask(
            self.llm,
            self.prompts["rewrite"],
            lambda t: parse_rewrite(t, query, shown),
            self.decoding,
            self.timeout_s,
            self.stats["rewrite"],
            history="\n".join(f"[{i}] {t}" for i, t in enumerate(shown, 1)),
            query=collapse(query),
        )
        self._pending_llm_ms += out.latency_ms
        if not out.ok:
            return self._fallback("rewrite", str(out.cause), self.fallback.rewrite(query, history))
        return out.value, ("llm:rewrite",)

    def decompose(self, query: str) -> tuple[list[str], tuple[str, ...]]:
        """Sub-queries of ``query`` (1..max_subqueries); see the module docstring."""
        if self.components["decompose"] == "rule":
            return self.fallback.decompose(query)
        if not query.strip():
            return [query], ()
        assert self.llm is not None
        out = ask(
            self.llm,
            self.prompts["decompose"],
            lambda t: parse_subqueries(t, self.max_subqueries),
            self.decoding,
            self.timeout_s,
            self.stats["decompose"],
            query=collapse(query),
            max_subqueries=self.max_subqueries,
        )
        self._pending_llm_ms += out.latency_ms
        if not out.ok:
            return self._fallback("decompose", str(out.cause), self.fallback.decompose(query))
        return list(out.value), ("llm:decompose",)

    def describe(self) -> dict[str, Any]:
        """Options, prompts with hashes, the LLM's and the fallback's description, and counters."""
        return {
            "name": self.name,
            "components": dict(self.components),
            "timeout_s": self.timeout_s,
            "decoding": self.decoding.as_dict(),
            "max_subqueries": self.max_subqueries,
            "max_history_turns": self.max_history_turns,
            "max_turn_chars": self.max_turn_chars,
            "prompts": {c: p.describe() for c, p in self.prompts.items() if self.components[c] == "llm"},
            "llm": self.llm.describe() if self.llm is not None else None,
            "fallback": self.fallback.describe(),
            "skipped_no_history": self.skipped_no_history,
            "counters": {c: s.as_dict() for c, s in self.stats.items()},
        }

    def close(self) -> None:
        """Close the LLM backend if it was built here from its config (a passed-in one is the caller's)."""
        if self.llm is not None and self._owns_llm:
            self.llm.close()
