"""H4 plan-selection accuracy on hand-built frames with known plans and gold labels."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from analysis.formatting import NM
from analysis.plans import PLANS, majority_baseline, plan_accuracy, plan_distribution, plan_table, wilson_ci
from analysis.report import plan_section
from analysis.views import DatasetView

# query_id: (gold plan_label, recorded plan, category, status); "-" = no plan recorded (flags without "plan")
CASES = {
    "q1": ("verify", "verify", "A", "ok"),
    "q2": ("verify", "explore", "A", "ok"),
    "q3": ("verify", "verify", "B", "ok"),
    "q4": ("explore", "explore", "B", "ok"),
    "q5": ("explore", "exploit", "B", "ok"),
    "q6": ("exploit", "exploit", "A", "ok"),
    "q7": ("exploit", "exploit", "A", "ok"),
    "q8": ("exploit", "verify", "B", "ok"),
    "q9": ("exploit", "exploit", "A", "ok"),
    "q10": ("exploit", "-", "A", "no_eligible_docs"),  # gold, flags "{}": missing plan
    "q11": ("explore", None, "B", "ok"),  # gold, "plan": null: missing plan
    "q12": (None, "explore", "A", "ok"),  # plan but no gold: not scored, not missing
}
SCORED = [q for q, (g, p, _, _) in CASES.items() if g and p not in (None, "-")]


def _flags(plan: str | None) -> str:
    if plan == "-":
        return "{}"
    return json.dumps({"plan": plan, "plan_inputs": {"overlap": 0.5, "query_terms": 4, "novelty": 0.2}})


def make_per_query(cases=CASES) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "query_id": q,
                "scope_id": "s",
                "category": c,
                "status": s,
                "latency_ms": 1.0,
                "timings_ms": "{}",
                "flags": _flags(p),
                "ndcg@10": 0.5,
            }
            for q, (_, p, c, s) in cases.items()
        ]
    )


def make_queries() -> pd.DataFrame:
    rows = [
        {"query_id": q, "plan_label": g, "category": c, "complexity": "low" if c == "A" else "high"}
        for q, (g, _, c, _) in CASES.items()
    ]
    rows.append({"query_id": "q13", "plan_label": "verify", "category": "A", "complexity": "low"})  # other split
    return pd.DataFrame(rows)


def wilson_by_hand(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return centre - half, centre + half


def test_accuracy_ci_counts_and_missing_plans():
    acc = plan_accuracy(make_per_query(), make_queries())
    assert acc["n"] == 9 and acc["n_correct"] == 6 and acc["accuracy"] == pytest.approx(6 / 9)
    assert acc["n_missing_plan"] == 2
    assert acc["missing_plan_by_status"] == {"no_eligible_docs": 1, "ok": 1}
    lo, hi = wilson_by_hand(6, 9)
    assert (acc["ci_low"], acc["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert (round(lo, 4), round(hi, 4)) == (0.3542, 0.8794)  # Wilson 95% for 6/9
    assert acc["ci_method"] == "wilson" and acc["confidence"] == 0.95


def test_confusion_matrix_counts():
    cm = plan_accuracy(make_per_query(), make_queries())["confusion"]
    assert list(cm.index) == list(cm.columns) == list(PLANS)
    expected = pd.DataFrame([[2, 1, 0], [0, 1, 1], [1, 0, 3]], index=list(PLANS), columns=list(PLANS))
    np.testing.assert_array_equal(cm.to_numpy(), expected.to_numpy())
    assert cm.to_numpy().sum() == 9


def test_macro_f1_matches_hand_and_sklearn():
    acc = plan_accuracy(make_per_query(), make_queries())
    # verify: TP 2 FP 1 FN 1 -> 4/6; explore: TP 1 FP 1 FN 1 -> 1/2; exploit: TP 3 FP 1 FN 1 -> 6/8
    assert acc["macro_f1"] == pytest.approx((4 / 6 + 1 / 2 + 6 / 8) / 3)
    gold = [CASES[q][0] for q in SCORED]
    pred = [CASES[q][1] for q in SCORED]
    assert acc["macro_f1"] == pytest.approx(f1_score(gold, pred, labels=list(PLANS), average="macro"))
    assert acc["per_plan"]["exploit"] == pytest.approx(
        {"support": 4, "predicted": 4, "precision": 0.75, "recall": 0.75, "f1": 0.75}
    )


def test_macro_f1_with_a_plan_absent_from_gold_and_predictions():
    cases = {q: v for q, v in CASES.items() if q in ("q6", "q7", "q8", "q1")}  # no explore anywhere
    acc = plan_accuracy(make_per_query(cases), make_queries())
    gold = [cases[q][0] for q in cases]
    pred = [cases[q][1] for q in cases]
    assert acc["per_plan"]["explore"]["f1"] == 0.0
    assert acc["macro_f1"] == pytest.approx(f1_score(gold, pred, labels=list(PLANS), average="macro", zero_division=0))
    assert acc["confusion"].loc["explore"].sum() == acc["confusion"]["explore"].sum() == 0


def test_per_category_accuracy():
    pc = plan_accuracy(make_per_query(), make_queries())["per_category"]
    assert pc.loc["A", "n"] == 5 and pc.loc["A", "accuracy"] == pytest.approx(4 / 5)
    assert pc.loc["B", "n"] == 4 and pc.loc["B", "accuracy"] == pytest.approx(2 / 4)
    assert (pc.loc["B", "ci_low"], pc.loc["B", "ci_high"]) == pytest.approx(wilson_by_hand(2, 4))


def test_indexed_per_query_gives_the_same_result():
    a = plan_accuracy(make_per_query(), make_queries())
    b = plan_accuracy(make_per_query().set_index("query_id"), make_queries())
    assert (a["n"], a["accuracy"], a["macro_f1"], a["n_missing_plan"]) == (
        b["n"],
        b["accuracy"],
        b["macro_f1"],
        b["n_missing_plan"],
    )
    assert a["confusion"].equals(b["confusion"])


def test_majority_baseline():
    maj = majority_baseline(make_queries())  # verify 4 (q1-q3, q13), explore 3, exploit 5
    assert maj == {"label": "exploit", "accuracy": pytest.approx(5 / 12), "n": 12}
    scored = plan_accuracy(make_per_query(), make_queries())["majority"]  # on the 9 scored queries
    assert scored == {"label": "exploit", "accuracy": pytest.approx(4 / 9), "n": 9}
    tie = pd.DataFrame({"query_id": list("abcd"), "plan_label": ["exploit", "verify", "exploit", "verify"]})
    assert majority_baseline(tie)["label"] == "verify"  # ties follow PLANS order
    assert majority_baseline(pd.DataFrame({"query_id": ["a"], "plan_label": [None]})) is None


def test_none_without_gold_labels_or_without_plans():
    no_gold = make_queries().assign(plan_label=None)
    assert plan_accuracy(make_per_query(), no_gold) is None
    no_plans = make_per_query().assign(flags="{}")
    assert plan_accuracy(no_plans, make_queries()) is None
    assert plan_distribution(no_plans).isna().all()
    # gold labels only on queries that were not evaluated
    only_other = make_queries().assign(plan_label=lambda d: np.where(d["query_id"] == "q13", "verify", None))
    assert plan_accuracy(make_per_query(), only_other) is None


def test_plan_distribution_and_wilson_edges():
    dist = plan_distribution(make_per_query())  # 10 recorded plans: verify 3, explore 3, exploit 4
    assert list(dist.index) == list(PLANS)
    assert dist.to_dict() == pytest.approx({"verify": 0.3, "explore": 0.3, "exploit": 0.4})
    lo, hi = wilson_ci(0, 10)
    assert lo == 0.0 and hi == pytest.approx(wilson_by_hand(0, 10)[1])
    lo, hi = wilson_ci(10, 10)
    assert hi == 1.0 and lo == pytest.approx(wilson_by_hand(10, 10)[0])
    assert all(math.isnan(x) for x in wilson_ci(0, 0))


def test_unknown_plan_value_is_an_error():
    pq = make_per_query()
    pq.loc[0, "flags"] = json.dumps({"plan": "VERIFY"})
    with pytest.raises(ValueError, match="unknown recorded plan"):
        plan_accuracy(pq, make_queries())


def _views() -> tuple[dict[str, DatasetView], dict]:
    pq = make_per_query().set_index("query_id")
    bench = DatasetView(
        "lethebench",
        make_queries(),
        {},
        {"bm25": pq.assign(flags="{}"), "lethe_iter1": pq, "lethe_iter1+no_plan": pq.assign(flags="{}")},
    )
    other = DatasetView("locomo", make_queries().assign(plan_label=None), {}, {"lethe_iter1": pq})
    cfg = {"baselines": ["bm25"], "lethe": ["lethe_iter1", "lethe_iter2"], "confidence": 0.95}
    return {"lethebench": bench, "locomo": other}, cfg


def test_plan_table_formats_rows():
    views, cfg = _views()
    t = plan_table(views, cfg)
    assert list(zip(t["dataset"], t["method"], strict=True)) == [
        ("lethebench", "lethe_iter1"),
        ("locomo", "lethe_iter1"),
    ]
    row = t.iloc[0].to_dict()
    assert row == {
        "dataset": "lethebench",
        "method": "lethe_iter1",
        "n": 9,
        "no plan": 2,
        "accuracy": "0.6667",
        "accuracy 95% CI (Wilson)": "[0.3542, 0.8794]",
        "macro-F1": f"{(4 / 6 + 1 / 2 + 6 / 8) / 3:.4f}",
        "majority baseline": "0.4444",
        "majority plan": "exploit",
        "verify %": "30.0",
        "explore %": "30.0",
        "exploit %": "40.0",
    }
    no_gold = t.iloc[1]
    assert no_gold["accuracy"] == no_gold["n"] == no_gold["majority baseline"] == NM
    assert no_gold["exploit %"] == "40.0"


def test_report_section(tmp_path):
    views, cfg = _views()
    md = plan_section(views, cfg, tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"table_plans.csv", "table_plans.md", "table_plans.tex"}
    assert "Confusion matrix, lethe_iter1 on lethebench" in md and "status no_eligible_docs: 1" in md
    assert "| exploit | 1 | 0 | 3 |" in md and "locomo" not in md.split("Confusion matrix")[1]
    assert "| A | 0.8000 (n=5) |" in md
    empty = plan_section(
        {"lethebench": DatasetView("lethebench", make_queries(), {}, {"bm25": make_per_query()})},
        cfg,
        tmp_path / "none",
    )
    assert empty.startswith("No runs with recorded plans yet") and not (tmp_path / "none").exists()
