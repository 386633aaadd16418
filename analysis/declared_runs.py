"""Read results folders (and the processed datasets they name) into tidy tables.

Only finished folders (with ``DONE``) are read. The report reads exactly the runs it is given as
:class:`RunRef` (the declared runs of the reproduction contract, located by config hash):
:func:`load_declared` returns the finished ones and the missing ones. :func:`load_runs` lists every
finished folder under a results folder (for summaries and for telling undeclared runs apart).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lethebench.runs import RunFolder, finished_runs

DAMAGED_FOLDER = "(damaged)"  # appended to a stored folder that differs from its tier's seal: nothing reads it


class RunInfo(RunFolder):
    """One finished results folder (:class:`lethebench.runs.RunFolder`) with what the report asks of it."""

    @property
    def folder(self) -> Path:
        return self.path

    @property
    def stored_labels(self) -> dict[str, Any] | None:
        """For a run of the reference store (experiments.reference_store): the label metrics stored in its
        per-query table and their settings (``coverage_n``, ``contradiction_k``); None for a results folder."""
        path = self.path / "labels.json"
        return json.loads(path.read_text()) if path.is_file() else None

    @property
    def filters(self) -> dict[str, Any]:
        return self.metrics.get("filters") or {}

    @property
    def is_default_subset(self) -> bool:
        """No scope/category/sample subset (a dataset's split choice is part of its default config)."""
        return not any(self.filters.get(k) for k in ("scopes", "categories", "sample"))


@dataclass(frozen=True)
class RunRef:
    """A declared run: the key it is reported under, its tier and where its results folder is."""

    dataset: str
    label: str  # method label: name or name+variant
    tier: str
    folder: Path  # <results_dir>/<dataset>/<label>/<config hash>; may not exist yet
    dataset_folder: Path  # the processed dataset the run reads; may not be built yet
    declared: str = ""  # the declaration in one line (sample, overrides)
    damage: str | None = None  # why its reference-store copy is not read (it differs from the tier's seal)

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.label}"


def load_run(folder: Path) -> RunInfo | None:
    """The finished run in ``folder``, or None when it has no ``DONE`` or is damaged (a console line says what is
    wrong: the report shows it as not run, and ``make reproduce`` makes it again)."""
    run = RunInfo(folder)
    if run.damage is not None:
        print(
            f"DAMAGED ({run.damage}): {folder} is left out of the report; make reproduce runs it again",
            file=sys.stderr,
            flush=True,
        )
        return None
    return run if run.is_done else None


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
    """Every finished run under ``results_dir``, sorted by (dataset, method, end time); a damaged one is named on the
    console and left out (:func:`load_run`)."""
    out = [run for f in finished_runs(results_dir) if (run := load_run(f.path)) is not None]
    return sorted(out, key=lambda r: (r.dataset, r.method, r.manifest.get("ended", "")))


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
