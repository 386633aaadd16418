"""Build a query-understanding backend by name (``rule`` or ``llm``) with its options."""

from __future__ import annotations

from typing import Any

from lethe.stages.understanding.base import QueryUnderstandingBackend
from lethe.stages.understanding.rules import RuleBasedBackend

BACKENDS: dict[str, type] = {"rule": RuleBasedBackend}


def make_backend(name: str = "rule", **options: Any) -> QueryUnderstandingBackend:
    """Build a backend by name with its keyword options; unknown names raise ValueError."""
    if name == "llm":  # imported lazily: the LLM stack is heavy and optional
        from lethe.stages.understanding.llm import LLMQueryUnderstanding

        return LLMQueryUnderstanding(**options)
    if name not in BACKENDS:
        raise ValueError(f"unknown query-understanding backend {name!r}; known: {', '.join(sorted([*BACKENDS, 'llm']))}")
    return BACKENDS[name](**options)
