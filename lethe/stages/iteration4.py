"""Lethe iteration 4: budgeted LLM reranking, contradiction handling, answer generation (and judging).

Iteration 4 = iteration 3's ranking, then (each a config switch of ``LethePipeline``):

1. ``llm_rerank`` (:class:`RerankConfig`): ``lethe.stages.rerank.BudgetedReranker`` judges the first
   ``top_n`` candidates pointwise ("is this passage relevant?", p(yes) from the logprob) within
   ``budget_ms`` per query (default 1200 ms, the paper's figure); candidates it could not judge keep
   their prior order, or are scored by the optional cross-encoder ``fallback``. The prior is the
   iteration-3 score (after diversification: 1 / rank). Recorded per query: share judged, calls,
   timeouts, predicted stops, parse failures, LLM and fallback time.
2. ``contradiction`` (:class:`ContradictionConfig`): a detector (``rules`` or ``llm``, see
   ``lethe.stages.contradiction.detectors``) finds (stale, current) pairs among the docs the query may see
   (``check_depth: null``; detection runs once per indexed doc set) or among the top
   ``check_depth`` of the ranking (per query; the only affordable scope for the ``llm`` backend);
   every stale doc in the ranking is demoted by ``penalty`` (``lethe.stages.contradiction.rules.demote``) and
   the pairs that touched the ranking's top ``log_depth`` are logged in the query's flags.
3. ``generation`` (:class:`GenerationConfig`, optional; on for the paper experiment): for a seeded
   sample of ``sample`` queries of the run (``seed``; the runner passes the run's query ids through
   ``set_queries``), generate an answer from the top ``context_docs`` docs of the final ranking
   (``lethe.stages.answering.AnswerStage``, the stage every method's ``answers`` uses) and, with
   ``judge.enabled``, ask a pinned judge prompt whether the answer is supported by those same docs (``lethe.stages.generation.HallucinationJudge``).
   Generation and judging happen in :meth:`Iteration4.annotate`, which the runner calls *after* the
   timed search: the query's ``latency_ms`` is retrieval (through reranking and contradiction
   handling) and the stages ``generation`` and ``judge`` are timed on their own.

LLM backends are built once per distinct config (``lethe.llm.backends.make_llm``) and shared
between stages that name the same model. The reranker's backend runs without the response cache
(``llm_rerank.cache: false``, the default) so its latency, and therefore what fits in the budget, is
measured, not replayed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lethe.llm.pool import LLMPool
from lethe.stages.contradiction.rules import Conflict, demote
from lethe.core.protocol import Doc, Query, SearchResult, record_llm_failures


@dataclass(frozen=True)
class RerankConfig:
    """``top_n`` candidates judged in prior order within ``budget_ms`` per query; ``weight`` of the
    LLM's p(yes) against the min-max normalized prior; passages cut to ``max_passage_chars`` characters,
    then to ``max_passage_tokens`` tokens of the reranker model's tokenizer (null: no token cut);
    ``predictive_stop``: do not start a call predicted to overrun the budget; ``fallback``: null or a
    cross-encoder model config (conf/model/cross_encoder.yaml) scoring the unjudged; ``cache``: use
    the LLM response cache (off: latencies are real); ``replay``: null, or a JSON file ``{query_id: reach}`` of a
    recorded run (the reference store writes one beside each stored run whose reranker recorded its reach,
    ``reach.json``): each query judges exactly its recorded reach, with no clock (lethe.stages.rerank), so the same
    candidates are judged on any machine."""

    enabled: bool
    top_n: int
    budget_ms: float
    weight: float
    prompt_version: str
    max_passage_chars: int
    max_passage_tokens: int | None
    predictive_stop: bool
    predict_quantile: float
    probe_every: int
    fallback: Mapping[str, Any] | None
    cache: bool
    llm: Mapping[str, Any] | None
    replay: str | None = None


@dataclass(frozen=True)
class ContradictionConfig:
    """``backend``: rules | llm; ``penalty`` in [0, 1] on the stale doc's normalized score;
    ``check_depth``: null = all docs the query may see, else the ranking's top N; ``log_depth``: pairs
    touching this many top docs are logged; ``demote_on``: 'score' (the incoming scores, min-max
    normalized: strong after LLM reranking, weak on iteration 3's 1/rank scores) or 'rank' (scale-free,
    see lethe.stages.contradiction.rules.demote); ``options``: detector settings (lethe.stages.contradiction.detectors)."""

    enabled: bool
    backend: str
    penalty: float
    check_depth: int | None
    log_depth: int
    demote_on: str
    options: Mapping[str, Any]
    llm: Mapping[str, Any] | None


@dataclass(frozen=True)
class GenerationConfig:
    """Answers for a seeded ``sample`` of the run's queries (null = all) from the top ``context_docs``;
    ``options`` go to AnswerGenerator; ``judge`` = {enabled, llm, options} for HallucinationJudge."""

    enabled: bool
    sample: int | None
    seed: int
    context_docs: int
    options: Mapping[str, Any]
    llm: Mapping[str, Any] | None
    judge: Mapping[str, Any]


def read_reach(path: str | Path) -> dict[str, int]:
    """A replay file: ``{query_id: reach}`` (reach an integer >= 0); errors name the file and the entry."""
    from lethe.core.paths import project_path

    file = project_path(path)
    if not file.is_file():
        raise FileNotFoundError(f"method.llm_rerank.replay: {file} does not exist")
    data = json.loads(file.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"method.llm_rerank.replay: {file} must hold an object {{query_id: reach}}")
    bad = [k for k, v in data.items() if type(v) is not int or v < 0]
    if bad:
        raise ValueError(f"method.llm_rerank.replay: {file}: reach of {bad[:3]} is not an integer >= 0")
    return {str(k): int(v) for k, v in data.items()}


class Iteration4:
    """The iteration-4 stages of one ``LethePipeline`` (module docstring)."""

    def __init__(self, llm_rerank: RerankConfig | None, contradiction: ContradictionConfig | None,
                 generation: GenerationConfig | None, cache_dir: str | Path | None):
        """Each section is a built config (``_target_`` in the method YAML) or None (stage off)."""
        self.rr_cfg, self.ct_cfg, self.gen_cfg = llm_rerank, contradiction, generation
        self.cache_dir = cache_dir
        self._llms = LLMPool(cache_dir)
        self.reranker = self.detector = None
        if self.rr_cfg is not None and self.rr_cfg.enabled:
            from lethe.stages.rerank import BudgetedReranker

            llm = self._llm(self.rr_cfg.llm, "llm_rerank", cache=self.rr_cfg.cache)
            self.reranker = BudgetedReranker(
                llm, budget_ms=self.rr_cfg.budget_ms, top_n=self.rr_cfg.top_n, weight=self.rr_cfg.weight,
                prompt_version=self.rr_cfg.prompt_version, max_passage_chars=self.rr_cfg.max_passage_chars,
                fallback=self._fallback(self.rr_cfg.fallback), predictive_stop=self.rr_cfg.predictive_stop,
                predict_quantile=self.rr_cfg.predict_quantile, probe_every=self.rr_cfg.probe_every,
                max_passage_tokens=self.rr_cfg.max_passage_tokens)
        self._reach = read_reach(self.rr_cfg.replay) if self.rr_cfg is not None and self.rr_cfg.replay else None
        if self.ct_cfg is not None and self.ct_cfg.enabled:
            from lethe.stages.contradiction.detectors import make_detector

            if not 0.0 <= self.ct_cfg.penalty <= 1.0:
                raise ValueError(f"contradiction.penalty must be in [0, 1], got {self.ct_cfg.penalty}")
            llm = self._llm(self.ct_cfg.llm, "contradiction") if self.ct_cfg.backend == "llm" else None
            self.detector = make_detector(self.ct_cfg.backend, llm=llm, **dict(self.ct_cfg.options))
        self.answering = None   # lethe.stages.answering.AnswerStage: the one answer stage every method shares
        if self.gen_cfg is not None and self.gen_cfg.enabled:
            from lethe.stages.answering import answer_stage_from_config

            self.answering = answer_stage_from_config(
                asdict(self.gen_cfg), lambda cfg, part: self._llm(cfg, "generation" + (f".{part}" if part else "")),
                "method.generation")
        self._conflicts: list[Conflict] = []

    @property
    def active(self) -> bool:
        return any(x is not None for x in (self.reranker, self.detector, self.answering))

    # -- construction helpers -------------------------------------------------------------------
    def _llm(self, cfg: Mapping[str, Any] | None, section: str, cache: bool | None = None) -> Any:
        c = dict(cfg) if cfg else None
        if c is not None and cache is not None:
            c["cache"] = cache
        return self._llms.get(c, f"method.{section}.llm")

    @staticmethod
    def _fallback(model_cfg: Mapping[str, Any] | None) -> Callable[[str, list[str]], Sequence[float]] | None:
        if not model_cfg:
            return None
        from lethe.retrieval.crossencoder import load_cross_encoder, resolve_cross_encoder, score_pairs

        if model_cfg.get("train") is not None:  # a model set of conf/model/cross_encoder.yaml (experiments/ce_regimes.py)
            raise ValueError(
                "method.llm_rerank.fallback: the cross-encoder model sets this project trains need the per-query "
                "leakage guard of baselines.cross_encoder (each query scored by a fold that never saw it), which this "
                "fallback does not apply; give it one model folder instead (fallback.train=null fallback.path=<folder>) "
                "or a hub model (fallback.train=null fallback.path=null fallback.allow_hub=true)")
        resolved = resolve_cross_encoder(model_cfg)
        max_len = model_cfg.get("max_length")
        # the same inference backend as the cross_encoder baseline (backend / onnx keys of its model config);
        # without a cache_dir an ONNX export goes to a temporary folder
        model = load_cross_encoder(resolved.path, max_length=int(max_len) if max_len else None,
                                   offline=resolved.source != "hub", backend=str(model_cfg.get("backend", "torch")),
                                   onnx=model_cfg.get("onnx"))
        return lambda query, texts: score_pairs(model, query, texts)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: asdict(c) if c is not None else None for k, c in
                               (("llm_rerank", self.rr_cfg), ("contradiction", self.ct_cfg), ("generation", self.gen_cfg))}
        if self.reranker is not None:
            out["llm_rerank"]["reranker"] = self.reranker.describe()
        if self.detector is not None:
            out["contradiction"]["detector"] = self.detector.describe()
        if self.answering is not None:
            stage = self.answering.describe()
            out["generation"]["generator"] = stage["generator"]
            if stage["judge_model"] is not None:
                out["generation"]["judge_model"] = stage["judge_model"]
        out["llms"] = [llm.describe() for llm in self._llms.backends()]
        return out

    # -- runner hooks ---------------------------------------------------------------------------
    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Choose the seeded generation sample among the run's queries."""
        if self.answering is not None:
            self.answering.set_queries(query_ids)

    def on_index(self, docs: Sequence[Doc]) -> None:
        """Detection over the whole eligible set (``check_depth: null``), once per indexed doc set."""
        self._conflicts = []
        if self.detector is not None and self.ct_cfg.check_depth is None:
            res = self.detector.detect(list(docs))
            self._conflicts = list(res.conflicts)

    def candidate_depth(self) -> int:
        """The reranker's ``top_n`` and the per-query contradiction check's ``check_depth`` (0 when neither acts)."""
        depths = [0]
        if self.reranker is not None:
            depths.append(int(self.rr_cfg.top_n))
        if self.detector is not None and self.ct_cfg.check_depth is not None:
            depths.append(int(self.ct_cfg.check_depth))
        return max(depths)

    # -- the stages -----------------------------------------------------------------------------
    def apply(self, query: Query, ranking: list[tuple[str, float]], docs_by_id: Mapping[str, Doc],
              timings: dict[str, float], flags: dict[str, Any]) -> list[tuple[str, float]]:
        """Rerank, then demote contradicted docs; fills ``timings`` and ``flags``."""
        if self.reranker is not None and ranking:
            cands = [(d, docs_by_id[d].text, s) for d, s in ranking]
            reach = None
            if self._reach is not None:
                reach = self._reach.get(str(query.query_id))
                if reach is None:
                    raise ValueError(f"method.llm_rerank.replay={self.rr_cfg.replay}: no recorded reach for query "
                                     f"{query.query_id!r} (replay the run that judged these queries)")
            res = self.reranker.rerank(query.text, cands, reach=reach)
            ranking = res.ranking
            timings["llm_rerank"] = res.total_ms - res.fallback_ms
            if res.fallback_used:
                timings["rerank_fallback"] = res.fallback_ms
            flags["rerank"] = {"judged": res.judged, "considered": res.considered,
                               "share_judged": round(res.share_judged, 4), "timeouts": res.timeouts,
                               "parse_failures": res.parse_failures, "errors": res.errors,
                               "predicted_stops": res.predicted_stops, "probes": res.probes, "reach": res.reach,
                               "fallback_used": res.fallback_used,
                               "llm_ms": round(res.llm_ms, 1), **({"replayed": True} if reach is not None else {})}
            # budget timeouts are the design (unjudged candidates keep their prior order), not failures
            record_llm_failures(flags, infra=res.errors, parse=res.parse_failures)
        if self.detector is not None and ranking:
            t0 = time.perf_counter()
            conflicts = self._conflicts
            det: dict[str, Any] = {"scope": "eligible"}
            if self.ct_cfg.check_depth is not None:
                top = [docs_by_id[d] for d, _ in ranking[: self.ct_cfg.check_depth]]
                res_d = self.detector.detect(top)
                conflicts = list(res_d.conflicts)
                det = {"scope": f"top{self.ct_cfg.check_depth}", "pairs_considered": res_d.pairs_considered,
                       "judged": res_d.judged, "parse_failures": res_d.parse_failures,
                       "timeouts": res_d.timeouts, "errors": res_d.errors, "llm_ms": round(res_d.llm_ms, 1)}
                if self.ct_cfg.backend == "llm":
                    record_llm_failures(flags, infra=res_d.errors, parse=res_d.parse_failures)
            in_ranking = {d for d, _ in ranking}
            hit = [c for c in conflicts if c.stale_doc_id in in_ranking]
            if hit and self.ct_cfg.penalty > 0:
                ranking = demote(ranking, hit, self.ct_cfg.penalty, on=self.ct_cfg.demote_on)
            timings["contradiction"] = (time.perf_counter() - t0) * 1e3
            top_ids = {d for d, _ in ranking[: self.ct_cfg.log_depth]}
            det["demoted"] = len({c.stale_doc_id for c in hit})
            det["pairs"] = [[c.stale_doc_id, c.current_doc_id, c.entity, c.attribute] for c in hit
                            if c.stale_doc_id in top_ids or c.current_doc_id in top_ids]
            flags["contradiction"] = det
        return ranking

    def annotate(self, query: Query, result: SearchResult, docs_by_id: Mapping[str, Doc]) -> None:
        """Answer generation and judging for the sampled queries (outside the timed search)."""
        if self.answering is not None and self.answering.wants(query.query_id):
            self.answering.annotate(query.text, result, lambda d: docs_by_id[d].text)

    def close(self) -> None:
        self._llms.close()
