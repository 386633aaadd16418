"""Dataset cards: ``card.json`` (machine-readable) and ``card.md`` (the same facts for people).

A card says where the data came from (sha256 of every input), how relevance was derived,
what was excluded and why, counts, chunk statistics and the builder's version and parameters.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


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
