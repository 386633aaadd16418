"""What the tables and figures read: one view per dataset of its declared runs' per-query scores,
with the label metrics (analysis.label_metrics: Coverage@N, contradiction@k, answer recall) added, and the bootstrap CIs they share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis import stats
from analysis.declared_runs import RunInfo, RunRef, load_declared
from analysis.label_metrics import LabelData, add_label_scores, label_columns, label_params
from analysis.labels import read_contradictions
from analysis.metric_names import canonical_or_other, is_retrieval_metric
from analysis.metrics import run_scores
from lethebench.schema import read_table


@dataclass
class DatasetView:
    """Everything the tables need about one dataset: its queries and each method's per-query scores."""

    name: str
    queries: pd.DataFrame
    runs: dict[str, RunInfo]
    per_query: dict[str, pd.DataFrame] = field(default_factory=dict)  # method -> indexed by query_id
    label_metrics: list[str] = field(default_factory=list)
    missing: dict[str, RunRef] = field(default_factory=dict)  # declared labels without a finished run
    # dataset folder -> its label inputs: runs of one dataset may have their own builds (another chunking has other
    # doc units), so the label metrics read each run's own
    label_data: dict[Path, LabelData] = field(default_factory=dict, repr=False)


def method_order(methods: list[str], cfg: Mapping[str, Any]) -> list[str]:
    """The main family in its order (a reranker's random control right after it), then the rest sorted."""
    controls = {m: spec.get("random") for m, spec in (cfg.get("rerankers") or {}).items() if spec.get("random")}
    known: list[str] = []
    for m in list(cfg["baselines"]) + list(cfg["lethe"]):
        known += [m] + ([controls[m]] if m in controls and controls[m] not in known else [])
    return [m for m in known if m in methods] + sorted(m for m in methods if m not in known)


def main_family(cfg: Mapping[str, Any]) -> list[str]:
    """The paper's methods in their fixed order: the baselines, then the Lethe iterations."""
    return list(cfg["baselines"]) + list(cfg["lethe"])


def asked_metrics(cfg: Mapping[str, Any]) -> list[str]:
    """The retrieval metrics (canonical names) the report's settings name: best baseline, gate and family metrics."""
    names = [cfg.get("best_baseline_metric"), cfg.get("gate_metric"), *(cfg.get("family_metrics") or [])]
    return list(dict.fromkeys(canonical_or_other(n) for n in names if n and is_retrieval_metric(n)))


def collect(cfg: Mapping[str, Any], refs: list[RunRef]) -> dict[str, DatasetView]:
    """The declared runs per dataset, with Coverage@N / contradiction@k added where labelled.

    Only ``refs`` are read; a declared run without a finished folder is kept in ``missing``. A
    dataset with no finished run has no view (its missing runs are listed by the report)."""
    found, missing = load_declared(refs)
    views: dict[str, DatasetView] = {}
    for (ds, method), run in sorted(found.items()):
        if ds not in views:
            views[ds] = DatasetView(ds, read_table(run.dataset_folder, "queries"), {})
        v = views[ds]
        v.runs[method] = run
        pq = run.per_query.set_index("query_id")
        stored = run.stored_labels
        if stored is not None:  # a reference-store run: its label metrics were computed when it was stored
            params = label_params(cfg)
            # a setting the store does not name came after it was made: that metric is missing (n/m), not wrong
            if any(stored.get(s, p) != p for s, p in params.items()):
                raise ValueError(
                    f"{run.folder} stores the label metrics at "
                    + ", ".join(f"{s}={stored.get(s)}" for s in params)
                    + "; "
                    + ", ".join(f"{s}={p}" for s, p in params.items())
                    + " need the run folders"
                )
        else:
            add_label_metrics(v, run, pq, cfg)
        unstored = [m for m in asked_metrics(cfg) if m not in pq.columns]
        if unstored:  # a metric the run did not store: from its run files (metrics are not part of a run's identity)
            if stored is not None:
                raise ValueError(f"{run.folder} (reference store) has no {unstored}; they need the run folders")
            pq[unstored] = run_scores(run, unstored).reindex(pq.index)
        v.per_query[method] = pq
    for ref in missing:
        if ref.dataset in views:
            views[ref.dataset].missing[ref.label] = ref
    for v in views.values():
        v.label_metrics = label_columns(list({c for pq in v.per_query.values() for c in pq.columns}))
    return views


