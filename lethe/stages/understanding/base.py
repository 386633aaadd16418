"""Query understanding's shared parts: the ``Understanding`` record, the backend protocol and
``understand`` (rewrite, then decompose; sub-queries deduplicated and capped).

Backends: ``lethe.stages.understanding.rules`` (deterministic rules, documented there) and
``lethe.stages.understanding.llm`` (a language model, the rules as fallback);
``lethe.stages.understanding.stage.make_backend`` builds one by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from lethe.text.collapse import comparison_key

DEFAULT_MAX_SUBQUERIES = 4


def dedupe_key(text: str) -> str:
    """Case-, whitespace- and trailing-punctuation-insensitive key of a (sub-)query."""
    return comparison_key(text)


@dataclass(frozen=True)
class Understanding:
    """The outcome of query understanding for one query."""

    original: str
    rewritten: str
    subqueries: tuple[str, ...]
    rules: tuple[str, ...]
    backend: str

    def as_record(self) -> dict[str, Any]:
        """All fields as a JSON-serializable dict (tuples become lists)."""
        return {
            "original": self.original,
            "rewritten": self.rewritten,
            "subqueries": list(self.subqueries),
            "rules": list(self.rules),
            "backend": self.backend,
        }


@runtime_checkable
class QueryUnderstandingBackend(Protocol):
    """What ``understand`` needs from a backend (rule-based now, an LLM later)."""

    name: str

    def rewrite(self, query: str, history: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        """(standalone query, rules fired); the query itself and () when nothing applies."""
        ...

    def decompose(self, query: str) -> tuple[list[str], tuple[str, ...]]:
        """(parts, rules fired); ([query], ()) when the query is not decomposable."""
        ...

    def describe(self) -> dict:
        """JSON-serializable name and options, for the run's manifest."""
        ...


@runtime_checkable
class TimesLLMCalls(Protocol):
    """Optional ability of a backend that calls a language model: how long its calls took."""

    def take_llm_ms(self) -> float:
        """Wall time (ms) of the LLM calls since the previous call, then reset."""
        ...


def understand(
    query: str, history: Sequence[str], backend: QueryUnderstandingBackend, rewrite: bool = True, decompose: bool = True
) -> Understanding:
    """Rewrite ``query`` from ``history`` (oldest first), then decompose the rewrite.

    ``subqueries[0]`` is the full rewritten query; decomposed parts that differ from it follow,
    deduplicated, up to ``backend.max_subqueries`` (default 4) sub-queries in total.
    """
    rules: list[str] = []
    rewritten = query
    if rewrite:
        rewritten, fired = backend.rewrite(query, list(history))
        rules.extend(fired)
    subqueries = [rewritten]
    if decompose:
        parts, fired = backend.decompose(rewritten)
        rules.extend(fired)
        cap = max(1, int(getattr(backend, "max_subqueries", DEFAULT_MAX_SUBQUERIES)))
        seen = {dedupe_key(rewritten)}
        for p in parts:
            key = dedupe_key(p)
            if p.strip() and key not in seen and len(subqueries) < cap:
                seen.add(key)
                subqueries.append(p.strip())
    return Understanding(
        original=query,
        rewritten=rewritten,
        subqueries=tuple(subqueries),
        rules=tuple(dict.fromkeys(rules)),
        backend=backend.name,
    )
