"""analysis/claims.py on two real runs with answers (BM25 and vector on LoCoMo, SmolLM2 answers, the runs of
test_seeds.py): each kind of claim measured from the per-query values by hand and given the rule's verdict, the
fixed verdicts (not comparable, not measured) with their reasons, and every spec row present."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from analysis import claims as CL
from analysis import stats
from analysis import verdicts as VD
from analysis import views as V
from tests.analysis.test_seeds import CFG, views  # noqa: F401 (views: the fixture, two runs with answers)


def _by_claim(rows: list[dict]) -> dict[str, dict]:
    return {r["claim"]: r for r in rows}


def test_paper_value_claims(views):
    pq = views["locomo"].per_query["bm25"]
    ci = stats.mean_ci(pq["ndcg@10"].to_numpy(float), CFG["bootstrap_resamples"], CFG["confidence"], CFG["seed"])
    mean = round(ci["mean"], 6)
    paper = {
        "table1_performance_summary": {
            "columns": [
                "ndcg_at_10",
                "ndcg_at_10_ci_low",
                "ndcg_at_10_ci_high",
                "recall_at_50",
                "latency_ms",
                "contradiction_rate",
                "hallucination_rate",
            ],
            "rows": {
                "bm25": [mean, 0.1, 0.9, 2.0, 38, 0.197, 0.336],
                "lethe_iter1": [0.737, 0.7, 0.75, 0.6, 908, 0.18, 0.2],
            },
        }
    }
    rows = _by_claim(CL.paper_rows(views, pd.DataFrame(), paper, CFG, dataset="locomo"))
    assert len(rows) == 2 * 5  # the printed CI bounds are not claims of their own
    hit = rows[f"bm25: nDCG@10 = {mean}"]
    assert hit["verdict"] == VD.CONSISTENT and hit["n"] == 5
    assert hit["measured [95% CI]"] == f"{ci['mean']:.4f} [{ci['ci_low']:.4f}, {ci['ci_high']:.4f}]"
    r50 = rows["bm25: R@50 = 2.0"]
    assert r50["verdict"] == VD.CONTRADICTED and "lies below the claimed 2" in r50["reason"]
    lat = rows["bm25: latency (ms) = 38"]
    assert lat["verdict"] == VD.NOT_COMPARABLE and "simulated pipeline" in lat["reason"]
    p95 = views["locomo"].runs["bm25"].metrics["latency_ms"]["p95"]
    assert lat["measured [95% CI]"] == f"{p95:.4f}"
    assert rows["bm25: contradiction rate = 0.197"]["verdict"] == VD.NOT_COMPARABLE
    hal = rows["bm25: hallucination rate = 0.336"]  # answers, but no judge in these runs
    assert hal["verdict"] == VD.NOT_MEASURED and "no judged answers" in hal["reason"]
    assert {r["verdict"] for c, r in rows.items() if c.startswith("lethe_iter1")} <= {
        VD.NOT_MEASURED,
        VD.NOT_COMPARABLE,
    }
    # lethe_iter1 is not a run of these views: not declared there, which the reason says; declared, it is n/m
    undeclared = "lethe_iter1 not declared on locomo, the dataset the paper's claims are judged on"
    assert rows["lethe_iter1: nDCG@10 = 0.737"]["reason"] == undeclared
    declared = {**views, "locomo": dataclasses.replace(views["locomo"], missing={"lethe_iter1": None})}
    rows = _by_claim(CL.paper_rows(declared, pd.DataFrame(), paper, CFG, dataset="locomo"))
    assert rows["lethe_iter1: nDCG@10 = 0.737"]["reason"] == CL.NO_RUN


def test_paper_difference_claims_read_table2(views):
    t = V.paired_row(views["locomo"], "locomo", "vector", "bm25", "ndcg@10", CFG)
    t2 = pd.DataFrame([{**t, "method": "lethe_iter1"}])  # Table 2's row, under the paper's method name
    claimed = round(t["mean_diff"], 6)
    paper = {
        "table2_significance_vs_best_baseline": {
            "ndcg_at_10": {"baseline": 0.5, "iter1": [0.5 + claimed, "<0.001", 1.0], "iter2": [0.9, "<0.001", 2.0]}
        }
    }
    rows = CL.paper_rows(views, t2, paper, CFG, dataset="locomo")
    assert [r["source"] for r in rows] == ["paper Table 2"] * 2
    want = VD.verdict(VD.Claim.point(claimed, 0.0), t["ci_low"], t["ci_high"])
    assert (rows[0]["verdict"], rows[0]["reason"].split(";")[0]) == want
    assert rows[0]["measured [95% CI]"] == f"{t['mean_diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]"
    assert rows[0]["reason"].endswith("our best baseline: bm25")
    assert (rows[1]["verdict"], rows[1]["reason"]) == (VD.NOT_MEASURED, CL.NO_RUN)  # no lethe_iter2 row in Table 2


def test_seed_claims(views):
    pv, pb = (views["locomo"].per_query[m] for m in ("vector", "bm25"))
    f1 = {m: pq.loc[pq["answer_status"] == "ok", "answer_f1"] for m, pq in (("vector", pv), ("bm25", pb))}
    spec = {
        "seed001": {
            "tables": [
                {
                    "name": "t",
                    "rows": [
                        {
                            "row": "semantic",
                            "run": "locomo/vector",
                            "claimed": {"f1": round(float(f1["vector"].mean()), 6)},
                        },
                        {
                            "row": "lexical",
                            "run": "locomo/bm25",
                            "versus": "semantic",
                            "claimed": {"f1": 0.99, "improvement": "5-10%"},
                        },
                        {"row": "not run", "run": "locomo/hybrid", "versus": "semantic", "claimed": {"f1": 0.3}},
                    ],
                }
            ]
        },
        "seed003": {"study": "pw", "pairwise_claim": {"text": "B loses"}, "tables": []},
    }
    doc = {
        "rows": [
            {"judge": "j", "pair": "p", "criterion": "overall", "a_wins": 9, "b_wins": 1, "ties": 2},
            {"judge": "j", "pair": "p", "criterion": "diversity", "a_wins": 0, "b_wins": 0, "ties": 12},
        ]
    }
    rows = CL.seed_rows(views, spec, CFG, {"pw": doc})
    by = _by_claim(rows)
    assert by[f"semantic: answer F1 = {round(float(f1['vector'].mean()), 6)}"]["verdict"] == VD.CONSISTENT
    assert by["lexical: answer F1 = 0.99"]["verdict"] == VD.CONTRADICTED
    common = f1["bm25"].dropna().index.intersection(f1["vector"].dropna().index)
    t = stats.paired_test(
        f1["bm25"].loc[common].to_numpy(float),
        f1["vector"].loc[common].to_numpy(float),
        CFG["permutation_resamples"],
        CFG["seed"],
        CFG["confidence"],
    )
    imp = by["lexical vs semantic: answer F1 improvement 5-10%"]
    lo, hi = t["ci_low"] / t["mean_b"], t["ci_high"] / t["mean_b"]
    assert imp["measured [95% CI]"] == f"{t['mean_diff'] / t['mean_b']:+.1%} [{lo:+.1%}, {hi:+.1%}]"
    assert imp["verdict"] == VD.verdict(VD.Claim(0.05, 0.10, 0.0), lo, hi)[0] and imp["claimed"] == "+5.0% to +10.0%"
    diff = by[f"lexical - semantic: answer F1 0.99 - {round(float(f1['vector'].mean()), 6)}"]
    assert diff["n"] == t["n"]
    assert by["not run: answer F1 = 0.3"]["verdict"] == VD.NOT_MEASURED
    assert (
        by["not run - semantic: answer F1 0.3 - " + str(round(float(f1["vector"].mean()), 6))]["verdict"]
        == VD.NOT_MEASURED
    )
    won = by["p, overall: B loses (judge j)"]
    w = stats.proportion_ci(1, 10)
    assert won["n"] == 10 and won["measured [95% CI]"] == f"0.1000 [{w['ci_low']:.4f}, {w['ci_high']:.4f}]"
    assert won["verdict"] == VD.CONSISTENT and "(2 ties left out)" in won["reason"]
    assert by["p, diversity: B loses (judge j)"]["verdict"] == VD.NOT_MEASURED
    missing = CL.seed_rows(views, {"seed003": spec["seed003"]}, CFG, {})
    assert [(r["verdict"], r["reason"]) for r in missing] == [(VD.NOT_MEASURED, "study pw not run (n/m†)")]


def _validation(model: str, low: float, n: int = 100) -> dict:
    """A judge-validation study document (experiments.studies.judge_validation's rows) with ``model``'s overall accuracy CI."""
    return {
        "rows": [
            {
                "judge": "pairwise",
                "model": model,
                "perturbation": "all",
                "n": n,
                "accuracy": low + 0.08,
                "accuracy_low": low,
                "accuracy_high": low + 0.17,
            },
            {
                "judge": "pairwise",
                "model": model,
                "perturbation": "date",
                "n": 20,
                "accuracy": 0.9,
                "accuracy_low": 0.7,
                "accuracy_high": 0.97,
            },
            {
                "judge": "hallucination",
                "model": model,
                "perturbation": "all",
                "n": n,
                "accuracy": 0.9,
                "accuracy_low": 0.8,
                "accuracy_high": 0.95,
            },
        ]
    }


def test_pairwise_claims_count_only_when_the_judge_passed_its_validation(views):
    spec = {
        "seed003": {
            "study": "pw",
            "pairwise_claim": {"text": "B loses"},
            "tables": [],
            "judge_validation": {"studies": ["val_a", "val_b"], "min_accuracy": 0.5},
        }
    }
    doc = {"rows": [{"judge": "j", "pair": "p", "criterion": "overall", "a_wins": 9, "b_wins": 1, "ties": 2}]}

    def verdict(val_a, val_b):
        studies = {"pw": doc, **({"val_a": val_a} if val_a else {}), **({"val_b": val_b} if val_b else {})}
        (r,) = CL.seed_rows(views, spec, CFG, studies)
        assert r["measured [95% CI]"].startswith("0.1000 [")  # the measurement is shown either way
        return r["verdict"], r["reason"]

    assert verdict(_validation("j", 0.55), _validation("j", 0.5))[0] == VD.CONSISTENT
    got, reason = verdict(_validation("j", 0.55), _validation("j", 0.18))
    assert got == VD.INCONCLUSIVE
    assert reason.startswith(
        "the judge failed its validation: it chose the known-better answer in both orders in "
        "0.26 [0.18, 0.35] of 100 pairs (val_b), the CI's lower bound below the 0.5 required"
    )
    assert verdict(_validation("j", 0.3), _validation("j", 0.1))[1].count(" pairs (val_") == 2  # both named
    # the subset rows (one perturbation) and the other judge kind do not count: only the pairwise judge overall
    assert verdict(_validation("j", 0.45), _validation("j", 0.6))[0] == VD.INCONCLUSIVE
    assert verdict(_validation("j", 0.6), None) == (
        VD.INCONCLUSIVE,
        "the judge failed its validation: its validation "
        "(study val_b) was not run; the modified run's share of 10 "
        "decided pairs (2 ties left out)",
    )
    assert "did not validate j" in verdict(_validation("other", 0.9), _validation("j", 0.9))[1]
    assert CL.judge_unfit("j", None, {}) is None  # a seed that names no validation


def test_agent_claims_without_runs_say_why(views):
    spec = {
        "seed002": {
            "kind": "agent",
            "rows": [
                {
                    "row": "W",
                    "run": "lethebench/window",
                    "claimed": {
                        "tool_result_recall": 0.1,
                        "p95_ms": 287,
                        "planning_coherence": 0.2,
                        "action_consistency": 0.18,
                    },
                }
            ],
            "headline": [
                {
                    "claim": "x +42.3%",
                    "metric": "tool_result_recall",
                    "row": "L",
                    "versus": "W",
                    "improvement": "42.3%",
                },
                {"claim": "y +31.7%", "improvement": "31.7%", "not_measured": "undefined"},
            ],
        }
    }
    rows = _by_claim(CL.seed_rows(views, spec, CFG))
    assert rows["W: tool result recall = 0.1"]["verdict"] == VD.NOT_MEASURED
    assert rows["W: P95 latency (ms) = 287"]["verdict"] == VD.NOT_COMPARABLE
    assert rows["W: action consistency = 0.18"]["reason"].startswith("redefined")
    assert rows["W: planning coherence = 0.2"]["verdict"] == VD.NOT_MEASURED
    assert rows["x +42.3%"]["verdict"] == VD.NOT_MEASURED and rows["x +42.3%"]["claimed"] == "+42.3%"
    assert (rows["y +31.7%"]["verdict"], rows["y +31.7%"]["reason"]) == (VD.NOT_MEASURED, "undefined")


def test_every_claim_of_the_committed_specs_has_a_row():
    """The paper's claims.yaml and seed_claims.yaml, with no run at all: one row per printed claim, each a verdict."""
    import yaml

    from lethe.core.paths import CONF_DIR, PROJECT_ROOT

    path = PROJECT_ROOT.parent / "shared" / "paper" / "claims.yaml"
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine")
    paper = yaml.safe_load(path.read_text())
    seeds = yaml.safe_load((CONF_DIR / "reference" / "seed_claims.yaml").read_text())
    table = CL.claims_table({}, pd.DataFrame(), paper, seeds, {**CFG, "paper_dataset": "lethebench_heldout"}, {})
    t1 = paper["table1_performance_summary"]
    n_t1 = len(t1["rows"]) * sum(not c.endswith(("_ci_low", "_ci_high")) for c in t1["columns"])
    n_t2 = sum(len(c) - 1 for c in paper["table2_significance_vs_best_baseline"].values())
    n_paper = n_t1 + n_t2 + len(paper["table3_latency_breakdown_ms"]) + len(paper["table4_ndcg_at_10_by_domain"])
    assert (table["source"].str.startswith("paper")).sum() == n_paper
    n_seed = sum(len(r.get("claimed") or {}) for s in seeds.values() for t in s.get("tables") or [] for r in t["rows"])
    n_seed += sum(len(r.get("claimed") or {}) for r in seeds["seed002"]["rows"]) + len(seeds["seed002"]["headline"])
    for t in (t for s in seeds.values() for t in s.get("tables") or []):
        by_name = {r["row"]: r for r in t["rows"]}
        n_seed += sum(
            1
            for r in t["rows"]
            if r.get("versus")
            and "f1" in (r.get("claimed") or {})
            and "f1" in (by_name[r["versus"]].get("claimed") or {})
        )
    n_seed += 1  # seed 003's pairwise claim, its study not run
    n_seed += sum(len(s.get("not_run_claims") or []) for s in seeds.values())
    assert (~table["source"].str.startswith("paper")).sum() == n_seed
    assert set(table["verdict"]) <= set(VD.VERDICTS) and table["reason"].str.len().gt(0).all()
    assert CL.verdict_counts(table).startswith(f"{n_paper + n_seed} claims: 0 consistent, 0 contradicted")