def add_label_metrics(v: DatasetView, run: RunInfo, pq: pd.DataFrame, cfg: Mapping[str, Any]) -> None:
    """Add every label metric switched on in ``cfg`` (:mod:`analysis.label_metrics`) to ``pq`` (indexed by query_id)
    where ``v``'s dataset has its labels, from ``run``'s rankings over its own dataset build (whose corpus text and
    labels are read once per build, in ``v.label_data``)."""
    folder = run.dataset_folder
    if folder not in v.label_data:
        v.label_data[folder] = LabelData(read_table(folder, "corpus", ["doc_id", "text"]), read_contradictions(folder))
    evaluated = v.queries[v.queries["query_id"].isin(pq.index)]
    add_label_scores(pq, run.run, v.label_data[folder], evaluated, cfg)


_CI_CACHE: dict[tuple, dict[str, Any]] = {}


def cached_mean_ci(x: np.ndarray, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """stats.mean_ci with the configured resamples/confidence/seed, memoized on the values
    (tables and figures ask for the same CIs)."""
    x = np.ascontiguousarray(x, dtype=float)
    key = (x.tobytes(), int(cfg["bootstrap_resamples"]), float(cfg["confidence"]), int(cfg["seed"]))
    if key not in _CI_CACHE:
        _CI_CACHE[key] = stats.mean_ci(x, resamples=key[1], confidence=key[2], seed=key[3])
    return _CI_CACHE[key]


def paired_row(v: DatasetView, ds: str, m: str, base: str, metric: str, cfg: Mapping[str, Any]) -> dict | None:
    """One paired comparison of method ``m`` against ``base`` on ``metric``, on the queries both scored
    (None if not measurable): the row of Table 2, the steps table and the sanity gates."""
    if metric not in v.per_query[m] or metric not in v.per_query[base]:
        return None
    # label metrics exist only for labelled queries (NaN elsewhere); the labelled set must
    # then be identical for both systems, which align() enforces
    frames = {"a": v.per_query[m][[metric]].dropna(), "b": v.per_query[base][[metric]].dropna()}
    if frames["a"].empty:
        return None
    subset_note = ""
    ia, ib = set(frames["a"].index), set(frames["b"].index)
    if (
        ia != ib
    ):  # runs on (different) samples: compare on the queries both scored (per-query scores do not depend on others)
        common = sorted(ia & ib)
        if not common:
            return None
        if ia < ib:
            subset_note = f"paired on the method's {len(ia)}-query subset; "
        elif ib < ia:
            subset_note = f"paired on the reference's {len(ib)}-query subset; "
        else:
            subset_note = f"paired on the {len(common)} queries both runs scored; "
        frames = {k: f.loc[common] for k, f in frames.items()}
    pair = stats.align(frames, metric)
    t = stats.paired_test(
        pair["a"].to_numpy(float),
        pair["b"].to_numpy(float),
        resamples=int(cfg["permutation_resamples"]),
        seed=int(cfg["seed"]),
        confidence=float(cfg["confidence"]),
    )
    return {
        "dataset": ds,
        "metric": metric,
        "baseline": base,
        "method": m,
        "n": t["n"],
        "baseline_mean": float(pair["b"].mean()),
        "method_mean": float(pair["a"].mean()),
        "mean_diff": t["mean_diff"],
        "ci_low": t["ci_low"],
        "ci_high": t["ci_high"],
        "p_wilcoxon": t["p_wilcoxon"],
        "n_nonzero": t["n_nonzero"],
        "p_randomization": t["p_randomization"],
        "d_z": t["d_z"],
        "wins": t["wins"],
        "ties": t["ties"],
        "losses": t["losses"],
        "ci_method": t["ci_method"],
        "wilcoxon_method": t["wilcoxon_method"],
        "notes": subset_note + (t["notes"] or ""),
    }


def without_labels(views: Mapping[str, DatasetView], drop: Callable[[str], bool]) -> dict[str, DatasetView]:
    """The views without the runs whose method label ``drop`` selects (finished or missing); datasets left with
    no finished run are dropped."""
    out = {}
    for ds, v in views.items():
        keep = [m for m in v.runs if not drop(m)]
        if keep:
            out[ds] = DatasetView(
                v.name,
                v.queries,
                {m: v.runs[m] for m in keep},
                {m: v.per_query[m] for m in keep if m in v.per_query},
                list(v.label_metrics),
                {m: r for m, r in v.missing.items() if not drop(m)},
                v.label_data,
            )
    return out
