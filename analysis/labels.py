"""Label-based metrics the runner does not compute: Coverage@N and contradiction rate.

They read a run's rankings and the dataset's own labels (gold entities, labelled stale/current
pairs). Methods never see these labels; only the analysis does.

- Coverage@N: share of a query's gold entities (``queries.meta.gold_entities``) that occur,
  case-insensitively, in the text of its top-N docs. Defined only for queries with gold entities.
- Contradiction@k: for queries with labelled (stale, current) pairs, 1 if the top k holds a stale
  doc of the query, else 0 (``both=True``: only if it holds a stale doc and its current doc).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd


def coverage_at_n(run: Mapping[str, Sequence[tuple[str, float]]], queries: pd.DataFrame, corpus: pd.DataFrame,
                  n: int = 10) -> pd.Series:
    """Per query of ``queries`` that has gold entities (index query_id): Coverage@n.

    ``queries`` must be the evaluated queries; one absent from ``run`` (no results) scores 0.
    """
    text = dict(zip(corpus["doc_id"], corpus["text"].str.lower()))
    out = {}
    for qid, meta in zip(queries["query_id"], queries["meta"]):
        ents = (json.loads(meta) if isinstance(meta, str) else meta).get("gold_entities") or []
        if not ents:
            continue
        top = " \n ".join(text[d] for d, _ in run.get(qid, [])[:n])
        out[qid] = sum(e.lower() in top for e in ents) / len(ents)
    return pd.Series(out, name=f"coverage@{n}", dtype=float)


def contradiction_at_k(run: Mapping[str, Sequence[tuple[str, float]]], contradictions: pd.DataFrame | None,
                       evaluated: Sequence[str], k: int = 10, both: bool = False) -> pd.Series:
    """Per evaluated query with labelled pairs (index query_id): 1.0 if its top k holds a stale doc, else 0.0.

    A query absent from ``run`` (no results) holds no stale doc: 0.0.
    """
    if contradictions is None or contradictions.empty:
        return pd.Series(dtype=float, name=f"contradiction@{k}")
    out = {}
    keep = set(evaluated)
    for qid, pairs in contradictions.groupby("query_id"):
        if qid not in keep:
            continue
        top = {d for d, _ in run.get(qid, [])[:k]}
        hit = any((s in top) and (c in top or not both) for s, c in zip(pairs["stale_doc_id"], pairs["current_doc_id"]))
        out[qid] = float(hit)
    return pd.Series(out, name=f"contradiction@{k}", dtype=float)


def read_contradictions(dataset_folder: Path) -> pd.DataFrame | None:
    p = Path(dataset_folder) / "contradictions.parquet"
    return pd.read_parquet(p) if p.is_file() else None
