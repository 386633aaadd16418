"""Tune the hybrid baseline's fusion parameter on one dataset's labels, cross-fitted on iteration 3's folds
(settings: ``conf/tune_hybrid.yaml``; ``make reproduce`` runs it as a prerequisite of a tuned hybrid run).

    python -m experiments.tune_hybrid dataset=lethebench method=hybrid_tuned [force=true] [overrides]

1. Over the labelled queries iteration 3's learned fusion learns from (:func:`experiments.cross_fit.labelled_queries`:
   train and dev on LetheBench, every query elsewhere; each query sees only its eligible docs, as in a run), the
   hybrid's two first-stage lists are built once per query and fused with every grid value of the tuned parameter;
   nDCG@10 per query and value (ranx, real qrels).
2. Folds: :func:`lethebench.folds.cross_fit_plan` over the same rows as iteration 3's, so the same folds. Per fold, the
   value with the best mean nDCG@10 over its train and dev queries (the labels iteration 3's fold model was fitted
   and selected on); ties go to the value nearest the untuned hybrid's.
3. Saves ``tuning.json`` (per fold: the value, the mean nDCG@10 of every grid value, the query ids it must never rank)
   under ``method.tuning.dir/<dataset build key>[-<query pool key>]/<configuration key>``.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from analysis.metrics import evaluate_run
from baselines.hybrid_tuned import TunedHybrid
from experiments.config import to_dict
from experiments.cross_fit import labelled_ids, labelled_queries
from experiments.datasets import dataset_build_key, dataset_key, prepare_dataset
from experiments.run_identity import method_params
from experiments.runner import QuerySelection, group_docs, walk_eligible
from lethe.core.arguments import check_arguments
from lethe.core.locking import hold
from lethe.core.paths import Paths
from lethe.core.protocol import Query
from lethe.core.targets import build
from lethebench.folds import cross_fit_plan
from lethebench.provenance import git_info
from lethebench.schema import read_dataset


def tuned_method(cfg: DictConfig, progress: bool = True) -> TunedHybrid:
    """The run config's tuned hybrid, as the runner builds it (no tuning loaded)."""
    if OmegaConf.select(cfg, "method.tuning") is None:
        raise ValueError(f"method {cfg.method.name} has no tuning section; use hybrid_tuned or hybrid_rrf_tuned")
    method = build(
        method_params(to_dict(cfg.method)), cache_dir=Paths.of(cfg).cache, progress=progress, _convert_="all"
    )
    if not isinstance(method, TunedHybrid):
        raise TypeError(f"method {cfg.method.name} builds {type(method).__name__}, not a TunedHybrid")
    return method


def tuning_folder(cfg: DictConfig) -> Path:
    """Where the tuning of the run config ``cfg`` is (or will be) saved."""
    pool = QuerySelection.from_config(to_dict(cfg.dataset), int(cfg.run.seed)).pool_key()
    return tuned_method(cfg, progress=False).tuning_dir(dataset_build_key(cfg), pool)


def grid_scores(cfg: DictConfig, method: TunedHybrid, progress: bool = True) -> tuple[pd.DataFrame, np.ndarray, str]:
    """(meta: query_id, scope_id, split per labelled query in walk order; nDCG@10 (n, len(grid)); build key)."""
    ds_folder = prepare_dataset(cfg)
    ds = read_dataset(ds_folder, cfg.dataset.name)
    build_key = dataset_key(cfg, ds_folder, ds)
    ds, q = labelled_queries(cfg, ds, labelled_ids(ds))  # test queries never prepared, their labels never read
    grid = list(method.tuning.grid)
    runs: list[dict[str, list[tuple[str, float]]]] = [{} for _ in grid]
    metas = []
    docs = group_docs(ds)
    bar = tqdm(total=len(q), desc=f"{method.tuning.parameter} grid {cfg.dataset.name}", disable=not progress, unit="q")
    for scope_id, row, ne, new_docs in walk_eligible(q, docs):
        bar.update()
        if ne == 0:
            continue
        if new_docs is not None:
            method.index(new_docs)
        c = method.candidates(Query(row.text, tuple(row.history), row.query_id, scope_id))
        metas.append(
            {"query_id": row.query_id, "scope_id": scope_id, "split": row.split if isinstance(row.split, str) else None}
        )
        for j, v in enumerate(grid):
            runs[j][row.query_id] = method.fuse(c, 10, **{method.tuning.parameter: v})
    bar.close()
    method.close()
    meta = pd.DataFrame(metas, columns=["query_id", "scope_id", "split"])
    qrels = {qid: ds.qrels[qid] for qid in meta["query_id"]}
    ndcg = (
        np.column_stack([evaluate_run(qrels, r, ["ndcg@10"]).loc[meta["query_id"], "ndcg@10"].to_numpy() for r in runs])
        if len(meta)
        else np.zeros((0, len(grid)))
    )
    return meta, ndcg, build_key


