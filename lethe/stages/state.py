"""What flows through the Lethe pipeline: one query's state, the indexed collection the stages read, and the
protocols a stage implements.

The pipeline (``lethe.methods.pipeline.LethePipeline``) is one ordered list of stages (``method.stages`` in a
method YAML, in ``method.order``). A *query step* (:class:`QueryStep`) changes a :class:`QueryState` in place; a
ranking stage (``lethe.stages.ranking_stage.RankingStage``) maps the state's ranking to a new one. Each query step
says in which phase it acts (:data:`PHASES`): ``prepare`` (understanding, planning, candidates, boost: nothing that
depends on the fusion weights), ``weigh`` (learned fusion sets alpha and lambda), ``rank`` (fusion, diversification:
the ranking for given weights), then the ranking stages. The phases split the list where training needs it
(``experiments/train_fusion.py`` prepares a query once and ranks it for every cell of its grid); the pipeline
refuses an order whose phases go back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from lethe.core.protocol import Doc, Query
from lethe.text.analyzer import analyze
from lethe.text.entities import entities

if TYPE_CHECKING:
    from lethe.llm.pool import LLMPool
    from lethe.retrieval.embedder import Embedder
    from lethe.stages.boost import QuerySignals
    from lethe.stages.candidates import SubCandidates
    from lethe.stages.planning import PlanInputs
    from lethe.stages.understanding.base import Understanding

PHASES = ("prepare", "weigh", "rank")  # a query step's phase, in the order they may follow each other


class Collection:
    """The docs the next queries may see, with the per-doc analyses stages share: analyzed terms (computed once per
    doc id and kept across re-indexing), entities, lowercased texts, kinds, and the analyzed vocabulary."""

    def __init__(self) -> None:
        self._terms: dict[str, list[str]] = {}
        self.set_docs([])

    def analyzed(self, d: Doc) -> list[str]:
        """``analyze(d.text)``, computed once per doc id."""
        t = self._terms.get(d.doc_id)
        if t is None:
            t = self._terms[d.doc_id] = analyze(d.text)
        return t

    def set_docs(self, docs: Sequence[Doc]) -> None:
        self.docs: list[Doc] = list(docs)
        self.terms: list[list[str]] = [self.analyzed(d) for d in self.docs]
        self.entities: list[frozenset[str]] = [entities(d.text) for d in self.docs]
        self.texts_lower: list[str] = [d.text.lower() for d in self.docs]
        self.kinds: list[str] = [d.kind for d in self.docs]
        self.docs_by_id: dict[str, Doc] = {d.doc_id: d for d in self.docs}
        self.vocab: frozenset[str] = frozenset(t for terms in self.terms for t in terms)
        self.all_entities: frozenset[str] = frozenset().union(*self.entities)


@dataclass
class QueryState:
    """One query on its way through the stages. Filled in order: ``text`` (the query, rewritten by understanding),
    ``understanding``; ``plan``/``inputs`` (planning); ``subs``/``signals``/``n_analyzed`` (retrieval: one candidate
    set per sub-query, boosted by the boost stage); ``alpha``/``lam`` (planning's and diversification's defaults,
    learned fusion's predictions); ``ranking`` (fusion, then diversification and the ranking stages). ``depth``: how
    deep fusion ranks (at least the run's ``k`` and every ranking stage's ``candidate_depth``). ``timings`` (ms per
    stage) and ``flags`` are the query's record."""

    query: Query
    collection: Collection
    depth: int
    text: str = ""
    understanding: Understanding | None = None
    history_entities: frozenset[str] = frozenset()
    query_entities: frozenset[str] = frozenset()
    plan: str | None = None
    inputs: PlanInputs | None = None
    subs: list[SubCandidates] = field(default_factory=list)
    signals: list[QuerySignals] = field(default_factory=list)
    n_analyzed: int = 0  # distinct analyzed terms of the (rewritten) query
    alpha: float | None = None  # BM25 weight of the fusion (Eq. 3)
    lam: float | None = None  # diversification lambda; None: the diversify stage's own
    rrf_k: int | None = None  # RRF constant merging sub-query lists (set by the stage that made several)
    list_depth: int | None = None  # how much of each sub-query's fused list RRF reads (retrieval's depth)
    fused: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (np.zeros(0, np.int64), np.zeros(0)))
    ranking: list[tuple[str, float]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)

    @property
    def n_docs(self) -> int:
        return len(self.collection.docs)

    @property
    def first_signals(self) -> QuerySignals:
        """The (rewritten) query's own signals (its sub-queries follow)."""
        return self.signals[0]


