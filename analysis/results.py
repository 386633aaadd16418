"""Read results folders (and the processed datasets they name) into tidy tables.

Only finished folders (with ``DONE``) are read. For each (dataset, method name) the *reference
run* is the most recent finished run whose dataset filters are the dataset's defaults (no scope or
category subset), else the most recent subset run; all runs stay available through :func:`load_runs`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from lethebench.trec import read_run


@dataclass
class RunInfo:
    """One finished results folder."""

    folder: Path
    metrics: dict[str, Any]
    manifest: dict[str, Any] = field(repr=False)

    @property
    def dataset(self) -> str:
        return self.metrics["dataset"]

    @property
    def method(self) -> str:
        return self.metrics["method"]

    @property
    def config_hash(self) -> str:
        return self.metrics["config_hash"]

    @property
    def filters(self) -> dict[str, Any]:
        return self.metrics.get("filters") or {}

    @property
    def is_default_subset(self) -> bool:
        """No scope/category/sample subset (a dataset's split choice is part of its default config)."""
        return not any(self.filters.get(k) for k in ("scopes", "categories", "sample"))

    @cached_property
    def per_query(self) -> pd.DataFrame:
        return pd.read_parquet(self.folder / "per_query.parquet")

    @cached_property
    def run(self) -> dict[str, list[tuple[str, float]]]:
        return read_run(self.folder / "run.trec")

    @property
    def dataset_folder(self) -> Path:
        return Path(self.manifest["dataset"]["folder"])


def load_runs(results_dir: str | Path) -> list[RunInfo]:
    """Every finished run under ``results_dir``, sorted by (dataset, method, end time)."""
    out = []
    for m in Path(results_dir).glob("*/*/*/metrics.json"):
        if (m.parent / "DONE").is_file():
            out.append(RunInfo(m.parent, json.loads(m.read_text()), json.loads((m.parent / "manifest.json").read_text())))
    return sorted(out, key=lambda r: (r.dataset, r.method, r.manifest.get("ended", "")))


def reference_runs(runs: list[RunInfo]) -> dict[tuple[str, str], RunInfo]:
    """(dataset, method) -> the most recent finished run on the default subset, or, when there is
    none, the most recent run on a subset (its filters are shown wherever it is reported)."""
    ref: dict[tuple[str, str], RunInfo] = {}
    for r in runs:  # sorted by end time: later ones win
        key = (r.dataset, r.method)
        if r.is_default_subset or key not in ref or not ref[key].is_default_subset:
            ref[key] = r
    return ref


def load_queries(dataset_folder: Path) -> pd.DataFrame:
    """queries.parquet of a processed dataset, with meta parsed into a dict column ``meta_d``."""
    q = pd.read_parquet(dataset_folder / "queries.parquet")
    q["meta_d"] = q["meta"].map(json.loads)
    return q


def tidy(runs: list[RunInfo], metrics: list[str] | None = None) -> pd.DataFrame:
    """Long table: dataset, method, config_hash, query_id, category, metric, value (one row each)."""
    frames = []
    for r in runs:
        pq = r.per_query
        cols = [c for c in (metrics or r.metrics["means"].keys()) if c in pq.columns]
        long = pq.melt(id_vars=["query_id", "category"], value_vars=cols, var_name="metric", value_name="value")
        long.insert(0, "config_hash", r.config_hash)
        long.insert(0, "method", r.method)
        long.insert(0, "dataset", r.dataset)
        frames.append(long)
    if not frames:
        return pd.DataFrame(columns=["dataset", "method", "config_hash", "query_id", "category", "metric", "value"])
    return pd.concat(frames, ignore_index=True)
