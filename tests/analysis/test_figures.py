"""The figures on small hand-built runs: Figure 4's latency stack is Table 3's numbers, a mean of 0 is drawn and
labelled, a 0 ms latency sits at 0, the captions name the datasets the settings choose, and iteration 4 missing on
the held-out family is said on the figure and picked up once it exists."""

from __future__ import annotations

import json
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from analysis import figures as FG
from analysis.report import CAPTIONS, load_cfg
from analysis.tables import table3
from analysis.views import DatasetView

N = 12


@pytest.fixture(scope="module")
def cfg() -> dict:
    """The report's settings with few resamples, no reranker gates, and invented dataset names (so a caption or
    title that names a dataset must have read it from here)."""
    out = load_cfg(["bootstrap_resamples=200", "permutation_resamples=200"])
    return {**out, "rerankers": {}, "paper_dataset": "fam_held", "dev_dataset": "fam_dev"}


def per_query(ndcg: float, stages: dict[str, float], latency: float, contradiction: float = 1.0, n: int = N):
    """``n`` queries with the same scores and per-stage timings (a stage with value None is absent)."""
    rng = np.random.default_rng(int(ndcg * 100))
    df = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)]})
    df["ndcg@10"] = np.clip(ndcg + rng.normal(0, 0.05, n), 0, 1)
    df["recall@50"] = 0.9
    df["coverage@10"] = 0.8
    df["contradiction@10"] = contradiction
    df["latency_ms"] = latency
    df["timings_ms"] = [json.dumps({s: v for s, v in stages.items() if v is not None})] * n
    return df.set_index("query_id")


def run(p95: float) -> SimpleNamespace:
    return SimpleNamespace(metrics={"latency_ms": {"p95": p95}}, manifest={"config": {}}, config_hash="h")


def view(name: str, with_iter4: bool) -> DatasetView:
    queries = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(N)],
            "complexity": ["low", "medium", "high"] * (N // 3),
            "domain": ["code", "prose"] * (N // 2),
        }
    )
    pq = {
        "window": per_query(0.2, {}, 0.0),
        "bm25": per_query(0.5, {"bm25": 0.3}, 0.31),
        "lethe_iter3": per_query(0.6, {"search": 2.5, "fusion": 1.0}, 3.6),
        "lethe_iter4+contradiction_only": per_query(0.6, {"search": 2.5, "contradiction": 0.01}, 3.7, 0.5),
    }
    if with_iter4:
        # generation and judge run after the search: in Table 3, not in latency_ms (its total mean)
        pq["lethe_iter4"] = per_query(
            0.62, {"search": 9.0, "fusion": 15.5, "llm_rerank": 406.5, "generation": 272.4, "judge": 437.0}, 431.5, 0.0
        )
    runs = {m: run(float(df["latency_ms"].quantile(0.95))) for m, df in pq.items()}
    return DatasetView(name, queries, runs, pq)


def test_latency_stack_is_table3(cfg):
    """The stack's segments are Table 3's cells; the search bar ends at Table 3's total mean (431.5 here, while
    all its stage columns add up to 1140.4), and answer generation and judge are a bar of their own."""
    v = view("fam_dev", with_iter4=True)
    t3 = table3(v, cfg).set_index("method")
    fig, ax = plt.subplots()
    FG.latency_stack(ax, v, cfg, ["lethe_iter3", "lethe_iter4"], "t")
    drawn = {c.get_label(): [p.get_width() for p in c.patches] for c in ax.containers}
    plt.close(fig)
    # one bar per row, top to bottom: iter3 search, iter4 search, iter4 answer + judge
    cell = lambda m, col: float(t3.loc[m, col])  # noqa: E731
    assert drawn["retrieval"] == pytest.approx(
        [cell("lethe_iter3", "retrieval (ms)"), cell("lethe_iter4", "retrieval (ms)"), 0]
    )
    assert drawn["ml_processing"] == pytest.approx([1.0, 15.5, 0])
    assert drawn["llm_rerank"] == pytest.approx([0, cell("lethe_iter4", "llm_rerank (ms)"), 0])
    assert drawn["generation"] == pytest.approx([0, 0, cell("lethe_iter4", "generation (ms)")])
    assert drawn["evaluation"] == pytest.approx([0, 0, cell("lethe_iter4", "evaluation (ms)")])
    search = {
        m: sum(w[i] for g, w in drawn.items() if g not in ("generation", "evaluation"))
        for i, m in enumerate(["lethe_iter3", "lethe_iter4"])
    }
    for m in search:
        assert search[m] == pytest.approx(cell(m, "total mean (ms)"), abs=1e-9)
    assert cell("lethe_iter4", "total mean (ms)") == 431.5
    assert sum(
        cell("lethe_iter4", f"{g} (ms)")
        for g in ("retrieval", "ml_processing", "llm_rerank", "generation", "evaluation")
    ) == pytest.approx(1140.4)


