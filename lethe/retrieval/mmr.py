"""Maximal marginal relevance (Carbonell & Goldstein, 1998) on real cosine similarities."""

from __future__ import annotations

import numpy as np


def mmr(query_sim: np.ndarray, doc_sim: np.ndarray, lam: float = 0.7, k: int | None = None) -> list[int]:
    """Greedy MMR order of candidates.

    query_sim: (n,) similarity of each candidate to the query; doc_sim: (n, n) candidate-candidate
    similarity. Each step picks argmax lam * query_sim[i] - (1 - lam) * max_{j selected} doc_sim[i, j]
    (the max term is 0 for the first pick); ties go to the lower index. Returns indices in pick order.
    """
    n = len(query_sim)
    k = n if k is None else min(k, n)
    selected: list[int] = []
    max_sim = np.full(n, -np.inf)
    remaining = np.ones(n, dtype=bool)
    for _ in range(k):
        penalty = np.where(np.isfinite(max_sim), max_sim, 0.0)
        obj = lam * query_sim - (1 - lam) * penalty
        obj = np.where(remaining, obj, -np.inf)
        i = int(np.argmax(obj))
        selected.append(i)
        remaining[i] = False
        max_sim = np.maximum(max_sim, doc_sim[:, i])
    return selected
