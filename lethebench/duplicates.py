"""Duplicated sources: a collection where duplicates exist, for testing context deduplication (issue 35, item 6).

Seed 004's deduplication study never triggered on the collections as they are (no TechQA or UltraDomain doc has a
duplicate; LoCoMo 4 of 5,882). Real collections often hold one document twice (re-crawled pages, mirrored
technotes, a manual ingested from two sources). ``dataset.duplicates: {share, seed}`` builds such a collection from
a real one: a seeded ``share`` of its sources is ingested a second time, as an exact copy with its own id
(``<source_id>~dup``) in the same scope, and a copy of a relevant source is relevant with the same grade (it holds
the same text). Nothing else changes: queries, answers, splits. The copies enter the build key and the card
(``duplicates``: share, seed, copies), so the collection is a dataset of its own (conf/dataset/techqa_dup.yaml).

Only loaders whose relevance is on sources can be duplicated (a copy's chunks then get its grade through the
ordinary chunk mapping); a loader that grades chunks itself (UltraDomain) or returns docs already is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from lethebench.schema import DatasetError, SourceDataset

SUFFIX = "~dup"
KEYS = {"share", "seed"}


def duplicate_params(cfg: Mapping[str, Any] | None, dataset: str) -> tuple[float, int] | None:
    """``(share, seed)`` of a ``dataset.duplicates`` section, or None when it is absent or null."""
    if not cfg:
        return None
    bad = set(cfg) - KEYS
    if bad:
        raise ValueError(f"dataset {dataset}: duplicates has unknown key(s) {sorted(bad)}; allowed: {sorted(KEYS)}")
    share, seed = cfg.get("share"), cfg.get("seed", 0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < float(share) <= 1.0:
        raise ValueError(f"dataset {dataset}: duplicates.share must be a number in (0, 1], got {share!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"dataset {dataset}: duplicates.seed must be an integer, got {seed!r}")
    return float(share), int(seed)


def inject_duplicates(src: SourceDataset, share: float, seed: int) -> SourceDataset:
    """``src`` with a seeded ``share`` of its sources (round(share x n), at least one) added again as exact copies
    (module docstring); the card gains ``duplicates``."""
    if src.prechunked or src.chunk_qrels is not None:
        raise DatasetError(
            f"dataset {src.name}: duplicates need relevance on sources; this loader "
            f"{'returns docs already' if src.prechunked else 'grades chunks itself'}"
        )
    sources = src.sources
    ids = sorted(sources["source_id"].astype(str))
    n = max(1, int(round(share * len(ids))))
    chosen = {ids[i] for i in np.random.default_rng(seed).choice(len(ids), size=n, replace=False)}
    copies = sources[sources["source_id"].astype(str).isin(chosen)].copy()
    copies["source_id"] = copies["source_id"].astype(str) + SUFFIX
    copies["doc_id"] = copies["source_id"]
    clash = set(copies["source_id"]) & set(ids)
    if clash:
        raise DatasetError(f"dataset {src.name}: source ids already end in {SUFFIX!r}: {sorted(clash)[:3]}")
    qrels = {q: {**rel, **{s + SUFFIX: g for s, g in rel.items() if s in chosen}} for q, rel in src.qrels.items()}
    card = {
        **src.card,
        "duplicates": {
            "share": share,
            "seed": seed,
            "copies": n,
            "sources_before": len(ids),
            "how": f"a seeded share of the sources ingested twice: exact copies with id <source_id>{SUFFIX}, in the "
            "same scope; a copy of a relevant source has its grade",
        },
    }
    return dataclasses.replace(src, sources=pd.concat([sources, copies], ignore_index=True), qrels=qrels, card=card)
