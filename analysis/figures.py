"""Figures 1-6 of the paper, drawn from measured runs only (PNG and PDF).

Panels whose runs do not exist yet say so on the panel. Greyscale-readable: methods differ by
hatch and marker as well as shade; CIs are drawn as error bars; axes carry units.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.iteration4 import budget_points  # noqa: E402
from analysis.tables import DatasetView, best_baseline, cached_mean_ci, method_order  # noqa: E402

HATCHES = ["", "//", "\\\\", "xx", "..", "--", "++", "oo", "**", "||", "OO"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h"]
GREYS = ["0.15", "0.35", "0.55", "0.75", "0.9", "0.25", "0.45", "0.65", "0.85", "0.05", "0.6"]
plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "figure.dpi": 110, "svg.hashsalt": "lethe",
                     "pdf.fonttype": 42})


def _style(i: int) -> dict[str, Any]:
    return {"color": GREYS[i % len(GREYS)], "hatch": HATCHES[i % len(HATCHES)], "edgecolor": "black", "linewidth": 0.6}


def not_yet(ax, what: str) -> None:
    """Mark a panel whose runs do not exist yet."""
    ax.text(0.5, 0.5, f"not measured yet:\n{what}", ha="center", va="center", fontsize=9, transform=ax.transAxes,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.5"})
    ax.set_xticks([])
    ax.set_yticks([])


def _ci(x: np.ndarray, cfg: Mapping[str, Any]) -> tuple[float, float, float]:
    r = cached_mean_ci(x, cfg)
    return r["mean"], r["ci_low"], r["ci_high"]


def bars(ax, v: DatasetView, metric: str, cfg: Mapping[str, Any], methods: list[str] | None = None, title: str = "") -> bool:
    """Mean of ``metric`` per method with BCa CIs; False (and a note) if no run has the metric."""
    methods = [m for m in (methods or method_order(list(v.per_query), cfg)) if metric in v.per_query[m]]
    if not methods:
        not_yet(ax, f"{metric} on {v.name}")
        return False
    for i, m in enumerate(methods):
        mean, lo, hi = _ci(v.per_query[m][metric].dropna().to_numpy(float), cfg)
        ax.bar(i, mean, yerr=[[mean - lo], [hi - mean]], capsize=2, **_style(i))
    ax.set_xticks(range(len(methods)), methods, rotation=30, ha="right")
    ax.set_ylabel(f"{metric} (mean, 95% BCa CI)")
    ax.set_title(title or f"{v.name}: {metric}")
    return True


def pareto(ax, views: Mapping[str, DatasetView], cfg: Mapping[str, Any], dataset: str) -> None:
    """nDCG@10 against P95 latency per method, Pareto front drawn."""
    v = views.get(dataset)
    if v is None:
        not_yet(ax, f"runs on {dataset}")
        return
    pts = []
    for i, m in enumerate(method_order(list(v.per_query), cfg)):
        p95 = (v.runs[m].metrics.get("latency_ms") or {}).get("p95")
        if p95 is None:
            continue
        y = float(v.per_query[m]["ndcg@10"].mean())
        x = max(float(p95), 1e-3)
        pts.append((x, y, m))
        ax.scatter(x, y, marker=MARKERS[i % len(MARKERS)], color="black", s=24)
        ax.annotate(m, (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
    front, best = [], -1.0
    for x, y, _ in sorted(pts):
        if y > best:
            front.append((x, y))
            best = y
    if front:
        ax.plot(*zip(*front), color="0.4", linestyle="--", linewidth=0.8, label="Pareto front")
        ax.legend(loc="lower right")
    ax.set_xscale("log")
    ax.set_xlabel("P95 latency per query (ms, log scale)")
    ax.set_ylabel("nDCG@10")
    ax.set_title(f"{dataset}: quality vs latency")


def by_group(ax, v: DatasetView, cfg: Mapping[str, Any], group_col: str, metric: str, title: str) -> None:
    """Grouped bars: ``metric`` per value of a query column (domain, complexity, category) per method."""
    groups = v.queries.set_index("query_id")[group_col]
    if groups.isna().all():
        not_yet(ax, f"{group_col} labels on {v.name}")
        return
    methods = [m for m in method_order(list(v.per_query), cfg) if metric in v.per_query[m]]
    if not methods:
        not_yet(ax, f"{metric} on {v.name}")
        return
    levels = [g for g in ["low", "medium", "high"] if g in set(groups.dropna())] or sorted(groups.dropna().unique())
    w = 0.8 / len(methods)
    for i, m in enumerate(methods):
        pq = v.per_query[m]
        vals = [float(pq.loc[pq.index[pq.index.map(groups) == g], metric].mean()) for g in levels]
        ax.bar(np.arange(len(levels)) + i * w, vals, width=w, label=m, **_style(i))
    ax.set_xticks(np.arange(len(levels)) + w * (len(methods) - 1) / 2, levels, rotation=20, ha="right")
    ax.set_ylabel(f"{metric} (mean)")
    ax.set_title(title)
    ax.legend(fontsize=6, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)  # below: never over bars


def budget_curve(ax, pts: pd.DataFrame, dataset: str) -> None:
    """nDCG@10 (95% BCa CI) against the rerank budget, one line per reranker model; the share of
    candidates judged is printed at each point; iteration 3 on the same queries is the dashed line."""
    for i, (model, g) in enumerate(sorted(pts.groupby("model"), key=lambda t: t[0])):
        g = g.sort_values("budget_ms")
        ax.errorbar(g["budget_ms"], g["ndcg"], yerr=[g["ndcg"] - g["ci_low"], g["ci_high"] - g["ndcg"]],
                    marker=MARKERS[i % len(MARKERS)], color=GREYS[i % len(GREYS)], capsize=2, label=model, lw=1)
        for _, r in g.iterrows():
            ax.annotate(f"{r['share_judged']:.0%}", (r["budget_ms"], r["ndcg"]), fontsize=6,
                        textcoords="offset points", xytext=(3, 3))
    base = pts["iter3_same"].dropna()
    if len(base):
        ax.axhline(float(base.iloc[0]), ls="--", color="0.4", lw=0.8, label=f"lethe_iter3 (same {int(pts['n'].iloc[0])} queries)")
    ax.set_xscale("log")
    ticks = sorted(pts["budget_ms"].unique())
    ax.set_xticks(ticks, [f"{t:.0f}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("LLM rerank budget per query (ms, log scale)")
    ax.set_ylabel("nDCG@10 (mean, 95% BCa CI)")
    ax.set_title(f"{dataset}: quality vs budget (labels: share judged)")
    ax.legend(fontsize=6)


def frontier(ax, pts: pd.DataFrame, dataset: str) -> None:
    """Model choice: nDCG@10 against the rerank stage's P95 latency, one point per (model, budget)."""
    for i, (model, g) in enumerate(sorted(pts.groupby("model"), key=lambda t: t[0])):
        g = g.sort_values("budget_ms")
        ax.plot(g["rerank_p95"], g["ndcg"], marker=MARKERS[i % len(MARKERS)], color=GREYS[i % len(GREYS)],
                lw=0.8, label=model)
        for _, r in g.iterrows():
            ax.annotate(f"{r['budget_ms']:.0f} ms", (r["rerank_p95"], r["ndcg"]), fontsize=6,
                        textcoords="offset points", xytext=(3, -8))
    ax.set_xlabel("rerank stage P95 latency (ms)")
    ax.set_ylabel("nDCG@10 (mean)")
    ax.set_title(f"{dataset}: model-choice frontier")
    ax.legend(fontsize=6)


