"""Per-query retrieval metrics with ranx.

Conventions (also in docs/running.md, "Evaluation conventions"): rankings are evaluated in the order the
runner wrote them to ``run.trec`` (score descending, ties broken by doc id descending, trec_eval's rule); a query with
relevance labels but no results scores 0 on every metric. Metric names may be given in ranx's or
ir_measures' spelling (``ndcg@10`` or ``nDCG@10``, :mod:`analysis.metric_names`); results are always keyed
by the ranx name. ranx is imported lazily because it compiles numba kernels on first use.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import pandas as pd

from analysis.metric_names import canonical_metrics, deeper_than
from lethebench.runs import RunFolder

log = logging.getLogger(__name__)

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


def rescore(folder: RunFolder | str | os.PathLike, metrics: Sequence[str]) -> pd.DataFrame:
    """Per-query ``metrics`` of a finished run computed from its own ``run.trec`` and ``qrels.trec`` (never from
    the ``per_query.parquet`` or ``metrics.json`` it stored): DataFrame indexed by query_id, one column per metric
    (ranx names), one row per query of its qrels."""
    f = folder if isinstance(folder, RunFolder) else RunFolder(folder)
    return evaluate_run(f.qrels, f.run, metrics)


def run_scores(folder: RunFolder | str | os.PathLike, metrics: Sequence[str]) -> pd.DataFrame:
    """Per-query ``metrics`` of a finished run, indexed by query_id in stored order: the columns its
    ``per_query.parquet`` holds, and any other metric computed from its run files (:func:`rescore`), so a metric
    added to ``run.metrics`` after the run needs no rerun (the metrics are not part of a run's identity)."""
    f = folder if isinstance(folder, RunFolder) else RunFolder(folder)
    names = list(canonical_metrics(metrics, "metrics"))
    depth = ((f.manifest.get("config") or {}).get("run") or {}).get("k")
    deep = deeper_than(names, depth) if isinstance(depth, int) else []
    if deep:
        log.warning(
            "%s: %s cut deeper than its run.k=%d, so they see only its top %d documents", f.path, deep, depth, depth
        )
    stored = f.per_query.set_index("query_id")
    out = stored[[m for m in names if m in stored.columns]].copy()
    missing = [m for m in names if m not in stored.columns]
    if missing:
        computed = rescore(f, missing).reindex(stored.index, fill_value=0.0)
        out[missing] = computed[missing]
    return out[names]