def test_a_mean_of_zero_is_drawn_and_labelled(cfg):
    v = view("fam_dev", with_iter4=True)
    fig, ax = plt.subplots()
    FG.hbars(ax, v, "contradiction@10", cfg, FG.Styles(cfg), ["lethe_iter3", "lethe_iter4"], "t")
    zeros = [t for t in ax.texts if t.get_gid() == FG.ZERO_GID]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    plt.close(fig)
    assert len(zeros) == 1 and zeros[0].get_text() == "0"
    assert zeros[0].xy == (0, 0)  # lethe_iter4, the lower row (y = 0), not lethe_iter3 (mean 1)
    assert sorted(labels) == [f"lethe_iter3 (n={N})", f"lethe_iter4 (n={N})"]  # every row states its n


def test_zero_latency_sits_at_zero_on_a_symlog_axis(cfg):
    v = view("fam_held", with_iter4=False)
    fig, ax = plt.subplots()
    FG.pareto(ax, v, cfg, FG.Styles(cfg), "fam_held")
    xs = {c.get_label(): float(c.get_offsets()[0][0]) for c in ax.collections}
    scale, left = ax.get_xscale(), ax.get_xlim()[0]
    plt.close(fig)
    assert scale == "symlog" and left < 0
    assert xs[f"window (n={N})"] == 0.0 and xs[f"bm25 (n={N})"] == pytest.approx(0.31)


def test_captions_and_figure4_follow_the_settings(cfg, tmp_path):
    """Every caption names the datasets cfg chooses; Figure 4 says iteration 4 is not run on the paper dataset and
    draws the dev family's, until the paper dataset has a run."""
    views = {"fam_held": view("fam_held", with_iter4=False), "fam_dev": view("fam_dev", with_iter4=True)}
    fields = FG.caption_fields(views, cfg)
    caps = {k: c.format_map(fields) for k, c in CAPTIONS.items()}
    for k in ("fig1", "fig2", "fig3", "fig4", "fig6"):
        assert "fam_held" in caps[k] and "lethebench" not in caps[k], k
    assert "fam_dev (dev family: rules written against it)" in caps["fig1"]
    assert "not run on fam_held" in caps["fig4"] and "(a)-(c) draw fam_dev" in caps["fig4"]
    assert FG.iter4_dataset(views, cfg) == "fam_dev"
    fig = FG._fig4(views, cfg, FG.Styles(cfg))
    texts = [t.get_text() for a in fig.axes for t in a.texts]
    titles = [a.get_title() for a in fig.axes]
    assert overlaps(fig) == []
    plt.close(fig)
    assert "iteration 4 not run on fam_held" in texts
    assert any(t.startswith("(a) fam_dev: quality") or "(a) fam_dev" in t for t in titles)

    views["fam_held"] = view("fam_held", with_iter4=True)  # the held-out run now exists
    assert FG.iter4_dataset(views, cfg) == "fam_held"
    assert "not run" not in CAPTIONS["fig4"].format_map(FG.caption_fields(views, cfg))
    fig = FG._fig4(views, cfg, FG.Styles(cfg))
    texts = [t.get_text() for a in fig.axes for t in a.texts]
    plt.close(fig)
    assert not any("not run on" in t for t in texts)


def overlaps(fig) -> list[str]:
    """The tick labels of ``fig`` that overlap another tick label of the same axis (as drawn)."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    bad = []
    for a in fig.axes:
        for labels in (a.get_xticklabels(), a.get_yticklabels()):
            boxes = [(t.get_text(), t.get_window_extent(r)) for t in labels if t.get_visible() and t.get_text()]
            bad += [f"{s} / {t}" for i, (s, b) in enumerate(boxes) for t, c in boxes[i + 1 :] if b.overlaps(c)]
    return bad


def test_figure7_labels_do_not_overlap(cfg):
    """Figure 7 with long method names and a wide range of differences: no tick label runs into another (the
    layout before issue 56, three panels of 5.2 inches a row, overlapped 5 x tick labels on these rows)."""
    rows = [
        {"dataset": ds, "metric": "ndcg@10", "method": f"cross_encoder_alone+label_free_{i}"}
        | {"reference": "cross_encoder_alone", "n": 500, "mean_diff": -0.07 + 0.008 * i}
        | {"ci_low": -0.09 + 0.008 * i, "ci_high": -0.05 + 0.008 * i}
        for ds, k in (("fam_held", 12), ("fam_dev", 30), ("other", 5))
        for i in range(k)
    ]
    views = {d: view(d, with_iter4=False) for d in ("fam_held", "fam_dev")}
    fig = FG._fig7(views, cfg, pd.DataFrame(rows))
    titles = [a.get_title() for a in fig.axes if a.get_title()]
    assert overlaps(fig) == []
    plt.close(fig)
    assert titles[:1] == ["fam_held"] and "fam_dev (dev family: rules written against it)" in titles
