"""Figures 1-7, drawn from measured runs only (PNG and PDF).

The main figures (1, 3, 5, 6) show the declared main family only (``analysis.tables.main_family``:
the baselines and the Lethe iterations, in their fixed order, each with the same style in every
figure); ablations, sweeps and side studies have their own figures (2, 4, 7). Method comparisons are
horizontal, so every method's name sits on its own row and no label can overlap another; scatter
plots name their points in a legend, never beside them. Panels whose runs do not exist yet say so.
Colour-blind-safe (the Okabe-Ito palette) and print-readable: methods and groups differ by marker
(and bars by hatch) as well as colour. Every mean carries its 95% BCa CI: breakdowns by a query column
(complexity, domain) are dot plots, one row per method, one marker per group, each with its CI.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable, Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.iteration4 import budget_points  # noqa: E402
from analysis.tables import best_baseline  # noqa: E402
from analysis.views import DatasetView, cached_mean_ci, main_family, paired_row  # noqa: E402
from lethe.core.atomic import atomic_write_bytes  # noqa: E402
from lethebench.runs import timings_frame  # noqa: E402

HATCHES = ["", "//", "\\\\", "xx", "..", "--", "++", "oo", "**", "||", "OO", "//.", "\\\\."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p", "d"]
# Okabe & Ito's colour-blind-safe palette without its black (black error bars and hatches stay visible on every
# bar), then a grey; 13 markers against 8 colours, so no two of the first 13 methods share colour and marker
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"]
plt.rcParams.update(
    {
        "font.size": 8,
        "axes.titlesize": 9,
        "figure.dpi": 110,
        "svg.hashsalt": "lethe",
        "pdf.fonttype": 42,
        "legend.fontsize": 7,
    }
)


class Styles:
    """One style per method, fixed by its place in the main family (then by first use), so a method
    looks the same in every figure."""

    def __init__(self, cfg: Mapping[str, Any]):
        self.index = {m: i for i, m in enumerate(main_family(cfg))}

    def _i(self, m: str) -> int:
        if m not in self.index:
            self.index[m] = len(self.index)
        return self.index[m]

    def bar(self, m: str) -> dict[str, Any]:
        i = self._i(m)
        return {
            "color": PALETTE[i % len(PALETTE)],
            "hatch": HATCHES[i % len(HATCHES)],
            "edgecolor": "black",
            "linewidth": 0.6,
            "error_kw": {"elinewidth": 1.2, "capthick": 1.2},
        }

    def marker(self, m: str) -> dict[str, Any]:
        i = self._i(m)
        return {
            "marker": MARKERS[i % len(MARKERS)],
            "color": PALETTE[i % len(PALETTE)],
            "edgecolors": "black",
            "linewidths": 0.6,
            "s": 36,
        }


def group_style(j: int) -> dict[str, Any]:
    """The style of the ``j``-th group (a domain, a complexity level) in a dot plot: colour and marker."""
    return {
        "marker": MARKERS[j % len(MARKERS)],
        "color": PALETTE[j % len(PALETTE)],
        "markeredgecolor": "black",
        "markeredgewidth": 0.5,
        "ecolor": PALETTE[j % len(PALETTE)],
    }


def not_yet(ax, what: str) -> None:
    """Mark a panel whose runs do not exist yet."""
    ax.text(
        0.5,
        0.5,
        f"not measured yet:\n{what}",
        ha="center",
        va="center",
        fontsize=9,
        transform=ax.transAxes,
        bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.5"},
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _ci(x: np.ndarray, cfg: Mapping[str, Any]) -> tuple[float, float, float]:
    r = cached_mean_ci(x, cfg)
    return r["mean"], r["ci_low"], r["ci_high"]


def main_methods(v: DatasetView, cfg: Mapping[str, Any]) -> list[str]:
    """The main family's methods that ran on ``v``, in the family's order."""
    return [m for m in main_family(cfg) if m in v.per_query]


def hbars(
    ax, v: DatasetView, metric: str, cfg: Mapping[str, Any], styles: Styles, methods: list[str], title: str
) -> bool:
    """Horizontal bars: mean of ``metric`` per method (top to bottom in ``methods`` order) with BCa CIs."""
    methods = [m for m in methods if metric in v.per_query[m] and v.per_query[m][metric].notna().any()]
    if not methods:
        not_yet(ax, f"{metric} on {v.name}")
        return False
    y = np.arange(len(methods))[::-1]
    for yi, m in zip(y, methods):
        mean, lo, hi = _ci(v.per_query[m][metric].dropna().to_numpy(float), cfg)
        ax.barh(yi, mean, xerr=[[mean - lo], [hi - mean]], capsize=2, height=0.7, **styles.bar(m))
    ax.set_yticks(y, methods)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.set_xlabel(f"{metric} (mean, 95% BCa CI)")
    ax.set_title(title)
    return True


def pareto(ax, v: DatasetView | None, cfg: Mapping[str, Any], styles: Styles, dataset: str) -> None:
    """nDCG@10 against P95 latency per main-family method (named in the legend), Pareto front drawn."""
    if v is None:
        not_yet(ax, f"runs on {dataset}")
        return
    pts = []
    for m in main_methods(v, cfg):
        p95 = (v.runs[m].metrics.get("latency_ms") or {}).get("p95")
        if p95 is None:
            continue
        x, y = max(float(p95), 1e-2), float(v.per_query[m]["ndcg@10"].mean())
        pts.append((x, y))
        ax.scatter(x, y, label=m, zorder=3, **styles.marker(m))
    front, best = [], -1.0
    for x, y in sorted(pts):
        if y > best:
            front.append((x, y))
            best = y
    if front:
        ax.plot(*zip(*front), color="0.4", linestyle="--", linewidth=0.8, label="Pareto front", zorder=2)
    ax.set_xscale("log")
    ax.set_xlabel("P95 latency per query on this machine (ms, log scale)")
    ax.set_ylabel("nDCG@10")
    ax.set_title(f"{dataset}: quality vs latency")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)


def group_levels(v: DatasetView, group_col: str) -> tuple[pd.Series, list]:
    """(query id -> group, the groups in display order: low/medium/high when they are levels, else sorted)."""
    groups = v.queries.set_index("query_id")[group_col]
    levels = [g for g in ["low", "medium", "high"] if g in set(groups.dropna())] or sorted(groups.dropna().unique())
    return groups, levels


def dots_by_group(
    ax,
    v: DatasetView,
    cfg: Mapping[str, Any],
    group_col: str,
    metric: str,
    title: str,
    methods: list[str],
    show_names: bool = True,
) -> list:
    """Dot plot: one row per method (top to bottom in ``methods`` order), one marker per value of a query column
    (domain, complexity) at the mean of ``metric`` over that group's queries, with its 95% BCa CI; returns the
    legend handles (one per group; the figure draws one legend for all panels)."""
    groups, levels = group_levels(v, group_col)
    if groups.isna().all():
        not_yet(ax, f"{group_col} labels on {v.name}")
        return []
    methods = [m for m in methods if metric in v.per_query[m] and v.per_query[m][metric].notna().any()]
    if not methods:
        not_yet(ax, f"{metric} on {v.name}")
        return []
    y = np.arange(len(methods))[::-1]
    step = 0.7 / max(1, len(levels))
    handles = []
    for j, g in enumerate(levels):
        xs, los, his, ys = [], [], [], []
        for yi, m in zip(y, methods):
            pq = v.per_query[m]
            vals = pq.loc[pq.index[pq.index.map(groups) == g], metric].dropna().to_numpy(float)
            if len(vals) == 0:
                continue
            mean, lo, hi = _ci(vals, cfg)
            lo, hi = (mean, mean) if np.isnan(lo) else (lo, hi)
            xs.append(mean), los.append(mean - lo), his.append(hi - mean)
            ys.append(yi + 0.35 - step * (j + 0.5))  # the groups of a method stacked inside its row
        if xs:
            handles.append(
                ax.errorbar(
                    xs,
                    ys,
                    xerr=[los, his],
                    linestyle="none",
                    capsize=1.5,
                    markersize=4,
                    elinewidth=1,
                    label=str(g),
                    **group_style(j),
                )
            )
    ax.set_yticks(y, methods)
    ax.tick_params(axis="y", labelleft=show_names)  # panels sharing the rows name them once
    for yi in y[:-1]:
        ax.axhline(yi - 0.5, color="0.9", linewidth=0.6, zorder=0)  # row separators
    ax.set_ylim(-0.5, len(methods) - 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.set_xlabel(f"{metric} (mean, 95% BCa CI)")
    ax.set_title(title)
    return handles


def budget_curve(ax, pts: pd.DataFrame, dataset: str) -> None:
    """nDCG@10 (95% BCa CI) against the rerank budget, one line per reranker model; iteration 3 on the
    same queries is the dashed line."""
    for i, (model, g) in enumerate(sorted(pts.groupby("model"), key=lambda t: t[0])):
        g = g.sort_values("budget_ms")
        x = g["budget_ms"] * (1.0 + 0.04 * (i - 1))  # models side by side at a budget: CIs never overlap
        ax.errorbar(
            x,
            g["ndcg"],
            yerr=[g["ndcg"] - g["ci_low"], g["ci_high"] - g["ndcg"]],
            marker=MARKERS[i % len(MARKERS)],
            color=PALETTE[i % len(PALETTE)],
            capsize=2,
            label=model,
            lw=1,
        )
    base = pts["iter3_same"].dropna()
    if len(base):
        ax.axhline(
            float(base.iloc[0]),
            ls="--",
            color="0.4",
            lw=0.8,
            label=f"lethe_iter3 (same {int(pts['n'].iloc[0])} queries)",
        )
    _budget_axis(ax, pts)
    ax.set_ylabel("nDCG@10 (mean, 95% BCa CI)")
    ax.set_title(f"{dataset}: quality vs LLM budget")
    ax.legend(loc="lower left")


def _budget_axis(ax, pts: pd.DataFrame) -> None:
    ax.set_xscale("log")
    ticks = sorted(pts["budget_ms"].unique())
    ax.set_xticks(ticks, [f"{t:.0f}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("LLM rerank budget per query (ms, log scale)")


def share_curve(ax, pts: pd.DataFrame, dataset: str) -> None:
    """Share of the top candidates the LLM judged within the budget, one line per model."""
    for i, (model, g) in enumerate(sorted(pts.groupby("model"), key=lambda t: t[0])):
        g = g.sort_values("budget_ms")
        ax.plot(
            g["budget_ms"],
            g["share_judged"],
            marker=MARKERS[i % len(MARKERS)],
            color=PALETTE[i % len(PALETTE)],
            lw=1,
            label=model,
        )
    _budget_axis(ax, pts)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of the top 10 judged")
    ax.set_title(f"{dataset}: what the budget buys")
    ax.legend(loc="upper left")


def frontier(ax, pts: pd.DataFrame, dataset: str) -> None:
    """Model choice: nDCG@10 against the rerank stage's P95 latency, one line per model through its
    budgets (in budget order); the models are named in the legend."""
    for i, (model, g) in enumerate(sorted(pts.groupby("model"), key=lambda t: t[0])):
        g = g.sort_values("budget_ms")
        ax.plot(
            g["rerank_p95"],
            g["ndcg"],
            marker=MARKERS[i % len(MARKERS)],
            color=PALETTE[i % len(PALETTE)],
            lw=0.8,
            label=model,
        )
    ax.set_xlabel("rerank stage P95 latency on this machine (ms)")
    ax.set_ylabel("nDCG@10 (mean)")
    ax.set_title(f"{dataset}: model-choice frontier")
    ax.legend(loc="lower left")


def latency_stack(ax, v: DatasetView, cfg: Mapping[str, Any], methods: list[str]) -> None:
    """Stacked horizontal bars: mean per-stage latency (ms) per method."""
    groups = {g: list(s) for g, s in cfg["stage_groups"].items()}
    y = np.arange(len(methods))[::-1]
    lefts = np.zeros(len(methods))
    for gi, (g, names) in enumerate(groups.items()):
        vals = []
        for m in methods:
            st = timings_frame(v.per_query[m])
            cols = [c for c in names if c in st.columns]
            vals.append(float(st[cols].fillna(0).sum(axis=1).mean()) if cols else 0.0)
        if any(vals):
            ax.barh(
                y,
                vals,
                left=lefts,
                height=0.6,
                label=g,
                color=PALETTE[gi % len(PALETTE)],
                hatch=HATCHES[gi % len(HATCHES)],
                edgecolor="black",
                linewidth=0.6,
            )
        lefts += np.array(vals)
    ax.set_yticks(y, methods)
    ax.set_xlabel("mean latency per query on this machine (ms)")
    ax.set_title(f"{v.name}: latency by stage")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False)  # below: never over a bar


def forest(ax, rows: pd.DataFrame, label: Callable[[Any], str], xlabel: str, title: str) -> None:
    """Mean differences with their BCa CIs, one row each (top to bottom in ``rows`` order)."""
    if rows.empty:
        not_yet(ax, title)
        return
    y = np.arange(len(rows))[::-1]
    ax.errorbar(
        rows["mean_diff"],
        y,
        xerr=[rows["mean_diff"] - rows["ci_low"], rows["ci_high"] - rows["mean_diff"]],
        fmt="o",
        color="black",
        ecolor="0.4",
        capsize=2,
        markersize=3,
    )
    ax.axvline(0, color="0.5", linewidth=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # few ticks: tick labels never run into each other
    ax.set_yticks(y, [label(r) for r in rows.itertuples()])
    ax.set_xlabel(xlabel)
    ax.set_title(title)


def progression(ax, v: DatasetView, cfg: Mapping[str, Any], its: list[str], base: str | None) -> None:
    """Mean nDCG@10 per Lethe iteration (95% BCa CI, n per iteration: a sampled iteration has fewer queries), and
    the best baseline's mean and CI as a line and band."""
    x = np.arange(len(its))
    ci = [_ci(v.per_query[m]["ndcg@10"].dropna().to_numpy(float), cfg) for m in its]
    mean = np.array([c[0] for c in ci])
    ax.errorbar(
        x,
        mean,
        yerr=[mean - [c[1] for c in ci], [c[2] for c in ci] - mean],
        fmt="-o",
        color=PALETTE[0],
        capsize=2,
        markeredgecolor="black",
        markeredgewidth=0.5,
        label="Lethe iteration",
    )
    if base:
        bm, blo, bhi = _ci(v.per_query[base]["ndcg@10"].dropna().to_numpy(float), cfg)
        ax.axhspan(blo, bhi, color=PALETTE[1], alpha=0.25, lw=0)
        ax.axhline(bm, color=PALETTE[1], ls="--", lw=1, label=f"best baseline: {base} (mean, 95% CI band)")
    ax.set_xticks(x, [f"{m.replace('lethe_', '')}\n(n={int(v.per_query[m]['ndcg@10'].notna().sum())})" for m in its])
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.set_ylabel("nDCG@10 (mean, 95% BCa CI)")
    ax.set_title("Progression over iterations")
    ax.legend(loc="lower right", frameon=False)


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    for path, fmt, metadata in (
        (paths[0], "png", {"Software": None}),
        (paths[1], "pdf", {"Creator": None, "Producer": None, "CreationDate": None}),
    ):
        buf = io.BytesIO()  # replaced whole (lethe.core.atomic): a crash never leaves a truncated figure
        fig.savefig(buf, format=fmt, metadata=metadata, bbox_inches="tight")
        atomic_write_bytes(path, buf.getvalue())
    plt.close(fig)
    return paths


