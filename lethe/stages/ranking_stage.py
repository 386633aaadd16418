"""What a ranking stage of the Lethe pipeline implements.

A stage takes the pipeline's ranking of one query and returns a new one; it may add per-stage timings
(ms) and per-query flags. Iteration 4's ``llm_rerank`` (``lethe.stages.llm_rerank``), ``contradiction``
(``lethe.stages.contradiction.stage``) and ``generation`` (``lethe.stages.answering.GenerationStage``) are
stages like any other, and a section added to ``method.stages`` in a method YAML adds more; each is a ``_target_``
section Hydra builds, applied in the list's order after the query steps (``lethe.stages.state``). Optional abilities are the Protocols below and those of
``lethe.core.protocol`` (``UsesQuerySet``, ``Annotates``); the pipeline checks each with isinstance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lethe.core.protocol import Doc, Query

if TYPE_CHECKING:
    from lethe.llm.pool import LLMPool


@runtime_checkable
class RankingStage(Protocol):
    def apply(
        self,
        query: Query,
        ranking: list[tuple[str, float]],
        docs_by_id: Mapping[str, Doc],
        timings: dict[str, float],
        flags: dict[str, Any],
    ) -> list[tuple[str, float]]:
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


@runtime_checkable
class UsesLLMs(Protocol):
    def bind_llms(self, llms: LLMPool) -> None:
        """Called once when the pipeline is built, with its pool of LLM backends (one backend per distinct LLM
        config, shared by every stage that names it; the pipeline closes them): the stage builds what calls a
        model here."""
