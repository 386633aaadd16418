"""The sanity gates of the report (analysis/gates.py) on real runs over two LoCoMo conversations.

random_rerank stands in for a reranker here (a cross-encoder needs training): shuffling BM25's top 10 is
a real reranker that makes BM25's order worse, so the gate must mark it, keep it from being the best
baseline and say so in Tables 1-2, the sanity table and the claims section. With depth 1 it returns BM25's
order (not below); started from another BM25 (k1 0.9) it is not comparable with the bm25 run, whatever
its score.
"""

from __future__ import annotations

import copy
import csv

import pytest

from analysis import gates as G
from analysis import tables as T
from analysis import views as V
from analysis.declared_runs import RunRef
from analysis.report import build_report, load_cfg
from lethebench.runs import RunFolder
from tests.conftest import TWO_CONVS

SPEC = {
    "first_stage": "bm25",
    "random": None,
    "depth": "candidates",
    "first_stage_keys": {"first_stage.k1": "k1", "first_stage.b": "b"},
    "random_keys": {"first_stage": "first_stage", "candidates": "candidates"},
}
RUNS = {  # label -> overrides
    "window": ["method=window"],
    "bm25": ["method=bm25"],
    "random_rerank": ["method=random_rerank", "method.candidates=10"],
    "random_rerank+seed1": ["method=random_rerank", "method.candidates=10", "method.seed=1", "++method.variant=seed1"],
    "random_rerank+top1": ["method=random_rerank", "method.candidates=1", "++method.variant=top1"],
    "random_rerank+k1": [
        "method=random_rerank",
        "method.candidates=10",
        "method.first_stage.k1=0.9",
        "++method.variant=k1",
    ],
}


@pytest.fixture(scope="module")
def refs(cfg_for, locomo_path) -> dict[str, RunRef]:
    from experiments.runner import run_experiment

    folders = {m: run_experiment(cfg_for(*o, f"dataset.scopes={TWO_CONVS}")) for m, o in RUNS.items()}
    ds = RunFolder(folders["bm25"]).dataset_folder
    return {m: RunRef("locomo", m, "test", f, ds, "2 conversations") for m, f in folders.items()}


@pytest.fixture(scope="module")
def base_cfg(tmp_path_factory) -> dict:
    return load_cfg(
        [f"out_dir={tmp_path_factory.mktemp('gates')}", "bootstrap_resamples=2000", "permutation_resamples=2000"]
    )


def _cfg(base: dict, rerankers: dict, baselines: list[str] | None = None) -> dict:
    cfg = copy.deepcopy(base)
    cfg["rerankers"] = rerankers
    if baselines is not None:
        cfg["baselines"] = baselines
    return cfg


def _view(cfg: dict, refs: dict[str, RunRef], labels: list[str]) -> V.DatasetView:
    return V.collect(cfg, [refs[m] for m in labels])["locomo"]


