"""Figures 1-7, drawn from measured runs only (PNG and PDF).

Which dataset: the single-dataset figures are drawn on ``cfg["paper_dataset"]`` (the LetheBench held-out family,
which no rule-based component was written against); where the dev family (``cfg["dev_dataset"]``) adds something
(Figures 1, 3, 4, 5, 7) it is drawn beside it, labelled "dev family: rules written against it"
(:func:`family_label`). The captions are generated from the same settings (:func:`caption_fields` fills the
templates of ``analysis.report.CAPTIONS``), so a caption names the dataset its figure draws.

The main figures (1, 3, 5, 6) show the declared main family only (``analysis.tables.main_family``: the baselines
and the Lethe iterations, in their fixed order, each with the same style in every figure); ablations, sweeps and
side studies have their own figures (2, 4, 7). Method comparisons are horizontal, so every method's name sits on
its own row and no label can overlap another; scatter plots name their points in a legend, never beside them.
Panels whose runs do not exist yet say so. Every mean states its n (in its row label or legend entry); a bar of
length 0 gets a marker and a "0" label (:func:`zero_marks`); a latency of 0 ms is drawn at 0 on a symmetric-log
axis (:data:`LINTHRESH_MS`). Figure 4's latency stacks are Table 3's numbers (:func:`stage_stack`).
Colour-blind-safe (the Okabe-Ito palette) and print-readable: methods and groups differ by marker (and bars by
hatch) as well as colour. Every mean carries its 95% BCa CI: breakdowns by a query column (complexity, domain)
are dot plots, one row per method, one marker per group, each with its CI.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from analysis.iteration4 import budget_points  # noqa: E402
from analysis.tables import best_baseline, table3, timing_mark  # noqa: E402
from analysis.views import DatasetView, cached_mean_ci, main_family, paired_row  # noqa: E402
from lethe.core.atomic import atomic_write_bytes  # noqa: E402

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
DEV_LABEL = "dev family: rules written against it"
# Figure 1's latency axis is symmetric-log, linear below this many ms, so a method measured at 0 ms sits at 0
LINTHRESH_MS = 0.1
# The Table 3 stages timed after the search, outside a query's latency_ms (lethe/stages/answering.py: the answer and
# its hallucination judgment): their groups are drawn as a bar of their own beside the search's stack
AFTER_SEARCH = frozenset({"generation", "judge"})
ZERO_GID = "zero"  # the gid of a zero marker's label (tests find them by it)
LEGEND_BELOW = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), "frameon": False}  # never over a line


# ----------------------------------------------------------------------------------------------------------------
# Which dataset a figure draws, and how it is named


def paper_dataset(cfg: Mapping[str, Any]) -> str:
    """The dataset the single-dataset figures draw: ``cfg["paper_dataset"]`` (the held-out family)."""
    return str(cfg["paper_dataset"])


def dev_dataset(cfg: Mapping[str, Any]) -> str | None:
    """The dev family drawn beside it (``cfg["dev_dataset"]``; None: none)."""
    d = cfg.get("dev_dataset")
    return str(d) if d and str(d) != paper_dataset(cfg) else None


def family_label(ds: str, cfg: Mapping[str, Any]) -> str:
    """``ds`` as a figure names it: the dev family says that its rules were written against it."""
    return f"{ds} ({DEV_LABEL})" if ds == dev_dataset(cfg) else ds


def families(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> list[str]:
    """The LetheBench families a figure draws, in order: the paper dataset (whether it has runs or not), then the
    dev family where it has runs."""
    dev = dev_dataset(cfg)
    return [paper_dataset(cfg)] + ([dev] if dev is not None and dev in views else [])


def iter4_dataset(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> str | None:
    """The dataset Figure 4's iteration-4 panels draw: the paper dataset once it has a finished ``lethe_iter4`` run,
    else the dev family where it has one, else None."""
    for ds in families(views, cfg):
        if ds in views and "lethe_iter4" in views[ds].per_query:
            return ds
    return None


def frontier_points(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> tuple[str, pd.DataFrame] | None:
    """(dataset, budget points) of the first LetheBench family with iteration-4 runs of two or more reranking models
    (Figure 4's model-choice frontier: conf/reference/llm_studies.yaml declares it on one family), else None."""
    for ds in families(views, cfg):
        pts = budget_points(views[ds], cfg) if ds in views else pd.DataFrame()
        if not pts.empty and pts["model"].nunique() >= 2:
            return ds, pts
    return None


def titled(what: str, ds: str, cfg: Mapping[str, Any]) -> str:
    """A panel title naming its dataset (the dev family's label on a second line)."""
    return f"{ds}: {what}\n({DEV_LABEL})" if ds == dev_dataset(cfg) else f"{ds}: {what}"


def n_of(v: DatasetView, m: str, metric: str = "ndcg@10") -> int:
    """The number of queries with a value of ``metric`` in ``m``'s run on ``v``."""
    pq = v.per_query[m]
    return int(pq[metric].notna().sum()) if metric in pq else 0


def n_label(v: DatasetView, m: str, metric: str = "ndcg@10") -> str:
    """``m (n=...)``: a method's row label or legend entry, with its n."""
    return f"{m} (n={n_of(v, m, metric)})"


def caption_fields(
    views: Mapping[str, DatasetView], cfg: Mapping[str, Any], ta: pd.DataFrame | None = None
) -> dict[str, str]:
    """The fields of the caption templates (``analysis.report.CAPTIONS``), from the same settings and runs the
    figures are drawn from: ``paper``; ``families`` (the LetheBench families drawn as rows, top first); ``it4``
    (what Figure 4's panels draw); ``all`` (Figure 5's datasets) and ``fig7`` (Figure 7's); ``coverage``
    (Coverage@N), ``k`` (the stale-document cutoff); ``linthresh`` (Figure 1's linear range, ms)."""
    paper, fams, dev = paper_dataset(cfg), families(views, cfg), dev_dataset(cfg)
    rows = (
        f"{paper} (top row) and {family_label(fams[1], cfg)} (bottom row)"
        if len(fams) > 1
        else paper + (f"; {dev}, the dev family, has no runs" if dev else "")
    )
    it4 = iter4_dataset(views, cfg)
    fr = frontier_points(views, cfg)
    if it4 == paper:
        it4_note = f"Panels (a) and (b) draw {paper}" + (
            f"; (c) {family_label(fr[0], cfg)}, the one family the model frontier is run on."
            if fr and fr[0] != paper
            else ", and so does (c)."
        )
    elif it4 is not None:
        it4_note = (
            f"Iteration 4 is not run on {paper} (no finished lethe_iter4 run there; panel (i) says so): panels "
            f"(a)-(c) draw {family_label(it4, cfg)}, and switch to {paper} once its run is stored."
        )
    else:
        it4_note = f"No iteration-4 run on {paper}" + (f" or {dev}" if dev else "") + ": panels (a)-(c) say so."
    slots = f"Panels (d) and (g) draw {paper}" + (f"; (e) and (h) {family_label(dev, cfg)}" if dev else "")
    ds7 = _order(sorted(set(ta["dataset"])) if ta is not None and not ta.empty else [], views, cfg)
    return {
        "paper": paper,
        "families": rows,
        "it4": f"{it4_note} {slots}.",
        "all": ", ".join(family_label(d, cfg) for d in _order(sorted(views), views, cfg)) or "no dataset yet",
        "fig7": ", ".join(family_label(d, cfg) for d in ds7) or "no dataset yet",
        "coverage": f"Coverage@{int(cfg['coverage_n'])}",
        "k": str(int(cfg["contradiction_k"])),
        "linthresh": f"{LINTHRESH_MS:g}",
    }


def _order(datasets: list[str], views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> list[str]:
    """``datasets`` with the LetheBench families first (paper dataset, dev family), then the rest sorted."""
    first = [d for d in families(views, cfg) if d in datasets]
    return first + sorted(d for d in datasets if d not in first)


# ----------------------------------------------------------------------------------------------------------------
# Styles and panel helpers


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


def notice(ax, head: str, body: str) -> None:
    """A panel that only says something (e.g. that a run does not exist): ``head`` large, ``body`` wrapped below."""
    ax.axis("off")
    ax.text(
        0.5,
        0.62,
        head,
        ha="center",
        va="center",
        fontsize=11,
        fontweight="bold",
        color="#D55E00",
        transform=ax.transAxes,
        wrap=True,
    )
    ax.text(0.5, 0.35, textwrap.fill(body, 48), ha="center", va="center", fontsize=8, transform=ax.transAxes)


def zero_marks(ax, y: Any, values: Any) -> list:
    """At each bar of length 0 (drawn as nothing), a vertical marker at 0 and a "0" label; returns the labels
    (their gid is :data:`ZERO_GID`)."""
    out = []
    for yi, x in zip(np.atleast_1d(y), np.atleast_1d(values), strict=True):
        if np.isfinite(x) and x == 0:
            ax.plot([0], [yi], marker="|", markersize=11, markeredgewidth=2, color="black", zorder=4)
            t = ax.annotate("0", (0, yi), xytext=(5, 0), textcoords="offset points", va="center", fontsize=7)
            t.set_gid(ZERO_GID)
            out.append(t)
    return out


def _ci(x: np.ndarray, cfg: Mapping[str, Any]) -> tuple[float, float, float]:
    r = cached_mean_ci(x, cfg)
    return r["mean"], r["ci_low"], r["ci_high"]


def main_methods(v: DatasetView, cfg: Mapping[str, Any]) -> list[str]:
    """The main family's methods that ran on ``v``, in the family's order."""
    return [m for m in main_family(cfg) if m in v.per_query]


def hbars(
    ax, v: DatasetView, metric: str, cfg: Mapping[str, Any], styles: Styles, methods: list[str], title: str
) -> bool:
    """Horizontal bars: mean of ``metric`` per method (top to bottom in ``methods`` order) with BCa CIs, each row
    labelled with its n; a mean of 0 is marked (:func:`zero_marks`)."""
    methods = [m for m in methods if metric in v.per_query[m] and v.per_query[m][metric].notna().any()]
    ax.set_title(title)
    if not methods:
        not_yet(ax, f"{metric} on {v.name}")
        return False
    y = np.arange(len(methods))[::-1]
    means = []
    for yi, m in zip(y, methods, strict=True):
        mean, lo, hi = _ci(v.per_query[m][metric].dropna().to_numpy(float), cfg)
        lo, hi = (mean, mean) if np.isnan(lo) else (lo, hi)
        ax.barh(yi, mean, xerr=[[mean - lo], [hi - mean]], capsize=2, height=0.7, **styles.bar(m))
        means.append(mean)
    zero_marks(ax, y, means)
    ax.set_yticks(y, [n_label(v, m, metric) for m in methods])
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.set_xlabel(f"{metric} (mean, 95% BCa CI)")
    return True


def pareto(ax, v: DatasetView | None, cfg: Mapping[str, Any], styles: Styles, dataset: str) -> None:
    """nDCG@10 against P95 latency per main-family method (named in the legend with its n), Pareto front drawn.
    The latency axis is symmetric-log (linear below :data:`LINTHRESH_MS`): a 0 ms latency is drawn at 0."""
    ax.set_title(titled("quality vs latency", dataset, cfg))
    if v is None:
        not_yet(ax, f"runs on {dataset}")
        return
    pts, ns = [], set()
    for m in main_methods(v, cfg):
        p95 = (v.runs[m].metrics.get("latency_ms") or {}).get("p95")
        if p95 is None:
            continue
        x, y = float(p95), float(v.per_query[m]["ndcg@10"].mean())
        pts.append((x, y))
        ns.add(n_of(v, m))
        ax.scatter(x, y, label=n_label(v, m) + timing_mark(v, m), zorder=3, **styles.marker(m))
    if not pts:
        not_yet(ax, f"latencies on {dataset}")
        return
    front, best = [], -1.0
    for x, y in sorted(pts):
        if y > best:
            front.append((x, y))
            best = y
    ax.plot(*zip(*front, strict=True), color="0.4", linestyle="--", linewidth=0.8, label="Pareto front", zorder=2)
    ax.set_xscale("symlog", linthresh=LINTHRESH_MS, linscale=0.5)
    top = max(x for x, _ in pts)
    decades = range(int(np.floor(np.log10(LINTHRESH_MS))), int(np.ceil(np.log10(max(top, LINTHRESH_MS)))) + 1)
    ticks = [0.0] + [10.0**k for k in decades]
    ax.set_xticks(ticks, ["0"] + [f"{t:g}" for t in ticks[1:]])
    ax.minorticks_off()
    ax.set_xlim(-LINTHRESH_MS * 0.3, ticks[-1] * 1.5)
    ax.set_xlabel(f"P95 latency per query on this machine (ms; symlog, linear below {LINTHRESH_MS:g})")
    ax.set_ylabel("nDCG@10 (mean)")
    if len(ns) > 1:
        ax.set_title(ax.get_title() + f"\nn differs between methods ({', '.join(map(str, sorted(ns)))} queries)")
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
    """Dot plot: one row per method (top to bottom in ``methods`` order, labelled with its n), one marker per value
    of a query column (domain, complexity) at the mean of ``metric`` over that group's queries, with its 95% BCa CI;
    returns the legend handles (one per group, labelled with its n over every query any drawn method scored; the
    figure draws one legend for all panels)."""
    ax.set_title(title)
    groups, levels = group_levels(v, group_col)
    if groups.isna().all():
        not_yet(ax, f"{group_col} labels on {v.name}")
        return []
    methods = [m for m in methods if metric in v.per_query[m] and v.per_query[m][metric].notna().any()]
    if not methods:
        not_yet(ax, f"{metric} on {v.name}")
        return []
    scored = pd.Index(sorted(set().union(*(v.per_query[m][metric].dropna().index for m in methods))))
    group_n = scored.map(groups).value_counts()
    y = np.arange(len(methods))[::-1]
    step = 0.7 / max(1, len(levels))
    handles = []
    for j, g in enumerate(levels):
        xs, los, his, ys = [], [], [], []
        for yi, m in zip(y, methods, strict=True):
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
                    label=f"{g} (n={int(group_n.get(g, 0))})",
                    **group_style(j),
                )
            )
    if show_names:  # panels sharing the rows name them once (a shared axis has one set of tick labels)
        ax.set_yticks(y, [n_label(v, m, metric) for m in methods])
    else:
        ax.tick_params(axis="y", labelleft=False)
    for yi in y[:-1]:
        ax.axhline(yi - 0.5, color="0.9", linewidth=0.6, zorder=0)  # row separators
    ax.set_ylim(-0.5, len(methods) - 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.set_xlabel(f"{metric} (mean, 95% BCa CI)")
    return handles


def budget_curve(ax, pts: pd.DataFrame, title: str) -> None:
    """nDCG@10 (95% BCa CI) against the rerank budget, one line per reranker model (legend: model and n);
    iteration 3 on the same queries is the dashed line."""
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
            label=f"{model} (n={int(g['n'].iloc[0])})",
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
    ax.set_title(title)
    ax.legend(**LEGEND_BELOW)


def _budget_axis(ax, pts: pd.DataFrame) -> None:
    ax.set_xscale("log")
    ticks = sorted(pts["budget_ms"].unique())
    ax.set_xticks(ticks, [f"{t:.0f}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("LLM rerank budget per query (ms, log scale)")


def share_curve(ax, pts: pd.DataFrame, title: str) -> None:
    """Share of the top candidates the LLM judged within the budget, one line per model (legend: model and n)."""
    for i, (model, g) in enumerate(sorted(pts.groupby("model"), key=lambda t: t[0])):
        g = g.sort_values("budget_ms")
        ax.plot(
            g["budget_ms"],
            g["share_judged"],
            marker=MARKERS[i % len(MARKERS)],
            color=PALETTE[i % len(PALETTE)],
            lw=1,
            label=f"{model} (n={int(g['n'].iloc[0])})",
        )
    _budget_axis(ax, pts)
    ax.set_ylim(-0.02, 1)
    ax.set_ylabel("share of the top 10 judged (mean)")
    ax.set_title(title)
    ax.legend(**LEGEND_BELOW)


def frontier(ax, pts: pd.DataFrame, title: str) -> None:
    """Model choice: nDCG@10 against the rerank stage's P95 latency, one line per model through its
    budgets (in budget order); the models are named in the legend with their n."""
    for i, (model, g) in enumerate(sorted(pts.groupby("model"), key=lambda t: t[0])):
        g = g.sort_values("budget_ms")
        ax.plot(
            g["rerank_p95"],
            g["ndcg"],
            marker=MARKERS[i % len(MARKERS)],
            color=PALETTE[i % len(PALETTE)],
            lw=0.8,
            label=f"{model} (n={int(g['n'].iloc[0])})",
        )
    ax.set_xlabel("rerank stage P95 latency on this machine (ms)")
    ax.set_ylabel("nDCG@10 (mean)")
    ax.set_title(title)
    ax.legend(**LEGEND_BELOW)


def stage_stack(v: DatasetView, cfg: Mapping[str, Any], methods: list[str]) -> pd.DataFrame:
    """Table 3's numbers (:func:`analysis.tables.table3`, the one implementation of the stage grouping) for
    ``methods``, in ms, as floats (NaN = n/m): one row per method, a column per stage group, ``other`` and
    ``total mean``; ``in_total`` names the groups timed inside a query's latency (every group but those of
    :data:`AFTER_SEARCH`), ``after`` the others."""
    t3 = table3(v, cfg, marked=False).set_index("method").reindex(methods)
    out = t3.rename(columns=lambda c: c.removesuffix(" (ms)")).apply(pd.to_numeric, errors="coerce")
    groups = {g: set(s) for g, s in cfg["stage_groups"].items()}
    out.attrs["after"] = [g for g, s in groups.items() if s and s <= AFTER_SEARCH]
    out.attrs["in_total"] = [g for g in [*groups, "other"] if g not in out.attrs["after"]]
    return out


def latency_stack(ax, v: DatasetView, cfg: Mapping[str, Any], methods: list[str], title: str) -> pd.DataFrame:
    """Stacked horizontal bars of Table 3's mean per-stage latency (ms per query over all the run's queries): per
    method one bar of the stages inside its per-query latency, ending at Table 3's total mean (the part no stage
    timed is its own segment), and, where it generated answers, one bar of the stages after the search (answer
    generation, judge), which are not in that total. Returns the drawn segments (:func:`stage_stack`)."""
    st = stage_stack(v, cfg, methods)
    inside, after = st.attrs["in_total"], st.attrs["after"]
    rows: list[tuple[str, str, list[str], float]] = []  # (method, label, segments, total)
    for m in methods:
        r = st.loc[m]
        timed = float(np.nansum([r[g] for g in inside]))
        untimed = float(r["total mean"]) - timed if np.isfinite(r["total mean"]) else np.nan
        st.loc[m, "untimed"] = round(untimed, 2) if np.isfinite(untimed) and untimed > 0 else np.nan
        mark = timing_mark(v, m)
        rows.append(
            (m, f"{m}{mark}: search\n(total mean {r['total mean']:.2f} ms)", [*inside, "untimed"], r["total mean"])
        )
        if any(np.isfinite(r[g]) for g in after):
            total = float(np.nansum([r[g] for g in after]))
            rows.append((m, f"{m}{mark}: answer + judge\n(after the search, {total:.2f} ms)", after, total))
    segs = [*inside, "untimed", *after]
    y = np.arange(len(rows))[::-1]
    lefts = np.zeros(len(rows))
    for gi, g in enumerate(segs):
        vals = np.array([float(st.loc[m, g]) if g in parts else np.nan for m, _, parts, _ in rows])
        vals = np.nan_to_num(vals)
        if vals.any():
            ax.barh(
                y,
                vals,
                left=lefts,
                height=0.6,
                label=g if g != "untimed" else "untimed (total - stages)",
                color=PALETTE[gi % len(PALETTE)] if g != "untimed" else "white",
                hatch=HATCHES[gi % len(HATCHES)],
                edgecolor="black",
                linewidth=0.6,
            )
        lefts += vals
    for yi, (_, _, _, total) in zip(y, rows, strict=True):
        if np.isfinite(total):
            ax.annotate(f"{total:.2f}", (total, yi), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    zero_marks(ax, y, lefts)
    ax.set_yticks(y, [lbl for _, lbl, _, _ in rows])
    ax.set_xlim(0, max(lefts.max(), 1e-9) * 1.25)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.set_xlabel("mean latency per query on this machine (ms; Table 3)")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, frameon=False)  # below: never over a bar
    return st


def _wrap(label: str, width: int = 34) -> str:
    """A row label broken before " vs " / " (" when it is longer than ``width`` characters."""
    if len(label) <= width:
        return label
    for sep in (" vs ", " ("):
        if sep in label:
            head, tail = label.split(sep, 1)
            return f"{head}\n{sep.strip()} {tail}" if sep == " vs " else f"{head}\n({tail}"
    return label


def forest(ax, rows: pd.DataFrame, label: Callable[[Any], str], xlabel: str, title: str) -> None:
    """Mean differences with their BCa CIs, one row each (top to bottom in ``rows`` order); long labels wrapped."""
    ax.set_title(title)
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
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4, prune=None))  # few ticks: tick labels never run into each other
    ax.set_yticks(y, [_wrap(label(r)) for r in rows.itertuples()])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel(xlabel)


def progression(ax, v: DatasetView, cfg: Mapping[str, Any], its: list[str], base: str | None, title: str) -> None:
    """Mean nDCG@10 per Lethe iteration of ``its`` (95% BCa CI, n per iteration: a sampled iteration has fewer
    queries; an iteration without a run on ``v`` is a tick saying "not run"), and the best baseline's mean and CI
    as a line and band (its n in the legend)."""
    ax.set_title(title)
    x = np.arange(len(its))
    ran = [i for i, m in enumerate(its) if m in v.per_query]
    ci = [_ci(v.per_query[its[i]]["ndcg@10"].dropna().to_numpy(float), cfg) for i in ran]
    mean = np.array([c[0] for c in ci])
    ax.errorbar(
        x[ran],
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
        ax.axhline(bm, color=PALETTE[1], ls="--", lw=1, label=f"best baseline: {n_label(v, base)}\n(mean, 95% CI band)")
    ax.set_xticks(
        x,
        [
            f"{m.replace('lethe_', '')}\n(n={n_of(v, m)})"
            if m in v.per_query
            else f"{m.replace('lethe_', '')}\nnot run"
            for m in its
        ],
    )
    ax.set_xlim(-0.4, len(its) - 0.6)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.set_ylabel("nDCG@10 (mean, 95% BCa CI)")
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


def _letter(axes: list) -> None:
    """Prefix each panel's title with (a), (b), ... in order."""
    for i, a in enumerate(axes):
        a.set_title(f"({chr(ord('a') + i)}) {a.get_title()}".rstrip())


# ----------------------------------------------------------------------------------------------------------------
# The figures


def _fig1(views, cfg, styles, fams) -> Any:
    """Entity coverage and the quality/latency Pareto front, one row per LetheBench family."""
    n = int(cfg["coverage_n"])
    h = max(3.2, 0.3 * max([len(main_methods(views[d], cfg)) for d in fams if d in views] or [1]) + 1.4)
    fig, ax = plt.subplots(len(fams), 2, figsize=(11, h * len(fams)), squeeze=False, width_ratios=[1, 1.15])
    for row, ds in zip(ax, fams, strict=True):
        v = views.get(ds)
        if v is None:
            row[0].set_title(titled(f"entity Coverage@{n}", ds, cfg))
            not_yet(row[0], f"runs on {ds}")
        else:
            hbars(
                row[0], v, f"coverage@{n}", cfg, styles, main_methods(v, cfg), titled(f"entity Coverage@{n}", ds, cfg)
            )
        pareto(row[1], v, cfg, styles, ds)
    _letter(list(ax.ravel()))
    fig.tight_layout()
    return fig


def _fig2(v, cfg, styles, ds) -> Any:
    """Iteration-2 ablation and nDCG@10 by query complexity, on the paper dataset."""
    mm = main_methods(v, cfg) if v is not None else []
    fig, ax = plt.subplots(1, 2, figsize=(11.5, max(3.4, 0.34 * len(mm) + 1.2)), width_ratios=[0.85, 1.2])
    abl = [
        m
        for m in ("lethe_iter1", "lethe_iter2+rewrite_only", "lethe_iter2+decompose_only", "lethe_iter2")
        if v is not None and m in v.per_query
    ]
    if len([m for m in abl if m.startswith("lethe_iter2")]) < 2:
        ax[0].set_title(titled("iteration 2 ablation", ds, cfg))
        not_yet(ax[0], "iteration-2 ablations (rewrite / decompose / both)")
    else:
        hbars(ax[0], v, "ndcg@10", cfg, styles, abl, titled("iteration 2 ablation", ds, cfg))
    handles = []
    if v is None:
        ax[1].set_title(titled("nDCG@10 by query complexity", ds, cfg))
        not_yet(ax[1], f"runs on {ds}")
    else:
        handles = dots_by_group(
            ax[1], v, cfg, "complexity", "ndcg@10", titled("nDCG@10 by query complexity", ds, cfg), mm
        )
    if handles:
        ax[1].legend(handles=handles, title="complexity", loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    _letter(list(ax))
    fig.tight_layout()
    return fig


def _fig3(views, cfg, fams) -> Any:
    """What learned fusion adds over static fusion (paired), and the mean per iteration against the best baseline,
    one row per LetheBench family."""
    fig, ax = plt.subplots(len(fams), 2, figsize=(11, 3.3 * len(fams)), squeeze=False)
    for row, ds in zip(ax, fams, strict=True):
        v = views.get(ds)
        has = lambda m, v=v: v is not None and m in v.per_query  # noqa: E731
        fus = [m for m in ("lethe_iter3+alpha_only", "lethe_iter3") if has(m)] if has("lethe_iter2") else []
        diffs = pd.DataFrame([r for m in fus if (r := paired_row(v, ds, m, "lethe_iter2", "ndcg@10", cfg))])
        forest(
            row[0],
            diffs,
            lambda r: f"{r.method} (n={r.n})",
            "nDCG@10: method - lethe_iter2 (paired, 95% BCa CI)",
            titled("learned vs static fusion (iteration 2)", ds, cfg),
        )
        its = list(cfg["lethe"])
        if v is None or not any(has(m) for m in its):
            row[1].set_title(titled("progression over iterations", ds, cfg))
            not_yet(row[1], f"Lethe iterations on {ds}")
        else:
            progression(row[1], v, cfg, its, best_baseline(v, cfg), titled("progression over iterations", ds, cfg))
    _letter(list(ax.ravel()))
    fig.tight_layout()
    return fig


def _fig4(views, cfg, styles) -> Any:
    """Iteration 4 in a 3 x 3 grid: (a) budget, (b) what it buys on :func:`iter4_dataset`, (c) the model frontier on
    the first LetheBench family that has it;
    (d, e) the stale-document rate and (g, h) latency by stage on the paper dataset and the dev family; (f) iteration
    4 against iteration 3 per dataset; (i) a notice while the paper dataset has no iteration-4 run."""
    paper, dev, k = paper_dataset(cfg), dev_dataset(cfg), int(cfg["contradiction_k"])
    it4 = iter4_dataset(views, cfg)
    v4 = views.get(it4) if it4 else None
    pts = budget_points(v4, cfg) if v4 is not None else pd.DataFrame()
    fig, flat = _grid(9, 3, 5.6, 4.3)
    pa, pb, pc, pd_, pe, pf, pg, ph, pi = flat
    where = it4 or paper
    if pts.empty or pts["budget_ms"].nunique() < 2:
        for p, what in ((pa, "quality vs LLM budget"), (pb, "what the budget buys")):
            p.set_title(titled(what, where, cfg))
            not_yet(p, f"iteration-4 LLM budget sweep on {where}")
    else:
        budget_curve(pa, pts, titled("quality vs LLM budget", where, cfg))
        share_curve(pb, pts, titled("what the budget buys", where, cfg))
    fr = frontier_points(views, cfg)
    if fr is None:
        pc.set_title(titled("model-choice frontier", where, cfg))
        not_yet(pc, f"LLM model-choice frontier on {where}")
    else:
        frontier(pc, fr[1], titled("model-choice frontier", fr[0], cfg))
    con = ("lethe_iter3", "lethe_iter4+contradiction_only", "lethe_iter4+contradiction_only_rank", "lethe_iter4")
    for p, q, ds in ((pd_, pg, paper), (pe, ph, dev)):
        v = views.get(ds) if ds else None
        name = ds or "the dev family (dev_dataset not set)"
        ms = [m for m in con if v is not None and m in v.per_query]
        title = titled(f"stale doc in top {k} (lower is better)", name, cfg)
        if not ms:
            p.set_title(title)
            not_yet(p, f"iteration 3/4 runs on {name}")
        else:
            hbars(p, v, f"contradiction@{k}", cfg, styles, ms, title)
        lat = [m for m in ("lethe_iter3", "lethe_iter4") if v is not None and m in v.per_query]
        if not lat:
            q.set_title(titled("latency by stage", name, cfg))
            not_yet(q, f"iteration 3/4 runs on {name}")
        else:
            latency_stack(q, v, cfg, lat, titled("latency by stage", name, cfg))
    same = []
    for ds in _order(sorted(views), views, cfg):
        dv = views[ds]
        if "lethe_iter4" in dv.per_query and "lethe_iter3" in dv.per_query:
            q = dv.per_query["lethe_iter4"].index
            d = dv.per_query["lethe_iter4"]["ndcg@10"] - dv.per_query["lethe_iter3"].reindex(q)["ndcg@10"]
            lo, hi = (_ci(d.to_numpy(float), cfg)[1:]) if d.std() > 0 else (float(d.mean()), float(d.mean()))
            name = f"{ds} (dev family)" if ds == dev else ds
            same.append({"dataset": name, "mean_diff": float(d.mean()), "ci_low": lo, "ci_high": hi, "n": len(q)})
    forest(
        pf,
        pd.DataFrame(same),
        lambda r: f"{r.dataset} (n={r.n})",
        "nDCG@10: iter4 - iter3, same queries (95% BCa CI)",
        "iteration 4 against iteration 3",
    )
    if it4 != paper:
        body = (
            f"No finished lethe_iter4 run on {paper}: panels (a)-(c) draw {family_label(it4, cfg)}. They draw "
            f"{paper} once its run is stored."
            if it4
            else f"No finished lethe_iter4 run on {paper}" + (f" or {dev}." if dev else ".")
        )
        pi.set_title(f"lethe_iter4 on {paper}")
        notice(pi, f"iteration 4 not run on {paper}", body)
    else:
        pi.axis("off")
    _letter(flat if it4 != paper else flat[:8])
    fig.tight_layout()
    return fig


def _fig5(views, t2, cfg, styles) -> Any:
    """Per dataset (LetheBench families first), paired differences against the best baseline (forest), and the
    means with CIs (bars); three datasets per pair of rows."""
    datasets = _order(sorted(views), views, cfg)
    ncols = max(1, min(3, len(datasets)))
    chunks = [datasets[i : i + ncols] for i in range(0, len(datasets), ncols)] or [[]]
    nmax = max([len(main_methods(views[d], cfg)) for d in datasets] or [1])
    h = max(3.0, 0.27 * nmax + 1.3)
    fig, ax = plt.subplots(2 * len(chunks), ncols, figsize=(4.6 * ncols, h * 2 * len(chunks)), squeeze=False)
    if not datasets:
        not_yet(ax[0][0], "runs")
        ax[1][0].axis("off")
    for c, chunk in enumerate(chunks):
        for j in range(ncols):
            top, bottom = ax[2 * c][j], ax[2 * c + 1][j]
            if j >= len(chunk):
                top.axis("off"), bottom.axis("off")
                continue
            ds = chunk[j]
            dv = views[ds]
            d = t2[(t2["dataset"] == ds) & (t2["metric"] == "ndcg@10")] if not t2.empty else pd.DataFrame()
            if not d.empty:
                d = d[d["method"].isin(main_family(cfg))]
                d = d.assign(_o=d["method"].map({m: i for i, m in enumerate(main_family(cfg))})).sort_values("_o")
            base = d["baseline"].iloc[0] if not d.empty else "best baseline"
            forest(
                top,
                d,
                lambda r: f"{r.method} (n={r.n}, d_z {r.d_z:.2f})",
                f"nDCG@10: method - {base} (95% BCa CI)",
                titled("vs best baseline", ds, cfg),
            )
            hbars(bottom, dv, "ndcg@10", cfg, styles, main_methods(dv, cfg), titled("nDCG@10", ds, cfg))
    fig.tight_layout()
    return fig


def _fig6(v, cfg, ds) -> Any:
    """The paper dataset by domain (main family): four small multiples sharing the method rows (named with the n of
    the first panel), one legend (the first panel's groups and n); a panel whose metric has fewer queries (a label
    metric: labelled queries only) says its n per domain in its title."""
    n, k = int(cfg["coverage_n"]), int(cfg["contradiction_k"])
    mm = main_methods(v, cfg) if v is not None else []
    fig, ax = plt.subplots(1, 4, figsize=(15, max(3.4, 0.34 * len(mm) + 1.6)), sharey=True)
    legend: list = []
    first: list | None = None
    for _i, (a, metric) in enumerate(
        zip(ax, ["ndcg@10", "recall@50", f"coverage@{n}", f"contradiction@{k}"], strict=True)
    ):
        title = f"{metric} (lower is better)" if metric.startswith("contradiction") else metric
        if v is None:
            a.set_title(title)
            not_yet(a, f"runs on {ds}")
            continue
        if not any(metric in v.per_query[m] for m in mm):
            a.set_title(title)
            not_yet(a, f"{metric} on {ds}")
            continue
        handles = dots_by_group(a, v, cfg, "domain", metric, title, mm, show_names=first is None)
        labels = [h.get_label() for h in handles]
        if first is None:
            first, legend = labels, handles
        elif labels != first:
            groups = ", ".join(x.replace(" (n=", "\u00a0(n=") for x in labels)  # a group and its n on one line
            a.set_title(title + "\n" + textwrap.fill(f"on fewer queries: {groups}", 48), fontsize=8)
    fig.suptitle(f"{family_label(ds, cfg)}: by domain", fontsize=10)
    if legend:
        fig.legend(
            handles=legend,
            title=f"{ds} domain (queries)",
            loc="lower center",
            ncol=len(legend),
            frameon=False,
            bbox_to_anchor=(0.5, -0.01),
        )
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def _fig7(views, cfg, ta) -> Any:
    """Steps, ablations and side studies against their references (nDCG@10), one panel per dataset (LetheBench
    families first), each as tall as its rows, in two columns."""
    rows = ta[ta["metric"] == "ndcg@10"] if not ta.empty else ta
    ds7 = _order(sorted(set(rows["dataset"])) if not rows.empty else [], views, cfg)
    if not ds7:
        fig, ax = plt.subplots(figsize=(6, 2.6))
        not_yet(ax, "Lethe steps, ablations or side studies")
        return fig
    sizes = {ds: int((rows["dataset"] == ds).sum()) for ds in ds7}
    ncols = 1 if len(ds7) == 1 else 2
    cols: list[list[str]] = [[] for _ in range(ncols)]
    for ds in ds7:  # in order, each to the column with fewer rows so far
        min(cols, key=lambda c: sum(sizes[d] + 3 for d in c)).append(ds)
    row_h, extra = 0.34, 1.1
    height = max(sum(sizes[d] * row_h + extra for d in c) for c in cols)
    fig = plt.figure(figsize=(7.2 * ncols, height), layout="constrained")
    subs = fig.subfigures(1, ncols, squeeze=False)[0]
    ref = lambda x: getattr(x, "reference", getattr(x, "baseline", "?"))  # noqa: E731
    for sub, col in zip(subs, cols, strict=True):
        used = sum(sizes[d] * row_h + extra for d in col)
        ratios = [sizes[d] * row_h + extra for d in col] + ([height - used] if height - used > 0.3 else [])
        axes = sub.subplots(len(ratios), 1, height_ratios=ratios, squeeze=False)[:, 0]
        for a, ds in zip(axes, col, strict=False):  # a last spacer axis may have no dataset
            r = rows[rows["dataset"] == ds]
            forest(
                a,
                r,
                lambda x: f"{x.method} vs {ref(x)} (n={x.n})",
                "nDCG@10: method - reference (95% BCa CI)",
                family_label(ds, cfg),
            )
        for a in axes[len(col) :]:
            a.axis("off")
    return fig


def draw_all(
    views: Mapping[str, DatasetView],
    t2: pd.DataFrame,
    cfg: Mapping[str, Any],
    out_dir: Path,
    main: str | None = None,
    ta: pd.DataFrame | None = None,
) -> dict[str, list[Path]]:
    """Draw Figures 1-7 into ``out_dir`` (PNG and PDF each); returns name -> paths. The single-dataset figures draw
    ``cfg["paper_dataset"]`` (``main`` overrides it), with ``cfg["dev_dataset"]`` beside it where it helps;
    ``t2`` and ``ta`` are Table 2 and the steps-and-ablations table. Captions: :func:`caption_fields`."""
    cfg = {**cfg, "paper_dataset": main} if main is not None else cfg
    styles = Styles(cfg)
    paper = paper_dataset(cfg)
    fams = families(views, cfg)
    v = views.get(paper)
    ta = ta if ta is not None else pd.DataFrame()
    figs = {
        "fig1": lambda: _fig1(views, cfg, styles, fams),
        "fig2": lambda: _fig2(v, cfg, styles, paper),
        "fig3": lambda: _fig3(views, cfg, fams),
        "fig4": lambda: _fig4(views, cfg, styles),
        "fig5": lambda: _fig5(views, t2, cfg, styles),
        "fig6": lambda: _fig6(v, cfg, paper),
        "fig7": lambda: _fig7(views, cfg, ta),
    }
    return {name: _save(draw(), out_dir, name) for name, draw in figs.items()}
