"""Answers for a seeded sample of a run's queries, from the top passages of a ranking, optionally judged.

One implementation for every method: the runner's ``answers`` section (any method, conf/answers/default.yaml)
and Lethe iteration 4's ``generation`` stage (:class:`GenerationStage`, a ranking stage of the pipeline) both
build an :class:`AnswerStage`. Either runs after the timed search (``annotate``): a query's ``latency_ms`` is
retrieval, and ``generation`` and ``judge`` are timed as their own stages.

- **Sample** (:func:`sample_queries`): the run's query ids, sorted and de-duplicated; ``sample`` of them
  drawn without replacement by ``numpy.random.default_rng(seed).choice`` (null or >= the count: all).
- **Context**: the texts of the first ``context_docs`` docs of the final ranking, in ranking order. With
  ``dedup_threshold`` (seed 004 section 6), a doc whose text has ``difflib.SequenceMatcher(None, text,
  kept).ratio() >= dedup_threshold`` with a text already kept is skipped and the next doc of the ranking takes its
  place (at most ``DEDUP_SCAN`` times ``context_docs`` docs are looked at); the count skipped is recorded.
- **Answer**: ``lethe.stages.generation.AnswerGenerator``; with a judge, the answer and the same passages go
  to ``lethe.stages.generation.HallucinationJudge``.
- **Recorded** on the query: ``result.flags["generation"]`` = {answer, status, context_docs, prompt_tokens,
  completion_tokens, cached (a response-cache hit), model_ms (the backend's own generation time in ms, excluding
  model loading; for a cache hit, the original generation's)[, supported, p_supported, judge_status]} and
  ``result.timings_ms["generation"]`` / ``["judge"]`` (wall clock, ms; about 0 for a cache hit); a generation
  that timed out or failed, and a judgment that did, count as LLM failures of the query
  (``lethe.core.protocol.record_llm_failures``), a judge reply that is not yes/no as a parse failure. Only a
  model judgment sets ``supported``; abstentions and failures leave it None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

import numpy as np

from lethe.core.protocol import Doc, Query, SearchResult, record_llm_failures
from lethe.llm.base import LLMBackend
from lethe.llm.pool import LLMPool
from lethe.stages.generation import AnswerGenerator, HallucinationJudge

__all__ = ["AnswerStage", "GenerationStage", "answer_stage_from_config", "sample_queries"]

JUDGE_KEYS = ("enabled", "llm", "options")
DEDUP_SCAN = 4  # with dedup, at most this many times context_docs docs of the ranking are looked at


def dedup_contexts(texts: Sequence[str], n: int, threshold: float | None) -> tuple[list[str], int]:
    """The first ``n`` texts, skipping near-duplicates of a text already kept (module docstring); and how many
    were skipped. ``threshold`` None: the first ``n`` texts, nothing skipped."""
    if threshold is None:
        return list(texts[:n]), 0
    kept: list[str] = []
    skipped = 0
    for t in texts[: n * DEDUP_SCAN]:
        if len(kept) == n:
            break
        if any(SequenceMatcher(None, t, k).ratio() >= threshold for k in kept):
            skipped += 1
        else:
            kept.append(t)
    return kept, skipped


def sample_queries(query_ids: Sequence[str], n: int | None, seed: int) -> set[str]:
    """The seeded sample of ``n`` query ids (all of them when ``n`` is None or >= their number)."""
    ids = sorted(set(query_ids))
    if n is None or n >= len(ids):
        return set(ids)
    if int(n) < 1:
        raise ValueError(f"sample must be null or >= 1, got {n}")
    rng = np.random.default_rng(seed)
    return {ids[i] for i in rng.choice(len(ids), size=int(n), replace=False)}


class AnswerStage:
    """Generate (and judge) answers for the sampled queries (module docstring)."""

    def __init__(
        self,
        generator: AnswerGenerator,
        judge: HallucinationJudge | None,
        *,
        context_docs: int,
        sample: int | None,
        seed: int,
        dedup_threshold: float | None = None,
    ):
        if int(context_docs) < 1:
            raise ValueError(f"context_docs must be >= 1, got {context_docs}")
        if dedup_threshold is not None and not 0.0 < float(dedup_threshold) <= 1.0:
            raise ValueError(f"dedup_threshold must be null or in (0, 1], got {dedup_threshold}")
        self.generator, self.judge = generator, judge
        self.context_docs, self.sample, self.seed = int(context_docs), sample, int(seed)
        self.dedup_threshold = None if dedup_threshold is None else float(dedup_threshold)
        self._selected: set[str] | None = None  # None until set_queries: every query

    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Draw the seeded sample among the run's query ids."""
        self._selected = sample_queries(query_ids, self.sample, self.seed)

    def wants(self, query_id: str | None) -> bool:
        """Whether the query is in the sample."""
        return self._selected is None or query_id in self._selected

    def annotate(self, query_text: str, result: SearchResult, text_of: Callable[[str], str]) -> None:
        """Answer from the top ``context_docs`` of ``result.ranking`` (``text_of(doc_id)`` gives a doc's text)
        and record it on ``result`` (module docstring). The caller checks :meth:`wants` first."""
        scan = self.context_docs * (DEDUP_SCAN if self.dedup_threshold is not None else 1)
        contexts, skipped = dedup_contexts(
            [text_of(d) for d, _ in result.ranking[:scan]], self.context_docs, self.dedup_threshold
        )
        g = self.generator.generate(query_text, contexts)
        record_llm_failures(result.flags, infra=int(g.status in ("timeout", "error")))
        result.timings_ms["generation"] = g.llm_ms
        out: dict[str, Any] = {
            "answer": g.answer,
            "status": g.status,
            "context_docs": len(contexts),
            "prompt_tokens": g.prompt_tokens,
            "completion_tokens": g.completion_tokens,
            "cached": g.cached,
            "model_ms": None if g.model_ms is None else round(g.model_ms, 1),
        }
        if self.dedup_threshold is not None:
            out["duplicates_skipped"] = skipped
        if self.judge is not None and g.answer is not None:
            j = self.judge.judge(g.answer, contexts, query_text)
            record_llm_failures(
                result.flags, infra=int(j.status in ("timeout", "error")), parse=int(j.status == "parse_failure")
            )
            result.timings_ms["judge"] = j.llm_ms
            # only a model judgment counts: abstentions (not sent to the judge) and failures stay None
            out.update(
                supported=j.supported if j.status == "ok" else None, p_supported=j.p_supported, judge_status=j.status
            )
        result.flags["generation"] = out

    def describe(self) -> dict[str, Any]:
        """Sample, seed, context size, and the generator's and judge's models, prompts and decoding."""
        return {
            "sample": self.sample,
            "seed": self.seed,
            "context_docs": self.context_docs,
            "dedup_threshold": self.dedup_threshold,
            "generator": self.generator.describe(),
            "judge_model": self.judge.describe() if self.judge is not None else None,
        }


