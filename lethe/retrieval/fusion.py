"""Score fusion: min-max normalization, convex combination, reciprocal rank fusion (RRF).

Conventions: inputs map doc_id -> score; a doc missing from one input counts as that input's
minimum after normalization (0) for convex fusion and contributes nothing to RRF.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def minmax(scores: np.ndarray, constant: float = 1.0) -> np.ndarray:
    """Scale to [0, 1] (float64, same shape); all-equal scores map to ``constant`` (default 1.0: they are
    all equally the best); empty stays empty."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    if hi - lo <= 0:
        return np.full_like(scores, constant)
    return (scores - lo) / (hi - lo)


def convex(a: Mapping[str, float], b: Mapping[str, float], alpha: float, normalize_b: bool = False) -> dict[str, float]:
    """alpha * minmax(a) + (1 - alpha) * b' over the union of keys (b' = minmax(b) if asked, else b).

    Keys absent from an input get 0 for that input's term.
    """
    keys = list(dict.fromkeys([*a, *b]))
    na = dict(zip(a, minmax(np.array(list(a.values()))), strict=True)) if a else {}
    nb = dict(zip(b, minmax(np.array(list(b.values()))), strict=True)) if b and normalize_b else dict(b)
    return {d: alpha * na.get(d, 0.0) + (1 - alpha) * nb.get(d, 0.0) for d in keys}


def rrf(rankings: Sequence[Sequence[str]], k: int = 60) -> dict[str, float]:
    """Reciprocal rank fusion: sum over lists of 1 / (k + rank), rank from 1."""
    out: dict[str, float] = {}
    for ranking in rankings:
        for r, d in enumerate(ranking, 1):
            out[d] = out.get(d, 0.0) + 1.0 / (k + r)
    return out
