"""Each dataset card's difficulty table, from real runs of window, BM25 and vector.

``python -m experiments.difficulty [dataset ...] [key=value overrides]`` runs (or reuses) the three
baselines on each dataset; ``experiments.reproduce`` calls :func:`write_difficulty` with the core
tier's declared runs instead. The table (nDCG@10 overall and per category) is written beside the
processed dataset's card as ``difficulty.json`` (the card itself, which runs record by hash, is never
rewritten) and, with the card, to ``results/cards/<name>.md``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping

from experiments.config import all_dataset_names, load_config
from lethe.core.paths import project_path
from experiments.runner import run_experiment
from lethe.core.atomic import atomic_write_text
from lethebench.card import render_card_md
from lethebench.runs import RunFolder

METHODS = ("window", "bm25", "vector")


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
        "runs": {m: "/".join(f.parts[-3:]) for m, f in folders.items()},
    }
    return section, project_path(manifest["dataset"]["folder"])


def write_difficulty(name: str, folders: Mapping[str, Path], cards_dir: str | Path = "results/cards") -> dict[str, Any]:
    """Write ``difficulty.json`` beside the dataset's card and ``<cards_dir>/<name>.md``; return the section."""
    section, ds_folder = difficulty_section(folders)
    atomic_write_text(ds_folder / "difficulty.json", json.dumps(section, indent=2, sort_keys=True) + "\n")
    card = json.loads((ds_folder / "card.json").read_text())
    atomic_write_text(project_path(cards_dir) / f"{name}.md", render_card_md({**card, "difficulty": section}))
    print(f"{name}: nDCG@10 " + ", ".join(f"{m} {v:.4f}" for m, v in section["overall"].items()))
    return section


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = [a for a in argv if "=" not in a] or all_dataset_names()
    overrides = [a for a in argv if "=" in a]
    for name in names:
        folders = {m: run_experiment(load_config([f"dataset={name}", f"method={m}", "run.print_summary=false", *overrides]))
                   for m in METHODS}
        write_difficulty(name, folders)


if __name__ == "__main__":
    main()
