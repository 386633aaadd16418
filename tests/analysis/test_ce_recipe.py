"""analysis/ce_recipe.py: recipe-dev queries are whole groups; the recipe is chosen on them and every candidate is
reported on the other queries only, on constructed per-query scores where the two disagree."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis import ce_recipe as CR
from analysis.views import DatasetView

CFG = {
    "ce_recipe": {
        "reranker": "ce",
        "candidates": ["ce", "ce_alone", "ce+other"],
        "metric": "ndcg@10",
        "share": 0.2,
        "seed": 0,
    },
    "rerankers": {"ce": {"first_stage": "bm25", "random": "rnd"}},
    "permutation_resamples": 2000,
    "bootstrap_resamples": 2000,
    "seed": 0,
    "confidence": 0.95,
}


def _view(scores: dict[str, np.ndarray], groups: list[str]) -> DatasetView:
    ids = [f"q{i:03d}" for i in range(len(groups))]
    queries = pd.DataFrame({"query_id": ids, "scope_id": "s", "gold_group": groups})
    runs = {
        m: SimpleNamespace(
            manifest={
                "method": {"model": {"regime": "in_domain"}, "interpolation": {"mode": "dev" if m == "ce" else "none"}}
            }
        )
        for m in scores
    }
    pq = {m: pd.DataFrame({"ndcg@10": s}, index=pd.Index(ids, name="query_id")) for m, s in scores.items()}
    return DatasetView("d", queries, runs, pq)


def test_recipe_dev_keeps_groups_whole_and_takes_about_the_share():
    groups = [f"g{i // 3}" for i in range(60)]  # 20 groups of 3 queries
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(60)], "scope_id": "s"})
    dev, how = CR.recipe_dev_ids(q, dict(zip(q["query_id"], groups, strict=True)), 0.2, 0)
    assert how == "gold document" and len(dev) == 12  # 4 of 20 groups
    by_group = {g: {q for q, gg in zip(q["query_id"], groups, strict=True) if gg == g} for g in set(groups)}
    assert all(m <= dev or not m & dev for m in by_group.values())
    assert CR.recipe_dev_ids(q, dict(zip(q["query_id"], groups, strict=True)), 0.2, 0)[0] == dev  # seeded
    with pytest.raises(ValueError, match="share"):
        CR.recipe_dev_ids(q, {}, 0.7, 0)


def test_the_choice_reads_recipe_dev_and_the_report_reads_only_the_rest():
    n = 100
    groups = [f"g{i}" for i in range(n)]
    probe = _view({"ce": np.zeros(n)}, groups)
    dev, _ = CR.recipe_dev_ids(probe.queries, dict(zip(probe.queries["query_id"], groups, strict=True)), 0.2, 0)
    on_dev = probe.queries["query_id"].isin(dev).to_numpy()
    # ce_alone wins on recipe-dev only; ce wins on the reported queries
    ce = np.where(on_dev, 0.4, 0.6)
    alone = np.where(on_dev, 0.9, 0.1)
    rng = np.random.default_rng(1)
    bm25 = np.clip(0.5 + rng.normal(0, 0.05, n), 0, 1)
    view = _view({"ce": ce, "ce_alone": alone, "bm25": bm25, "rnd": np.full(n, 0.2)}, groups)
    t = CR.recipe_table({"d": view}, CFG).set_index("candidate")
    assert list(t.index) == ["ce", "ce_alone"]  # ce+other has no run here
    assert t.loc["ce_alone", "chosen"] == "yes" and t.loc["ce", "chosen"] == ""
    assert (t["recipe-dev n"] == len(dev)).all() and (t["reported n"] == n - len(dev)).all()
    assert t.loc["ce", "reported ndcg@10"] == "0.6000" and t.loc["ce_alone", "reported ndcg@10"] == "0.1000"
    want = bm25[~on_dev].mean()
    assert t.loc["ce", "bm25 ndcg@10"] == f"{want:.4f}"
    assert t.loc["ce_alone", "- bm25 [95% CI]"].startswith(f"{0.1 - want:+.4f}")
    assert t.loc["ce", "- rnd [95% CI]"].startswith("+0.4000")
    assert "ce_alone chosen, below bm25" in CR.finding(t.reset_index(), CFG)
