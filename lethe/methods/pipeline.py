"""The Lethe retrieval pipeline: iterations 1-3 as one configurable, ablatable method.

Stages, in order (each switch is a config key, so an iteration is the previous one plus switches
and an ablation is an override):

1. query understanding (iteration 2, ``query_understanding``): rewrite an elliptical follow-up
   from its history, decompose a multi-part query into sub-queries;
2. planning (``planning``, paper Eq. 2): VERIFY / EXPLORE / EXPLOIT from entity overlap, length
   and novelty, giving the BM25 weight alpha;
3. candidates per sub-query: BM25 with per-session statistics (Eq. 1; Lucene-exact
   ``lethe.retrieval.bm25.BM25Index`` fitted on the docs the query may see, or collection IDF with
   ``bm25.idf_scope=corpus``) and dense cosine (``lethe.retrieval.dense``), each its top ``depth``;
4. fusion (Eq. 3): alpha * minmax(BM25) + (1 - alpha) * cosine over the union of the two lists,
   plus the metadata boost (iteration 1, ``boost``); several sub-queries are fused with RRF;
5. learned fusion (iteration 3, ``learned_fusion``): alpha and the diversification trade-off are
   predicted per query from features instead of taken from the plan;
6. entity diversification (iteration 1, ``diversify``, Eq. 4) over the top ``pool`` candidates;
   the rest follow in fused order;
7. ranking stages (``lethe.stages.ranking_stage.RankingStage``), applied in order to the ranking: iteration
   4's ``llm_rerank`` (budgeted LLM reranking of the top candidates, ``lethe.stages.llm_rerank``),
   ``contradiction`` (demotion of contradicted, stale docs, ``lethe.stages.contradiction.stage``) and
   ``generation`` (answers with a hallucination judge on a seeded sample of queries, after the timed search,
   ``lethe.stages.answering.GenerationStage``), then ``extra_stages``; a new stage is its own module plus a
   ``_target_`` entry in a method YAML. The pipeline ranks as deep as the deepest stage reads
   (``ReadsCandidates``) and cuts to the run's ``k`` after the last one.

Every stage is an object built by Hydra from its ``_target_`` section of the method YAML
(``conf/method/lethe_iter1.yaml`` holds every value; no stage has defaults in code); the pipeline
receives the built stages, so a test can hand in any object with the same methods.

Scores returned are the fused scores, except after diversification, where the ranking is the
greedy order and scores are ``1 / rank`` (only the order carries meaning).
Per query, ``flags`` record the plan, its inputs, rewrites, sub-queries, signals, alpha and lambda.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.protocol import (
    Annotates,
    Doc,
    Query,
    SearchResult,
    UsesQuerySet,
    count_fallback_causes,
    record_llm_failures,
)
from lethe.llm.pool import LLMPool
from lethe.retrieval.bm25 import BM25Index
from lethe.retrieval.dense import make_embedder
from lethe.retrieval.embedder import Embedder
from lethe.retrieval.fusion import minmax, rrf
from lethe.retrieval.ranking import top_indices
from lethe.stages.boost import MetadataBoost, QuerySignals, query_signals
from lethe.stages.candidates import BM25Params, Prepared, SubCandidates
from lethe.stages.diversify import EntityDiversifier
from lethe.stages.learned_fusion import FusionModel, LearnedFusionConfig
from lethe.stages.planning import Planner, as_dict, plan_inputs
from lethe.stages.ranking_stage import IndexAware, RankingStage, ReadsCandidates, UsesLLMs
from lethe.stages.understanding.base import TimesLLMCalls
from lethe.stages.understanding.stage import QueryUnderstanding
from lethe.text.analyzer import analyze
from lethe.text.entities import entities


def _stage(value: Any, cls: type, key: str) -> Any:
    """``value`` if it is a built ``cls``; a TypeError naming ``method.<key>`` otherwise (e.g. a plain
    mapping given where Hydra should have built the stage from its ``_target_``)."""
    if not isinstance(value, cls):
        raise TypeError(
            f"method.{key} must be a built {cls.__module__}.{cls.__qualname__} "
            f"(a config section with _target_), got {type(value).__name__}"
        )
    return value


class LethePipeline:
    """Lethe iterations 1-4 (see the module docstring); implements ``lethe.core.protocol.Method``."""

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        *,
        depth: int,
        bm25: BM25Params,
        planning: Planner,
        boost: MetadataBoost,
        diversify: EntityDiversifier,
        query_understanding: QueryUnderstanding,
        learned_fusion: LearnedFusionConfig,
        llm_rerank: RankingStage | None,
        contradiction: RankingStage | None,
        generation: RankingStage | None,
        extra_stages: Mapping[str, RankingStage | None],
        name: str = "lethe",
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        """``depth``: candidates per list and sub-query; the stages as built from the method YAML (None: off);
        ``llm_rerank``, ``contradiction``, ``generation`` and then ``extra_stages`` are the ranking stages, in
        this order; ``cache_dir``/``progress``: given by the runner."""
        self.name, self.depth = name, int(depth)
        self.bm25_params: BM25Params = _stage(bm25, BM25Params, "bm25")
        self.planner: Planner = _stage(planning, Planner, "planning")
        self.boost: MetadataBoost = _stage(boost, MetadataBoost, "boost")
        self.diversifier: EntityDiversifier = _stage(diversify, EntityDiversifier, "diversify")
        self.understanding: QueryUnderstanding = _stage(query_understanding, QueryUnderstanding, "query_understanding")
        self.learned_fusion: LearnedFusionConfig = _stage(learned_fusion, LearnedFusionConfig, "learned_fusion")
        named = {
            "llm_rerank": llm_rerank,
            "contradiction": contradiction,
            "generation": generation,
            **{f"extra_stages.{k}": v for k, v in (extra_stages or {}).items()},
        }
        # the ranking stages by config key, in order; null switches a stage off
        self.stages: dict[str, RankingStage] = {
            k: _stage(st, RankingStage, k) for k, st in named.items() if st is not None
        }
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.qu = self.understanding.build_backend(cache_dir)
        self.embedder = make_embedder(embedder, cache_dir, progress)
        self.fusion_model: FusionModel | None = (
            None  # learned fusion: loaded by bind_dataset (one per dataset build and query pool)
        )
        self.llms = LLMPool(cache_dir)  # the stages' LLM backends, one per distinct config
        for st in self.stages.values():
            if isinstance(st, UsesLLMs):
                st.bind_llms(self.llms)
        self._terms: dict[str, list[str]] = {}
        self._vecs: dict[str, np.ndarray] = {}
        self._collection_df: dict[str, int] | None = None
        self._collection_n = 0
        self.docs: list[Doc] = []
        self.bm25 = BM25Index(self.bm25_params.k1, self.bm25_params.b)
        self.vecs = np.zeros((0, 1), np.float32)

    # -- configuration --------------------------------------------------------------------------
    def base_config(self) -> dict[str, Any]:
        """Parameters that shape the candidates and features (everything but learned fusion and
        the values it predicts); a fusion model is valid only for the base it was trained on."""
        return json.loads(
            json.dumps(
                {
                    "depth": self.depth,
                    "bm25": asdict(self.bm25_params),
                    "planning": asdict(self.planner),
                    "boost": asdict(self.boost),
                    "diversify": {k: v for k, v in asdict(self.diversifier).items() if k != "lam"},
                    "query_understanding": asdict(self.understanding),
                    "embedder": {"name": self.embedder.model.name, "sha256": self.embedder.model.sha256},
                },
                sort_keys=True,
                default=str,
            )
        )

    def fusion_dir(self, build_key: str, pool: str = "") -> Path:
        """Where the learned-fusion models of dataset build ``build_key`` lie, trained on the query pool
        ``pool`` ("" = every query; else the runner's key of a scopes/categories/sample selection):
        ``learned_fusion.model_dir`` (a relative one under the cache dir) / build key[-pool]; each model
        in its configuration key's folder."""
        d = Path(str(self.learned_fusion.model_dir))
        return (d if d.is_absolute() or self.cache_dir is None else self.cache_dir / d) / (
            f"{build_key}-{pool}" if pool else build_key
        )

    def training_config(self) -> dict[str, Any]:
        """Learned-fusion training settings (they key the saved model together with the base)."""
        lf = asdict(self.learned_fusion)
        return json.loads(json.dumps({k: lf[k] for k in ("alpha_grid", "lambda_grid", "folds", "families", "seed")}))

    def describe(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            **self.base_config(),
            "diversify": asdict(self.diversifier),
            "learned_fusion": asdict(self.learned_fusion),
            "query_understanding_backend": self.qu.describe() if self.qu else None,
            "embedder": self.embedder.stats(),
        }
        if self.fusion_model is not None:
            out["fusion_model"] = self.fusion_model.card
        out["stages"] = {k: st.describe() for k, st in self.stages.items()}
        out["llms"] = [llm.describe() for llm in self.llms.backends()]
        return out

    def set_collection(self, docs: Sequence[Doc]) -> None:
        """Collection statistics for ``bm25.idf_scope=corpus`` (called once by the runner)."""
        if self.bm25_params.idf_scope != "corpus":
            return
        df: dict[str, int] = {}
        for d in docs:
            for t in set(self._analyzed(d)):
                df[t] = df.get(t, 0) + 1
        self._collection_df, self._collection_n = df, sum(1 for d in docs if self._analyzed(d))

    def bind_dataset(self, info: Mapping[str, Any]) -> None:
        """Loads the learned-fusion model trained on this very dataset build and query pool (``info``: name,
        build_key, pool)."""
        if self.learned_fusion.enabled:
            self.fusion_model = FusionModel.load(
                self.fusion_dir(str(info["build_key"]), str(info.get("pool") or "")),
                self.base_config(),
                self.training_config(),
            )
            self.fusion_model.check_dataset(info)

    # -- indexing -------------------------------------------------------------------------------
    def _analyzed(self, d: Doc) -> list[str]:
        t = self._terms.get(d.doc_id)
        if t is None:
            t = self._terms[d.doc_id] = analyze(d.text)
        return t

    def index(self, docs: Sequence[Doc]) -> None:
        self.docs = list(docs)
        self.bm25 = BM25Index(self.bm25_params.k1, self.bm25_params.b).fit_terms([self._analyzed(d) for d in self.docs])
        if self._collection_df is not None:
            self.bm25.set_idf(self._collection_df, self._collection_n)
        missing = [d for d in self.docs if d.doc_id not in self._vecs]
        if missing:
            for d, v in zip(missing, self.embedder.encode([d.text for d in missing], role="doc"), strict=True):
                self._vecs[d.doc_id] = v
        self.vecs = np.stack([self._vecs[d.doc_id] for d in self.docs]) if self.docs else np.zeros((0, 1), np.float32)
        self.doc_entities = [entities(d.text) for d in self.docs]
        self.history_entities = frozenset().union(*self.doc_entities) if self.planner.history_docs else frozenset()
        self.texts_lower = [d.text.lower() for d in self.docs]
        self.kinds = [d.kind for d in self.docs]
        self.docs_by_id = {d.doc_id: d for d in self.docs}
        for st in self.stages.values():
            if isinstance(st, IndexAware):
                st.on_index(self.docs)

    # -- search ---------------------------------------------------------------------------------
    def _candidates(self, text: str, signals: QuerySignals) -> tuple[SubCandidates, float, float]:
        t0 = time.perf_counter()
        lex = self.bm25.score(text)
        lex_top = np.array([i for i in top_indices(lex, self.depth) if lex[i] > 0], dtype=np.int64)
        t1 = time.perf_counter()
        q = self.embedder.encode([text], role="query")[0]
        cos = self.vecs @ q
        dense_top = top_indices(cos, self.depth)
        union = np.union1d(lex_top, dense_top).astype(np.int64)
        boost = self.boost.scores(signals, [self.texts_lower[i] for i in union], [self.kinds[i] for i in union])
        t2 = time.perf_counter()
        return (
            SubCandidates(
                text, union, lex[union].astype(np.float64), cos[union].astype(np.float64), boost, lex_top, dense_top
            ),
            (t1 - t0) * 1e3,
            (t2 - t1) * 1e3,
        )

    def prepare(self, query: Query) -> Prepared:
        """Query understanding, planning and candidate generation (no alpha/lambda yet)."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        u = None
        if self.qu is not None:
            u = self.understanding.run(query.text, query.history, self.qu)
        t1 = time.perf_counter()
        llm_ms = self.qu.take_llm_ms() if isinstance(self.qu, TimesLLMCalls) else None
        text = u.rewritten if u else query.text
        q_ents = entities(text)
        hist_ents = self.history_entities.union(*(entities(h) for h in query.history))
        hist_vocab: Any = self.bm25.vocab if self.planner.history_docs else {}
        if query.history:
            hist_vocab = set(hist_vocab) | {t for h in query.history for t in analyze(h)}
        q_terms = analyze(text)
        inputs = plan_inputs(text, q_ents, hist_ents, q_terms, hist_vocab)
        plan = self.planner.plan(inputs)
        t2 = time.perf_counter()
        subs, signals, bm25_ms, enc_ms = [], [], 0.0, 0.0
        for s in u.subqueries if u else (text,):  # subqueries[0] is the rewritten query itself
            signals.append(query_signals(s))
            c, b, e = self._candidates(s, signals[-1])
            subs.append(c)
            bm25_ms += b
            enc_ms += e
        timings.update(
            {"understand": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3, "bm25": bm25_ms, "encode_query": enc_ms}
        )
        if llm_ms is not None:  # the LLM's share of query understanding, reported as its own stage
            timings["understand"] -= llm_ms
            timings["llm"] = llm_ms
        return Prepared(u, plan, inputs, signals[0], q_ents, subs, timings, len(self.docs), len(set(q_terms)))

    def rank(self, p: Prepared, alpha: float, lam: float, k: int) -> tuple[list[tuple[str, float]], dict[str, float]]:
        """The final ranking for given alpha and lambda, plus the fusion/diversify timings (ms)."""
        t0 = time.perf_counter()
        lists = []
        for c in p.subs:
            s = alpha * minmax(c.bm25) + (1 - alpha) * c.cos + c.boost
            order = top_indices(s, len(s), tie_rank=c.idx)
            lists.append((c.idx[order], s[order]))
        if len(lists) == 1:
            idx, rel = lists[0]
        else:
            fused = rrf([list(ix[: self.depth]) for ix, _ in lists], self.understanding.rrf_k)
            keys = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
            vals = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
            order = top_indices(vals, len(vals), tie_rank=keys)
            idx, rel = keys[order], vals[order]
        t1 = time.perf_counter()
        ids = [self.docs[i].doc_id for i in idx]
        if self.diversifier.enabled and lam > 0 and len(idx) > 1:
            order = self.diversifier.reorder(rel, [self.doc_entities[i] for i in idx], p.query_entities, lam)
            out = [(ids[j], 1.0 / (r + 1)) for r, j in enumerate(order[:k])]
        else:
            out = [(ids[j], float(rel[j])) for j in range(min(k, len(idx)))]
        t2 = time.perf_counter()
        return out, {"fusion": (t1 - t0) * 1e3, "diversify": (t2 - t1) * 1e3}

    def search(self, query: Query, k: int) -> SearchResult:
        p = self.prepare(query)
        timings = dict(p.timings_ms)
        alpha = self.planner.alpha_for(p.plan)
        lam = self.diversifier.lam if self.diversifier.enabled else 0.0
        flags: dict[str, Any] = {"plan": p.plan, "plan_inputs": as_dict(p.inputs), **p.signals.as_record()}
        if self.fusion_model is not None:
            t0 = time.perf_counter()
            pred = self.fusion_model.predict(p, query)
            alpha = pred["alpha"]
            if self.learned_fusion.predict_lambda and "lam" in pred and self.diversifier.enabled:
                lam = pred["lam"]
            flags["fusion_fold"] = pred["fold"]
            timings["features"] = (time.perf_counter() - t0) * 1e3
        depth = max([k, *(st.candidate_depth() for st in self.stages.values() if isinstance(st, ReadsCandidates))])
        ranking, t = self.rank(p, alpha, lam, depth)
        timings.update(t)
        if p.understanding is not None:
            u = p.understanding
            flags.update(
                {
                    "rewritten": u.rewritten if u.rewritten != u.original else None,
                    "subqueries": list(u.subqueries[1:]),
                    "qu_rules": list(u.rules),
                }
            )
            if isinstance(self.qu, TimesLLMCalls):  # an LLM backend: its failed calls fell back to the rules
                causes = [r.split(":")[2] for r in u.rules if r.startswith("llm_fallback:")]
                record_llm_failures(flags, *count_fallback_causes(causes))
        flags.update(
            {
                "alpha": round(float(alpha), 4),
                "lambda": round(float(lam), 4),
                "candidates": int(sum(len(c.idx) for c in p.subs)),
            }
        )
        for st in self.stages.values():
            ranking = st.apply(query, ranking, self.docs_by_id, timings, flags)
        return SearchResult(ranking[:k], timings, flags)

    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Runner hook: the run's query ids (iteration 4 draws its generation sample from them)."""
        for st in self.stages.values():
            if isinstance(st, UsesQuerySet):
                st.set_queries(query_ids)

    def annotate(self, query: Query, result: SearchResult) -> None:
        """Runner hook, outside the timed search: answer generation and judging (iteration 4)."""
        for st in self.stages.values():
            if isinstance(st, Annotates):
                st.annotate(query, result)

    def close(self) -> None:
        self.embedder.flush()
        for st in self.stages.values():
            st.close()
        self.llms.close()