def latency_stack(ax, v: DatasetView, cfg: Mapping[str, Any], methods: list[str] | None = None) -> None:
    """Stacked mean per-stage latency (ms) per method."""
    groups = {g: list(s) for g, s in cfg["stage_groups"].items()}
    methods = methods or method_order(list(v.per_query), cfg)
    bottoms = np.zeros(len(methods))
    for gi, (g, names) in enumerate(groups.items()):
        vals = []
        for m in methods:
            st = pd.DataFrame([json.loads(t) for t in v.per_query[m]["timings_ms"]])
            cols = [c for c in names if c in st.columns]
            vals.append(float(st[cols].fillna(0).sum(axis=1).mean()) if cols else 0.0)
        ax.bar(range(len(methods)), vals, bottom=bottoms, label=g, **_style(gi))
        bottoms += np.array(vals)
    ax.set_xticks(range(len(methods)), methods, rotation=30, ha="right")
    ax.set_ylabel("mean latency per query (ms)")
    ax.set_title(f"{v.name}: latency by stage")
    ax.legend(fontsize=6)


def effect_sizes(ax, t2: pd.DataFrame, metric: str) -> None:
    """Forest plot: mean difference vs the best baseline with its BCa CI, per (dataset, method)."""
    d = t2[t2["metric"] == metric] if not t2.empty else t2
    if d.empty:
        not_yet(ax, f"comparisons on {metric}")
        return
    d = d.sort_values(["dataset", "method"]).reset_index(drop=True)
    y = np.arange(len(d))
    ax.errorbar(d["mean_diff"], y, xerr=[d["mean_diff"] - d["ci_low"], d["ci_high"] - d["mean_diff"]], fmt="o",
                color="black", ecolor="0.4", capsize=2, markersize=3)
    ax.axvline(0, color="0.5", linewidth=0.8)
    ax.set_yticks(y, [f"{r.dataset}: {r.method} (d_z {r.d_z:.2f})" for r in d.itertuples()], fontsize=6)
    ax.set_xlabel(f"{metric}: mean paired difference vs best baseline (95% BCa CI)")
    ax.set_title("Effect sizes vs best baseline")


