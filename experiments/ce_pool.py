"""Choose a cross-encoder model set's interpolation weights for a candidate pool other than BM25's (e.g. the hybrid's
top 50), on each fold's own dev queries (a prerequisite of an interpolated run over that pool; ``make reproduce``
makes it).

    python -m experiments.ce_pool dataset=locomo method=cross_encoder_hybrid [force=true] [overrides]

Each fold of the set chose its checkpoint and its BM25 weight on its dev queries when it was trained
(``experiments/train_cross_encoder.py``). Over another first stage the logits are mixed with that stage's scores, so
the weight is chosen again the same way: the fold's dev queries (the same ones, the same cap and seed) get the run's
first-stage top ``method.candidates``, the fold's model scores them, and the weight of ``train.interpolation_grid``
with the best dev nDCG@10 wins (ties: the larger weight). The checkpoint is unchanged. Saved beside the set as
``pools/<pool key>.json`` (:func:`lethe.retrieval.crossencoder.pool_weights_file`).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from baselines.cross_encoder import CrossEncoderRerank
from baselines.first_stage import is_bm25, plain, pool_key
from experiments import train_cross_encoder as T
from experiments.config import to_dict
from experiments.datasets import dataset_build_key
from experiments.run_identity import method_params
from lethe.core.arguments import check_arguments
from lethe.core.locking import hold
from lethe.core.paths import Paths
from lethe.core.targets import build
from lethe.retrieval.crossencoder import (
    FOLDS_JSON,
    pool_weights_file,
    read_pool_weights,
    set_folder,
    write_pool_weights,
)
from lethebench.provenance import git_info


def pool_of(cfg: DictConfig) -> str:
    """The pool key of the run config ``cfg``; ValueError for a BM25 first stage (its weights are in the cards)."""
    spec = plain(OmegaConf.select(cfg, "method.first_stage"))
    if OmegaConf.select(cfg, "method.model.train") is None or is_bm25(spec):
        raise ValueError(f"method {cfg.method.name}: a cross-encoder over a first stage other than BM25 is needed")
    return pool_key(spec, int(cfg.method.candidates))


def pool_file(cfg: DictConfig) -> Path:
    """Where the weights of the run config ``cfg``'s pool are (or will be) saved."""
    folder = set_folder(to_dict(cfg.method.model), str(cfg.dataset.name), dataset_build_key(cfg))
    return pool_weights_file(folder, pool_of(cfg))


def pool_is_whole(path: Path) -> bool:
    """Whether the pool weights file ``path`` was written by :func:`ensure_pool` and not changed since (its checksum)."""
    try:
        read_pool_weights(path)
    except (OSError, ValueError):
        return False
    return True


def choose_weights(cfg: DictConfig, set_dir: Path) -> dict[str, Any]:
    """Per fold of the model set ``set_dir``: the interpolation weight chosen on its dev queries over ``cfg``'s pool."""
    progress = bool(cfg.run.progress)
    tcfg = to_dict(cfg.method.model.train)
    depth = int(cfg.method.candidates)
    target, _ = T.set_target(cfg, progress)
    plans, _, data = T.set_plans(cfg, target)
    recorded = json.loads((set_dir / FOLDS_JSON).read_text())["folds"]
    params = {**method_params(to_dict(cfg.method)), "interpolation": "none"}  # the models only, as the run loads them
    reranker: CrossEncoderRerank = build(params, cache_dir=Paths.of(cfg).cache, progress=progress, _convert_="all")
    folds = []
    try:
        reranker.bind_dataset({"name": str(cfg.dataset.name), "build_key": dataset_build_key(cfg)})
        for i, plan in enumerate(plans):
            record = {"dir": f"fold{i}", **plan.record()}
            if json.loads(json.dumps(record, default=str)) != json.loads(json.dumps(recorded[i], default=str)):
                raise ValueError(f"fold {i} of {set_dir} was trained on other queries than this config plans; retrain")
            items, cands, qrels = T.dev_set(plan, data, tcfg, int(tcfg["seed"]) + i, reranker.first, depth, progress)
            scorer = T.DevScorer(items, cands, qrels, list(cfg.run.metrics), int(cfg.method.batch_size))
            scorer(reranker.models[i])
            chosen = scorer.interpolation(0, [float(w) for w in tcfg["interpolation_grid"]])
            folds.append({"dir": record["dir"], "weight": chosen["weight"], "n_dev": len(items), "selection": chosen})
            print(
                f"fold {i}: {len(items)} dev queries, weight {chosen['weight']:g} ({chosen['score']:.4f})", flush=True
            )
    finally:
        reranker.close()
    return {
        "pool": {"first_stage": reranker.first_stage_spec, "candidates": depth, "key": reranker.pool},
        "set": str(set_dir),
        "metric": T.METRIC,
        "folds": folds,
        "created": dt.datetime.now(dt.UTC).isoformat(),
        "git": git_info(),
    }


def ensure_pool(cfg: DictConfig, force: bool = False) -> tuple[Path, bool]:
    """(weights file, chosen now): the model set of ``cfg`` (trained or waited for first), then its weights over
    ``cfg``'s pool unless they exist (or ``force``)."""
    set_dir = T.train_model_set(cfg)
    path = pool_weights_file(set_dir, pool_of(cfg))
    with hold(path.with_suffix("")):
        if pool_is_whole(path) and not force:
            print(f"[keep] {path} exists (force=true chooses again)")
            return path, False
        if path.is_file() and not force:
            print(f"{path} is not the file this command wrote (its checksum differs, or it has none): chosen again")
        doc = choose_weights(cfg, set_dir)
        write_pool_weights(path, doc)
        print(f"saved: {path}")
        return path, True


@hydra.main(config_path="../conf", config_name="ce_pool", version_base="1.3")
def main(cfg: DictConfig) -> None:
    ensure_pool(cfg, force=bool(cfg.force))


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
