"""Dataset cards: ``card.json`` (machine-readable) and ``card.md`` (the same facts for people).

A card says where the data came from (the dataset config's ``provenance``: name, upstream,
licence, citation; sha256 of every input), how relevance was derived, what was excluded and why,
counts, chunk statistics and the builder's version and parameters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from lethe.text.analyzer import STOPWORDS  # Lucene's English stopwords, for overlap statistics

# keys of a dataset config's `provenance:` section; `description` becomes the card's prose description,
# the others its `provenance` entry
PROVENANCE_KEYS = ("name", "description", "upstream", "license", "citation")


def provenance_entries(provenance: Mapping[str, Any] | None, dataset: str) -> dict[str, Any]:
    """The card entries a dataset config's ``provenance`` section gives: ``description`` and
    ``provenance`` ({name, upstream, license, citation}); {} without a section. Raises ValueError
    naming the dataset and key for an unknown key or a value that is not a string or null."""
    if not provenance:
        return {}
    if not isinstance(provenance, Mapping):
        raise ValueError(
            f"dataset {dataset}: provenance must be a mapping of {list(PROVENANCE_KEYS)}, "
            f"got {type(provenance).__name__}"
        )
    unknown = sorted(set(provenance) - set(PROVENANCE_KEYS))
    if unknown:
        raise ValueError(f"dataset {dataset}: unknown provenance key(s) {unknown}; known: {list(PROVENANCE_KEYS)}")
    for k, v in provenance.items():
        if v is not None and not isinstance(v, str):
            raise ValueError(f"dataset {dataset}: provenance.{k} must be a string or null, got {type(v).__name__}")
    out: dict[str, Any] = {}
    if provenance.get("description"):
        out["description"] = provenance["description"]
    out["provenance"] = {k: provenance.get(k) for k in PROVENANCE_KEYS if k != "description"}
    return out


def count_by(df: pd.DataFrame, col: str) -> dict[str, int]:
    """Value counts of ``col`` as a plain, key-sorted dict (None shown as 'none')."""
    vals = df[col].fillna("none").astype(str)
    return {k: int(v) for k, v in sorted(vals.value_counts().items())}


def _md_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict | list):
        return "`" + json.dumps(v, sort_keys=True) + "`"
    return str(v)


def _md_section(title: str, value: Any, level: int = 2) -> list[str]:
    out = [f"{'#' * level} {title}", ""]
    if isinstance(value, dict) and value and all(not isinstance(v, dict) for v in value.values()):
        out += ["| key | value |", "|---|---|"]
        out += [f"| {k} | {_md_value(v)} |" for k, v in value.items()]
    elif (
        isinstance(value, dict)
        and value
        and all(
            isinstance(v, dict) and v and all(not isinstance(x, dict | list) for x in v.values())
            for v in value.values()
        )
    ):  # a matrix: rows = outer keys, columns = inner keys
        cols = list(dict.fromkeys(c for v in value.values() for c in v))
        out += ["| | " + " | ".join(map(str, cols)) + " |", "|---" * (len(cols) + 1) + "|"]
        out += [f"| {k} | " + " | ".join(_md_value(v.get(c, "")) for c in cols) + " |" for k, v in value.items()]
    elif isinstance(value, dict):
        for k, v in value.items():
            out += _md_section(str(k), v, level + 1)
            continue
        return out
    elif isinstance(value, list):
        out += [f"- {_md_value(v)}" for v in value]
    else:
        out.append(str(value))
    out.append("")
    return out


def render_card_md(card: dict[str, Any]) -> str:
    """Render a card dict as Markdown; key order follows the dict (builders put prose first)."""
    lines = [f"# Dataset card: {card.get('name', '?')}", ""]
    for key, value in card.items():
        if key == "name":
            continue
        lines += _md_section(key.replace("_", " "), value)
    return "\n".join(lines).rstrip() + "\n"


_TOKEN = re.compile(r"[a-z0-9]+")


def content_tokens(text: str) -> set[str]:
    """Lowercased alphanumeric tokens minus stopwords."""
    return {t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS}


def lexical_overlap(
    queries: pd.DataFrame, corpus: pd.DataFrame, qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, Any]:
    """Share of a query's content tokens that occur in its relevant docs (union), per query.

    Returns the mean overall and per category, and the share of queries with zero overlap.
    """
    text = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    rows = []
    for qid, cat, qtext in zip(queries["query_id"], queries["category"], queries["text"], strict=True):
        rel = qrels.get(qid)
        toks = content_tokens(qtext)
        if not rel or not toks:
            continue
        docs = set().union(*(content_tokens(text[d]) for d in rel))
        rows.append((str(cat) if cat is not None and cat == cat else "none", len(toks & docs) / len(toks)))
    if not rows:
        return {}
    df = pd.DataFrame(rows, columns=["category", "overlap"])
    return {
        "definition": "share of the query's content tokens (lowercased, alphanumeric, Lucene stopwords removed) found in its relevant docs",
        "mean": round(float(df["overlap"].mean()), 4),
        "share_zero": round(float((df["overlap"] == 0).mean()), 4),
        "by_category": {k: round(float(v), 4) for k, v in sorted(df.groupby("category")["overlap"].mean().items())},
    }
