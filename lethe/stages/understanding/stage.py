"""The query-understanding stage of the Lethe pipeline (iteration 2): its switches and its backend.

A backend is chosen by name, ``rule`` (``lethe.stages.understanding.rules``) or ``llm``
(``lethe.stages.understanding.llm``, imported only when named: the LLM stack is heavy), with its options.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from lethe.core.protocol import count_fallback_causes, record_llm_failures
from lethe.stages.understanding.base import QueryUnderstandingBackend, TimesLLMCalls, Understanding, understand
from lethe.stages.understanding.rules import RuleBasedBackend
from lethe.text.entities import entities

if TYPE_CHECKING:
    from lethe.stages.state import QueryState, StageContext

BACKENDS: dict[str, type] = {"rule": RuleBasedBackend}


def make_backend(name: str = "rule", **options: Any) -> QueryUnderstandingBackend:
    """Build a backend by name with its keyword options; unknown names raise ValueError."""
    if name == "llm":
        from lethe.stages.understanding.llm import LLMQueryUnderstanding

        return LLMQueryUnderstanding(**options)
    if name not in BACKENDS:
        raise ValueError(
            f"unknown query-understanding backend {name!r}; known: {', '.join(sorted([*BACKENDS, 'llm']))}"
        )
    return BACKENDS[name](**options)


@dataclass
class QueryUnderstanding:
    """Iteration 2's switches ``rewrite`` and ``decompose``, the ``backend`` name and its ``options``;
    ``rrf_k`` fuses the sub-query lists. Values: the method YAML. A query step (``lethe.stages.state``): it
    rewrites ``s.text`` and gives the sub-queries retrieval runs (the query itself first)."""

    phase: ClassVar[str] = "prepare"

    rewrite: bool
    decompose: bool
    backend: str
    options: Mapping[str, Any]
    rrf_k: int

    def __post_init__(self) -> None:
        self.backend_impl: QueryUnderstandingBackend | None = None  # built by bind (not a field: asdict leaves it out)

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "built": self.backend_impl.describe() if self.backend_impl else None}

    def bind(self, ctx: StageContext) -> None:
        self.backend_impl = self.build_backend(ctx.cache_dir)

    def step(self, s: QueryState) -> None:
        """Rewrite and decompose ``s.text`` (off: nothing; the LLM's share of the time is its own stage, ``llm``)."""
        qu = self.backend_impl
        if qu is None:
            return
        t0 = time.perf_counter()
        u = self.run(s.text, s.query.history, qu)
        ms = (time.perf_counter() - t0) * 1e3
        s.understanding, s.rrf_k = u, self.rrf_k
        if u.rewritten != s.text:
            s.text, s.query_entities = u.rewritten, entities(u.rewritten)
        s.timings["understand"] = ms
        s.flags.update(
            {
                "rewritten": u.rewritten if u.rewritten != u.original else None,
                "subqueries": list(u.subqueries[1:]),
                "qu_rules": list(u.rules),
            }
        )
        if isinstance(qu, TimesLLMCalls):  # an LLM backend: its time apart; its failed calls fell back to the rules
            llm_ms = qu.take_llm_ms()
            s.timings["understand"] -= llm_ms
            s.timings["llm"] = llm_ms
            causes = [r.split(":")[2] for r in u.rules if r.startswith("llm_fallback:")]
            record_llm_failures(s.flags, *count_fallback_causes(causes))

    @property
    def active(self) -> bool:
        return self.rewrite or self.decompose

    def build_backend(self, cache_dir: str | Path | None) -> QueryUnderstandingBackend | None:
        """The backend (None when both switches are off); an LLM backend caches beside the embeddings."""
        if not self.active:
            return None
        options = dict(self.options)
        if self.backend == "llm":
            options.setdefault("cache_dir", cache_dir)
        return make_backend(self.backend, **options)

    def run(self, query: str, history: Sequence[str], backend: QueryUnderstandingBackend) -> Understanding:
        """Rewrite and/or decompose ``query`` as switched on."""
        return understand(query, list(history), backend, rewrite=self.rewrite, decompose=self.decompose)