def answer_stage_from_config(
    cfg: Mapping[str, Any], llm_for: Callable[[Mapping[str, Any] | None, str], LLMBackend], section: str
) -> AnswerStage:
    """An AnswerStage from a config section {sample, seed, context_docs, dedup_threshold, options, llm, judge:
    {enabled, llm, options}}; ``llm_for(llm_config, part)`` builds (or shares) the backend of ``part`` ("" = the generator,
    "judge"); ``section`` names the config section in errors (e.g. ``answers`` or ``method.stages.generation``)."""
    generator = AnswerGenerator(
        llm_for(cfg.get("llm"), ""), context_docs=int(cfg["context_docs"]), **dict(cfg.get("options") or {})
    )
    judge_cfg = dict(cfg.get("judge") or {})
    unknown = sorted(set(judge_cfg) - set(JUDGE_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {section}.judge; known: {', '.join(JUDGE_KEYS)}")
    judge = None
    if judge_cfg.get("enabled", True):
        judge = HallucinationJudge(llm_for(judge_cfg.get("llm"), "judge"), **dict(judge_cfg.get("options") or {}))
    return AnswerStage(
        generator,
        judge,
        context_docs=int(cfg["context_docs"]),
        sample=cfg.get("sample"),
        seed=int(cfg.get("seed", 0)),
        dedup_threshold=cfg.get("dedup_threshold"),
    )


class GenerationStage:
    """Lethe iteration 4's ``generation`` section as a ranking stage: it leaves the ranking as it is and answers
    (and judges) the sampled queries in ``annotate``; with ``UsesLLMs``, ``UsesQuerySet``, ``IndexAware`` and
    ``Annotates`` (``lethe.stages.ranking_stage``, ``lethe.core.protocol``)."""

    SECTION = "method.stages.generation"

    def __init__(
        self,
        *,
        enabled: bool,
        sample: int | None,
        seed: int,
        context_docs: int,
        options: Mapping[str, Any],
        llm: Mapping[str, Any] | None,
        judge: Mapping[str, Any],
    ):
        """A seeded ``sample`` of the run's queries (None = all) answered from the top ``context_docs`` docs;
        ``options`` go to AnswerGenerator, ``llm`` is its model config; ``judge`` = {enabled, llm, options} for
        HallucinationJudge."""
        self.enabled = bool(enabled)
        self.cfg = {
            "sample": sample,
            "seed": int(seed),
            "context_docs": int(context_docs),
            "options": dict(options or {}),
            "llm": llm,
            "judge": dict(judge or {}),
        }
        self.answering: AnswerStage | None = None  # built by bind_llms
        self._text: dict[str, str] = {}

    def bind_llms(self, llms: LLMPool) -> None:
        """Build the generator and judge on the pool's backends (nothing when the stage is off)."""
        if self.enabled:
            self.answering = answer_stage_from_config(
                self.cfg,
                lambda cfg, part: llms.get(cfg, f"{self.SECTION}{'.' + part if part else ''}.llm"),
                self.SECTION,
            )

    def set_queries(self, query_ids: Sequence[str]) -> None:
        if self.answering is not None:
            self.answering.set_queries(query_ids)

    def on_index(self, docs: Sequence[Doc]) -> None:
        self._text = {d.doc_id: d.text for d in docs}

    def apply(
        self,
        query: Query,
        ranking: list[tuple[str, float]],
        docs_by_id: Mapping[str, Doc],
        timings: dict[str, float],
        flags: dict[str, Any],
    ) -> list[tuple[str, float]]:
        return ranking

    def annotate(self, query: Query, result: SearchResult) -> None:
        if self.answering is not None and self.answering.wants(query.query_id):
            self.answering.annotate(query.text, result, self._text.__getitem__)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"enabled": self.enabled, **self.cfg}
        if self.answering is not None:
            stage = self.answering.describe()
            out["generator"] = stage["generator"]
            if stage["judge_model"] is not None:
                out["judge_model"] = stage["judge_model"]
        return out

    def close(self) -> None:
        """The backends belong to the pipeline's pool, which closes them."""
