"""Hypothesis H4: does Lethe's adaptive planning choose the right plan (verify / explore / exploit)?

Inputs. A Lethe run (method name starting with ``lethe_iter``) records per query, in the
``flags`` JSON of ``per_query.parquet``, ``"plan"``: one of ``PLANS`` (absent or null when
planning is off or the method was never called for the query, e.g. ``no_eligible_docs``). The
dataset's ``queries.parquet`` holds the gold ``plan_label`` (LetheBench only; null elsewhere).
Only *evaluated* queries count: the rows of ``per_query`` (``queries`` may hold other splits).

Quantities (all over the evaluated queries that have both a recorded plan and a gold label, the
*scored* queries, n of them; the prediction is the recorded plan, the truth the gold label):

- ``n_missing_plan``: evaluated queries with a gold label but no recorded plan. They are not
  scored (there is no prediction to score) and are reported, never silently dropped.
- accuracy = (number of scored queries whose plan equals the gold label) / n.
- Its CI is the Wilson score interval at confidence c (z = Phi^-1((1 + c) / 2), p = k / n):
  ``(p + z^2/(2n) -/+ z * sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n)``. Unlike the normal
  approximation it stays inside [0, 1] and is not degenerate at p = 0 or 1 (where its lower,
  resp. upper, bound is exactly 0, resp. 1).
- Confusion matrix: counts, rows = gold label, columns = predicted plan, always all of ``PLANS``
  in that order on both axes (zero rows/columns included).
- Per plan l: precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2 TP / (2 TP + FP + FN),
  each 0 when its denominator is 0. Macro-F1 = unweighted mean of F1 over the three plans (a plan
  that is neither gold nor predicted contributes F1 = 0), identical to
  ``sklearn.metrics.f1_score(gold, pred, labels=PLANS, average="macro", zero_division=0)``.
- Per-category (and per-complexity) accuracy: the same accuracy and Wilson CI within each
  ``queries.category`` (``queries.complexity``) group of the scored queries.
- Majority baseline: accuracy of predicting, for every query, the most frequent gold label of the
  *same* queries (ties broken by ``PLANS`` order). This is the best constant predictor chosen
  in-sample, so a slightly generous reference; any plan accuracy has to be read against it.
- Plan distribution: share of each plan among the evaluated queries with a recorded plan (gold
  labels not needed).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from analysis.formatting import NM
from analysis.formatting import fmt as _f
from analysis.views import DatasetView, method_order
from lethe.core.protocol import PLANS
from lethebench.runs import decode_cell

LETHE_PREFIX = "lethe_iter"


def is_lethe(method: str) -> bool:
    """Lethe methods (and their ablation variants, e.g. ``lethe_iter1+no_plan``)."""
    return method.startswith(LETHE_PREFIX)


def _check_labels(values: pd.Series, what: str) -> None:
    bad = sorted(set(values.dropna()) - set(PLANS), key=str)
    if bad:
        raise ValueError(f"unknown {what} value(s) {bad[:5]}; expected one of {PLANS}")


def _plan_of(flags: Any) -> str | None:
    """The ``plan`` of one ``flags`` cell (JSON string or dict); None when absent or null."""
    plan = decode_cell(flags).get("plan")
    return None if plan is None or plan == "" else plan


def recorded_plans(per_query: pd.DataFrame) -> pd.Series:
    """Plan per evaluated query (index query_id; None where no plan was recorded)."""
    ids = per_query["query_id"] if "query_id" in per_query.columns else per_query.index.to_series()
    flags = per_query["flags"] if "flags" in per_query.columns else pd.Series([None] * len(per_query))
    plans = pd.Series(
        [_plan_of(f) for f in flags], index=pd.Index(ids.to_numpy(), name="query_id"), name="plan", dtype=object
    )
    _check_labels(plans, "recorded plan")
    return plans


def wilson_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for k successes out of n (NaN, NaN when n = 0)."""
    if n == 0:
        return math.nan, math.nan
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2))
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # analytically the bounds are exactly 0 at k = 0 and 1 at k = n; avoid float noise there
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def _group_accuracy(scored: pd.DataFrame, col: str, confidence: float) -> pd.DataFrame:
    rows = []
    for g, part in scored.groupby(col, sort=True, dropna=False):
        k, n = int(part["correct"].sum()), len(part)
        lo, hi = wilson_ci(k, n, confidence)
        rows.append({col: g, "n": n, "n_correct": k, "accuracy": k / n, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows, columns=[col, "n", "n_correct", "accuracy", "ci_low", "ci_high"]).set_index(col)


def majority_baseline(queries: pd.DataFrame) -> dict[str, Any] | None:
    """Accuracy of always predicting the most frequent gold ``plan_label`` of ``queries``.

    Returns {"label", "accuracy", "n"}; None when no query has a gold label. Pass the queries the
    accuracy it is compared with was computed on.
    """
    gold = queries["plan_label"].dropna() if "plan_label" in queries.columns else pd.Series(dtype=object)
    if gold.empty:
        return None
    _check_labels(gold, "plan_label")
    counts = gold.value_counts()
    label = max(PLANS, key=lambda p: (int(counts.get(p, 0)), -PLANS.index(p)))
    return {"label": label, "accuracy": int(counts.get(label, 0)) / len(gold), "n": int(len(gold))}


def plan_accuracy(per_query: pd.DataFrame, queries: pd.DataFrame, confidence: float = 0.95) -> dict[str, Any] | None:
    """Plan-selection accuracy of one run against the gold plan labels (see the module docstring).

    ``per_query``: the run's per-query table (``query_id`` column or index, ``flags``, ``status``).
    ``queries``: the dataset's queries (``query_id``, ``plan_label``, ``category``, ...).
    None when no evaluated query has a gold label or no evaluated query has a recorded plan.
    """
    plans = recorded_plans(per_query)
    q = queries.drop_duplicates("query_id").set_index("query_id")
    gold = (q["plan_label"] if "plan_label" in q.columns else pd.Series(dtype=object)).reindex(plans.index)
    _check_labels(gold, "plan_label")
    has_gold, has_plan = gold.notna().to_numpy(), plans.notna().to_numpy()
    if not has_gold.any() or not has_plan.any():
        return None
    missing = has_gold & ~has_plan
    status = per_query["status"].to_numpy() if "status" in per_query.columns else np.full(len(plans), "unknown")
    missing_by_status = {str(s): int(c) for s, c in sorted(pd.Series(status[missing]).value_counts().items())}

    keep = has_gold & has_plan
    scored = pd.DataFrame({"gold": gold[keep].astype(str), "pred": plans[keep].astype(str)})
    for col in ("category", "complexity"):
        if col in q.columns:
            scored[col] = q[col].reindex(scored.index)
    scored["correct"] = scored["gold"] == scored["pred"]
    n, k = len(scored), int(scored["correct"].sum())
    lo, hi = wilson_ci(k, n, confidence)

    pairs = scored.groupby(["gold", "pred"]).size()
    confusion = pd.DataFrame(
        [[int(pairs.get((g, p), 0)) for p in PLANS] for g in PLANS],
        index=pd.Index(PLANS, name="gold"),
        columns=pd.Index(PLANS, name="predicted"),
    )
    per_plan = {}
    for p in PLANS:
        tp = int(confusion.loc[p, p])
        fp, fn = int(confusion[p].sum()) - tp, int(confusion.loc[p].sum()) - tp
        per_plan[p] = {
            "support": tp + fn,
            "predicted": tp + fp,
            "precision": tp / (tp + fp) if tp + fp else 0.0,
            "recall": tp / (tp + fn) if tp + fn else 0.0,
            "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0,
        }

    out: dict[str, Any] = {
        "n": n,
        "n_correct": k,
        "n_missing_plan": int(missing.sum()),
        "missing_plan_by_status": missing_by_status,
        "accuracy": k / n,
        "ci_low": lo,
        "ci_high": hi,
        "ci_method": "wilson",
        "confidence": float(confidence),
        "macro_f1": float(np.mean([per_plan[p]["f1"] for p in PLANS])),
        "per_plan": per_plan,
        "confusion": confusion,
        "majority": majority_baseline(scored.rename(columns={"gold": "plan_label"})),
    }
    for col, key in (("category", "per_category"), ("complexity", "per_complexity")):
        if col in scored.columns:
            out[key] = _group_accuracy(scored, col, confidence)
    return out


def plan_distribution(per_query: pd.DataFrame) -> pd.Series:
    """Share of each plan among evaluated queries with a recorded plan (index ``PLANS``, sums to 1;
    all NaN when no plan was recorded)."""
    plans = recorded_plans(per_query).dropna()
    if plans.empty:
        return pd.Series(np.nan, index=pd.Index(PLANS, name="plan"), name="share", dtype=float)
    counts = plans.value_counts().reindex(list(PLANS), fill_value=0)
    return pd.Series(counts.to_numpy() / len(plans), index=pd.Index(PLANS, name="plan"), name="share", dtype=float)


def runs_with_plans(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> Iterator[tuple[str, str, DatasetView]]:
    """(dataset, method, view) for every Lethe method that recorded at least one plan, in report order."""
    for ds, v in sorted(views.items()):
        for m in method_order([m for m in v.per_query if is_lethe(m)], cfg):
            if recorded_plans(v.per_query[m]).notna().any():
                yield ds, m, v


def plan_table(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (dataset, Lethe method with recorded plans): n scored, queries without a plan,
    accuracy with its Wilson CI, macro-F1, majority baseline (same queries), plan shares in %."""
    conf = float(cfg.get("confidence", 0.95))
    ci_col = f"accuracy {conf:.0%} CI (Wilson)"
    rows = []
    for ds, m, v in runs_with_plans(views, cfg):
        pq = v.per_query[m]
        acc = plan_accuracy(pq, v.queries, conf)
        dist = plan_distribution(pq)
        maj = acc["majority"] if acc else None
        row: dict[str, Any] = {
            "dataset": ds,
            "method": m,
            "n": acc["n"] if acc else NM,
            "no plan": acc["n_missing_plan"] if acc else NM,
            "accuracy": _f(acc["accuracy"]) if acc else NM,
            ci_col: f"[{_f(acc['ci_low'])}, {_f(acc['ci_high'])}]" if acc else NM,
            "macro-F1": _f(acc["macro_f1"]) if acc else NM,
            "majority baseline": _f(maj["accuracy"]) if maj else NM,
            "majority plan": maj["label"] if maj else NM,
        }
        for p in PLANS:
            row[f"{p} %"] = _f(float(dist[p]) * 100, 1)
        rows.append(row)
    return pd.DataFrame(rows)
