"""Training regimes of the cross-encoder: which labelled queries train and select each fold.

``method.model.train.regime`` (``conf/model/cross_encoder.yaml``):

- ``lethebench``: LetheBench's synthetic ``train`` pairs, checkpoint chosen on its ``dev`` split; one
  model set shared by every evaluated dataset (``<path>/any/<key>``).
- ``transfer`` (leave-one-dataset-out): the labels of every source dataset except the evaluated one,
  plus the evaluated dataset's own ``train`` split where it has one (LetheBench); a seeded share
  ``dev_share`` of each source's groups (scopes, or queries in one-scope collections) selects the
  checkpoint. One model set per evaluated dataset.
- ``in_domain``: the evaluated dataset's own labels. With ``train``/``dev`` splits (LetheBench): one
  fold, train on ``train``, select on ``dev``. Otherwise grouped k-fold (``folds``): whole scopes when
  there are at least k of them (LoCoMo), else queries grouped by gold document (``fold_groups``; TechQA's
  technotes, UltraDomain's contexts: ``lethebench/folds.py``); held-out fold f is scored by a model trained on
  the other folds except f+1, which selects its checkpoint. One model set per evaluated dataset.
- ``label_free``: no label at all: questions the local LLM wrote for sampled documents of the evaluated
  collection (:mod:`experiments.synthetic_queries`), split train/dev. One model set per evaluated dataset.

The ``test`` split is never read. Each fold records the query ids (per dataset) it was trained and
selected on and, for k-fold, the ids it is for; the reranker uses a fold only for a query it never
saw (:mod:`lethe.core.heldout`), so the leakage guard is the same as learned fusion's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf, open_dict

from experiments.config import load_config, to_dict
from experiments.datasets import dataset_key, prepare_dataset
from experiments.runner import QuerySelection, select_queries
from lethebench.folds import assign_folds, gold_groups, source_ids
from lethebench.schema import Dataset, read_dataset

FORBIDDEN_SPLIT = "test"


@dataclass
class Labelled:
    """A dataset as training sees it: its run config, data, build key and labelled non-test queries."""

    name: str
    cfg: DictConfig
    ds: Dataset
    build_key: str
    queries: pd.DataFrame  # with qrels, never the test split, sorted as the runner visits them


@dataclass
class FoldPlan:
    """Which queries (ids per dataset) train and select one fold, and which queries it is for."""

    train: dict[str, list[str]]
    dev: dict[str, list[str]]
    heldout: list[str] | None = None  # evaluated dataset's ids this fold scores; None = any it never saw
    scopes: dict[str, list[str]] = field(default_factory=dict)  # scopes of train+dev when folds group scopes

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def source_config(cfg: DictConfig, name: str, overrides: Sequence[str]) -> DictConfig:
    """``cfg`` with its dataset section replaced by ``conf/dataset/<name>.yaml`` and ``overrides``
    (``dataset.*`` keys); data, chunking and cache settings stay ``cfg``'s."""
    ds_cfg = load_config([f"dataset={name}", *overrides]).dataset
    out = cfg.copy()
    with open_dict(out):
        out.dataset = OmegaConf.create(to_dict(ds_cfg))
    return out


def open_dataset(cfg: DictConfig) -> tuple[Dataset, str]:
    """``cfg.dataset`` processed (built when missing) and its build key."""
    folder = prepare_dataset(cfg)
    ds = read_dataset(folder, cfg.dataset.name)
    return ds, dataset_key(cfg, folder, ds)


def load_labelled(cfg: DictConfig) -> Labelled:
    """The labelled non-test queries of ``cfg.dataset`` within its scope and category filters (its
    ``split`` and ``sample`` are the evaluation's, not training's, and are ignored)."""
    ds, key = open_dataset(cfg)
    sel = dataclasses.replace(
        QuerySelection.from_config(to_dict(cfg.dataset), int(cfg.run.seed)), split=None, sample=None
    )
    q, _ = select_queries(ds, sel)
    if "split" in q.columns:
        q = q[q["split"].fillna("") != FORBIDDEN_SPLIT]
    q = q.sort_values(["scope_id", "position", "query_id"], kind="stable").reset_index(drop=True)
    return Labelled(str(cfg.dataset.name), cfg, ds, key, q)


def has_splits(lab: Labelled) -> bool:
    return "split" in lab.queries.columns and {"train", "dev"} <= set(lab.queries["split"].dropna())


def _split_ids(lab: Labelled, split: str) -> list[str]:
    return lab.queries.loc[lab.queries["split"] == split, "query_id"].tolist()


def _scopes(lab: Labelled, ids: Sequence[str]) -> list[str]:
    return sorted(set(lab.queries.loc[lab.queries["query_id"].isin(set(ids)), "scope_id"]))


def split_plan(lab: Labelled) -> FoldPlan:
    """One fold: ``train`` split trains, ``dev`` split selects."""
    train, dev = _split_ids(lab, "train"), _split_ids(lab, "dev")
    return FoldPlan({lab.name: train}, {lab.name: dev}, None, {lab.name: _scopes(lab, train + dev)})


FOLD_GROUPS = ("gold_document", "query")


