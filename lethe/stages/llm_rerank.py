"""The budgeted LLM rerank stage (Lethe iteration 4's ``llm_rerank``): a ranking stage around
``lethe.stages.rerank.BudgetedReranker``.

The first ``top_n`` candidates of the incoming ranking are judged pointwise ("is this passage relevant?",
p(yes) from the logprob) within ``budget_ms`` per query (default 1200 ms, the paper's figure); candidates it
could not judge keep their prior order, or are scored by the optional cross-encoder ``fallback``. The prior is
the incoming score (after iteration 3's diversification: 1 / rank). With ``replay`` (a JSON file
``{query_id: reach}``, e.g. the ``reach.json`` the reference store keeps beside a stored run) each query judges
exactly its recorded reach with no clock, so the same candidates are judged on any machine.

Recorded per query: ``flags["rerank"]`` (judged, considered, share judged, timeouts, parse failures, errors,
predicted stops, probes, reach, fallback use, LLM ms; ``replayed`` when replayed) and the stage time
``timings_ms["llm_rerank"]`` (``rerank_fallback`` apart). Budget timeouts are the design (unjudged candidates
keep their prior order), not failures; backend errors and parse failures count as LLM failures of the query.
The backend comes from the pipeline's shared pool (``bind_llms``); its response cache is what ``llm.cache``
says (off in ``conf/method/lethe_iter4.yaml``: what fits in the budget is measured, not replayed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lethe.core.protocol import Doc, Query, record_llm_failures
from lethe.llm.pool import LLMPool

SECTION = "method.stages.llm_rerank"


def read_reach(path: str | Path) -> dict[str, int]:
    """A replay file: ``{query_id: reach}`` (reach an integer >= 0); errors name the file and the entry."""
    from lethe.core.paths import Paths

    file = Paths.default().resolve(path)
    if not file.is_file():
        raise FileNotFoundError(f"{SECTION}.replay: {file} does not exist")
    data = json.loads(file.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{SECTION}.replay: {file} must hold an object {{query_id: reach}}")
    bad = [k for k, v in data.items() if type(v) is not int or v < 0]
    if bad:
        raise ValueError(f"{SECTION}.replay: {file}: reach of {bad[:3]} is not an integer >= 0")
    return {str(k): int(v) for k, v in data.items()}


def cross_encoder_fallback(model_cfg: Mapping[str, Any] | None) -> Callable[[str, list[str]], Sequence[float]] | None:
    """``score(query, texts)`` of one cross-encoder model folder or hub model (None without a config). The model
    sets this project trains (a ``train`` section) are refused: they need the per-query leakage guard of
    ``baselines.cross_encoder``, which a fallback does not apply."""
    if not model_cfg:
        return None
    from lethe.retrieval.crossencoder import load_cross_encoder, resolve_cross_encoder, score_pairs

    if model_cfg.get("train") is not None:  # a model set of conf/model/cross_encoder.yaml (experiments/ce_regimes.py)
        raise ValueError(
            f"{SECTION}.fallback: the cross-encoder model sets this project trains need the per-query "
            "leakage guard of baselines.cross_encoder (each query scored by a fold that never saw it), which this "
            "fallback does not apply; give it one model folder instead (fallback.train=null fallback.path=<folder>) "
            "or a hub model (fallback.train=null fallback.path=null fallback.allow_hub=true)"
        )
    resolved = resolve_cross_encoder(model_cfg)
    max_len = model_cfg.get("max_length")
    # the same inference backend as the cross_encoder baseline (backend / onnx keys of its model config);
    # without a cache_dir an ONNX export goes to a temporary folder
    model = load_cross_encoder(
        resolved.path,
        max_length=int(max_len) if max_len else None,
        offline=resolved.source != "hub",
        backend=str(model_cfg.get("backend", "torch")),
        onnx=model_cfg.get("onnx"),
    )
    return lambda query, texts: score_pairs(model, query, texts)


class LLMRerankStage:
    """Budgeted pointwise LLM reranking of the top ``top_n`` (module docstring); a ranking stage
    (``lethe.stages.ranking_stage``) with ``ReadsCandidates`` and ``UsesLLMs``."""

    @classmethod
    def hashed_section(cls, section: Mapping[str, Any]) -> Mapping[str, Any]:
        """The section as a run's identity hashes it (lethe.core.protocol.ExtendsIdentity): with ``replay``, the
        sha256 of the reach file instead of its path (a run replaying another reach is another run; the same reach
        read from another folder is the same run)."""
        from lethe.core.hashing import sha256_file
        from lethe.core.paths import Paths
        from lethe.core.typed_config import ConfigError

        replay = section.get("replay")
        if not replay:
            return section
        path = Paths.default().resolve(str(replay))
        if not path.is_file():
            raise ConfigError(f"{SECTION}.replay={replay}: {path} does not exist")
        return {**{k: v for k, v in section.items() if k != "replay"}, "replay_sha256": sha256_file(path)}

    def __init__(
        self,
        *,
        enabled: bool,
        top_n: int,
        budget_ms: float,
        weight: float,
        prompt_version: str,
        max_passage_chars: int,
        max_passage_tokens: int | None,
        predictive_stop: bool,
        predict_quantile: float,
        probe_every: int,
        fallback: Mapping[str, Any] | None,
        llm: Mapping[str, Any] | None,
        replay: str | None = None,
    ):
        """``weight``: of the LLM's p(yes) against the min-max normalized prior; passages cut to
        ``max_passage_chars`` characters, then to ``max_passage_tokens`` tokens of the reranker model's tokenizer
        (None: no token cut); ``predictive_stop``: do not start a call predicted to overrun the budget (a call's
        predicted time includes the ``predict_quantile`` of the fit's residuals; ``probe_every`` queries predicted
        not to fit, one call starts anyway); ``fallback``: None or a cross-encoder model config scoring the unjudged;
        ``llm``: the reranker's LLM config (conf/llm/*.yaml); ``replay``: None or a reach file."""
        self.enabled, self.top_n, self.llm_cfg, self.replay = bool(enabled), int(top_n), llm, replay
        self.fallback_cfg = fallback
        self._options = {
            "budget_ms": budget_ms,
            "top_n": int(top_n),
            "weight": weight,
            "prompt_version": prompt_version,
            "max_passage_chars": max_passage_chars,
            "max_passage_tokens": max_passage_tokens,
            "predictive_stop": predictive_stop,
            "predict_quantile": predict_quantile,
            "probe_every": probe_every,
        }
        self.reranker: Any = None  # lethe.stages.rerank.BudgetedReranker, built by bind_llms
        self._reach = read_reach(replay) if enabled and replay else None

    def bind_llms(self, llms: LLMPool) -> None:
        """Build the reranker on the pool's backend for ``llm`` (nothing when the stage is off)."""
        if not self.enabled:
            return
        from lethe.stages.rerank import BudgetedReranker

        self.reranker = BudgetedReranker(
            llms.get(self.llm_cfg, f"{SECTION}.llm"),
            fallback=cross_encoder_fallback(self.fallback_cfg),
            **self._options,
        )

    def candidate_depth(self) -> int:
        return self.top_n if self.enabled else 0

    def apply(
        self,
        query: Query,
        ranking: list[tuple[str, float]],
        docs_by_id: Mapping[str, Doc],
        timings: dict[str, float],
        flags: dict[str, Any],
    ) -> list[tuple[str, float]]:
        if not self.enabled or not ranking:
            return ranking
        if self.reranker is None:
            raise RuntimeError(f"{SECTION}: bind_llms was not called (the pipeline calls it when it is built)")
        reach = None
        if self._reach is not None:
            reach = self._reach.get(str(query.query_id))
            if reach is None:
                raise ValueError(
                    f"{SECTION}.replay={self.replay}: no recorded reach for query "
                    f"{query.query_id!r} (replay the run that judged these queries)"
                )
        res = self.reranker.rerank(query.text, [(d, docs_by_id[d].text, s) for d, s in ranking], reach=reach)
        timings["llm_rerank"] = res.total_ms - res.fallback_ms
        if res.fallback_used:
            timings["rerank_fallback"] = res.fallback_ms
        flags["rerank"] = {
            "judged": res.judged,
            "considered": res.considered,
            "share_judged": round(res.share_judged, 4),
            "timeouts": res.timeouts,
            "parse_failures": res.parse_failures,
            "errors": res.errors,
            "predicted_stops": res.predicted_stops,
            "probes": res.probes,
            "reach": res.reach,
            "fallback_used": res.fallback_used,
            "llm_ms": round(res.llm_ms, 1),
            **({"replayed": True} if reach is not None else {}),
        }
        record_llm_failures(flags, infra=res.errors, parse=res.parse_failures)
        return res.ranking

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "enabled": self.enabled,
            **self._options,
            "fallback": self.fallback_cfg,
            "llm": self.llm_cfg,
            "replay": self.replay,
        }
        if self.reranker is not None:
            out["reranker"] = self.reranker.describe()
        return out

    def close(self) -> None:
        """The backend belongs to the pipeline's pool, which closes it."""
