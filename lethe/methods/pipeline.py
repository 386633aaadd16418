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
7. iteration 4 (``llm_rerank``, ``contradiction``, ``generation``; ``lethe.stages.iteration4``): budgeted
   LLM reranking of the top candidates, demotion of contradicted (stale) docs, and answer
   generation with a hallucination judge on a seeded sample of queries.

Scores returned are the fused scores, except after diversification, where the ranking is the
greedy order and scores are ``1 / rank`` (only the order carries meaning).
Per query, ``flags`` record the plan, its inputs, rewrites, sub-queries, signals, alpha and lambda.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lethe.retrieval.bm25 import BM25Index
from lethe.text.analyzer import analyze
from lethe.stages.boost import BoostConfig, QuerySignals, boost_scores, query_signals
from lethe.retrieval.dense import make_embedder
from lethe.retrieval.ranking import top_indices
from lethe.stages.diversify import entity_matrix, entity_weights, greedy_diversify
from lethe.retrieval.embedder import Embedder
from lethe.text.entities import entities
from lethe.retrieval.fusion import minmax, rrf
from lethe.stages.iteration4 import Iteration4
from lethe.stages.learned_fusion import FusionModel
from lethe.core.protocol import Doc, Query, SearchResult
from lethe.core.typed_config import build_section as _build
from lethe.stages.candidates import Prepared, SubCandidates
from lethe.stages.planning import PlanningConfig, as_dict, choose_plan, plan_alpha, plan_inputs
from lethe.stages.understanding.base import TimesLLMCalls, understand
from lethe.stages.understanding.factory import make_backend


@dataclass(frozen=True)
class BM25Config:
    """``idf_scope``: 'session' = statistics of the docs the query may see (Eq. 1); 'corpus' = IDF
    from the whole collection (needs the runner's ``set_collection`` call)."""

    k1: float = 1.2
    b: float = 0.75
    idf_scope: str = "session"

    def __post_init__(self) -> None:
        if self.idf_scope not in ("session", "corpus"):
            raise ValueError(f"bm25.idf_scope must be 'session' or 'corpus', got {self.idf_scope!r}")


@dataclass(frozen=True)
class DiversifyConfig:
    """Greedy entity coverage (Eq. 4) over the top ``pool`` fused candidates.

    ``lam``: weight of the coverage gain vs relevance; ``weights``: 'uniform' or 'idf';
    ``query_weight``: extra weight of entities the query itself names.
    """

    enabled: bool = True
    lam: float = 0.3
    pool: int = 30
    weights: str = "uniform"
    query_weight: float = 1.0


@dataclass(frozen=True)
class QUConfig:
    """Iteration 2 switches: ``rewrite``, ``decompose``; ``backend`` and its ``options``;
    ``rrf_k`` fuses the sub-query lists."""

    rewrite: bool = False
    decompose: bool = False
    backend: str = "rule"
    options: Mapping[str, Any] = field(default_factory=dict)
    rrf_k: int = 60


@dataclass(frozen=True)
class LearnedFusionConfig:
    """Iteration 3: predict alpha (and lambda) per query with the model saved in ``model_dir``
    by ``python -m experiments.train_fusion``."""

    enabled: bool = False
    model_dir: str | None = None    # relative: under the cache dir
    predict_lambda: bool = True
    alpha_grid: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    lambda_grid: Sequence[float] = (0.0, 0.15, 0.3, 0.5)
    folds: int = 5
    families: Sequence[str] = ("constant", "ridge", "forest", "gbr")
    seed: int = 0


