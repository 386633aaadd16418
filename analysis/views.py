"""What the tables and figures read: one view per dataset of its declared runs' per-query scores,
with label metrics (Coverage@N, contradiction@k) added, and the bootstrap CIs they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from analysis import stats
from analysis.labels import contradiction_at_k, coverage_at_n, read_contradictions
from analysis.declared_runs import RunInfo, RunRef, load_declared


@dataclass
class DatasetView:
    """Everything the tables need about one dataset: its queries and each method's per-query scores."""

    name: str
    queries: pd.DataFrame
    runs: dict[str, RunInfo]
    per_query: dict[str, pd.DataFrame] = field(default_factory=dict)  # method -> indexed by query_id
    label_metrics: list[str] = field(default_factory=list)
    missing: dict[str, RunRef] = field(default_factory=dict)  # declared labels without a finished run


def method_order(methods: list[str], cfg: Mapping[str, Any]) -> list[str]:
    known = list(cfg["baselines"]) + list(cfg["lethe"])
    return [m for m in known if m in methods] + sorted(m for m in methods if m not in known)


def main_family(cfg: Mapping[str, Any]) -> list[str]:
    """The paper's methods in their fixed order: the baselines, then the Lethe iterations."""
    return list(cfg["baselines"]) + list(cfg["lethe"])


def collect(cfg: Mapping[str, Any], refs: list[RunRef]) -> dict[str, DatasetView]:
    """The declared runs per dataset, with Coverage@N / contradiction@k added where labelled.

    Only ``refs`` are read; a declared run without a finished folder is kept in ``missing``. A
    dataset with no finished run has no view (its missing runs are listed by the report)."""
    found, missing = load_declared(refs)
    views: dict[str, DatasetView] = {}
    for (ds, method), run in sorted(found.items()):
        if ds not in views:
            folder = run.dataset_folder
            q = pd.read_parquet(folder / "queries.parquet")
            views[ds] = DatasetView(ds, q, {})
            views[ds]._corpus = pd.read_parquet(folder / "corpus.parquet", columns=["doc_id", "text"])  # type: ignore[attr-defined]
            views[ds]._contra = read_contradictions(folder)  # type: ignore[attr-defined]
        v = views[ds]
        v.runs[method] = run
        pq = run.per_query.set_index("query_id")
        n, k = int(cfg["coverage_n"]), int(cfg["contradiction_k"])
        evaluated = v.queries[v.queries["query_id"].isin(pq.index)]
        cov = coverage_at_n(run.run, evaluated, v._corpus, n)  # type: ignore[attr-defined]
        if len(cov):
            pq[f"coverage@{n}"] = cov.reindex(pq.index)
        con = contradiction_at_k(run.run, v._contra, list(pq.index), k)  # type: ignore[attr-defined]
        if len(con):
            pq[f"contradiction@{k}"] = con.reindex(pq.index)
        v.per_query[method] = pq
    for ref in missing:
        if ref.dataset in views:
            views[ref.dataset].missing[ref.label] = ref
    for v in views.values():
        v.label_metrics = sorted({c for pq in v.per_query.values() for c in pq.columns if c.startswith(("coverage@", "contradiction@"))})
    return views


_CI_CACHE: dict[tuple, dict[str, Any]] = {}


def cached_mean_ci(x: np.ndarray, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """stats.mean_ci with the configured resamples/confidence/seed, memoized on the values
    (tables and figures ask for the same CIs)."""
    x = np.ascontiguousarray(x, dtype=float)
    key = (x.tobytes(), int(cfg["bootstrap_resamples"]), float(cfg["confidence"]), int(cfg["seed"]))
    if key not in _CI_CACHE:
        _CI_CACHE[key] = stats.mean_ci(x, resamples=key[1], confidence=key[2], seed=key[3])
    return _CI_CACHE[key]
