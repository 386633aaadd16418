"""analysis/longmemeval.py: LongMemEval's recall_any@k, recall_all@k and ndcg_any@k, and its turn-to-session scoring,
against values worked out by hand from the official definitions (module docstring)."""

from __future__ import annotations

import math

import pytest

from analysis import longmemeval as LME


def test_unit_level_any_all_and_the_official_discount():
    ranked, relevant = ["a", "x", "b", "y"], {"a", "b"}
    assert LME.scores(ranked, relevant, 1) == {"recall_any@1": 1.0, "recall_all@1": 0.0, "ndcg_any@1": 1.0}
    s3 = LME.scores(ranked, relevant, 3)
    assert s3["recall_any@3"] == 1.0 and s3["recall_all@3"] == 1.0
    # DCG = 1 + 0 + 1/log2(3); the ideal puts both first: 1 + 1/log2(2) = 2 (ranks 1 and 2 undiscounted)
    assert s3["ndcg_any@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    # not trec_eval's nDCG@3, which discounts rank i by log2(i + 1): (1 + 1/log2(4)) / (1 + 1/log2(3))
    assert s3["ndcg_any@3"] != pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert LME.scores(["x", "y"], relevant, 2) == {"recall_any@2": 0.0, "recall_all@2": 0.0, "ndcg_any@2": 0.0}


def test_turns_scored_at_session_level_as_the_official_evaluation_does():
    """A session counts only through its has_answer turns; the cut grows until it holds k distinct sessions."""
    session_of = lambda d: d.rsplit("_", 1)[0]  # noqa: E731
    ranked = ["s1_2", "s2_1", "s1_4", "s3_1", "s4_3"]
    relevant = {"s1_2", "s4_3"}  # s1_4 is another turn of an evidence session: it does not stand for s1
    two = LME.session_level(ranked, relevant, session_of, 2)  # cut 2: s1, s2
    assert two == {"recall_any@2": 1.0, "recall_all@2": 0.0, "ndcg_any@2": 0.5}  # ideal: both evidence turns first
    four = LME.session_level(ranked, relevant, session_of, 4)  # s1, s2, s1's other turn, s3: four distinct keys
    assert four["recall_all@4"] == 0.0
    five = LME.session_level(ranked, relevant, session_of, 5)
    assert five["recall_all@5"] == 1.0 and five["ndcg_any@5"] == pytest.approx((1 + 1 / math.log2(5)) / 2)
    # the cut grows past repeated sessions: two turns of s9 then s1's answer turn, at k=2
    grown = LME.session_level(["s9_1", "s9_3", "s1_2"], {"s1_2"}, session_of, 2)
    assert grown["recall_any@2"] == 1.0


def test_per_query_scores_only_queries_with_qrels_and_a_missing_ranking_scores_zero():
    run = {"q1": [("a", 2.0), ("b", 1.0)], "q2_abs": [("c", 1.0)]}
    qrels = {"q1": {"b": 1}, "q3": {"d": 1}}  # abstention questions have no qrels (the loader)
    df = LME.per_query(run, qrels, ks=(1, 2))
    assert list(df.index) == ["q1", "q3"] and df.loc["q3"].eq(0).all()
    assert df.loc["q1", "recall_any@1"] == 0.0 and df.loc["q1", "recall_any@2"] == 1.0
    assert df.loc["q1", "ndcg_any@2"] == pytest.approx(1.0)  # rank 2 is undiscounted
    turns = LME.per_query({"q": [("q:s1_2", 1.0)]}, {"q": {"q:s1_2": 1}}, ks=(1,), session_of=LME.session_of_turn)
    assert turns.loc["q", "session_recall_all@1"] == 1.0 and LME.session_of_turn("q:answer_1_12") == "q:answer_1"


def test_the_three_metrics_are_names_a_run_can_ask_for():
    """run.metrics=[recall_any@5, recall_all@5, ndcg_any@5] (analysis.metric_names): evaluate_run gives this module's
    values, beside the ranx metrics, and a query without results scores 0."""
    from analysis.metric_names import canonical_metric, display_metric
    from analysis.metrics import evaluate_run

    run = {"q1": [("a", 3.0), ("b", 2.0), ("c", 1.0)], "q2": [("d", 1.0)]}
    qrels = {"q1": {"b": 1, "z": 1}, "q2": {"d": 1}, "q3": {"e": 1}}
    names = ["recall_any@2", "recall_all@2", "ndcg_any@2", "nDCG@2"]
    got = evaluate_run(qrels, run, names)
    want = LME.per_query(run, qrels, ks=(2,))
    for m in names[:3]:
        assert canonical_metric(m) == display_metric(m) == m
        assert got[m].tolist() == pytest.approx(want.loc[got.index, m].tolist()), m
    assert got.loc["q1", "recall_any@2"] == 1.0 and got.loc["q1", "recall_all@2"] == 0.0
    assert got.loc["q3"].eq(0).all() and got.loc["q1", "ndcg@2"] < got.loc["q1", "ndcg_any@2"]  # the discounts differ
