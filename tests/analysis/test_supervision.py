"""Issue 57: each method's supervision-matched best baseline is chosen among the baselines that saw at least as much
label supervision, and Table 2 tests a method against it beside the best baseline of any supervision."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis import supervision as SUP
from analysis import tables as T
from analysis.report import load_cfg
from analysis.views import DatasetView

SUPERVISION = {
    "bm25": "none",
    "hybrid": "none",
    "hybrid_tuned": "in_domain",
    "lethe_iter1": "dev_labels",
    "lethe_iter3": ["dev_labels", "in_domain"],
}
MEANS = {"bm25": 0.0, "hybrid": 0.10, "hybrid_tuned": 0.05, "lethe_iter1": 0.06, "lethe_iter3": 0.12}


@pytest.fixture(scope="module")
def cfg():
    c = load_cfg(["bootstrap_resamples=500", "permutation_resamples=500"])
    return {**c, "baselines": ["bm25", "hybrid", "hybrid_tuned"], "lethe": ["lethe_iter1", "lethe_iter3"]}


@pytest.fixture(scope="module")
def view():
    """The fixed hybrid (no label) above the tuned one (in-domain labels): a case where the two rules differ."""
    rng = np.random.default_rng(0)
    ids = pd.Index([f"q{i:02d}" for i in range(40)], name="query_id")
    base = rng.uniform(0.2, 0.6, len(ids))
    pq = {
        m: pd.DataFrame({"ndcg@10": np.clip(base + mu + rng.normal(0, 0.03, len(ids)), 0, 1)}, index=ids)
        for m, mu in MEANS.items()
    }
    runs = {
        m: SimpleNamespace(manifest={"config": {"method": {"name": m, "supervision": s}}})
        for m, s in SUPERVISION.items()
    }
    return DatasetView("toy", pd.DataFrame({"query_id": list(ids)}), runs, pq)


def test_the_best_baseline_is_chosen_among_those_with_as_much_supervision(view, cfg):
    assert T.best_baseline(view, cfg) == "hybrid"  # of any supervision
    assert T.best_baseline(view, cfg, method="lethe_iter3") == "hybrid_tuned"  # in-domain labels: only the tuned one
    assert T.best_baseline(view, cfg, method="lethe_iter1") == "hybrid_tuned"  # dev labels: at least as much
    assert T.best_baseline(view, cfg, method="bm25") == "hybrid"  # no label: every baseline


TIED = ["bm25", "hybrid", "hybrid_tuned", "cross_encoder_hybrid"]  # the hybrid declared before the reranker


def _tied(view: DatasetView) -> DatasetView:
    """``view`` plus cross_encoder_hybrid (in-domain labels) scoring every query as the hybrid does: a reranker whose
    chosen weight left the hybrid's ranking as it was (UltraDomain mix's)."""
    return DatasetView(
        "toy_tie",
        view.queries,
        {**view.runs, "cross_encoder_hybrid": view.runs["hybrid_tuned"]},
        {**view.per_query, "cross_encoder_hybrid": view.per_query["hybrid"].copy()},
    )


def test_a_tie_names_the_baseline_declared_first(view, cfg):
    """The reranker ties with the hybrid per query: the simpler one, declared first, is named, whatever the names'
    alphabetical order."""
    tied = _tied(view)
    assert T.best_baseline(tied, {**cfg, "baselines": TIED}, gated=False) == "hybrid"
    first = {**cfg, "baselines": ["bm25", "cross_encoder_hybrid", "hybrid", "hybrid_tuned"]}
    assert T.best_baseline(tied, first, gated=False) == "cross_encoder_hybrid"


def test_a_matched_baseline_with_the_best_ones_very_scores_is_not_tested_twice(view, cfg, monkeypatch):
    """Iteration 3 (in-domain labels) may not be compared with the hybrid (none) for its matched row; its matched best,
    cross_encoder_hybrid, scores every query as the hybrid does: one test, not two with one verdict each."""
    monkeypatch.setattr(T.G, "excluded_from_best", lambda v, c: {})  # the toy runs have no gate records
    both = {**cfg, "baselines": TIED}
    tied = _tied(view)
    assert T.best_baseline(tied, both, method="lethe_iter3") == "cross_encoder_hybrid"
    assert T.compared_baselines(tied, both, "lethe_iter3") == [("hybrid", T.OVERALL)]
    tied.per_query["cross_encoder_hybrid"] -= 1e-9  # other scores: tested beside it
    assert T.compared_baselines(tied, both, "lethe_iter3") == [
        ("hybrid", T.OVERALL),
        ("cross_encoder_hybrid", T.MATCHED),
    ]


def test_table2_tests_both_the_matched_and_the_overall_best_and_says_which(view, cfg):
    t2 = T.table2({"toy": view}, {**cfg, "family_metrics": ["ndcg@10"]})
    it3 = t2[t2["method"] == "lethe_iter3"]
    # the best of all first (the reference of the findings), then the matched one, never stronger
    assert list(zip(it3["baseline"], it3["versus"], strict=True)) == [
        ("hybrid", T.OVERALL),
        ("hybrid_tuned", T.MATCHED),
    ]
    assert set(it3["supervision"]) == {"dev labels (rules tuned on a dev set) + in-domain labels, cross-fitted"}
    bm25 = t2[t2["method"] == "bm25"]
    assert list(zip(bm25["baseline"], bm25["versus"], strict=True)) == [
        ("hybrid", T.OVERALL)
    ]  # one row: the two are the same


def test_a_run_made_before_the_key_existed_reads_its_method_declaration():
    v = DatasetView(
        "toy",
        pd.DataFrame(),
        {"lethe_iter3": SimpleNamespace(manifest={"config": {"method": {"name": "lethe_iter3"}}})},
    )
    assert SUP.of(v, "lethe_iter3") == ("dev_labels", "in_domain")
    ce = {"name": "cross_encoder", "model": {"train": {"regime": "label_free"}}}
    assert (
        SUP.cell(DatasetView("toy", pd.DataFrame(), {"ce": SimpleNamespace(manifest={"config": {"method": ce}})}), "ce")
        == "LLM"
    )


def test_a_reranker_and_its_control_differing_only_in_supervision_are_the_same_first_stage():
    """The sanity gates compare a reranker with its random control key by key; `supervision` describes a method (the
    cross-encoder learns from labels, its random control does not) and is not a difference between their runs."""
    from analysis.gates import mismatches

    def run(**method):
        return SimpleNamespace(
            manifest={"config": {"method": method, "run": {"k": 100}}, "dataset": {"build_key": "b"}}
        )

    ce = run(name="cross_encoder", supervision="regime", candidates=20, model={"x": 1})
    rnd = run(name="random_rerank", supervision="none", candidates=20, seed=0)
    assert mismatches(ce, rnd, own=["model", "seed"]) == []
    assert mismatches(ce, run(name="random_rerank", supervision="none", candidates=50, seed=0), own=["model", "seed"])
