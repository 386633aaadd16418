"""Grouped k-fold assignment for the learned components (learned fusion, the cross-encoder's ``in_domain`` regime).

A fold must not share what a model could memorise with the fold it is evaluated on. Queries are grouped, and
whole groups go to one fold:

- by **scope** when there are at least k scopes (LoCoMo: a conversation; its turns are its documents, so no gold
  document crosses two conversations);
- else by **gold document**: queries whose relevant docs come from one source document (a doc's ``source_id``:
  a TechQA technote, an UltraDomain context) are one group, transitively (connected components);
- else (no groups given) by query.

The cross-encoder's k-fold passes gold groups (``method.model.train.fold_groups: gold_document``); learned fusion
passes none (scope, else query), so its folds are those its models were trained with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

Qrels = Mapping[str, Mapping[str, int]]


def source_ids(corpus: pd.DataFrame) -> dict[str, str]:
    """doc_id -> source_id (the document a chunk was cut from) of a processed corpus."""
    return dict(zip(corpus["doc_id"].astype(str), corpus["source_id"].astype(str), strict=True))


def gold_groups(query_ids: list[str], qrels: Qrels, source_of: Mapping[str, str]) -> dict[str, str]:
    """query_id -> group id (the smallest query id of its group): queries that share a gold source document
    (``source_of``: doc_id -> source_id; a doc without one is its own source) are one group, transitively."""
    parent = {q: q for q in query_ids}

    def find(q: str) -> str:
        while parent[q] != q:
            parent[q] = parent[parent[q]]
            q = parent[q]
        return q

    first_query: dict[str, str] = {}
    for q in query_ids:
        for doc in sorted(qrels.get(q) or {}):
            src = source_of.get(doc, doc)
            other = first_query.setdefault(src, q)
            a, b = find(q), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {q: find(q) for q in query_ids}


GROUP_COLUMN = "gold_group"  # the reference store's queries.parquet column holding query_gold_groups()


def query_gold_groups(queries: pd.DataFrame, qrels: Qrels, corpus: pd.DataFrame) -> dict[str, str]:
    """:func:`gold_groups` over every query of a processed dataset (its queries, qrels and corpus)."""
    return gold_groups(queries["query_id"].astype(str).tolist(), qrels, source_ids(corpus))


def assign_folds(
    meta: pd.DataFrame, k: int, seed: int, groups: Mapping[str, str] | None = None
) -> tuple[np.ndarray, str]:
    """Fold number (0..k-1) per row of ``meta`` (columns scope_id, query_id) and the grouping used: 'scope' when
    there are at least ``k`` scopes, else 'gold document' when ``groups`` (query_id -> group, from
    :func:`gold_groups`) is given, else 'query'. Groups (rows, for 'query') are dealt to folds in a seeded random
    order, one each in turn."""
    scopes = meta["scope_id"].astype(str)
    if scopes.nunique() >= k:
        key, grouping = scopes, "scope"
    elif groups is not None:
        missing = sorted(set(meta["query_id"]) - set(groups))
        if missing:
            raise ValueError(f"gold groups: no group for {len(missing)} queries, e.g. {missing[:3]}")
        key, grouping = meta["query_id"].map(groups).astype(str), "gold document"
    else:  # one query per group, dealt in a seeded order of the rows
        order = np.random.default_rng(seed).permutation(len(meta))
        folds = np.empty(len(meta), dtype=np.int64)
        folds[order] = np.arange(len(meta)) % k
        return folds, "query"
    names = sorted(key.unique())
    order = np.random.default_rng(seed).permutation(len(names))
    fold_of = {names[i]: r % k for r, i in enumerate(order)}
    return key.map(fold_of).to_numpy(dtype=np.int64), grouping


@dataclass(frozen=True)
class FoldPlan:
    """One cross-fitted fold over the rows of a ``meta`` table (boolean masks, shape (n,)): what a model or a
    tuned parameter is fit on (``train``), selected on (``dev``) and applied to (``heldout``; None: any query
    outside train and dev, the train/dev-splits scheme). ``scopes``: the scopes of train+dev when folds group whole
    scopes (those scopes are never scored by this fold)."""

    train: np.ndarray
    dev: np.ndarray
    heldout: np.ndarray | None
    scopes: frozenset[str]


def cross_fit_plan(meta: pd.DataFrame, k: int, seed: int) -> tuple[list[FoldPlan], str]:
    """The folds of every component cross-fitted on the evaluated dataset's labelled queries (iteration 3's learned
    fusion, the tuned hybrids), and the scheme in words. ``meta`` (columns query_id, scope_id, split; one row per
    labelled query, in walk order) holds train and dev queries only when the dataset has those splits: then one fold,
    fit on train, selected on dev, for every other query. Otherwise ``k`` folds (:func:`assign_folds`, no gold
    groups): fold f held out, fold f+1 dev, the rest train."""
    split = meta["split"]
    if {"train", "dev"} <= set(split.dropna()):
        tr, dv = (split == "train").to_numpy(), (split == "dev").to_numpy()
        scheme = "splits: fit on train, select on dev, refit on train+dev; applies to queries outside both"
        return [FoldPlan(tr, dv, None, frozenset(meta.loc[tr | dv, "scope_id"]))], scheme
    fold_no, grouping = assign_folds(meta, k, seed)
    plans = []
    for f in range(k):
        held, dv = fold_no == f, fold_no == (f + 1) % k
        tr = ~held & ~dv
        scopes = frozenset(meta.loc[tr | dv, "scope_id"]) if grouping == "scope" else frozenset()
        plans.append(FoldPlan(tr, dv, held, scopes))
    scheme = (
        f"{k}-fold over {'scopes' if grouping == 'scope' else 'queries'}: fold f held out, fold f+1 dev, the rest "
        "train; refit on train+dev"
    )
    return plans, scheme
