"""The labelled queries a component cross-fitted on the evaluated dataset may learn from (iteration 3's learned
fusion, the tuned hybrids): one definition, so every such component sees the same queries in the same order and
therefore the same folds (:func:`lethebench.folds.cross_fit_plan`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd
from omegaconf import DictConfig

from experiments.config import to_dict
from experiments.runner import QuerySelection, select_queries
from lethebench.schema import Dataset


def labelled_ids(ds: Dataset) -> list[str] | None:
    """The train and dev query ids when the dataset has both splits (its test queries are never prepared and their
    labels never read); None (every query with qrels, cross-fitted in k folds) otherwise."""
    split = ds.queries["split"]
    if {"train", "dev"} <= set(split.dropna()):
        return ds.queries.loc[split.isin(["train", "dev"]), "query_id"].tolist()
    return None


def labelled_queries(cfg: DictConfig, ds: Dataset, query_ids: Sequence[str] | None) -> tuple[Dataset, pd.DataFrame]:
    """(``ds`` keeping only ``query_ids`` and their qrels (None: all), the queries the run config ``cfg`` selects
    among them (its scopes, categories and sample; not its split), in run order)."""
    if query_ids is not None:  # other queries are never looked at, not even their qrels
        keep = set(query_ids)
        ds = Dataset(
            ds.name,
            ds.corpus,
            ds.queries[ds.queries["query_id"].isin(keep)],
            {k: v for k, v in ds.qrels.items() if k in keep},
            ds.card,
        )
    sel = dataclasses.replace(QuerySelection.from_config(to_dict(cfg.dataset), int(cfg.run.seed)), split=None)
    q, _ = select_queries(ds, sel)
    return ds, q