def test_a_reranker_below_its_first_stage_is_marked_and_never_the_best_baseline(base_cfg, refs):
    spec = {**SPEC, "random": "random_rerank+seed1"}
    cfg = _cfg(base_cfg, {"random_rerank": spec}, baselines=["window", "random_rerank"])
    labels = ["window", "bm25", "random_rerank", "random_rerank+seed1"]
    v = _view(cfg, refs, labels)
    g = G.gate(v, "random_rerank", cfg)
    assert g.verdict == G.V_BELOW and g.below and g.depth == 10 and g.random_depth == 10
    assert g.test["n"] == 302 and g.test["mean_diff"] < 0 and g.test["ci_high"] < 0
    assert g.test["baseline_mean"] == pytest.approx(v.per_query["bm25"]["ndcg@10"].mean())
    assert g.random_test is not None and g.random_test["n"] == 302
    # it beats window, so without the gate it would be the best baseline
    assert T.best_baseline(v, cfg, gated=False) == "random_rerank" and T.best_baseline(v, cfg) == "window"

    out = build_report(cfg, [refs[m] for m in labels]).parent
    report = (out / "report.md").read_text()
    t2 = list(csv.DictReader((out / "tables" / "table2_significance.csv").open()))
    assert t2 and {r["baseline"] for r in t2} == {"window"}
    assert {r["gate"] for r in t2 if r["method"] == "random_rerank"} == {"▼ below first stage bm25"}
    note = (
        "locomo: window (random_rerank ▼ excluded: below its first stage bm25; without the gate it would have "
        "been random_rerank)"
    )
    assert note in (out / "tables" / "table2_significance.md").read_text() and note in report
    t1 = {r["method"]: r for r in csv.DictReader((out / "tables" / "table1_locomo.csv").open())}
    col = "vs first stage (nDCG@10)"  # printed in ir_measures form (gate_metric: ndcg@10)
    assert list(t1) == ["window", "random_rerank", "random_rerank+seed1", "bm25"]  # the control after its reranker
    cell = t1["random_rerank"][col]
    assert cell == f"{g.test['mean_diff']:+.4f} vs bm25 (depth 10) ▼"
    assert t1["bm25"][col] == t1["window"][col] == "n/a"
    assert t1["random_rerank+seed1"][col] == "random control of random_rerank"
    sanity = list(csv.DictReader((out / "tables" / "table_sanity.csv").open()))
    assert len(sanity) == 1
    row = sanity[0]
    assert (
        row["reranker"],
        row["depth"],
        row["first stage"],
        row["random control"],
        row["random depth"],
        row["n"],
    ) == ("random_rerank", "10", "bm25", "random_rerank+seed1", "10", "302")
    assert row["verdict"].startswith("▼ below first stage")
    assert "## Sanity gates" in report and "| locomo | random_rerank | 10 | bm25 |" in report
    claims = report.split("## Claims: verdicts", 1)[1]
    assert "locomo: random_rerank (depth 10) scores nDCG@10" in claims
    assert "once rerankers below their own first stage are left out (locomo: window)" in claims


def test_no_mark_when_not_below_or_not_comparable(base_cfg, refs):
    cfg = _cfg(
        base_cfg,
        {"random_rerank+top1": SPEC, "random_rerank+k1": SPEC},
        baselines=["window", "random_rerank+top1", "random_rerank+k1"],
    )
    v = _view(cfg, refs, ["window", "bm25", "random_rerank+top1", "random_rerank+k1"])
    top1 = G.gate(v, "random_rerank+top1", cfg)
    assert top1.verdict == G.V_NO_DIFF and top1.depth == 1  # CI [0, 0] holds 0
    assert top1.test["mean_diff"] == 0 and top1.test["ties"] == 302
    k1 = G.gate(v, "random_rerank+k1", cfg)
    assert k1.test["mean_diff"] < 0  # it is below bm25, but it did not start from that bm25: no verdict on it
    assert k1.verdict == G.V_NOT_COMPARABLE and k1.notes == ["first stage: first_stage.k1=0.9 vs k1=1.2"]
    assert G.excluded_from_best(v, cfg) == {}
    assert G.first_stage_cell(v, "random_rerank+top1", cfg) == "+0.0000 vs bm25 (depth 1)"
    assert G.first_stage_cell(v, "random_rerank+k1", cfg) == "not comparable (bm25, depth 10)"
    assert "without the gate" not in T.best_baseline_note({"locomo": v}, cfg)


def test_first_stage_not_run_and_own_keys(base_cfg, refs, tmp_path):
    cfg = _cfg(base_cfg, {"random_rerank": SPEC})
    never = RunRef("locomo", "bm25", "test", tmp_path / "bm25" / "000000000000", refs["bm25"].dataset_folder)
    v = V.collect(cfg, [refs["window"], refs["random_rerank"], never])["locomo"]
    g = G.gate(v, "random_rerank", cfg)
    assert g.verdict == G.V_NOT_RUN and g.test is None and not g.below
    # own_keys: every method key but the reranker's own must match (as lethe_iter4 against lethe_iter3)
    own = {"first_stage": "random_rerank", "random": None, "depth": "candidates"}
    v = _view(cfg, refs, ["random_rerank", "random_rerank+seed1"])
    ok = G.gate(v, "random_rerank+seed1", _cfg(base_cfg, {"random_rerank+seed1": {**own, "own_keys": ["seed"]}}))
    assert ok.verdict in (G.V_OK, G.V_BELOW, G.V_NO_DIFF) and ok.test["n"] == 302
    bad = G.gate(
        v, "random_rerank+seed1", _cfg(base_cfg, {"random_rerank+seed1": {**own, "own_keys": ["first_stage"]}})
    )
    assert bad.verdict == G.V_NOT_COMPARABLE and bad.notes == ["first stage: method.seed differs"]


