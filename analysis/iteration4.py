"""Iteration 4 in numbers: the LLM stages' own table, the budget curve and the model-choice frontier.

All of it is read from results folders (per-query flags and timings written by iteration 4's stages, ``lethe.stages.llm_rerank``, ``lethe.stages.contradiction.stage`` and ``lethe.stages.answering``):

- :func:`iteration4_table`: one row per (dataset, ``lethe_iter4*`` run): queries, nDCG@10 of the run
  and of ``lethe_iter3`` **on the same queries**, the rerank stage's share judged and latency (P50,
  P95, against ``budget_ms * 1.1``), contradiction@k, answers generated / token F1 / ROUGE-L, and
  the hallucination rate (unsupported / judged, with the judged count).
- :func:`budget_points`: one row per run of ``lethe_iter4`` variants on a dataset, with the budget
  and reranker model read from the run's manifest (Figure 4's budget curve and model frontier).
- :func:`hallucination_cell`: the Table 1 cell (rate, Wilson interval and judged count, marked when the judge
  failed its validation: analysis.instruments), n/m without judged answers.
- :func:`mean_cell` / :func:`rate_cell`: an answer metric's cell, mean with its BCa interval / share with its
  Wilson interval, and n.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from analysis import stats
from analysis.formatting import NM
from analysis.formatting import fmt as _f
from analysis.instruments import hallucination_judge_unfit, judge_mark
from analysis.views import DatasetView, cached_mean_ci
from lethebench.runs import flag_frame, timings_frame

BUDGET_SLACK = 1.10  # the acceptance rule: rerank-stage P95 within budget + 10 %


def _stage(pq: pd.DataFrame, stage: str) -> pd.Series:
    """The ms ``stage`` took, for the queries it ran on (index: ``pq``'s)."""
    t = timings_frame(pq)
    return t[stage].dropna() if stage in t.columns else pd.Series(dtype=float)


def hallucination(pq: pd.DataFrame) -> tuple[float | None, int]:
    """(unsupported / judged, judged) over the answers the judge model judged (flag
    ``generation.judge_status == "ok"``: abstentions and judge failures are not judgments, even in runs
    written before the runner stored them as None); (None, 0) if none."""
    if "answer_supported" not in pq:
        return None, 0
    gen = flag_frame(pq, "generation")
    ok = gen["judge_status"].eq("ok") if "judge_status" in gen else pd.Series(True, index=pq.index)
    sup = pq.loc[ok & pq["answer_supported"].notna(), "answer_supported"].astype(bool)
    return (float((~sup).mean()) if len(sup) else None), int(len(sup))


def rate_cell(k: int, n: int, confidence: float, mark: str = "") -> str:
    """``k / n`` with its Wilson interval and n ("0.2500 [0.1118, 0.4687] n=28"), then ``mark`` if any; n/m when
    n == 0."""
    if n == 0:
        return NM
    ci = stats.proportion_ci(k, n, confidence)
    return f"{_f(ci['share'])} [{_f(ci['ci_low'])}, {_f(ci['ci_high'])}] n={n}" + (f" {mark}" if mark else "")


def mean_cell(x: pd.Series, cfg: Mapping[str, Any]) -> str:
    """Mean of the non-missing values of ``x`` with its BCa interval (analysis.views.cached_mean_ci) and n
    ("0.3512 [0.2811, 0.4290] n=30"); where no interval can be estimated (n < 2, BCa undefined) the cell says so;
    n/m when no value."""
    v = x.dropna().to_numpy(float)
    if not len(v):
        return NM
    ci = cached_mean_ci(v, cfg)
    if np.isnan(ci["ci_low"]):
        return f"{_f(ci['mean'])} [no CI: {ci['method'].removeprefix('degenerate: ')}] n={len(v)}"
    return f"{_f(ci['mean'])} [{_f(ci['ci_low'])}, {_f(ci['ci_high'])}] n={len(v)}"


def _answer_cell(pq: pd.DataFrame, col: str, cfg: Mapping[str, Any]) -> str:
    """The cell of answer metric ``col``: a 0/1 metric (exact match) as a rate with its Wilson interval, any
    other as a mean with its BCa interval; n/m when the run has no value of it."""
    if col not in pq:
        return NM
    x = pq[col].dropna().astype(float)
    if len(x) and x.isin([0.0, 1.0]).all() and col == "answer_em":
        return rate_cell(int(x.sum()), len(x), float(cfg["confidence"]))
    return mean_cell(x, cfg)


def hallucination_cell(pq: pd.DataFrame, cfg: Mapping[str, Any], unfit: str | None) -> str:
    """The hallucination rate of a run (:func:`hallucination`) with its Wilson interval and the number judged,
    marked (analysis.instruments.judge_mark) when ``unfit`` says the judge failed or was not validated
    (:func:`analysis.instruments.hallucination_judge_unfit`); n/m without judged answers."""
    rate, n = hallucination(pq)
    if rate is None:
        return NM
    return rate_cell(round(rate * n), n, float(cfg["confidence"]), judge_mark(unfit))


def rerank_model(run: Any) -> tuple[str | None, float | None]:
    """(reranker model name, budget ms) from a run's manifest config, (None, None) without reranking."""
    m = (run.manifest.get("config") or {}).get("method") or {}
    rr = (m.get("stages") or {}).get("llm_rerank") or {}
    if not rr.get("enabled"):
        return None, None
    return (rr.get("llm") or {}).get("name"), float(rr.get("budget_ms"))


ANSWER_METRICS = {  # per-query column -> the iteration-4 table's column (mean or rate, 95% CI, n)
    "answer_f1": "answer F1 [95% CI]",
    "answer_em": "EM [95% Wilson CI]",
    "answer_rouge_l": "ROUGE-L [95% CI]",
    "answer_similarity": "similarity [95% CI]",
}
HALLUCINATION = "hallucination [95% Wilson CI] n judged"


def iteration4_table(
    views: Mapping[str, DatasetView],
    cfg: Mapping[str, Any],
    studies: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """One row per (dataset, ``lethe_iter4*`` run) (module docstring); every answer metric with its 95% interval
    and n, the hallucination rate marked when the judge failed its validation on ``studies`` (the finished studies'
    JSON documents by name; None = none finished, so the judge counts as not validated)."""
    k = int(cfg["contradiction_k"])
    unfit = hallucination_judge_unfit(cfg, studies)
    rows = []
    for ds, v in sorted(views.items()):
        ref = v.per_query.get("lethe_iter3")
        for m in sorted(x for x in v.per_query if x.startswith("lethe_iter4")):
            pq = v.per_query[m]
            model, budget = rerank_model(v.runs[m])
            rr = flag_frame(pq, "rerank")
            st = _stage(pq, "llm_rerank")
            p95 = float(st.quantile(0.95)) if len(st) else None
            same = ref.reindex(pq.index)["ndcg@10"] if ref is not None else None
            gen = pq["answer_status"].notna() if "answer_status" in pq else pd.Series(False, index=pq.index)
            con = pq[f"contradiction@{k}"].dropna() if f"contradiction@{k}" in pq else pd.Series(dtype=float)
            rows.append(
                {
                    "dataset": ds,
                    "method": m,
                    "n": int(len(pq)),
                    "nDCG@10": _f(float(pq["ndcg@10"].mean())),
                    "iter3 nDCG@10 (same queries)": _f(float(same.mean()))
                    if same is not None and same.notna().all()
                    else NM,
                    "reranker": model or "-",
                    "budget (ms)": _f(budget, 0) if budget else "-",
                    "share judged": _f(float(rr["share_judged"].mean())) if "share_judged" in rr else NM,
                    "judged / query": _f(float(rr["judged"].mean()), 2) if "judged" in rr else NM,
                    "rerank P50 (ms)": _f(float(st.quantile(0.5)), 1) if len(st) else NM,
                    "rerank P95 (ms)": _f(p95, 1) if p95 is not None else NM,
                    "P95 <= budget+10%": ("yes" if p95 <= budget * BUDGET_SLACK else "NO")
                    if p95 is not None and budget
                    else NM,
                    f"contradiction@{k}": _f(float(con.mean())) if len(con) else NM,
                    "answers": int(gen.sum()),
                    **{name: _answer_cell(pq, col, cfg) for col, name in ANSWER_METRICS.items()},
                    HALLUCINATION: hallucination_cell(pq, cfg, unfit),
                }
            )
    return pd.DataFrame(rows)


def budget_points(v: DatasetView, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per reranking ``lethe_iter4`` run of ``v``: model, budget, n, nDCG@10 mean and 95% BCa
    CI, iter3's mean on the same queries, share judged, rerank-stage P50/P95 (ms). Only runs on one
    query set are compared: the set shared by most reranking runs (the sweep's sample)."""
    ref = v.per_query.get("lethe_iter3")
    runs = {m: rerank_model(v.runs[m]) for m in sorted(x for x in v.per_query if x.startswith("lethe_iter4"))}
    runs = {m: mb for m, mb in runs.items() if mb[0] is not None}
    if not runs:
        return pd.DataFrame()
    sets: dict[frozenset, list[str]] = {}
    for m in runs:
        sets.setdefault(frozenset(v.per_query[m].index), []).append(m)
    keep = set(max(sets.values(), key=lambda ms: (len(ms), len(v.per_query[ms[0]]))))
    rows = []
    for m, (model, budget) in runs.items():
        if m not in keep:
            continue
        pq = v.per_query[m]
        ci = cached_mean_ci(pq["ndcg@10"].to_numpy(float), cfg)
        st = _stage(pq, "llm_rerank")
        rr = flag_frame(pq, "rerank")
        rows.append(
            {
                "method": m,
                "model": model,
                "budget_ms": budget,
                "n": int(len(pq)),
                "ndcg": ci["mean"],
                "ci_low": ci["ci_low"],
                "ci_high": ci["ci_high"],
                "iter3_same": float(ref.reindex(pq.index)["ndcg@10"].mean()) if ref is not None else np.nan,
                "share_judged": float(rr["share_judged"].mean()) if "share_judged" in rr else np.nan,
                "rerank_p50": float(st.quantile(0.5)) if len(st) else np.nan,
                "rerank_p95": float(st.quantile(0.95)) if len(st) else np.nan,
            }
        )
    return pd.DataFrame(rows)
