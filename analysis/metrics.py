"""Per-query retrieval metrics with ranx (and, for measures ranx lacks, ir_measures' pytrec_eval or judged provider).

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

import numpy as np
import pandas as pd

from analysis.metric_names import (
    canonical_metrics,
    deeper_than,
    ir_measures_provider,
    is_ir_measures_only,
    is_longmemeval,
    metric_cutoff,
)
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
    metrics = canonical_metrics(metrics, "metrics")
    qids = sorted(qrels)
    out = pd.DataFrame(0.0, index=pd.Index(qids, name="query_id"), columns=list(metrics))
    with_results = [q for q in qids if run.get(q)]
    if not with_results:
        return out
    # rank-derived scores: the evaluated order is exactly the written order
    ranked = {q: {d: float(len(run[q]) - i) for i, (d, _) in enumerate(run[q])} for q in with_results}
    labels = {q: dict(qrels[q]) for q in with_results}
    by_ranx = [m for m in metrics if not is_ir_measures_only(m) and not is_longmemeval(m)]
    if by_ranx:
        for m, values in _by_ranx(by_ranx, labels, ranked, with_results).items():
            out.loc[with_results, m] = values
    for m, values in _by_ir_measures([m for m in metrics if is_ir_measures_only(m)], labels, ranked).items():
        out.loc[list(values), m] = list(values.values())
    lme = [m for m in metrics if is_longmemeval(m)]
    if lme:
        from analysis.longmemeval import per_query

        ks = sorted({metric_cutoff(m) for m in lme})
        scores = per_query({q: run[q] for q in with_results}, labels, ks)
        out.loc[with_results, lme] = scores.loc[with_results, lme].to_numpy()
    return out


def _by_ranx(
    names: Sequence[str],
    qrels: Mapping[str, Mapping[str, int]],
    ranked: Mapping[str, Mapping[str, float]],
    qids: Sequence[str],
) -> dict[str, np.ndarray]:
    """Per-query values of ranx's measures ``names`` for ``qids`` (in that order): {name: float64 array (n,)}.

    ranx's own kernels on the arrays its ``Qrels``/``Run`` become before they are scored, one (n_docs, 2) array per
    query of (doc, score) rows sorted by score descending, built here directly: a doc id is numbered by its first
    appearance in the query's judgments then ranking (exact, where ranx hashes it to a float). No numba typed dict is
    made: its operations compile in every process, where the metric kernels load from numba's cache."""
    from numba.typed import List as TypedList
    from ranx.meta.evaluate import extract_metric_and_params
    from ranx.metrics import metric_switch

    judged, runs = TypedList(), TypedList()
    for q in qids:
        ids: dict[str, int] = {}
        rels = sorted(qrels[q].items(), key=lambda kv: -kv[1])  # ranx sorts judgments by relevance too
        for d, _ in rels:
            ids.setdefault(d, len(ids))
        for d in ranked[q]:
            ids.setdefault(d, len(ids))
        judged.append(np.array([(ids[d], rel) for d, rel in rels], np.float64).reshape(-1, 2))
        runs.append(np.array([(ids[d], s) for d, s in ranked[q].items()], np.float64).reshape(-1, 2))
    out = {}
    for name in names:
        metric, k, rel_lvl = extract_metric_and_params(name)
        out[name] = np.asarray(metric_switch(metric)(judged, runs, k, rel_lvl), np.float64)
    return out


def _by_ir_measures(
    names: Sequence[str], qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """Per-query values of measures ranx lacks (``Judged@10``, ``P(rel=2)@5``, ...), each computed by the provider
    :func:`analysis.metric_names.ir_measures_provider` names: {name: {query_id: value}}. A query a provider gives no
    value for keeps 0 (as a query without results)."""
    import ir_measures

    out: dict[str, dict[str, float]] = {n: {} for n in names}
    for n in names:
        measure = ir_measures.parse_measure(n)
        for value in ir_measures_provider(measure).iter_calc([measure], qrels, ranked):
            out[n][value.query_id] = float(value.value)
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
