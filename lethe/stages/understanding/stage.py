"""The query-understanding stage of the Lethe pipeline (iteration 2): its switches and its backend.

A backend is chosen by name, ``rule`` (``lethe.stages.understanding.rules``) or ``llm``
(``lethe.stages.understanding.llm``, imported only when named: the LLM stack is heavy), with its options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lethe.stages.understanding.base import QueryUnderstandingBackend, Understanding, understand
from lethe.stages.understanding.rules import RuleBasedBackend

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


@dataclass(frozen=True)
class QueryUnderstanding:
    """Iteration 2's switches ``rewrite`` and ``decompose``, the ``backend`` name and its ``options``;
    ``rrf_k`` fuses the sub-query lists. Values: the method YAML."""

    rewrite: bool
    decompose: bool
    backend: str
    options: Mapping[str, Any]
    rrf_k: int

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
