"""Results folders (DESIGN.md "Runs and results"): hashing, resume checks and atomic writing.

``<results_dir>/<dataset>/<method>/<config_hash>/`` holds run.trec, run.parquet, qrels.trec,
per_query.parquet, metrics.json, manifest.json and, written last, DONE. The folder is assembled
under a temporary name and renamed into place, so it is either complete or absent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
from omegaconf import DictConfig

from experiments.config import project_path, to_dict
from lethe.core.atomic import atomic_dir
from lethebench.trec import Qrels, write_qrels, write_run

DONE = "DONE"


def config_hash(hashed: Mapping[str, Any]) -> str:
    """12-hex sha256 of the canonical JSON of the result-relevant config."""
    return hashlib.sha256(json.dumps(hashed, sort_keys=True, default=str).encode()).hexdigest()[:12]


def run_folder(results_dir: Path, dataset: str, method: str, chash: str) -> Path:
    return Path(results_dir) / dataset / method / chash


def method_label(method_cfg: Any) -> str:
    """The name results are filed and reported under: ``name``, or ``name+variant`` for a variant
    (an ablation or sweep point of the same method, e.g. ``lethe_iter1+no_boost``)."""
    variant = method_cfg.get("variant")
    return f"{method_cfg.name}+{variant}" if variant else str(method_cfg.name)


def hashed_config(cfg: DictConfig, build_key: str) -> dict[str, Any]:
    """The part of the config that determines results (paths and display options excluded)."""
    run = to_dict(cfg.run)
    return {
        "dataset": to_dict(cfg.dataset),
        "dataset_build_key": build_key,
        "method": to_dict(cfg.method),
        "chunking": to_dict(cfg.chunking),
        "run": {k: run[k] for k in ("k", "metrics", "seed", "warmup", "max_error_share")},
    }


@dataclass(frozen=True)
class RunIdentity:
    """Where a run's results live and what identifies them."""

    label: str                 # method label (name or name+variant)
    hashed: dict[str, Any]     # the hashed part of the config
    config_hash: str
    folder: Path               # <results_dir>/<dataset>/<label>/<config_hash>


def run_identity(cfg: DictConfig, build_key: str) -> RunIdentity:
    """The identity of the run ``cfg`` describes on the dataset build ``build_key``."""
    hashed = hashed_config(cfg, build_key)
    chash = config_hash(hashed)
    label = method_label(cfg.method)
    return RunIdentity(label, hashed, chash, run_folder(project_path(cfg.results_dir), cfg.dataset.name, label, chash))


def is_done(folder: Path) -> bool:
    return (folder / DONE).is_file()


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def write_results(
    folder: Path,
    run: Mapping[str, Sequence[tuple[str, float]]],
    qrels: Qrels,
    per_query: pd.DataFrame,
    metrics: Mapping[str, Any],
    manifest: Mapping[str, Any],
    tag: str,
) -> Path:
    """Write a complete results folder atomically; ``DONE`` is the last file written."""
    with atomic_dir(folder) as tmp:
        write_run(run, tmp / "run.trec", tag)
        rows = [(q, r, d, s) for q in sorted(run) for r, (d, s) in enumerate(run[q], 1)]
        pd.DataFrame(rows, columns=["query_id", "rank", "doc_id", "score"]).to_parquet(tmp / "run.parquet", index=False)
        write_qrels(qrels, tmp / "qrels.trec")
        per_query.to_parquet(tmp / "per_query.parquet", index=False)
        (tmp / "metrics.json").write_text(_json(metrics))
        (tmp / "manifest.json").write_text(_json(manifest))
        (tmp / DONE).write_text("complete\n")
    return folder
