"""Read results folders (and the processed datasets they name) into tidy tables.

Only finished folders (with ``DONE``) are read. The report reads exactly the runs it is given as
:class:`RunRef` (the declared runs of the reproduction contract, located by config hash):
:func:`load_declared` returns the finished ones and the missing ones. :func:`load_runs` lists every
finished folder under a results folder (for summaries and for telling undeclared runs apart).
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


@dataclass(frozen=True)
class RunRef:
    """A declared run: the key it is reported under, its tier and where its results folder is."""

    dataset: str
    label: str                  # method label: name or name+variant
    tier: str
    folder: Path                # <results_dir>/<dataset>/<label>/<config hash>; may not exist yet
    dataset_folder: Path        # the processed dataset the run reads; may not be built yet
    declared: str = ""          # the declaration in one line (sample, overrides)

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.label}"


def load_run(folder: Path) -> RunInfo | None:
    """The finished run in ``folder``, or None when it has no ``DONE``."""
    folder = Path(folder)
    if not (folder / "DONE").is_file():
        return None
    return RunInfo(folder, json.loads((folder / "metrics.json").read_text()),
                   json.loads((folder / "manifest.json").read_text()))


def load_declared(refs: list[RunRef]) -> tuple[dict[tuple[str, str], RunInfo], list[RunRef]]:
    """((dataset, label) -> finished run, declared runs without a finished folder)."""
    found: dict[tuple[str, str], RunInfo] = {}
    missing: list[RunRef] = []
    for ref in refs:
        run = load_run(ref.folder)
        if run is None:
            missing.append(ref)
            continue
        if (run.dataset, run.method) != (ref.dataset, ref.label):
            raise ValueError(f"{ref.folder} holds {run.dataset}/{run.method}, not the declared {ref.key}")
        found[(ref.dataset, ref.label)] = run
    return found, missing


def undeclared(results_dir: str | Path, refs: list[RunRef]) -> list[RunInfo]:
    """Finished runs under ``results_dir`` that no ref points at (never reported; listed on the console)."""
    declared = {Path(r.folder).resolve() for r in refs}
    return [r for r in load_runs(results_dir) if r.folder.resolve() not in declared]


def load_runs(results_dir: str | Path) -> list[RunInfo]:
    """Every finished run under ``results_dir``, sorted by (dataset, method, end time)."""
    out = []
    for m in Path(results_dir).glob("*/*/*/metrics.json"):
        if (m.parent / "DONE").is_file():
            out.append(RunInfo(m.parent, json.loads(m.read_text()), json.loads((m.parent / "manifest.json").read_text())))
    return sorted(out, key=lambda r: (r.dataset, r.method, r.manifest.get("ended", "")))


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
