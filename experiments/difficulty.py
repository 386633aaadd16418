"""Fill each dataset card's difficulty table from real runs of window, BM25 and vector.

``python -m experiments.difficulty [dataset ...] [key=value overrides]`` runs (or reuses) the three
baselines on each dataset, then writes ``difficulty`` (nDCG@10 overall and per category) into
the processed folder's card.json / card.md and copies the card to ``results/cards/<name>.md``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pandas as pd

from experiments.config import all_dataset_names, load_config, project_path
from experiments.runner import run_experiment
from lethe.atomic import atomic_write_text
from lethebench.card import render_card_md

METHODS = ("window", "bm25", "vector")


def difficulty_table(name: str, overrides: list[str]) -> tuple[dict[str, Any], str]:
    """Run/reuse the baselines on ``name``; return the card section and the processed folder."""
    per_query, folders = {}, {}
    for m in METHODS:
        cfg = load_config([f"dataset={name}", f"method={m}", "run.print_summary=false", *overrides])
        folder = run_experiment(cfg)
        folders[m] = folder
        per_query[m] = pd.read_parquet(folder / "per_query.parquet")
    manifest = json.loads((folders[METHODS[0]] / "manifest.json").read_text())
    overall = {m: round(float(df["ndcg@10"].mean()), 4) for m, df in per_query.items()}
    by_cat: dict[str, dict[str, float]] = {}
    for m, df in per_query.items():
        for cat, v in df.groupby(df["category"].fillna("none"))["ndcg@10"].mean().items():
            by_cat.setdefault(str(cat), {})[m] = round(float(v), 4)
    section = {
        "metric": "nDCG@10 (mean over evaluated queries; failures score 0)",
        "split": manifest["config"]["dataset"].get("split"),
        "queries": int(len(per_query[METHODS[0]])),
        "overall": overall,
        "by_category": dict(sorted(by_cat.items())),
        "runs": {m: str(f.relative_to(project_path(manifest["config"]["results_dir"]))) for m, f in folders.items()},
    }
    return section, manifest["dataset"]["folder"]


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = [a for a in argv if "=" not in a] or all_dataset_names()
    overrides = [a for a in argv if "=" in a]
    out_dir = project_path("results/cards")
    for name in names:
        section, folder = difficulty_table(name, overrides)
        card_path = project_path(folder) / "card.json"
        card = json.loads(card_path.read_text())
        card["difficulty"] = section
        atomic_write_text(card_path, json.dumps(card, indent=2, sort_keys=True) + "\n")
        md = render_card_md(card)
        atomic_write_text(card_path.with_name("card.md"), md)
        atomic_write_text(out_dir / f"{name}.md", md)
        print(f"{name}: nDCG@10 " + ", ".join(f"{m} {v:.4f}" for m, v in section["overall"].items()))


if __name__ == "__main__":
    main()
