"""The declared confirmatory family and the exploratory rest (``conf/analysis/default.yaml``, ``confirmatory``).

The confirmatory family is fixed in config before any comparison is read: per dataset, each named Lethe iteration
against the best baseline, and each named step against the step before, on the confirmatory metrics (and the answer
metrics where both runs generated answers). Its rows are tested with ``confirmatory.permutation_resamples`` sign
flips and Holm-corrected over the family alone. Every other paired row of Table 2 and the steps table is
exploratory: Benjamini-Hochberg within its own table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from analysis import stats
from analysis.views import DatasetView, paired_row

CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
KEY = ["dataset", "method", "baseline", "metric"]
# the columns of a whole-table correction that a split table replaces with family, correction and p_adj
WHOLE_TABLE = ["p_bonferroni", "p_holm", "p_bh"]


def comparisons(v: DatasetView, cfg: Mapping[str, Any], best: str | None) -> list[tuple[str, str, str]]:
    """The declared (method, reference, role) comparisons of one dataset whose runs both finished: each method of
    ``confirmatory.versus_best_baseline`` against ``best`` (role "vs best baseline"), then each
    ``confirmatory.steps`` pair (role "step")."""
    spec = cfg["confirmatory"]
    out = [(m, best, "vs best baseline") for m in spec["versus_best_baseline"] if best is not None]
    out += [(m, ref, "step") for m, ref in spec["steps"]]
    return [(m, ref, role) for m, ref, role in out if m in v.per_query and ref in v.per_query]


def family_size_bound(cfg: Mapping[str, Any], n_rows: int) -> float:
    """The smallest Holm-adjusted p the family can reach: its size times the smallest sign-flip p, 1/(B+1)."""
    return n_rows / (int(cfg["confirmatory"]["permutation_resamples"]) + 1)


def confirmatory_table(
    views: Mapping[str, DatasetView], cfg: Mapping[str, Any], best: Mapping[str, str | None]
) -> pd.DataFrame:
    """Every declared confirmatory comparison (paired rows of :func:`analysis.views.paired_row` plus ``role``),
    tested with ``confirmatory.permutation_resamples`` sign flips, Holm over these rows alone (``p_adj``).
    ``best``: the best baseline per dataset (None: none finished)."""
    spec = cfg["confirmatory"]
    test_cfg = {**cfg, "permutation_resamples": int(spec["permutation_resamples"])}
    rows = []
    for ds, v in sorted(views.items()):
        for m, ref, role in comparisons(v, cfg, best.get(ds)):
            for metric in [*spec["metrics"], *spec.get("answer_metrics", [])]:
                r = paired_row(v, ds, m, ref, metric, test_cfg)
                if r is not None:
                    rows.append({**r, "role": role})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    primary = cfg["primary_test"]["table2"]
    out = stats.with_primary_test(df, primary, 1.0 - float(cfg["confidence"]))
    out["family"], out["correction"] = CONFIRMATORY, "holm"
    out["p_adj"] = out["p_holm"]
    return out.drop(columns=WHOLE_TABLE)


def split(
    df: pd.DataFrame, confirmatory: pd.DataFrame, cfg: Mapping[str, Any], reference: str = "baseline"
) -> pd.DataFrame:
    """``df`` (a table of paired rows, e.g. Table 2 or the steps table, whose ``reference`` column names the
    compared-with run) with each row labelled ``family``: a row in ``confirmatory`` takes that family's test and
    Holm-adjusted p (``p_adj``); the others are exploratory, BH over themselves. Confirmatory rows come first."""
    if df.empty:
        return df
    primary = df.attrs.get("primary_test", cfg["primary_test"]["table2"])
    to_base = {reference: "baseline", f"{reference}_mean": "baseline_mean"} if reference != "baseline" else {}
    keyed = df.rename(columns=to_base).drop(columns=[c for c in WHOLE_TABLE if c in df.columns])
    conf = confirmatory.drop(columns=["role"], errors="ignore")
    in_family = set(map(tuple, conf[KEY].to_numpy())) if not conf.empty else set()
    is_conf = pd.Series([tuple(k) in in_family for k in keyed[KEY].to_numpy()], index=keyed.index, dtype=bool)
    explo = keyed[~is_conf].copy()
    if not explo.empty:
        explo = stats.with_primary_test(explo, primary, 1.0 - float(cfg["confidence"]))
        explo["family"], explo["correction"], explo["p_adj"] = EXPLORATORY, "bh", explo["p_bh"]
        explo = explo.drop(columns=WHOLE_TABLE)
    conf_rows = (  # the family's own test of each row, in the family's column order
        keyed.loc[is_conf, KEY].merge(conf, on=KEY, how="left")[list(conf.columns)] if in_family else conf.iloc[0:0]
    )
    out = pd.concat([conf_rows, explo], ignore_index=True)
    out = out.rename(columns={v: k for k, v in to_base.items()})
    out.attrs["primary_test"] = primary
    return out


def note(confirmatory: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """What the family column means, the family's size and the smallest adjusted p it can reach."""
    spec = cfg["confirmatory"]
    b = int(spec["permutation_resamples"])
    n = len(confirmatory)
    steps = ", ".join(f"{m} vs {ref}" for m, ref in spec["steps"])
    return (
        f"Confirmatory family (declared in `conf/analysis/default.yaml` `confirmatory` before any comparison was read): "
        f"per dataset, {', '.join(spec['versus_best_baseline'])} against the best baseline and the steps {steps}, on "
        f"{', '.join(spec['metrics'])}"
        + (
            f" (and {', '.join(spec['answer_metrics'])} where both runs generated answers)"
            if spec.get("answer_metrics")
            else ""
        )
        + f": {n} comparisons, each tested with {b:,} sign flips, Holm over these {n} alone (`p_adj`, "
        f"`family` = confirmatory). The smallest p a row can reach is 1/(B+1) = {1 / (b + 1):.1e}, so the smallest "
        f"adjusted p is {family_size_bound(cfg, n):.1e}. Every other row is exploratory: Benjamini-Hochberg within "
        "its table (`p_adj`, `family` = exploratory), a screen, not a confirmation."
    )