def _grid(n: int, ncols: int, w: float, h: float):
    nrows = max(1, -(-n // ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False)
    flat = list(axes.ravel())
    for a in flat[n:]:
        a.axis("off")
    return fig, flat[:n]


def draw_all(
    views: Mapping[str, DatasetView],
    t2: pd.DataFrame,
    cfg: Mapping[str, Any],
    out_dir: Path,
    main: str = "lethebench",
    ta: pd.DataFrame | None = None,
) -> dict[str, list[Path]]:
    """Draw Figures 1-7; ``main`` is the dataset the paper's single-dataset figures are about;
    ``t2`` and ``ta`` are Table 2 and the steps-and-ablations table."""
    styles = Styles(cfg)
    v = views.get(main)
    out: dict[str, list[Path]] = {}
    has = lambda m: v is not None and m in v.per_query  # noqa: E731
    n, k = int(cfg["coverage_n"]), int(cfg["contradiction_k"])
    mm = main_methods(v, cfg) if v is not None else []
    rows_h = max(3.0, 0.28 * len(mm) + 1.0)

    # Figure 1: entity coverage (main family) and the quality/latency Pareto front
    fig, ax = plt.subplots(1, 2, figsize=(10.5, rows_h), gridspec_kw={"width_ratios": [1, 1.1]})
    if v is None:
        not_yet(ax[0], f"runs on {main}")
    else:
        hbars(ax[0], v, f"coverage@{n}", cfg, styles, mm, f"{main}: entity Coverage@{n}")
    pareto(ax[1], v, cfg, styles, main)
    fig.tight_layout()
    out["fig1"] = _save(fig, out_dir, "fig1")

    # Figure 2: iteration-2 ablation and nDCG@10 by query complexity (main family)
    fig, ax = plt.subplots(1, 2, figsize=(11, max(3.4, 0.34 * len(mm) + 1.2)), gridspec_kw={"width_ratios": [0.8, 1.2]})
    abl = [
        m for m in ("lethe_iter1", "lethe_iter2+rewrite_only", "lethe_iter2+decompose_only", "lethe_iter2") if has(m)
    ]
    if len([m for m in abl if m.startswith("lethe_iter2")]) < 2:
        not_yet(ax[0], "iteration-2 ablations (rewrite / decompose / both)")
    else:
        hbars(ax[0], v, "ndcg@10", cfg, styles, abl, "Iteration 2 ablation")
    handles = []
    if v is None:
        not_yet(ax[1], f"runs on {main}")
    else:
        handles = dots_by_group(ax[1], v, cfg, "complexity", "ndcg@10", f"{main}: nDCG@10 by query complexity", mm)
    if handles:
        ax[1].legend(handles=handles, title="complexity", loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    fig.tight_layout()
    out["fig2"] = _save(fig, out_dir, "fig2")

    # Figure 3: what learned fusion adds over static fusion (paired), and the mean per iteration against the best
    # baseline, each with its 95% BCa CI
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.0), gridspec_kw={"width_ratios": [1, 1]})
    fus = [m for m in ("lethe_iter3+alpha_only", "lethe_iter3") if has(m)] if has("lethe_iter2") else []
    diffs = pd.DataFrame([r for m in fus if (r := paired_row(v, main, m, "lethe_iter2", "ndcg@10", cfg))])
    forest(
        ax[0],
        diffs,
        lambda r: f"{r.method} (n={r.n})",
        "nDCG@10: method - lethe_iter2 (paired, 95% BCa CI)",
        "Learned fusion against static fusion (iteration 2)",
    )
    its = [m for m in cfg["lethe"] if has(m)]
    if not its:
        not_yet(ax[1], "Lethe iterations 1-4")
    else:
        progression(ax[1], v, cfg, its, best_baseline(v, cfg))
    fig.tight_layout()
    out["fig3"] = _save(fig, out_dir, "fig3")

    # Figure 4: iteration 4 (budget, what it buys, contradiction, frontier, latency by stage, per dataset)
    fig, ax = _grid(6, 3, 4.6, 3.6)
    pts = budget_points(v, cfg) if v is not None else pd.DataFrame()
    if pts.empty or pts["budget_ms"].nunique() < 2:
        not_yet(ax[0], "iteration-4 LLM budget sweep")
        not_yet(ax[1], "iteration-4 LLM budget sweep")
    else:
        budget_curve(ax[0], pts, main)
        share_curve(ax[1], pts, main)
    con = [
        m
        for m in ("lethe_iter3", "lethe_iter4+contradiction_only", "lethe_iter4+contradiction_only_rank", "lethe_iter4")
        if has(m)
    ]
    if not con:
        not_yet(ax[2], f"iteration 3/4 runs on {main}")
    else:
        hbars(ax[2], v, f"contradiction@{k}", cfg, styles, con, f"{main}: stale doc in top {k} (lower is better)")
    if pts.empty or pts["model"].nunique() < 2:
        not_yet(ax[3], "LLM model-choice frontier (iteration 4)")
    else:
        frontier(ax[3], pts, main)
    lat = [m for m in ("lethe_iter3", "lethe_iter4") if has(m)]
    if not lat:
        not_yet(ax[4], f"iteration 3/4 runs on {main}")
    else:
        latency_stack(ax[4], v, cfg, lat)
    same = []
    for ds, dv in sorted(views.items()):
        if "lethe_iter4" in dv.per_query and "lethe_iter3" in dv.per_query:
            q = dv.per_query["lethe_iter4"].index
            d = dv.per_query["lethe_iter4"]["ndcg@10"] - dv.per_query["lethe_iter3"].reindex(q)["ndcg@10"]
            lo, hi = (_ci(d.to_numpy(float), cfg)[1:]) if d.std() > 0 else (float(d.mean()), float(d.mean()))
            same.append({"dataset": ds, "mean_diff": float(d.mean()), "ci_low": lo, "ci_high": hi, "n": len(q)})
    forest(
        ax[5],
        pd.DataFrame(same),
        lambda r: f"{r.dataset} (n={r.n})",
        "nDCG@10: iter4 - iter3 on the same queries (95% BCa CI)",
        "Iteration 4 against iteration 3",
    )
    fig.tight_layout()
    out["fig4"] = _save(fig, out_dir, "fig4")

    # Figure 5: per dataset, paired differences against the best baseline, and means with CIs (main family)
    datasets = sorted(views)
    fig, ax = _grid(2 * max(1, len(datasets)), max(1, len(datasets)), 3.3, 3.4)
    if not datasets:
        not_yet(ax[0], "runs")
    for j, ds in enumerate(datasets):
        dv = views[ds]
        d = t2[(t2["dataset"] == ds) & (t2["metric"] == "ndcg@10")] if not t2.empty else pd.DataFrame()
        if not d.empty:
            d = d[d["method"].isin(main_family(cfg))]
            d = d.assign(_o=d["method"].map({m: i for i, m in enumerate(main_family(cfg))})).sort_values("_o")
        base = d["baseline"].iloc[0] if not d.empty else "best baseline"
        forest(
            ax[j],
            d,
            lambda r: f"{r.method} (d_z {r.d_z:.2f})",
            f"nDCG@10: method - {base} (95% BCa CI)",
            f"{ds}: vs best baseline",
        )
        hbars(ax[len(datasets) + j], dv, "ndcg@10", cfg, styles, main_methods(dv, cfg), f"{ds}: nDCG@10")
    fig.tight_layout()
    out["fig5"] = _save(fig, out_dir, "fig5")

    # Figure 6: LetheBench by domain (main family): four small multiples sharing the method rows, one legend
    fig, ax = plt.subplots(1, 4, figsize=(14, max(3.4, 0.34 * len(mm) + 1.4)), sharey=True)
    handles = []
    for i, (a, metric) in enumerate(zip(ax, ["ndcg@10", "recall@50", f"coverage@{n}", f"contradiction@{k}"])):
        if v is None:
            not_yet(a, f"runs on {main}")
        elif not any(metric in v.per_query[m] for m in mm):
            not_yet(a, f"{metric} on {main}")
        else:
            title = f"{metric} (lower is better)" if metric.startswith("contradiction") else metric
            handles = dots_by_group(a, v, cfg, "domain", metric, title, mm, show_names=i == 0) or handles
    if handles:
        fig.legend(
            handles=handles,
            title=f"{main} domain",
            loc="lower center",
            ncol=len(handles),
            frameon=False,
            bbox_to_anchor=(0.5, -0.01),
        )
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    out["fig6"] = _save(fig, out_dir, "fig6")

    # Figure 7: steps, ablations and side studies against their references (nDCG@10), per dataset
    ta = ta if ta is not None else pd.DataFrame()
    rows = ta[ta["metric"] == "ndcg@10"] if not ta.empty else ta
    ds7 = sorted(set(rows["dataset"])) if not rows.empty else []
    sizes = [int((rows["dataset"] == ds).sum()) for ds in ds7]
    fig, ax = _grid(max(1, len(ds7)), max(1, min(len(ds7), 3)), 5.2, max(2.6, 0.3 * max(sizes or [1]) + 1.2))
    if not ds7:
        not_yet(ax[0], "Lethe steps, ablations or side studies")
    for a, ds in zip(ax, ds7):
        r = rows[rows["dataset"] == ds]
        forest(a, r, lambda x: f"{x.method} vs {x.reference}", "nDCG@10: method - reference (95% BCa CI)", ds)
    fig.tight_layout()
    out["fig7"] = _save(fig, out_dir, "fig7")
    return out
