"""Iteration 4 in numbers: the LLM stages' own table, the budget curve and the model-choice frontier.

All of it is read from results folders (per-query flags and timings written by iteration 4's stages, ``lethe.stages.llm_rerank``, ``lethe.stages.contradiction.stage`` and ``lethe.stages.answering``):

- :func:`iteration4_table`: one row per (dataset, ``lethe_iter4*`` run): queries, nDCG@10 of the run
  and of ``lethe_iter3`` **on the same queries**, the rerank stage's share judged and latency (P50,
  P95, against ``budget_ms * 1.1``), contradiction@k, answers generated / token F1 / ROUGE-L, and
  the hallucination rate (unsupported / judged, with the judged count).
- :func:`budget_points`: one row per run of ``lethe_iter4`` variants on a dataset, with the budget
  and reranker model read from the run's manifest (Figure 4's budget curve and model frontier).
- :func:`hallucination_cell`: the Table 1 cell (rate and judged count), n/m without judged answers.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from analysis.formatting import NM
from analysis.formatting import fmt as _f
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


def hallucination_cell(pq: pd.DataFrame) -> str:
    rate, n = hallucination(pq)
    return NM if rate is None else f"{rate:.4f} (n={n})"


def rerank_model(run: Any) -> tuple[str | None, float | None]:
    """(reranker model name, budget ms) from a run's manifest config, (None, None) without reranking."""
    m = (run.manifest.get("config") or {}).get("method") or {}
    rr = m.get("llm_rerank") or {}
    if not rr.get("enabled"):
        return None, None
    return (rr.get("llm") or {}).get("name"), float(rr.get("budget_ms"))


def iteration4_table(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> pd.DataFrame:
    k = int(cfg["contradiction_k"])
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
            rate, n_j = hallucination(pq)
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
                    "answer F1": _f(float(pq["answer_f1"].dropna().mean()))
                    if "answer_f1" in pq and pq["answer_f1"].notna().any()
                    else NM,
                    "ROUGE-L": _f(float(pq["answer_rouge_l"].dropna().mean()))
                    if "answer_rouge_l" in pq and pq["answer_rouge_l"].notna().any()
                    else NM,
                    "hallucination (judged)": NM if rate is None else f"{rate:.4f} ({n_j})",
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
