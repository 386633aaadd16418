"""Per-query retrieval metrics with ranx.

Conventions (also in README): rankings are evaluated in the order the runner wrote them to
``run.trec`` (score descending, ties broken by doc id descending, trec_eval's rule); a query with
relevance labels but no results scores 0 on every metric. Metric names may be given in ranx's or
ir_measures' spelling (``ndcg@10`` or ``nDCG@10``, :mod:`analysis.metric_names`); results are always keyed
by the ranx name. ranx is imported lazily because it compiles numba kernels on first use.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from analysis.metric_names import canonical_metrics

DEFAULT_METRICS = ("ndcg@10", "recall@10", "recall@50", "mrr@10", "precision@10")


def evaluate_run(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Sequence[tuple[str, float]]],
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> pd.DataFrame:
    """Score every query of ``qrels``: DataFrame indexed by query_id, one column per metric, named by
    its canonical (ranx) name whichever spelling ``metrics`` used (an unknown name raises
    :class:`analysis.metric_names.UnknownMetric`).

    ``run`` maps query_id -> ranking in final order; queries missing from it or with an empty
    ranking score 0. The ranking order, not the raw scores, is what is evaluated.
    """
    from ranx import Qrels, Run, evaluate

    metrics = canonical_metrics(metrics, "metrics")
    qids = sorted(qrels)
    out = pd.DataFrame(0.0, index=pd.Index(qids, name="query_id"), columns=list(metrics))
    with_results = [q for q in qids if run.get(q)]
    if with_results:
        # rank-derived scores: the evaluated order is exactly the written order
        r = Run({q: {d: float(len(run[q]) - i) for i, (d, _) in enumerate(run[q])} for q in with_results})
        qr = Qrels({q: dict(qrels[q]) for q in with_results})
        evaluate(qr, r, list(metrics), return_mean=False)
        for m in metrics:
            out.loc[with_results, m] = [float(r.scores[m][q]) for q in with_results]
    return out
