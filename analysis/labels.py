"""Label-based metrics the runner does not compute: Coverage@N, contradiction rate and answer recall at a text budget.

They read a run's rankings and the dataset's own labels (gold entities, labelled stale/current
pairs). Methods never see these labels; only the analysis does.

- Coverage@N: share of a query's gold entities (``queries.meta.gold_entities``) that occur,
  case-insensitively, in the text of its top-N docs. Defined only for queries with gold entities.
- Contradiction@k: for queries with labelled (stale, current) pairs, 1 if the top k holds a stale
  doc of the query, else 0 (``both=True``: only if it holds a stale doc and its current doc).
- Answer recall@Cc: share of the distinct words of a query's gold answer (lowercased ``\\w+`` words, without
  a/an/the/and) that occur among the words of the first C characters of its ranking's text (the docs' texts in rank
  order, joined by a blank line, cut at C without splitting a word). A fixed budget of text, whatever the size of the units: it compares
  chunkings, which nDCG over units of different sizes cannot. Defined only for queries with a gold answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from lethebench.schema import read_table


def coverage_at_n(
    run: Mapping[str, Sequence[tuple[str, float]]], queries: pd.DataFrame, corpus: pd.DataFrame, n: int = 10
) -> pd.Series:
    """Per query of ``queries`` that has gold entities (index query_id): Coverage@n.

    ``queries`` must be the evaluated queries; one absent from ``run`` (no results) scores 0.
    """
    text = dict(zip(corpus["doc_id"], corpus["text"].str.lower(), strict=True))
    out = {}
    for qid, meta in zip(queries["query_id"], queries["meta"], strict=True):
        ents = (json.loads(meta) if isinstance(meta, str) else meta).get("gold_entities") or []
        if not ents:
            continue
        top = " \n ".join(text[d] for d, _ in run.get(qid, [])[:n])
        out[qid] = sum(e.lower() in top for e in ents) / len(ents)
    return pd.Series(out, name=f"coverage@{n}", dtype=float)


_WORD = re.compile(r"\w+")
_SKIP = frozenset({"a", "an", "the", "and"})


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _SKIP


def _cut(text: str, chars: int) -> str:
    """The first ``chars`` characters of ``text`` without a word the cut splits (its start could match a gold word)."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    return re.sub(r"\w+$", "", head) if re.match(r"\w", text[chars]) else head


def answer_recall_at_chars(
    run: Mapping[str, Sequence[tuple[str, float]]], queries: pd.DataFrame, corpus: pd.DataFrame, chars: int
) -> pd.Series:
    """Per query of ``queries`` with a gold answer (``answer``; index query_id): answer recall@``chars``c (module
    docstring). ``queries`` must be the evaluated queries; one absent from ``run`` (no results) scores 0."""
    if chars < 1:
        raise ValueError(f"answer recall needs a budget of at least one character, got {chars}")
    if "answer" not in queries:
        return pd.Series(dtype=float, name=f"answer_recall@{chars}c")
    text = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    out = {}
    for qid, answer in zip(queries["query_id"], queries["answer"], strict=True):
        gold = _words(str(answer)) if answer is not None and answer == answer else set()
        if not gold:
            continue
        parts, size = [], 0
        for d, _ in run.get(qid, []):
            parts.append(text[d])
            size += len(text[d]) + 2
            if size >= chars:
                break
        out[qid] = len(gold & _words(_cut("\n\n".join(parts), chars))) / len(gold)
    return pd.Series(out, name=f"answer_recall@{chars}c", dtype=float)


def contradiction_at_k(
    run: Mapping[str, Sequence[tuple[str, float]]],
    contradictions: pd.DataFrame | None,
    evaluated: Sequence[str],
    k: int = 10,
    both: bool = False,
) -> pd.Series:
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
        hit = any(
            (s in top) and (c in top or not both)
            for s, c in zip(pairs["stale_doc_id"], pairs["current_doc_id"], strict=True)
        )
        out[qid] = float(hit)
    return pd.Series(out, name=f"contradiction@{k}", dtype=float)


def read_contradictions(dataset_folder: Path) -> pd.DataFrame | None:
    return read_table(dataset_folder, "contradictions", optional=True)