def method_cis(ax, views: Mapping[str, DatasetView], cfg: Mapping[str, Any], metric: str) -> None:
    """Mean and 95% CI of ``metric`` per (dataset, method)."""
    rows = []
    for ds, v in sorted(views.items()):
        for m in method_order(list(v.per_query), cfg):
            if metric in v.per_query[m]:
                rows.append((f"{ds}: {m}",) + _ci(v.per_query[m][metric].dropna().to_numpy(float), cfg))
    if not rows:
        not_yet(ax, metric)
        return
    y = np.arange(len(rows))
    means = np.array([r[1] for r in rows])
    ax.errorbar(means, y, xerr=[means - [r[2] for r in rows], [r[3] for r in rows] - means], fmt="s", color="black",
                ecolor="0.4", capsize=2, markersize=3)
    ax.set_yticks(y, [r[0] for r in rows], fontsize=6)
    ax.set_xlabel(f"{metric} (mean, 95% BCa CI)")
    ax.set_title(f"95% CIs per method: {metric}")


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    fig.savefig(paths[0], metadata={"Software": None})
    fig.savefig(paths[1], metadata={"Creator": None, "Producer": None, "CreationDate": None})
    plt.close(fig)
    return paths


def draw_all(views: Mapping[str, DatasetView], t2: pd.DataFrame, cfg: Mapping[str, Any], out_dir: Path,
             main: str = "lethebench") -> dict[str, list[Path]]:
    """Draw Figures 1-6; ``main`` is the dataset the paper's figures are about."""
    v = views.get(main)
    lethe = [m for m in cfg["lethe"]]
    out: dict[str, list[Path]] = {}
    has = (lambda m: v is not None and m in v.per_query)  # noqa: E731
    n, k = int(cfg["coverage_n"]), int(cfg["contradiction_k"])

    def fig(name: str, ncols: int, draw: Callable[[list], None], width: float = 4.2) -> None:
        f, axes = plt.subplots(1, ncols, figsize=(width * ncols, 4.0))
        draw(list(np.atleast_1d(axes)))
        out[name] = _save(f, out_dir, name)

    def f1(ax):
        if v is None:
            not_yet(ax[0], f"runs on {main}")
        else:
            bars(ax[0], v, f"coverage@{n}", cfg, title=f"{main}: entity Coverage@{n}")
        pareto(ax[1], views, cfg, main)

    def f2(ax):
        abl = [m for m in (v.per_query if v else {}) if m.startswith("lethe_iter2")]
        if len(abl) < 2:
            not_yet(ax[0], "iteration-2 ablations (rewrite / decompose / both)")
        else:
            bars(ax[0], v, "ndcg@10", cfg, methods=sorted(abl), title="Iteration 2 ablation")
        if v is None:
            not_yet(ax[1], f"runs on {main}")
        else:
            by_group(ax[1], v, cfg, "complexity", "ndcg@10", f"{main}: nDCG@10 by query complexity")

    def f3(ax):
        # static fusion = iteration 2 (plan alpha, fixed lambda); learned = iteration 3 and its variants
        ran = v.per_query if v else {}
        fus = (["lethe_iter2"] if "lethe_iter2" in ran else []) + sorted(m for m in ran if m.startswith("lethe_iter3"))
        if len(fus) < 2:
            not_yet(ax[0], "learned vs static fusion runs (iteration 3)")
        else:
            bars(ax[0], v, "ndcg@10", cfg, methods=fus, title="Static (iter2) vs learned fusion (iter3)")
        its = [m for m in lethe if has(m)]
        if not its:
            not_yet(ax[1], "Lethe iterations 1-4")
        else:
            base = best_baseline(v, cfg)
            bars(ax[1], v, "ndcg@10", cfg, methods=([base] if base else []) + its, title="Progression over iterations")

    def f4(ax):
        pts = budget_points(v, cfg) if v is not None else pd.DataFrame()
        if pts.empty or pts["budget_ms"].nunique() < 2:
            not_yet(ax[0], "iteration-4 LLM budget sweep")
        else:
            budget_curve(ax[0], pts, main)
        its = [m for m in ("lethe_iter3", "lethe_iter4+contradiction_only", "lethe_iter4") if has(m)]
        if not its:
            not_yet(ax[1], f"iteration 3/4 runs on {main}")
        else:
            bars(ax[1], v, f"contradiction@{k}", cfg, methods=its, title=f"{main}: stale doc in top {k} (lower is better)")
        if pts.empty or pts["model"].nunique() < 2:
            not_yet(ax[2], "LLM model-choice frontier (iteration 4)")
        else:
            frontier(ax[2], pts, main)
        if not its:
            not_yet(ax[3], f"iteration 3/4 runs on {main}")
        else:
            latency_stack(ax[3], v, cfg, methods=its)

    def f5(ax):
        effect_sizes(ax[0], t2, "ndcg@10")
        method_cis(ax[1], views, cfg, "ndcg@10")

    def f6(ax):
        if v is None:
            for a in ax:
                not_yet(a, f"runs on {main}")
            return
        for a, metric in zip(ax, ["ndcg@10", "recall@50", f"coverage@{n}", f"contradiction@{k}"]):
            if not any(metric in pq for pq in v.per_query.values()):
                not_yet(a, f"{metric} on {main}")
            else:
                by_group(a, v, cfg, "domain", metric, f"{main}: {metric} by domain")

    fig("fig1", 2, f1)
    fig("fig2", 2, f2)
    fig("fig3", 2, f3)
    fig("fig4", 4, f4, width=3.6)
    fig("fig5", 2, f5, width=5.0)
    fig("fig6", 4, f6, width=3.6)
    return out
