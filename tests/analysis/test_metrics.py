"""ranx metrics agree with trec_eval (pytrec_eval) on run.trec + qrels.trec, to 1e-6."""

from __future__ import annotations

import pandas as pd
import pytest
import pytrec_eval

from analysis.metrics import evaluate_run
from lethebench.runs import RunFolder

TREC = {"ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "recall@50": "recall_50", "precision@10": "P_10"}


def trec_eval_means(folder):
    qrels = RunFolder(folder).qrels
    run = {q: {d: s for d, s in r} for q, r in RunFolder(folder).run.items()}
    ev = pytrec_eval.RelevanceEvaluator(qrels, set(TREC.values()))
    res = ev.evaluate(run)
    # trec_eval skips queries absent from the run; ours score them 0: average over all qrels queries
    return {m: sum(res.get(q, {}).get(t, 0.0) for q in qrels) / len(qrels) for m, t in TREC.items()}


@pytest.mark.parametrize("method", ["window", "bm25", "vector"])
def test_means_match_trec_eval(e2e_runs, method):
    folder = e2e_runs[method]
    ours = RunFolder(folder).metrics["means"]
    theirs = trec_eval_means(folder)
    for m in TREC:
        assert ours[m] == pytest.approx(theirs[m], abs=1e-6), m


def test_ties_and_empty_rankings():
    qrels = {"q1": {"b": 1}, "q2": {"x": 1}}
    # tied scores: the written order (b after c) is what is evaluated
    run = {"q1": [("c", 1.0), ("b", 1.0)], "q2": []}
    df = evaluate_run(qrels, run, ["mrr@10", "recall@10"])
    assert df.loc["q1", "mrr@10"] == pytest.approx(0.5)
    assert df.loc["q2"].tolist() == [0.0, 0.0]
    assert isinstance(df, pd.DataFrame)
