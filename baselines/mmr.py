"""MMR baseline: vector top-N candidates re-ordered by maximal marginal relevance (lambda = 0.7)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baselines.vector import VectorSearch
from lethe.core.protocol import Query, SearchResult
from lethe.retrieval.embedder import Embedder
from lethe.retrieval.mmr import mmr
from lethe.retrieval.ranking import top_indices


class MMRSearch(VectorSearch):
    """The first ``candidates`` vector hits in MMR order, then the remaining vector hits in their order.

    Scores are rank-derived (k - rank + 1) because MMR's objective is not monotone in pick order.
    """

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        lam: float = 0.7,
        candidates: int = 50,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        super().__init__(embedder, cache_dir=cache_dir, progress=progress)
        self.lam, self.candidates = float(lam), int(candidates)

    def search(self, query: Query, k: int) -> SearchResult:
        scores, timings, flags = self.score_all(query)
        t0 = time.perf_counter()
        idx = top_indices(scores, max(k, self.candidates))
        cand = idx[: self.candidates]
        vecs = self.dense.vecs[cand]
        order = [int(cand[i]) for i in mmr(scores[cand], vecs @ vecs.T, self.lam)]
        final = (order + [int(i) for i in idx[self.candidates :]])[:k]
        timings["mmr"] = (time.perf_counter() - t0) * 1e3
        return SearchResult([(self.dense.ids[i], float(len(final) - r)) for r, i in enumerate(final)], timings, flags)

    def describe(self) -> dict[str, Any]:
        return {
            "name": "mmr",
            "lambda": self.lam,
            "candidates": self.candidates,
            "score": "rank-derived (k - rank + 1)",
            "embedder": self.dense.embedder.stats(),
        }
