"""Each dataset card's difficulty table, from real runs of window, BM25 and vector.

    python -m experiments.difficulty dataset=locomo [key=value overrides]
    python -m experiments.difficulty -m dataset=locomo,techqa

runs (or reuses) the methods of ``conf/difficulty.yaml`` on the dataset (:func:`difficulty`);
``experiments.reproduce`` calls :func:`write_difficulty` with the core tier's declared runs instead.
The table (nDCG@10 overall and per category) is written beside the processed dataset's card as
``difficulty.json`` (the card itself, which runs record by hash, is never rewritten) and, with the
card, to ``<cards_dir>/<name>.md``.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, open_dict

from experiments.config import load_config
from experiments.runner import run_experiment
from lethe.core.arguments import check_arguments
from lethe.core.atomic import atomic_write_text
from lethe.core.paths import Paths
from lethebench.card import render_card_md
from lethebench.runs import RunFolder

OWN_KEYS = ("methods", "cards_dir")  # keys of conf/difficulty.yaml that are not run config


def difficulty_section(folders: Mapping[str, Path]) -> tuple[dict[str, Any], Path]:
    """(difficulty section, processed dataset folder) from finished runs (method -> results folder)."""
    per_query = {m: RunFolder(f).per_query for m, f in folders.items()}
    manifest = RunFolder(next(iter(folders.values()))).manifest
    overall = {m: round(float(df["ndcg@10"].mean()), 4) for m, df in per_query.items()}
    by_cat: dict[str, dict[str, float]] = {}
    for m, df in per_query.items():
        for cat, v in df.groupby(df["category"].fillna("none"))["ndcg@10"].mean().items():
            by_cat.setdefault(str(cat), {})[m] = round(float(v), 4)
    section = {
        "metric": "nDCG@10 (mean over evaluated queries; failures score 0)",
        "split": manifest["config"]["dataset"].get("split"),
        "queries": int(len(per_query[next(iter(per_query))])),
        "overall": overall,
        "by_category": dict(sorted(by_cat.items())),
        "runs": {
            m: f"{r.dataset}/{r.method}/{r.config_hash}" for m, r in ((m, RunFolder(f)) for m, f in folders.items())
        },
    }
    return section, RunFolder(next(iter(folders.values()))).dataset_folder


def write_difficulty(
    name: str, folders: Mapping[str, Path], cards_dir: str | Path, beside_card: bool = True, note: str | None = None
) -> dict[str, Any]:
    """Write ``<cards_dir>/<name>.md`` (``note`` first, when given) and (``beside_card``) ``difficulty.json`` beside
    the dataset's card; return the section. The reference store's datasets are read only (``beside_card=False``)."""
    section, ds_folder = difficulty_section(folders)
    if beside_card:
        atomic_write_text(ds_folder / "difficulty.json", json.dumps(section, indent=2, sort_keys=True) + "\n")
    card = json.loads((ds_folder / "card.json").read_text())
    page = {"name": card.get("name", name), **({"note": note} if note else {}), **card, "difficulty": section}
    atomic_write_text(Paths.default().resolve(cards_dir) / f"{name}.md", render_card_md(page))
    print(f"{name}: nDCG@10 " + ", ".join(f"{m} {v:.4f}" for m, v in section["overall"].items()))
    return section


def method_run_config(cfg: DictConfig, method: str) -> DictConfig:
    """The run config of ``method`` on ``cfg``'s dataset: ``cfg`` without difficulty's own keys, its
    method node composed from ``conf/method/<method>.yaml`` (interpolations resolve against ``cfg``)."""
    run = copy.deepcopy(cfg)
    with open_dict(run):
        for key in OWN_KEYS:
            run.pop(key, None)
        run.method = load_config([f"method={method}"]).method
    return run


def difficulty(cfg: DictConfig) -> dict[str, Any]:
    """Run (or reuse) each of ``cfg.methods`` on ``cfg.dataset`` and write the dataset's difficulty table."""
    folders = {m: run_experiment(method_run_config(cfg, str(m))) for m in cfg.methods}
    return write_difficulty(str(cfg.dataset.name), folders, str(cfg.cards_dir))


@hydra.main(config_path="../conf", config_name="difficulty", version_base="1.3")
def main(cfg: DictConfig) -> None:
    difficulty(cfg)


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