class LethePipeline:
    """Lethe iterations 1-3 (see the module docstring); implements ``lethe.core.protocol.Method``."""

    def __init__(self, embedder: Mapping[str, Any] | Embedder, name: str = "lethe", depth: int = 100,
                 bm25: Mapping[str, Any] | None = None, planning: Mapping[str, Any] | None = None,
                 boost: Mapping[str, Any] | None = None, diversify: Mapping[str, Any] | None = None,
                 query_understanding: Mapping[str, Any] | None = None,
                 learned_fusion: Mapping[str, Any] | None = None,
                 llm_rerank: Mapping[str, Any] | None = None, contradiction: Mapping[str, Any] | None = None,
                 generation: Mapping[str, Any] | None = None,
                 cache_dir: str | Path | None = None, progress: bool = True):
        self.name, self.depth = name, int(depth)
        self.bm25_cfg: BM25Config = _build(BM25Config, bm25, "bm25")
        self.plan_cfg: PlanningConfig = _build(PlanningConfig, planning, "planning")
        self.boost_cfg: BoostConfig = _build(BoostConfig, boost, "boost")
        self.div_cfg: DiversifyConfig = _build(DiversifyConfig, diversify, "diversify")
        self.qu_cfg: QUConfig = _build(QUConfig, query_understanding, "query_understanding")
        self.lf_cfg: LearnedFusionConfig = _build(LearnedFusionConfig, learned_fusion, "learned_fusion")
        if not 0.0 <= self.div_cfg.lam <= 1.0:
            raise ValueError(f"diversify.lam must be in [0, 1], got {self.div_cfg.lam}")
        qu_options = dict(self.qu_cfg.options)
        if self.qu_cfg.backend == "llm":
            qu_options.setdefault("cache_dir", cache_dir)  # LLM responses are cached beside the embeddings
        self.qu = make_backend(self.qu_cfg.backend, **qu_options) if (self.qu_cfg.rewrite or self.qu_cfg.decompose) else None
        if self.lf_cfg.enabled and not self.lf_cfg.model_dir:
            raise ValueError("learned_fusion.enabled needs learned_fusion.model_dir")
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.embedder = make_embedder(embedder, cache_dir, progress)
        self.fusion_model: FusionModel | None = None
        if self.lf_cfg.enabled:
            self.fusion_model = FusionModel.load(self.fusion_dir(), self.base_config(), self.training_config())
        self.it4 = Iteration4(llm_rerank, contradiction, generation, cache_dir)
        self._terms: dict[str, list[str]] = {}
        self._vecs: dict[str, np.ndarray] = {}
        self._collection_df: dict[str, int] | None = None
        self._collection_n = 0
        self.docs: list[Doc] = []
        self.bm25 = BM25Index(self.bm25_cfg.k1, self.bm25_cfg.b)
        self.vecs = np.zeros((0, 1), np.float32)

    # -- configuration --------------------------------------------------------------------------
    def base_config(self) -> dict[str, Any]:
        """Parameters that shape the candidates and features (everything but learned fusion and
        the values it predicts); a fusion model is valid only for the base it was trained on."""
        return json.loads(json.dumps({
            "depth": self.depth, "bm25": asdict(self.bm25_cfg), "planning": asdict(self.plan_cfg),
            "boost": asdict(self.boost_cfg),
            "diversify": {k: v for k, v in asdict(self.div_cfg).items() if k != "lam"},
            "query_understanding": asdict(self.qu_cfg),
            "embedder": {"name": self.embedder.model.name, "sha256": self.embedder.model.sha256},
        }, sort_keys=True, default=str))

    def fusion_dir(self) -> Path:
        """``learned_fusion.model_dir``; a relative one lies under the cache dir."""
        d = Path(str(self.lf_cfg.model_dir))
        return d if d.is_absolute() or self.cache_dir is None else self.cache_dir / d

    def training_config(self) -> dict[str, Any]:
        """Learned-fusion training settings (they key the saved model together with the base)."""
        lf = asdict(self.lf_cfg)
        return json.loads(json.dumps({k: lf[k] for k in ("alpha_grid", "lambda_grid", "folds", "families", "seed")}))

    def describe(self) -> dict[str, Any]:
        out = {"name": self.name, **self.base_config(),
               "diversify": asdict(self.div_cfg), "learned_fusion": asdict(self.lf_cfg),
               "query_understanding_backend": self.qu.describe() if self.qu else None,
               "embedder": self.embedder.stats()}
        if self.fusion_model is not None:
            out["fusion_model"] = self.fusion_model.card
        out["iteration4"] = self.it4.describe()
        return out

    def set_collection(self, docs: Sequence[Doc]) -> None:
        """Collection statistics for ``bm25.idf_scope=corpus`` (called once by the runner)."""
        if self.bm25_cfg.idf_scope != "corpus":
            return
        df: dict[str, int] = {}
        for d in docs:
            for t in set(self._analyzed(d)):
                df[t] = df.get(t, 0) + 1
        self._collection_df, self._collection_n = df, sum(1 for d in docs if self._analyzed(d))

    def bind_dataset(self, info: Mapping[str, Any]) -> None:
        """Checks that a learned fusion model was trained on this very dataset build."""
        if self.fusion_model is not None:
            self.fusion_model.check_dataset(info)

    # -- indexing -------------------------------------------------------------------------------
    def _analyzed(self, d: Doc) -> list[str]:
        t = self._terms.get(d.doc_id)
        if t is None:
            t = self._terms[d.doc_id] = analyze(d.text)
        return t

    def index(self, docs: Sequence[Doc]) -> None:
        self.docs = list(docs)
        self.bm25 = BM25Index(self.bm25_cfg.k1, self.bm25_cfg.b).fit_terms([self._analyzed(d) for d in self.docs])
        if self._collection_df is not None:
            self.bm25.set_idf(self._collection_df, self._collection_n)
        missing = [d for d in self.docs if d.doc_id not in self._vecs]
        if missing:
            for d, v in zip(missing, self.embedder.encode([d.text for d in missing], role="doc")):
                self._vecs[d.doc_id] = v
        self.vecs = np.stack([self._vecs[d.doc_id] for d in self.docs]) if self.docs else np.zeros((0, 1), np.float32)
        self.doc_entities = [entities(d.text) for d in self.docs]
        self.history_entities = frozenset().union(*self.doc_entities) if self.plan_cfg.history_docs else frozenset()
        self.texts_lower = [d.text.lower() for d in self.docs]
        self.kinds = [d.kind for d in self.docs]
        self.docs_by_id = {d.doc_id: d for d in self.docs}
        self.it4.on_index(self.docs)

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
        boost = boost_scores(signals, [self.texts_lower[i] for i in union], [self.kinds[i] for i in union], self.boost_cfg)
        t2 = time.perf_counter()
        return (SubCandidates(text, union, lex[union].astype(np.float64), cos[union].astype(np.float64), boost,
                              lex_top, dense_top), (t1 - t0) * 1e3, (t2 - t1) * 1e3)

    def prepare(self, query: Query) -> Prepared:
        """Query understanding, planning and candidate generation (no alpha/lambda yet)."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        u = None
        if self.qu is not None:
            u = understand(query.text, list(query.history), self.qu, rewrite=self.qu_cfg.rewrite,
                           decompose=self.qu_cfg.decompose)
        t1 = time.perf_counter()
        llm_ms = self.qu.take_llm_ms() if isinstance(self.qu, TimesLLMCalls) else None
        text = u.rewritten if u else query.text
        q_ents = entities(text)
        hist_ents = self.history_entities.union(*(entities(h) for h in query.history))
        hist_vocab: Any = self.bm25.vocab if self.plan_cfg.history_docs else {}
        if query.history:
            hist_vocab = set(hist_vocab) | {t for h in query.history for t in analyze(h)}
        q_terms = analyze(text)
        inputs = plan_inputs(text, q_ents, hist_ents, q_terms, hist_vocab)
        plan = choose_plan(inputs, self.plan_cfg) if self.plan_cfg.enabled else None
        t2 = time.perf_counter()
        subs, signals, bm25_ms, enc_ms = [], [], 0.0, 0.0
        for s in (u.subqueries if u else (text,)):  # subqueries[0] is the rewritten query itself
            signals.append(query_signals(s))
            c, b, e = self._candidates(s, signals[-1])
            subs.append(c)
            bm25_ms += b
            enc_ms += e
        timings.update({"understand": (t1 - t0) * 1e3, "plan": (t2 - t1) * 1e3, "bm25": bm25_ms, "encode_query": enc_ms})
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
            fused = rrf([list(ix[: self.depth]) for ix, _ in lists], self.qu_cfg.rrf_k)
            keys = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
            vals = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
            order = top_indices(vals, len(vals), tie_rank=keys)
            idx, rel = keys[order], vals[order]
        t1 = time.perf_counter()
        ids = [self.docs[i].doc_id for i in idx]
        if self.div_cfg.enabled and lam > 0 and len(idx) > 1:
            pool = min(self.div_cfg.pool, len(idx))
            inc, names = entity_matrix([self.doc_entities[i] for i in idx[:pool]])
            q_cols = [j for j, e in enumerate(names) if e in p.query_entities]
            w = entity_weights(inc, self.div_cfg.weights, q_cols, self.div_cfg.query_weight)
            order = greedy_diversify(rel[:pool], inc, w, lam, pool) + list(range(pool, len(idx)))
            out = [(ids[j], 1.0 / (r + 1)) for r, j in enumerate(order[:k])]
        else:
            out = [(ids[j], float(rel[j])) for j in range(min(k, len(idx)))]
        t2 = time.perf_counter()
        return out, {"fusion": (t1 - t0) * 1e3, "diversify": (t2 - t1) * 1e3}

    def search(self, query: Query, k: int) -> SearchResult:
        p = self.prepare(query)
        timings = dict(p.timings_ms)
        alpha = plan_alpha(p.plan, self.plan_cfg)
        lam = self.div_cfg.lam if self.div_cfg.enabled else 0.0
        flags: dict[str, Any] = {"plan": p.plan, "plan_inputs": as_dict(p.inputs), **p.signals.as_record()}
        if self.fusion_model is not None:
            t0 = time.perf_counter()
            pred = self.fusion_model.predict(p, query)
            alpha = pred["alpha"]
            if self.lf_cfg.predict_lambda and "lam" in pred and self.div_cfg.enabled:
                lam = pred["lam"]
            flags["fusion_fold"] = pred["fold"]
            timings["features"] = (time.perf_counter() - t0) * 1e3
        ranking, t = self.rank(p, alpha, lam, k)
        timings.update(t)
        if p.understanding is not None:
            u = p.understanding
            flags.update({"rewritten": u.rewritten if u.rewritten != u.original else None,
                          "subqueries": list(u.subqueries[1:]), "qu_rules": list(u.rules)})
        flags.update({"alpha": round(float(alpha), 4), "lambda": round(float(lam), 4),
                      "candidates": int(sum(len(c.idx) for c in p.subs))})
        if self.it4.active:
            ranking = self.it4.apply(query, ranking, self.docs_by_id, timings, flags)
        return SearchResult(ranking, timings, flags)

    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Runner hook: the run's query ids (iteration 4 draws its generation sample from them)."""
        self.it4.set_queries(query_ids)

    def annotate(self, query: Query, result: SearchResult) -> None:
        """Runner hook, outside the timed search: answer generation and judging (iteration 4)."""
        self.it4.annotate(query, result, self.docs_by_id)

    def close(self) -> None:
        self.embedder.flush()
        self.it4.close()
