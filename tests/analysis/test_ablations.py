"""Lethe steps and ablations: which pairs are compared, and that they form their own family."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import tables as T
from analysis import views as V

CFG = {
    "baselines": ["bm25", "hybrid"],
    "lethe": ["lethe_iter1", "lethe_iter2", "lethe_iter3"],
    "family_metrics": ["ndcg@10"],
    "best_baseline_metric": "ndcg@10",
    "permutation_resamples": 2000,
    "seed": 0,
    "confidence": 0.95,
    "primary_test": {"table2": "randomization", "ablations": "randomization"},
}


def _pq(x: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"ndcg@10": x}, index=pd.Index([f"q{i}" for i in range(len(x))], name="query_id"))


def test_pairs_are_steps_and_variants_against_their_parent():
    methods = ["bm25", "lethe_iter1", "lethe_iter3", "lethe_iter1+no_plan", "lethe_iter2+rewrite_only", "hybrid"]
    assert T.ablation_pairs(methods, CFG) == [("lethe_iter3", "lethe_iter1"), ("lethe_iter1+no_plan", "lethe_iter1")]


def test_variants_leave_the_main_family_and_form_their_own():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 60)
    per_query = {
        "bm25": _pq(base),
        "hybrid": _pq(base * 0.9),
        "lethe_iter1": _pq(np.clip(base + 0.1, 0, 1)),
        "lethe_iter1+no_plan": _pq(base),
        "lethe_iter2": _pq(np.clip(base + 0.1, 0, 1)),
    }
    views = {"d": V.DatasetView("d", pd.DataFrame(), {}, per_query)}
    main = T.table2(views, CFG)
    assert set(main["method"]) == {"hybrid", "lethe_iter1", "lethe_iter2"}  # no variant in the main family
    abl = T.table_ablations(views, CFG)
    assert list(zip(abl["method"], abl["reference"], strict=True)) == [
        ("lethe_iter2", "lethe_iter1"),
        ("lethe_iter1+no_plan", "lethe_iter1"),
    ]
    row = abl.set_index("method").loc["lethe_iter1+no_plan"]
    assert row["mean_diff"] < 0 and row["losses"] > 0 and row["p_bonferroni"] <= 1.0
    assert abl.set_index("method").loc["lethe_iter2", "ties"] == 60  # identical scores: all ties


def test_a_sampled_method_is_paired_on_its_own_queries():
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 80)
    cfg = {**CFG, "reference_pairs": {"lethe_iter2_llm": "lethe_iter2"}}
    sample = _pq(np.clip(base[:30] + 0.05, 0, 1)).iloc[::-1]  # 30 of the 80 queries, any order
    views = {
        "d": V.DatasetView(
            "d", pd.DataFrame(), {}, {"bm25": _pq(base), "lethe_iter2": _pq(base), "lethe_iter2_llm": sample}
        )
    }
    assert "lethe_iter2_llm" not in set(T.table2(views, cfg)["method"])  # undeclared: not in the main family
    row = T.table_ablations(views, cfg).set_index("method").loc["lethe_iter2_llm"]
    assert row["reference"] == "lethe_iter2" and row["n"] == 30
    assert row["reference_mean"] == pytest.approx(base[:30].mean()) and "30-query subset" in row["notes"]


def test_runs_on_different_samples_are_paired_on_their_common_queries():
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 1, 80)
    a, b = _pq(base + 0.1).iloc[10:60], _pq(base).iloc[30:80]  # queries 10-59 and 30-79: 30 in common
    views = {"d": V.DatasetView("d", pd.DataFrame(), {}, {"lethe_iter4": b, "lethe_iter4+x": a})}
    row = T.table_ablations(views, CFG).set_index("method").loc["lethe_iter4+x"]
    assert row["n"] == 30 and "30 queries both runs scored" in row["notes"]
    assert row["mean_diff"] == pytest.approx(0.1) and row["reference_mean"] == pytest.approx(base[30:60].mean())
    full = _pq(base)  # a variant on every query against a sampled reference: the reference's queries
    views = {"d": V.DatasetView("d", pd.DataFrame(), {}, {"lethe_iter4": b, "lethe_iter4+y": full})}
    row = T.table_ablations(views, CFG).set_index("method").loc["lethe_iter4+y"]
    assert row["n"] == 50 and "reference's 50-query subset" in row["notes"]
