"""What to do with an :func:`experiments.api.experiment` result: paste it, save it, look at it per query.

- :func:`plain`: the wide table with plain row labels (``dataset``, ``system`` columns, no tuples) and one cell per
  metric: the mean with its significance mark (``0.4123 +``; ``(base)`` on the baseline row) and the difference to
  the baseline with its CI (``+0.0123 [+0.0010, +0.0230]``); :func:`to_markdown` and :func:`to_latex` render it.
- :func:`save`: one file by its suffix (``.csv`` the frame as it is, ``.md``, ``.tex`` the plain table).
- :func:`plot_per_query`: one system's per-query differences to a baseline, sorted, with the mean difference and its
  BCa CI (``analysis.stats.mean_ci``), from the ``perquery=True`` frame.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lethe.core.atomic import atomic_write_text

MARK_NOTE = "+ / -: significantly better / worse than the baseline (the adjusted p of the call); (base): the baseline"


def _measures(wide: pd.DataFrame) -> list[str]:
    """The metric names of a wide comparison frame (each has a ``<name> sig`` column), in order."""
    return [c[: -len(" sig")] for c in wide.columns if isinstance(c, str) and c.endswith(" sig")]


def plain(wide: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """The wide frame of :func:`experiments.api.experiment` as a table to paste: index levels as columns, per metric
    the mean with its mark and ``Δ [CI low, CI high]``, then ``n``; folders and hashes left out."""
    if not _measures(wide):
        raise ValueError("plain() takes the wide frame of experiments.api.experiment (format='wide')")
    rows = wide.reset_index()
    out = rows[list(wide.index.names)].copy()
    for m in _measures(wide):
        sig = rows[f"{m} sig"].fillna("")
        out[m] = [
            f"{v:.{digits}f}" + (" (base)" if s == "base" else f" {s}" if s else "")
            for v, s in zip(rows[m], sig, strict=True)
        ]
        out[f"{m} Δ [CI]"] = [
            "" if pd.isna(d) else f"{d:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"
            for d, lo, hi in zip(rows[f"{m} Δ"], rows[f"{m} CI low"], rows[f"{m} CI high"], strict=True)
        ]
    out["n"] = rows["n"]
    return out


def to_markdown(wide: pd.DataFrame, digits: int = 4) -> str:
    """:func:`plain` as a Markdown table, with a line saying what the marks mean."""
    return plain(wide, digits).to_markdown(index=False) + f"\n\n{MARK_NOTE}.\n"


def to_latex(wide: pd.DataFrame, digits: int = 4) -> str:
    """:func:`plain` as a LaTeX tabular (``booktabs`` rules), its marks explained in a comment line."""
    return f"% {MARK_NOTE}\n" + plain(wide, digits).to_latex(index=False, escape=True)


def save(df: pd.DataFrame, path: str | os.PathLike, digits: int = 4) -> Path:
    """Write ``df`` (a frame of :func:`experiments.api.experiment`) to ``path`` by its suffix: ``.csv`` as it is
    (every column, full precision), ``.md`` / ``.tex`` the :func:`plain` table (wide frames). Written atomically; the
    path is returned."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        text = df.to_csv(index=df.index.names != [None])
    elif suffix == ".md":
        text = to_markdown(df, digits)
    elif suffix == ".tex":
        text = to_latex(df, digits)
    else:
        raise ValueError(f"save({str(path)!r}): the suffix must be .csv, .md or .tex")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


def per_query_differences(
    per_query: pd.DataFrame, system: str, baseline: str, metric: str, dataset: str | None = None
) -> pd.Series:
    """``system`` minus ``baseline`` per query on ``metric`` from the ``perquery=True`` frame (columns dataset,
    system, query_id and one per metric), over the queries both have, sorted ascending."""
    pq = per_query if dataset is None else per_query[per_query["dataset"] == dataset]
    if metric not in pq.columns:
        raise ValueError(f"metric {metric!r} is not a column of the per-query frame: {list(pq.columns)}")
    if pq["dataset"].nunique() > 1:
        raise ValueError(f"several datasets {sorted(pq['dataset'].unique())}: name one with dataset=")
    table = pq.pivot_table(index="query_id", columns="system", values=metric, aggfunc="first")
    missing = [s for s in (system, baseline) if s not in table.columns]
    if missing:
        raise ValueError(f"systems {missing} are not in the per-query frame: {sorted(table.columns)}")
    both = table[[system, baseline]].dropna()
    return (both[system] - both[baseline]).sort_values(kind="stable")


def plot_per_query(
    per_query: pd.DataFrame,
    system: str,
    baseline: str,
    metric: str,
    dataset: str | None = None,
    resamples: int = 10_000,
    confidence: float = 0.95,
    ax: Any = None,
) -> Any:
    """Sorted per-query differences of ``system`` to ``baseline`` on ``metric`` (one bar per query), with the mean
    difference and its BCa CI as a line and a band; the matplotlib Figure."""
    import matplotlib.pyplot as plt

    from analysis.stats import mean_ci

    diff = per_query_differences(per_query, system, baseline, metric, dataset)
    ci = mean_ci(diff.to_numpy(), resamples=resamples, confidence=confidence)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    x = np.arange(len(diff))
    ax.bar(x, diff.to_numpy(), width=1.0, color=np.where(diff.to_numpy() >= 0, "tab:blue", "tab:red"), linewidth=0)
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.axhspan(ci["ci_low"], ci["ci_high"], color="tab:gray", alpha=0.3, label=f"{confidence:.0%} BCa CI of the mean")
    ax.axhline(ci["mean"], color="tab:gray", linewidth=1.2, label=f"mean {ci['mean']:+.4f}")
    ax.set_xlabel(f"queries, sorted ({len(diff)})")
    ax.set_ylabel(f"{metric}: {system} - {baseline}")
    ax.legend(loc="upper left", fontsize="small")
    ax.figure.tight_layout()
    return ax.figure
