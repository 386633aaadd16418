"""Iteration 4's analysis: hallucination rate, the budget table and the P95-within-budget rule, on
hand-built per-query frames (values chosen so every number can be checked by hand)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

from analysis.iteration4 import budget_points, hallucination, hallucination_cell, iteration4_table
from analysis.views import DatasetView

CFG = {"contradiction_k": 10, "bootstrap_resamples": 200, "confidence": 0.95, "seed": 0}


def run(budget: float | None, model: str = "m") -> SimpleNamespace:
    rr = {"enabled": budget is not None, "budget_ms": budget, "llm": {"name": model}}
    return SimpleNamespace(manifest={"config": {"method": {"stages": {"llm_rerank": rr}}}})


def pq(
    ndcg: list[float],
    stage_ms: list[float] | None = None,
    share: list[float] | None = None,
    supported: list | None = None,
) -> pd.DataFrame:
    n = len(ndcg)
    df = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "ndcg@10": ndcg})
    df["timings_ms"] = [json.dumps({"llm_rerank": s}) if stage_ms else "{}" for s in (stage_ms or [0] * n)]
    df["flags"] = [
        json.dumps({"rerank": {"share_judged": s, "judged": s * 10}}) if share else "{}" for s in (share or [0] * n)
    ]
    if supported is not None:
        df["flags"] = [
            json.dumps({**json.loads(f), "generation": {"judge_status": "ok" if x is not None else "timeout"}})
            for f, x in zip(df["flags"], supported, strict=True)
        ]
        df["answer_supported"] = supported
        df["answer_status"] = ["ok" if s is not None else None for s in supported]
        df["answer_f1"] = [0.5 if s is not None else None for s in supported]
        df["answer_rouge_l"] = [0.25 if s is not None else None for s in supported]
    return df.set_index("query_id")


def test_hallucination_rate_counts_only_judged_answers():
    df = pq([0.5] * 5, supported=[True, False, None, False, True])
    assert hallucination(df) == (0.5, 4)
    # 2 of 4 with its 95% Wilson interval (scipy: [0.1500, 0.8500]); no mark without a declared judge rule
    assert hallucination_cell(df, CFG, None) == "0.5000 [0.1500, 0.8500] n=4"
    assert hallucination(pq([0.5]))[0] is None and hallucination_cell(pq([0.5]), CFG, None) == "n/m"
    # an abstention stored as supported by an older run is still not a judgment
    old = pq([0.5] * 2, supported=[True, False])
    old["flags"] = [json.dumps({"generation": {"judge_status": s}}) for s in ("abstention", "ok")]
    assert hallucination(old) == (1.0, 1)


def test_table_compares_with_iter3_on_the_same_queries_and_checks_the_budget():
    it3 = pq([0.2, 0.4, 0.6, 0.8])
    ok = pq([0.3, 0.5], stage_ms=[1000, 1300], share=[0.1, 0.2], supported=[True, False])
    late = pq([0.3, 0.5], stage_ms=[1000, 1400], share=[0.1, 0.1])
    v = DatasetView(
        "lb",
        pd.DataFrame(),
        {"lethe_iter3": run(None), "lethe_iter4": run(1200), "lethe_iter4+late": run(1200)},
        {"lethe_iter3": it3, "lethe_iter4": ok, "lethe_iter4+late": late},
    )
    t = iteration4_table({"lb": v}, CFG).set_index("method")
    assert t.loc["lethe_iter4", "iter3 nDCG@10 (same queries)"] == "0.3000"  # q0, q1 only
    assert t.loc["lethe_iter4", "nDCG@10"] == "0.4000"
    assert t.loc["lethe_iter4", "share judged"] == "0.1500"
    # P95 of [1000, 1300] = 1285 <= 1320; of [1000, 1400] = 1380 > 1320
    assert t.loc["lethe_iter4", "P95 <= budget+10%"] == "yes" and t.loc["lethe_iter4+late", "P95 <= budget+10%"] == "NO"
    # CFG declares no judge rule: the rate is unmarked, with its Wilson interval (1 of 2: [0.0945, 0.9055])
    assert t.loc["lethe_iter4", "hallucination [95% Wilson CI] n judged"] == "0.5000 [0.0945, 0.9055] n=2"
    # two equal F1 values: a zero-width interval, said as such by its bounds
    assert t.loc["lethe_iter4", "answer F1 [95% CI]"] == "0.5000 [0.5000, 0.5000] n=2"
    assert t.loc["lethe_iter4+late", "answer F1 [95% CI]"] == "n/m"


def test_budget_points_read_model_and_budget_from_manifests():
    v = DatasetView(
        "lb",
        pd.DataFrame(),
        {"lethe_iter4+a": run(300, "small"), "lethe_iter4+b": run(4800, "big"), "lethe_iter4+none": run(None)},
        {
            "lethe_iter4+a": pq([0.1, 0.3], [200, 250], [0.0, 0.1]),
            "lethe_iter4+b": pq([0.5, 0.7], [4000, 4500], [0.5, 0.7]),
            "lethe_iter4+none": pq([0.2, 0.2]),
        },
    )
    p = budget_points(v, CFG).set_index("method")
    assert list(p.index) == ["lethe_iter4+a", "lethe_iter4+b"]  # the run without reranking is no point
    assert p.loc["lethe_iter4+b", "model"] == "big" and p.loc["lethe_iter4+b", "budget_ms"] == 4800
    assert (
        abs(p.loc["lethe_iter4+a", "ndcg"] - 0.2) < 1e-12 and abs(p.loc["lethe_iter4+b", "share_judged"] - 0.6) < 1e-12
    )
    assert p.loc["lethe_iter4+a", "ci_low"] <= 0.2 <= p.loc["lethe_iter4+a", "ci_high"]


def test_budget_points_keep_the_query_set_most_runs_share():
    sweep = {f"lethe_iter4+b{b}": pq([0.1 * (i + 1), 0.2]) for i, b in enumerate((300, 600))}
    other = pq([0.9, 0.9, 0.9])  # the main run on a bigger sample: not a point of the sweep's curve
    runs = {m: run(float(m.split("+b")[1])) for m in sweep} | {"lethe_iter4": run(1200)}
    v = DatasetView("lb", pd.DataFrame(), runs, {**sweep, "lethe_iter4": other})
    assert list(budget_points(v, CFG)["method"]) == sorted(sweep)
