"""The Lethe retrieval pipeline: iterations 1-4 as one ordered list of stages.

``method.stages`` in a method YAML holds every step, each a ``_target_`` section Hydra builds, in the order a query
passes them; ``method.order`` lists their names (``${oc.dict.keys:.stages}``: the hash then covers the order, which
a sorted mapping would not), and ``null`` switches a stage off. Iteration 1's list (``conf/method/lethe_iter1.yaml``
holds every value; no stage has defaults in code):

1. ``query_understanding`` (iteration 2): rewrite an elliptical follow-up from its history, decompose a multi-part
   query into sub-queries (``lethe.stages.understanding.stage``);
2. ``planning`` (paper Eq. 2): VERIFY / EXPLORE / EXPLOIT from entity overlap, length and novelty, giving the BM25
   weight alpha (``lethe.stages.planning``);
3. ``retrieve``: per sub-query BM25 (Eq. 1, per-session statistics or collection IDF) and dense cosine, each its
   top ``depth`` (``lethe.stages.retrieve``);
4. ``boost`` (iteration 1): the metadata boost of each candidate (``lethe.stages.boost``);
5. ``learned_fusion`` (iteration 3): alpha and the diversification lambda predicted per query
   (``lethe.stages.learned_fusion``);
6. ``fuse`` (Eq. 3): alpha * minmax(BM25) + (1 - alpha) * cosine + boost, sub-queries merged with RRF
   (``lethe.stages.fuse``);
7. ``diversify`` (iteration 1, Eq. 4): entity coverage over the top ``pool`` (``lethe.stages.diversify``);
8. the ranking stages (``lethe.stages.ranking_stage.RankingStage``) of iteration 4: ``llm_rerank``, ``contradiction``,
   ``generation``; a new stage is its own module plus a ``_target_`` section at its place in ``stages``.

The pipeline only folds a ``lethe.stages.state.QueryState`` through the list (query steps change it, ranking stages
map its ranking); each stage's phase (prepare, weigh, rank, then the ranking stages) lets training prepare a query
once and rank it for many weights (``prepare`` and ``rank``). It ranks as deep as the deepest stage reads
(``ReadsCandidates``) and cuts to the run's ``k`` after the last one. Scores returned are the fused scores, except
after diversification (``1 / rank``: only the order carries meaning).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lethe.core.protocol import Annotates, Doc, Query, SearchResult, UsesQuerySet
from lethe.llm.pool import LLMPool
from lethe.retrieval.dense import make_embedder
from lethe.retrieval.embedder import Embedder
from lethe.stages.ranking_stage import IndexAware, RankingStage, ReadsCandidates, UsesLLMs
from lethe.stages.state import (
    PHASES,
    Binds,
    BindsDataset,
    Collection,
    Indexes,
    QueryState,
    QueryStep,
    StageContext,
    UsesCollectionStats,
    UsesLambda,
    base_params_of,
    description_of,
)
from lethe.text.entities import entities

Stage = QueryStep | RankingStage


def _phase(name: str, stage: Any) -> int:
    """The position of ``stage``'s phase (``PHASES``, then the ranking stages); a TypeError names a stage that is
    neither a query step nor a ranking stage (e.g. a plain mapping where Hydra should have built a ``_target_``)."""
    if isinstance(stage, QueryStep) and getattr(stage, "phase", None) in PHASES:
        return PHASES.index(stage.phase)
    if isinstance(stage, RankingStage):
        return len(PHASES)
    raise TypeError(
        f"method.stages.{name} must be a built stage (a section with _target_ whose class has step() and a phase in "
        f"{PHASES}, or a ranking stage with apply()), got {type(stage).__name__}"
    )


class LethePipeline:
    """Lethe iterations 1-4 (see the module docstring); implements ``lethe.core.protocol.Method``."""

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        *,
        stages: Mapping[str, Stage | None],
        order: Sequence[str],
        name: str = "lethe",
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        """``stages``: name -> stage as built from the method YAML (None: off); ``order``: their names in the order a
        query passes them (every name of ``stages``, once); ``cache_dir``/``progress``: given by the runner."""
        if sorted(order) != sorted(stages) or len(set(order)) != len(order):
            raise ValueError(f"method.order {list(order)} must name every stage of method.stages once: {list(stages)}")
        self.name = name
        self.stages: list[tuple[str, Stage]] = [(n, stages[n]) for n in order if stages[n] is not None]
        phases = [_phase(n, st) for n, st in self.stages]
        for i in range(1, len(phases)):
            if phases[i] < phases[i - 1]:
                (a, _), (b, _) = self.stages[i - 1], self.stages[i]
                raise ValueError(
                    f"method.order: stage {b} ({_phase_name(phases[i])}) cannot follow {a} "
                    f"({_phase_name(phases[i - 1])}); the phases run in the order {(*PHASES, 'ranking')}"
                )
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.embedder = make_embedder(embedder, cache_dir, progress)
        self.llms = LLMPool(cache_dir)  # the stages' LLM backends, one per distinct config
        ctx = StageContext(self.cache_dir, self.embedder, self.llms, progress)
        for _, st in self.stages:
            if isinstance(st, Binds):
                st.bind(ctx)
            if isinstance(st, UsesLLMs):
                st.bind_llms(self.llms)
        self.collection = Collection()
        self._steps_at = [isinstance(st, QueryStep) for _, st in self.stages]  # else a ranking stage
        self._min_depth = max([0, *(st.candidate_depth() for _, st in self.stages if isinstance(st, ReadsCandidates))])

    @classmethod
    def migrated_section(cls, section: Mapping[str, Any]) -> Mapping[str, Any]:
        """A method section of the shape before ``stages`` (identity schema 3 records: ``depth``, ``bm25`` and one key
        per stage at the top, ``extra_stages``) in today's shape; a section of today's shape as it is
        (``lethe.core.protocol.MigratesSection``, read by ``experiments.run_identity``)."""
        if "stages" in section or "depth" not in section:
            return section
        old = dict(section)
        fusion = dict(old.pop("learned_fusion"))
        if fusion.get("_target_") == "lethe.stages.learned_fusion.LearnedFusionConfig":
            fusion["_target_"] = "lethe.stages.learned_fusion.LearnedFusion"
        stages = {
            "query_understanding": old.pop("query_understanding"),
            "planning": old.pop("planning"),
            "retrieve": {
                "_target_": "lethe.stages.retrieve.Retrieve",
                "depth": old.pop("depth"),
                "bm25": old.pop("bm25"),
            },
            "boost": old.pop("boost"),
            "learned_fusion": fusion,
            "fuse": {"_target_": "lethe.stages.fuse.Fuse"},
            "diversify": old.pop("diversify"),
            "llm_rerank": old.pop("llm_rerank"),
            "contradiction": old.pop("contradiction"),
            "generation": old.pop("generation"),
            **dict(old.pop("extra_stages", None) or {}),
        }
        return {**old, "order": list(stages), "stages": stages}

    # -- the stages by kind ---------------------------------------------------------------------
    def _steps(self, phase: str) -> Iterator[QueryStep]:
        return (st for _, st in self.stages if isinstance(st, QueryStep) and getattr(st, "phase", None) == phase)

    def _of(self, kind: type) -> Iterator[Any]:
        return (st for _, st in self.stages if isinstance(st, kind))

    def stage(self, name: str) -> Any:
        """The stage called ``name`` (None when it is off or absent)."""
        return dict(self.stages).get(name)

    def _weigher(self) -> Any:
        """The weigh-phase stage (learned fusion); a ValueError when the method has none."""
        found = list(self._steps("weigh"))
        if len(found) != 1:
            raise ValueError(f"{self.name}: {len(found)} weigh stages (learned fusion); expected one")
        return found[0]

    # -- configuration --------------------------------------------------------------------------
    def base_config(self) -> dict[str, Any]:
        """Parameters that shape the candidates, features and rankings for given weights (every stage before the
        ranking stages but the weigh stage, and the embedder); a fusion model is valid only for the base it was
        trained on."""
        base = {n: base_params_of(st) for n, st in self.stages if getattr(st, "phase", None) in ("prepare", "rank")}
        base["embedder"] = {"name": self.embedder.model.name, "sha256": self.embedder.model.sha256}
        return json.loads(json.dumps(base, sort_keys=True, default=str))

    def fusion_dir(self, build_key: str, pool: str = "") -> Path:
        """Where the learned-fusion models of dataset build ``build_key`` and query pool ``pool`` lie."""
        return self._weigher().model_folder(build_key, pool)

    def training_config(self) -> dict[str, Any]:
        """Learned-fusion training settings (they key the saved model together with the base)."""
        return self._weigher().training_config()

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "order": [n for n, _ in self.stages],
            "stages": {n: description_of(st) for n, st in self.stages},
            "embedder": self.embedder.stats(),
            "llms": [llm.describe() for llm in self.llms.backends()],
        }

    def set_collection(self, docs: Sequence[Doc]) -> None:
        """Collection statistics (``retrieve.bm25.idf_scope=corpus``; called once by the runner)."""
        for st in self._of(UsesCollectionStats):
            st.set_collection(docs, self.collection)

    def bind_dataset(self, info: Mapping[str, Any]) -> None:
        """The dataset build and query pool the next queries come from (``info``: name, build_key, pool)."""
        base = None
        for st in self._of(BindsDataset):
            base = self.base_config() if base is None else base
            st.bind_dataset(info, base)

    # -- indexing -------------------------------------------------------------------------------
    def index(self, docs: Sequence[Doc]) -> None:
        self.collection.set_docs(docs)
        for st in self._of(Indexes):
            st.on_collection(self.collection)
        for st in self._of(IndexAware):
            st.on_index(self.collection.docs)

    # -- search ---------------------------------------------------------------------------------
    def _state(self, query: Query, depth: int) -> QueryState:
        return QueryState(query, self.collection, depth, text=query.text, query_entities=entities(query.text))

    def prepare(self, query: Query) -> QueryState:
        """The query through the prepare phase (understanding, planning, candidates, boost): nothing that depends on
        the fusion weights."""
        s = self._state(query, 0)
        for st in self._steps("prepare"):
            st.step(s)
        return s

    def rank(self, p: QueryState, alpha: float, lam: float | None, k: int) -> list[tuple[str, float]]:
        """The ranking (top ``k``) of prepared ``p`` for given alpha and lambda (None: the stages' own): the rank
        phase only, on a copy (``p`` is reused for other weights)."""
        s = dataclasses.replace(p, alpha=alpha, lam=lam, depth=k, timings={}, flags={})
        for st in self._steps("rank"):
            st.step(s)
        return s.ranking

    def default_lambda(self) -> float:
        """The lambda the rank phase uses without a prediction (0 when nothing reads one)."""
        return max([0.0, *(st.effective_lam(None) for st in self._of(UsesLambda))])

    def uses_lambda(self) -> bool:
        return any(st.lambda_applies() for st in self._of(UsesLambda))

    def search(self, query: Query, k: int) -> SearchResult:
        s = self._state(query, max(k, self._min_depth))
        for (_, st), is_step in zip(self.stages, self._steps_at, strict=True):
            if is_step:
                st.step(s)
            else:
                s.ranking = st.apply(query, s.ranking, self.collection.docs_by_id, s.timings, s.flags)
        return SearchResult(s.ranking[:k], s.timings, s.flags)

    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Runner hook: the run's query ids (iteration 4 draws its generation sample from them)."""
        for st in self._of(UsesQuerySet):
            st.set_queries(query_ids)

    def annotate(self, query: Query, result: SearchResult) -> None:
        """Runner hook, outside the timed search: answer generation and judging (iteration 4)."""
        for st in self._of(Annotates):
            st.annotate(query, result)

    def close(self) -> None:
        self.embedder.flush()
        for st in self._of(RankingStage):
            st.close()
        self.llms.close()


def _phase_name(i: int) -> str:
    return (*PHASES, "ranking")[i]
