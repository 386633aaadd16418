"""The ranking orders of the harness, each written once.

- A ranking of doc ids, ``[(doc_id, score)]``: **canonical order** = score descending, ties by doc id
  descending (trec_eval's tie rule), so re-evaluating ``run.trec`` with any tool gives the same numbers.
  ``canonical_order`` sorts; ``top_k`` cuts. The runner applies it to every method's final ranking.
- A ranking of positions in a score array (candidate generation inside a method): score descending,
  ties by ``tie_rank`` ascending (default: the position itself), exactly the top ``k`` whatever the
  ties. ``top_indices`` returns them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np


def canonical_order(ranking: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """``ranking`` by score descending, ties by doc id descending."""
    by_id = sorted(ranking, key=lambda x: x[0], reverse=True)
    return sorted(by_id, key=lambda x: -x[1])  # stable: equal scores keep doc id descending


def top_k(ranking: Iterable[tuple[str, float]] | Mapping[str, float], k: int) -> list[tuple[str, float]]:
    """The first ``k`` of ``canonical_order`` (a mapping doc id -> score is taken as its items)."""
    items = ranking.items() if isinstance(ranking, Mapping) else ranking
    return canonical_order(items)[: max(k, 0)]


def top_indices(
    scores: np.ndarray, k: int, tie_rank: np.ndarray | None = None, positive_only: bool = False
) -> np.ndarray:
    """Positions of the ``k`` best ``scores`` (n,), best first, ties by ``tie_rank`` (n,) ascending
    (default: position). ``positive_only`` keeps only scores > 0 (a lexical match)."""
    scores = np.asarray(scores)
    cand = np.flatnonzero(scores > 0) if positive_only else np.arange(len(scores))
    if k <= 0 or len(cand) == 0:
        return np.zeros(0, dtype=np.int64)
    cs = scores[cand]
    if len(cand) > k:  # keep every doc tied with the k-th best, then order and cut
        kth = np.partition(cs, len(cs) - k)[len(cs) - k]
        keep = cs >= kth
        cand, cs = cand[keep], cs[keep]
    rank = cand if tie_rank is None else tie_rank[cand]
    return cand[np.lexsort((rank, -cs))[:k]].astype(np.int64)