def choose(ndcg: np.ndarray, grid: list[float], default: float) -> tuple[float, list[float]]:
    """(the grid value with the best mean nDCG@10 over the rows of ``ndcg`` (n, len(grid)), ties to the value nearest
    ``default``; the mean of every value)."""
    if not len(ndcg):
        raise ValueError("no labelled query to tune on")
    means = ndcg.mean(axis=0)
    best = np.flatnonzero(means >= means.max() - 1e-12)
    j = min(best, key=lambda i: (abs(grid[i] - default), grid[i]))
    return float(grid[j]), [round(float(m), 6) for m in means]


def tune(cfg: DictConfig, progress: bool = True) -> tuple[TunedHybrid, dict[str, Any]]:
    """The tuned method of ``cfg`` and its tuning card (not yet saved)."""
    method = tuned_method(cfg, progress)
    grid = [float(g) for g in method.tuning.grid]
    meta, ndcg, build_key = grid_scores(cfg, method, progress)
    plans, scheme = cross_fit_plan(meta, int(method.tuning.folds), int(method.tuning.seed))
    folds = []
    for plan in plans:
        fit = plan.train | plan.dev
        value, means = choose(ndcg[fit], grid, method.default_value())
        ids = lambda mask: sorted(meta.loc[mask, "query_id"])  # noqa: E731
        folds.append(
            {
                "value": value,
                "mean_ndcg@10_by_value": dict(zip(map(str, grid), means, strict=True)),
                "n_train": int(plan.train.sum()),
                "n_dev": int(plan.dev.sum()),
                "n_heldout": None if plan.heldout is None else int(plan.heldout.sum()),
                "train_ids": ids(plan.train),
                "dev_ids": ids(plan.dev),
                "heldout_ids": None if plan.heldout is None else ids(plan.heldout),
                "scopes": sorted(plan.scopes),
            }
        )
    card = {
        "dataset": {"name": str(cfg.dataset.name), "build_key": build_key},
        "base": method.base_config(),
        "tuning": method.tuning.settings(),
        "scheme": scheme + " (here: the value is chosen on train+dev together)",
        "n_queries": int(len(meta)),
        "folds": folds,
        "created": dt.datetime.now(dt.UTC).isoformat(),
        "git": git_info(),
    }
    return method, card


def ensure_tuning(cfg: DictConfig, force: bool = False) -> tuple[Path, bool]:
    """(tuning folder, tuned now): tune and save unless the tuning of ``cfg`` exists (or ``force``)."""
    folder = tuning_folder(cfg)
    with hold(folder):  # one process tunes; another waiting for it finds it made
        if (folder / "tuning.json").is_file() and not force:
            print(f"[keep] {folder} exists (force=true tunes again)")
            return folder, False
        method, card = tune(cfg, progress=bool(cfg.run.progress))
        method.save(folder, card)
        print(
            json.dumps(
                {"dataset": card["dataset"], "scheme": card["scheme"], "values": [f["value"] for f in card["folds"]]},
                indent=1,
            )
        )
        print(f"saved: {folder}")
        return folder, True


@hydra.main(config_path="../conf", config_name="tune_hybrid", version_base="1.3")
def main(cfg: DictConfig) -> None:
    ensure_tuning(cfg, force=bool(cfg.force))


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