def kfold_plans(lab: Labelled, k: int, seed: int, fold_groups: str) -> tuple[list[FoldPlan], str]:
    """Grouped k-fold over ``lab``'s labelled queries (:func:`lethebench.folds.assign_folds`): (plans, grouping
    'scope', 'gold document' or 'query'). ``fold_groups`` is the grouping below k scopes."""
    if k < 3:
        raise ValueError(f"method.model.train.folds={k}: k-fold needs at least 3 folds (train, dev, held out)")
    if fold_groups not in FOLD_GROUPS:
        raise ValueError(f"method.model.train.fold_groups={fold_groups!r}: expected one of {', '.join(FOLD_GROUPS)}")
    ids = lab.queries["query_id"].to_numpy()
    groups = gold_groups(list(ids), lab.ds.qrels, source_ids(lab.ds.corpus)) if fold_groups == "gold_document" else None
    fold_no, group = assign_folds(lab.queries[["scope_id", "query_id"]], k, seed, groups)
    plans = []
    for f in range(k):
        dev_f = (f + 1) % k
        train = ids[(fold_no != f) & (fold_no != dev_f)].tolist()
        dev = ids[fold_no == dev_f].tolist()
        scopes = {lab.name: _scopes(lab, train + dev)} if group == "scope" else {}
        plans.append(FoldPlan({lab.name: train}, {lab.name: dev}, ids[fold_no == f].tolist(), scopes))
    return plans, group


def holdout_split(lab: Labelled, share: float, seed: int) -> tuple[list[str], list[str]]:
    """(train ids, dev ids) of a source: a seeded ``share`` of its groups (scopes when it has enough
    of them to hold out at least one, else queries) selects."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"method.model.train.dev_share={share}: expected a share in (0, 1)")
    rng = np.random.default_rng(seed)
    q = lab.queries
    scopes = sorted(q["scope_id"].unique())
    if len(scopes) * share >= 1:
        n_dev = int(round(len(scopes) * share))
        dev_scopes = {scopes[i] for i in rng.permutation(len(scopes))[:n_dev]}
        is_dev = q["scope_id"].isin(dev_scopes).to_numpy()
    else:
        n_dev = max(1, int(round(len(q) * share)))
        is_dev = np.zeros(len(q), bool)
        is_dev[rng.permutation(len(q))[:n_dev]] = True
    ids = q["query_id"].to_numpy()
    return ids[~is_dev].tolist(), ids[is_dev].tolist()


def transfer_plan(target: Labelled, sources: Sequence[Labelled], share: float, seed: int) -> FoldPlan:
    """Every source but the evaluated dataset (split ``dev_share`` for selection), plus the evaluated
    dataset's own train/dev splits where it has them."""
    plan = FoldPlan({}, {}, None, {})
    for src in sources:
        if src.name == target.name:
            continue
        plan.train[src.name], plan.dev[src.name] = holdout_split(src, share, seed)
    if has_splits(target):
        own = split_plan(target)
        plan.train.update(own.train)
        plan.dev.update(own.dev)
        plan.scopes.update(own.scopes)
    if not plan.train:
        raise ValueError(f"transfer to {target.name}: no source dataset other than it (method.model.train.sources)")
    return plan


def label_free_target(cfg: DictConfig, progress: bool) -> tuple[Labelled, dict[str, Any]]:
    """The evaluated dataset with its generated questions as its only labelled queries (split train/dev), and the
    generated set's manifest; generated first when missing (:mod:`experiments.synthetic_queries`)."""
    from experiments import synthetic_queries as SQ

    ds, key = open_dataset(cfg)
    settings = to_dict(cfg.method.model.train.label_free)
    gen = SQ.generate(ds, key, settings, cfg.cache_dir, progress)
    syn = SQ.synthetic_dataset(ds, gen, float(settings["dev_share"]), int(settings["seed"]))
    q = syn.queries.sort_values(["scope_id", "position", "query_id"], kind="stable").reset_index(drop=True)
    return Labelled(str(cfg.dataset.name), cfg, syn, key, q), {"folder": gen.name, **SQ.manifest(gen)}


def label_free_plan(lab: Labelled) -> FoldPlan:
    """One fold: generated questions of the ``train`` split train, those of ``dev`` select; no scope is withheld
    (no evaluated query was read), so the model may score every evaluated query."""
    return FoldPlan({lab.name: _split_ids(lab, "train")}, {lab.name: _split_ids(lab, "dev")}, None, {})


def plans_for(
    regime: str, target: Labelled | None, sources: Mapping[str, Labelled], train: Mapping[str, Any], seed: int
) -> tuple[list[FoldPlan], str]:
    """The fold plans of ``regime`` and how they were cut ('splits', 'transfer', or 'k-fold by scope/query')."""
    if regime == "lethebench":
        lab = sources[str(train["dataset"])]
        if not has_splits(lab):
            raise ValueError(f"regime lethebench: dataset {lab.name} has no train and dev splits")
        return [split_plan(lab)], "splits"
    assert target is not None
    if regime == "label_free":
        return [label_free_plan(target)], "label-free (generated questions)"
    if regime == "transfer":
        return [transfer_plan(target, list(sources.values()), float(train["dev_share"]), seed)], "transfer"
    if has_splits(target):
        return [split_plan(target)], "splits"
    plans, group = kfold_plans(target, int(train["folds"]), seed, str(train["fold_groups"]))
    return plans, f"k-fold by {group}"


def cap(ids: Sequence[str], limit: int | None, seed: int) -> list[str]:
    """At most ``limit`` of ``ids`` (a seeded sample, in their original order); all when None."""
    if limit is None or len(ids) <= int(limit):
        return list(ids)
    keep = set(np.random.default_rng(seed).permutation(len(ids))[: int(limit)].tolist())
    return [x for i, x in enumerate(ids) if i in keep]


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file's content, or None when it does not exist."""
    return json.loads(path.read_text()) if path.is_file() else None
