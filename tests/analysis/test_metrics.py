"""ranx metrics agree with trec_eval (pytrec_eval) on run.trec + qrels.trec, to 1e-6; ir_measures names
(nDCG@10, R@50, RR@10, P@10) give the same per-query values as ranx's, and mean what ir_measures computes."""

from __future__ import annotations

import ir_measures
import pandas as pd
import pytest
import pytrec_eval

from analysis.metric_names import UnknownMetric
from analysis.metrics import DEFAULT_METRICS, evaluate_run
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


IR_MEASURES_NAMES = ["nDCG@10", "R@10", "R@50", "RR@10", "P@10"]  # DEFAULT_METRICS, spelled as ir_measures


@pytest.mark.parametrize("method", ["bm25", "vector"])
def test_ir_measures_names_give_the_runs_per_query_values(e2e_runs, method):
    folder = RunFolder(e2e_runs[method])
    qrels, run = folder.qrels, folder.run
    ranx = evaluate_run(qrels, run, list(DEFAULT_METRICS))
    irm = evaluate_run(qrels, run, IR_MEASURES_NAMES)
    pd.testing.assert_frame_equal(irm, ranx, check_exact=True)  # columns keyed by the ranx (canonical) names
    assert list(irm.columns) == list(DEFAULT_METRICS)
    stored = folder.per_query.set_index("query_id").loc[ranx.index, list(DEFAULT_METRICS)]
    pd.testing.assert_frame_equal(stored, ranx, check_exact=True, check_names=False)  # what the run wrote
    assert (ranx["ndcg@10"] > 0).sum() > 50  # real scores, not a comparison of zeros

    # the ir_measures names mean what ir_measures itself computes (pytrec_eval / its own providers) on the
    # same order (rank-derived scores, as evaluate_run); queries without results score 0
    measures = [ir_measures.parse_measure(n) for n in IR_MEASURES_NAMES]
    ranked = {q: {d: float(len(r) - i) for i, (d, _) in enumerate(r)} for q, r in run.items() if r}
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, ranked)}
    for name, col in zip(IR_MEASURES_NAMES, DEFAULT_METRICS, strict=True):
        expected = [theirs.get((q, name), 0.0) for q in ranx.index]
        assert ranx[col].tolist() == pytest.approx(expected, abs=1e-6), name


def test_an_unknown_metric_name_is_refused():
    with pytest.raises(UnknownMetric, match=r"metrics: unknown retrieval metric 'ERR@10'; accepted: .*nDCG\[@k\]"):
        evaluate_run({"q1": {"a": 1}}, {"q1": [("a", 1.0)]}, ["ndcg@10", "ERR@10"])


MORE_FAMILIES = ["AP@100", "AP", "Success@5", "Rprec", "nDCG", "RR"]  # beyond the defaults, spelled as ir_measures


@pytest.mark.parametrize("method", ["bm25", "vector"])
def test_every_family_means_what_ir_measures_computes(e2e_runs, method):
    """AP (with and without a cutoff), Success@k, R-precision, nDCG and RR without a cutoff: computed by ranx under
    the ranx name, equal per query to ir_measures on the same order (queries without results score 0)."""
    folder = RunFolder(e2e_runs[method])
    qrels, run = folder.qrels, folder.run
    ours = evaluate_run(qrels, run, MORE_FAMILIES)
    assert list(ours.columns) == ["map@100", "map", "hit_rate@5", "r-precision", "ndcg", "mrr"]
    measures = [ir_measures.parse_measure(n) for n in MORE_FAMILIES]
    ranked = {q: {d: float(len(r) - i) for i, (d, _) in enumerate(r)} for q, r in run.items() if r}
    theirs = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, ranked)}
    for name, col in zip(MORE_FAMILIES, ours.columns, strict=True):
        expected = [theirs.get((q, name), 0.0) for q in ours.index]
        assert ours[col].tolist() == pytest.approx(expected, abs=1e-6), name
        assert ours[col].sum() > 0, name  # real scores


@pytest.mark.parametrize("method", ["bm25", "vector"])
def test_scores_equal_ranx_own_qrels_and_run(e2e_runs, method):
    """evaluate_run hands ranx's kernels the arrays it builds itself (no numba dict): every ranx measure, per query,
    exactly as ranx's own ``Qrels``/``Run``/``evaluate`` gives it on the same order, graded judgments included."""
    from ranx import Qrels, Run, evaluate

    names = [*DEFAULT_METRICS, "map@100", "map", "hit_rate@5", "r-precision", "ndcg", "mrr"]
    folder = RunFolder(e2e_runs[method])
    qrels, run = dict(folder.qrels), folder.run
    first = sorted(qrels)[0]  # one graded query: its first judged doc gets relevance 2
    qrels[first] = {**qrels[first], next(iter(qrels[first])): 2}
    ours = evaluate_run(qrels, run, names)
    ranked = {q: {d: float(len(r) - i) for i, (d, _) in enumerate(r)} for q, r in run.items() if r and q in qrels}
    theirs = Run(ranked)
    evaluate(Qrels({q: qrels[q] for q in ranked}), theirs, names, return_mean=False)
    for name in names:
        assert ours.loc[sorted(ranked), name].tolist() == [float(theirs.scores[name][q]) for q in sorted(ranked)], name
        assert ours[name].sum() > 0, name  # real scores