def test_declarations_are_checked(base_cfg):
    with pytest.raises(ValueError, match="exactly one of first_stage_keys and own_keys"):
        G.declared({"rerankers": {"x": {"first_stage": "bm25", "depth": "candidates"}}})
    with pytest.raises(ValueError, match="needs first_stage and depth"):
        G.declared({"rerankers": {"x": {"first_stage": "bm25", "own_keys": ["a"]}}})
    # the shipped declaration: the cross-encoder against BM25 with its random control, iteration 4 against 3
    assert G.declared(base_cfg)["cross_encoder"]["random"] == "random_rerank"
    assert G.declared(base_cfg)["lethe_iter4"]["first_stage"] == "lethe_iter3"
    order = V.method_order(["random_rerank", "mmr", "cross_encoder", "bm25"], base_cfg)
    assert order == ["bm25", "cross_encoder", "random_rerank", "mmr"]


def test_the_regime_table_sets_each_variant_beside_the_first_stage_and_states_the_finding(refs, base_cfg):
    from analysis import ce_selection as CS

    cfg = _cfg(base_cfg, {"random_rerank": {**SPEC, "random": None}})
    views = V.collect(cfg, [refs[m] for m in ("bm25", "random_rerank", "random_rerank+seed1", "random_rerank+top1")])
    table = CS.regime_table(views, cfg, reranker="random_rerank")
    assert list(table.columns) == [
        "dataset",
        "first stage (bm25)",
        "random (None)",
        "random_rerank (default)",
        "seed1",
        "top1",
    ]
    row = table.iloc[0]
    bm25 = float(views["locomo"].per_query["bm25"]["ndcg@10"].mean())
    assert float(row["first stage (bm25)"]) == pytest.approx(bm25, abs=5e-5)
    assert float(row["seed1"]) < bm25 and float(row["top1"]) == pytest.approx(bm25, abs=5e-5)  # depth 1: BM25's order
    # the default (shuffled top 10) is below BM25 while the top1 variant (BM25's own order) reaches it
    assert CS.regime_finding(table).startswith("On locomo (top1), the default is below its first stage")
    shuffled = V.collect(cfg, [refs[m] for m in ("bm25", "random_rerank", "random_rerank+seed1")])
    finding = CS.regime_finding(CS.regime_table(shuffled, cfg, reranker="random_rerank"))
    assert finding.startswith("Finding: on locomo, no training regime")
    assert CS.regime_table(V.collect(cfg, [refs["bm25"], refs["random_rerank"]]), cfg, reranker="random_rerank").empty


def test_a_ci_that_holds_zero_is_no_detectable_difference():
    """Below (or above) only when the CI excludes 0 on that side: a negative point estimate whose CI holds 0 (as the
    UltraDomain cs cross-encoder's -0.0037 [-0.0176, +0.0091]) is no detectable difference, and not excluded."""
    words = ("below", "above", "neither")
    assert G.side({"mean_diff": -0.0037, "ci_low": -0.0176, "ci_high": 0.0091}, *words) == "neither"
    assert G.side({"mean_diff": -0.02, "ci_low": -0.03, "ci_high": -0.001}, *words) == "below"
    assert G.side({"mean_diff": 0.02, "ci_low": 0.001, "ci_high": 0.03}, *words) == "above"
    assert G.side({"ci_low": float("nan"), "ci_high": float("nan")}, *words) == "neither"
    g = G.Gate("d", "r", "bm25", G.side({"ci_low": -0.0176, "ci_high": 0.0091}, G.V_BELOW, G.V_OK, G.V_NO_DIFF))
    assert g.verdict == G.V_NO_DIFF and not g.below
