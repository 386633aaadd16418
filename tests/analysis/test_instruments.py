"""The hallucination judge's validation rule (analysis/instruments.py) on constructed study documents (pass, fail on
each criterion, missing study), the marked cells of Table 1 and the iteration-4 table, and the rule's outcome on the
stored validation studies under every conventional threshold (the config comment's claim)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis import instruments as INS
from analysis import stats
from analysis.iteration4 import hallucination_cell, iteration4_table
from analysis.report import load_cfg
from analysis.tables import table1
from analysis.views import DatasetView
from lethe.core.paths import PROJECT_ROOT

RULE = {"model": "m", "studies": ["jv_a", "jv_b"], "min_accuracy": 0.5, "min_kappa": 0.61}
CFG = {
    "confidence": 0.95,
    "bootstrap_resamples": 200,
    "seed": 0,
    "contradiction_k": 10,
    "coverage_n": 10,
    "gate_metric": "ndcg@10",
    "baselines": ["bm25"],
    "lethe": ["lethe_iter4"],
    "rerankers": {},
    "instruments": {"hallucination_judge": RULE},
}
PERTURBATIONS = ("date", "entity", "number", "other_answer")


def row(pert: str, label: str, correct: int, n: int, model: str = "m", **kw) -> dict:
    return {"judge": "hallucination", "model": model, "perturbation": pert, "label": label, "n": n, "judged": n,
            "correct": correct, **kw}  # fmt: skip


def doc(gold=(70, 77), unsup=(19, 20), kappa=0.8, model="m") -> dict:
    """A study document like experiments/studies/judge_validation.py's: the gold items, four perturbations (each
    ``unsup`` unless a dict per perturbation), the pooled row with kappa, and a pairwise row that must be ignored."""
    per = unsup if isinstance(unsup, dict) else dict.fromkeys(PERTURBATIONS, unsup)
    rows = [row("gold", "supported", *gold, model=model)]
    rows += [row(p, "unsupported", *per[p], model=model) for p in PERTURBATIONS]
    k = gold[0] + sum(c for c, _ in per.values())
    n = gold[1] + sum(m for _, m in per.values())
    rows.append(row("all", "supported/unsupported", k, n, model=model, cohen_kappa=kappa))
    rows.append({"judge": "pairwise", "model": model, "perturbation": "all", "accuracy_low": 0.0, "n": 5})
    return {"meta": {}, "rows": rows}


def test_wilson_pass_is_the_lower_bound_of_stats_proportion_ci():
    for k, n in ((15, 20), (14, 20), (29, 77), (41, 69)):
        ci, ok = INS.wilson_pass(k, n, 0.5)
        assert ci == stats.proportion_ci(k, n, 0.95) and ok == (ci["ci_low"] >= 0.5)
    assert INS.wilson_pass(15, 20, 0.5)[1] and not INS.wilson_pass(14, 20, 0.5)[1]  # 0.531 vs 0.481
    assert not INS.wilson_pass(0, 0, 0.0)[1]  # nothing judged never passes


def test_a_judge_good_on_every_criterion_passes():
    assert INS.hallucination_judge_unfit(CFG, {"jv_a": doc(), "jv_b": doc()}) is None


def test_gold_accuracy_below_chance_fails_naming_the_study_and_numbers():
    why = INS.hallucination_judge_unfit(CFG, {"jv_a": doc(gold=(29, 77)), "jv_b": doc()})
    assert why is not None and not why.startswith(INS.NOT_VALIDATED)
    assert "on jv_a" in why and "jv_b" not in why and "0.38 [0.28, 0.49] on 77 gold" in why
    assert INS.judge_mark(why) == INS.MARK_FAILED


def test_a_point_estimate_above_the_bar_is_not_enough():
    # 41 of 69 gold items: 0.59, but the Wilson lower bound is 0.48 (the stored TechQA study's numbers)
    why = INS.hallucination_judge_unfit(CFG, {"jv_a": doc(), "jv_b": doc(gold=(41, 69))})
    assert why is not None and "0.59 [0.48, 0.70] on 69 gold" in why


def test_a_judge_calling_everything_unsupported_fails_on_gold_though_perfect_on_perturbations():
    why = INS.hallucination_judge_unfit(CFG, {"jv_a": doc(gold=(0, 77), unsup=(20, 20), kappa=0.0), "jv_b": doc()})
    assert "gold" in why and "perturbed" not in why and "kappa 0.00 < 0.61" in why


def test_perturbations_are_pooled_before_the_bound():
    # date perfect, the rest hopeless: pooled 23/80, lower bound far below 0.5
    per = {"date": (20, 20), "entity": (1, 20), "number": (1, 20), "other_answer": (1, 20)}
    why = INS.hallucination_judge_unfit(CFG, {"jv_a": doc(unsup=per), "jv_b": doc()})
    assert "on 80 perturbed (unsupported) answers" in why
    # each perturbation at 15/20 (lower bound 0.53 alone) pools to 60/80 and passes
    assert INS.hallucination_judge_unfit(CFG, {"jv_a": doc(unsup=(15, 20)), "jv_b": doc()}) is None


def test_kappa_below_the_bar_fails_alone_and_an_undefined_kappa_fails():
    assert INS.hallucination_judge_unfit(CFG, {"jv_a": doc(kappa=0.5), "jv_b": doc()}).endswith(
        "Cohen's kappa 0.50 < 0.61"
    )
    assert "kappa undefined" in INS.hallucination_judge_unfit(CFG, {"jv_a": doc(kappa=None), "jv_b": doc()})
    no_kappa = {**CFG, "instruments": {"hallucination_judge": {**RULE, "min_kappa": None}}}
    assert INS.hallucination_judge_unfit(no_kappa, {"jv_a": doc(kappa=0.1), "jv_b": doc()}) is None


def test_a_missing_study_or_model_leaves_the_judge_not_validated():
    for studies in (None, {}, {"jv_a": doc()}):
        why = INS.hallucination_judge_unfit(CFG, studies)
        assert why.startswith(INS.NOT_VALIDATED) and INS.judge_mark(why) == INS.MARK_UNVALIDATED
    assert "jv_b" in INS.hallucination_judge_unfit(CFG, {"jv_a": doc()})
    why = INS.hallucination_judge_unfit(CFG, {"jv_a": doc(), "jv_b": doc(model="other")})
    assert why.startswith(INS.NOT_VALIDATED) and "did not judge m" in why
    # no declared rule: nothing to check
    assert INS.hallucination_judge_unfit({"confidence": 0.95}, None) is None


def _answered(supported: list) -> pd.DataFrame:
    n = len(supported)
    return pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(n)],
            "ndcg@10": [0.1 * (i % 10) for i in range(n)],
            "recall@50": [0.5] * n,
            "latency_ms": [10.0] * n,
            "timings_ms": ["{}"] * n,
            "flags": [json.dumps({"generation": {"judge_status": "ok"}})] * n,
            "answer_status": ["ok"] * n,
            "answer_supported": supported,
            "answer_f1": [0.1 * (i % 7) for i in range(n)],
            "answer_em": [float(i % 4 == 0) for i in range(n)],
            "answer_rouge_l": [0.05 * (i % 5) for i in range(n)],
        }
    ).set_index("query_id")


FAILED = {"jv_a": doc(gold=(29, 77)), "jv_b": doc()}


def test_the_hallucination_cell_shows_wilson_interval_n_and_the_mark():
    pq = _answered([True] * 21 + [False] * 7)  # 7 of 28 unsupported
    ci = stats.proportion_ci(7, 28, 0.95)
    want = f"0.2500 [{ci['ci_low']:.4f}, {ci['ci_high']:.4f}] n=28"
    unfit = INS.hallucination_judge_unfit(CFG, FAILED)
    assert hallucination_cell(pq, CFG, unfit) == f"{want} ⚠ judge failed validation"
    assert hallucination_cell(pq, CFG, INS.hallucination_judge_unfit(CFG, None)) == f"{want} ⚠ judge not validated"
    assert hallucination_cell(pq, CFG, None) == want


def _run() -> SimpleNamespace:
    return SimpleNamespace(metrics={}, manifest={"config": {"method": {}}}, config_hash="h")


def test_table1_marks_the_hallucination_cell_and_its_footnote_only_where_a_rate_is_printed():
    v = DatasetView(
        "ds",
        pd.DataFrame(),
        {"bm25": _run(), "lethe_iter4": _run()},
        {"bm25": _answered([True]).drop(columns=["answer_supported"]), "lethe_iter4": _answered([True] * 3 + [False])},
    )
    t = table1(v, CFG, FAILED).set_index("method")
    assert t.loc["bm25", "Hallucination"] == "n/m"
    assert t.loc["lethe_iter4", "Hallucination"].endswith("n=4 ⚠ judge failed validation")
    unfit = INS.hallucination_judge_unfit(CFG, FAILED)
    note = INS.marked_footnote(t.reset_index(), unfit)
    assert note.startswith("⚠ judge failed validation:") and "on jv_a" in note
    assert INS.marked_footnote(t.reset_index().loc[[0]], unfit) == ""  # no rate printed, no footnote
    assert (
        "⚠"
        not in table1(v, CFG, {"jv_a": doc(), "jv_b": doc()}).set_index("method").loc["lethe_iter4", "Hallucination"]
    )


def test_iteration4_table_prints_every_answer_metric_with_its_interval():
    pq = _answered([True] * 15 + [False] * 5)
    v = DatasetView("ds", pd.DataFrame(), {"lethe_iter4": _run()}, {"lethe_iter4": pq})
    t = iteration4_table({"ds": v}, CFG, FAILED).set_index("method").loc["lethe_iter4"]
    f1 = stats.mean_ci(pq["answer_f1"].to_numpy(), 200, 0.95, 0)
    assert t["answer F1 [95% CI]"] == f"{f1['mean']:.4f} [{f1['ci_low']:.4f}, {f1['ci_high']:.4f}] n=20"
    em = stats.proportion_ci(5, 20, 0.95)  # i % 4 == 0 for i < 20
    assert t["EM [95% Wilson CI]"] == f"0.2500 [{em['ci_low']:.4f}, {em['ci_high']:.4f}] n=20"
    assert t["ROUGE-L [95% CI]"].count("[") == 1 and t["ROUGE-L [95% CI]"].endswith("n=20")
    assert t["similarity [95% CI]"] == "n/m"  # the run has no similarity column
    assert t["hallucination [95% Wilson CI] n judged"].endswith("n=20 ⚠ judge failed validation")
    # one answer: no interval can be estimated, and the cell says so instead of printing a bare mean
    one = iteration4_table({"ds": DatasetView("ds", pd.DataFrame(), {"lethe_iter4": _run()},
                                              {"lethe_iter4": _answered([True])})}, CFG, FAILED)  # fmt: skip
    assert "[no CI: n < 2" in one.loc[0, "answer F1 [95% CI]"]


def test_validation_table_and_section_show_each_criterion_and_the_verdict():
    t = INS.validation_table(CFG, {"jv_a": doc(gold=(29, 77)), "jv_b": doc()})
    a = t[t["study"] == "jv_a"].set_index("items")
    assert a.loc["gold answers", "holds"] == "NO" and a.loc["perturbed, pooled", "holds"] == "yes"
    assert a.loc["gold answers", "accuracy [95% Wilson CI]"].startswith("0.3766 [0.2767, 0.4883]")
    assert a.loc["all items", "Cohen's kappa"] == "0.8000" and a.loc["all items", "holds"] == "yes"
    assert a.loc["perturbed: date", "holds"] == ""  # per-perturbation rows are shown, not judged by the rule
    sec = INS.validation_section(CFG, {"jv_a": doc(gold=(29, 77)), "jv_b": doc()})
    assert "**judge failed validation**" in sec and "| jv_a | gold answers |" in sec
    assert "not run (n/m†)" in INS.validation_section(CFG, {"jv_a": doc()})
    assert "**passed**" in INS.validation_section(CFG, {"jv_a": doc(), "jv_b": doc()})


STORE = PROJECT_ROOT / "results" / "reference" / "judges" / "studies"


@pytest.mark.skipif(not STORE.is_dir(), reason="no stored judge validation studies")
def test_the_stored_judge_fails_under_every_conventional_threshold():
    """The config comment's claim: the outcome does not hinge on the bars (accuracy bound at or above chance,
    kappa from Landis-Koch "moderate" up), and the declared rule fails the judge on the stored studies."""
    cfg = load_cfg()
    rule = cfg["instruments"]["hallucination_judge"]
    studies = {n: json.loads((STORE / n / "judge_validation.json").read_text()) for n in rule["studies"]}
    assert INS.judge_mark(INS.hallucination_judge_unfit(cfg, studies)) == INS.MARK_FAILED
    for acc in (0.5, 0.6, 0.7, 0.8):
        for kappa in (0.0, 0.21, 0.41, 0.6, 0.61, 0.667, 0.8):
            alt = {**cfg, "instruments": {"hallucination_judge": {**rule, "min_accuracy": acc, "min_kappa": kappa}}}
            assert INS.hallucination_judge_unfit(alt, studies) is not None, (acc, kappa)
    for kappa in (0.41, 0.6, 0.61, 0.667, 0.8):  # with no accuracy bar at all, kappa alone fails it
        alt = {**cfg, "instruments": {"hallucination_judge": {**rule, "min_accuracy": 0.0, "min_kappa": kappa}}}
        assert INS.hallucination_judge_unfit(alt, studies) is not None, kappa
    # the only way through: a "fair" kappa bar with an accuracy bar below chance (stated in the config comment)
    lax = {**cfg, "instruments": {"hallucination_judge": {**rule, "min_accuracy": 0.25, "min_kappa": 0.21}}}
    assert INS.hallucination_judge_unfit(lax, studies) is None


def test_the_declared_judge_is_the_one_iteration_4_and_the_answer_stage_use():
    model = load_cfg()["instruments"]["hallucination_judge"]["model"]
    assert (
        f"/llm@stages.generation.judge.llm: {model} "
        in (PROJECT_ROOT / "conf" / "method" / "lethe_iter4.yaml").read_text()
    )
    assert f"/llm@judge.llm: {model} " in (PROJECT_ROOT / "conf" / "answers" / "default.yaml").read_text()
    assert Path(PROJECT_ROOT / "conf" / "llm" / f"{model}.yaml").is_file()