@dataclass(frozen=True)
class StageContext:
    """What the pipeline hands every stage that binds (:class:`Binds`) once it is built: the cache folder (None: keep
    nothing), the embedder, the pool of LLM backends, progress bars on or off."""

    cache_dir: Path | None
    embedder: Embedder
    llms: LLMPool
    progress: bool


@runtime_checkable
class QueryStep(Protocol):
    phase: ClassVar[str]  # one of PHASES

    def step(self, s: QueryState) -> None:
        """Change ``s`` in place (and record ms in ``s.timings``, per-query facts in ``s.flags``)."""


@runtime_checkable
class Binds(Protocol):
    def bind(self, ctx: StageContext) -> None:
        """Called once when the pipeline is built: build what the stage runs on (a backend, an index)."""


@runtime_checkable
class Indexes(Protocol):
    def on_collection(self, collection: Collection) -> None:
        """Called after the pipeline indexed a new set of docs (``collection``), before the next query."""


@runtime_checkable
class UsesCollectionStats(Protocol):
    def set_collection(self, docs: Sequence[Doc], collection: Collection) -> None:
        """Called once by the runner with every doc of the collection (e.g. BM25's collection IDF)."""


@runtime_checkable
class UsesLambda(Protocol):
    def lambda_applies(self) -> bool:
        """Whether the stage reads lambda at all (diversification on)."""

    def effective_lam(self, predicted: float | None) -> float:
        """The lambda the stage uses given learned fusion's prediction (None: its own default)."""


@runtime_checkable
class BindsDataset(Protocol):
    def bind_dataset(self, info: Mapping[str, Any], base: Mapping[str, Any]) -> None:
        """Called when the runner binds a dataset build (``info``: name, build_key, pool), with the pipeline's
        ``base_config`` (e.g. learned fusion loads the model trained for exactly this base and dataset)."""


@runtime_checkable
class BaseParams(Protocol):
    def base_params(self) -> dict[str, Any]:
        """The parameters that shape candidates, features and rankings for given weights (what a learned-fusion
        model is trained for; ``lethe.methods.pipeline.LethePipeline.base_config``); without it, :func:`params_of`."""


@runtime_checkable
class Describes(Protocol):
    def describe(self) -> dict[str, Any]:
        """Effective parameters and what the stage built, for the run manifest; without it, :func:`params_of`."""


def params_of(stage: Any) -> dict[str, Any]:
    """A stage's parameters: its fields when it is a dataclass, else what ``base_params`` gives, else none."""
    if dataclasses.is_dataclass(stage):
        return dataclasses.asdict(stage)
    return stage.base_params() if isinstance(stage, BaseParams) else {}


def base_params_of(stage: Any) -> dict[str, Any]:
    """What of ``stage`` keys a learned-fusion model (``BaseParams``, else all its parameters)."""
    return stage.base_params() if isinstance(stage, BaseParams) else params_of(stage)


def description_of(stage: Any) -> dict[str, Any]:
    """What the manifest records of ``stage`` (``Describes``, else all its parameters)."""
    return stage.describe() if isinstance(stage, Describes) else params_of(stage)


def empty_vectors() -> np.ndarray:
    return np.zeros((0, 1), np.float32)
