"""What a ranking stage of the Lethe pipeline implements (``method.extra_stages`` in a method YAML).

A stage takes the pipeline's ranking of one query and returns a new one; it may add per-stage timings
(ms) and per-query flags. Optional abilities are the Protocols below and those of
``lethe.core.protocol`` (``UsesQuerySet``, ``Annotates``); the pipeline checks each with isinstance.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from lethe.core.protocol import Doc, Query


@runtime_checkable
class RankingStage(Protocol):
    def apply(self, query: Query, ranking: list[tuple[str, float]], docs_by_id: Mapping[str, Doc],
              timings: dict[str, float], flags: dict[str, Any]) -> list[tuple[str, float]]:
        """The new ranking (doc_id, score), scores non-increasing; only docs of ``ranking`` may appear."""

    def describe(self) -> dict[str, Any]:
        """Effective parameters, for the run manifest."""

    def close(self) -> None:
        """Release resources."""


@runtime_checkable
class IndexAware(Protocol):
    def on_index(self, docs: Sequence[Doc]) -> None:
        """Called after the pipeline indexed ``docs`` (the docs the next queries may see)."""


@runtime_checkable
class ReadsCandidates(Protocol):
    def candidate_depth(self) -> int:
        """How many of the incoming ranking's top documents the stage reads (its reranking or checking depth; 0 for
        none). The pipeline ranks at least this deep and cuts to the run's ``k`` after its last stage, so a stage
        judges its own depth whatever ``run.k`` is."""
