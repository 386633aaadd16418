"""MMR baseline: vector top-N candidates re-ordered by maximal marginal relevance (lambda = 0.7)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from lethe.dense import DenseIndex, make_embedder, top_k
from lethe.embedder import Embedder
from lethe.method import Doc, Query, SearchResult
from lethe.mmr import mmr


class MMRSearch:
    """The first ``candidates`` vector hits in MMR order, then the remaining vector hits in their order.

    Scores are rank-derived (k - rank + 1) because MMR's objective is not monotone in pick order.
    """

    def __init__(self, embedder: Mapping[str, Any] | Embedder, lam: float = 0.7, candidates: int = 50,
                 cache_dir: str | Path | None = None, progress: bool = True):
        self.lam, self.candidates = float(lam), int(candidates)
        self.dense = DenseIndex(make_embedder(embedder, cache_dir, progress))

    def index(self, docs: Sequence[Doc]) -> None:
        self.dense.fit([d.doc_id for d in docs], [d.text for d in docs])

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        q, cached = self.dense.query(query.text)
        t1 = time.perf_counter()
        scores = self.dense.scores(q)
        idx = top_k(scores, max(k, self.candidates))
        cand = idx[: self.candidates]
        t2 = time.perf_counter()
        vecs = self.dense.vecs[cand]
        order = [int(cand[i]) for i in mmr(scores[cand], vecs @ vecs.T, self.lam)]
        final = (order + [int(i) for i in idx[self.candidates:]])[:k]
        t3 = time.perf_counter()
        return SearchResult([(self.dense.ids[i], float(len(final) - r)) for r, i in enumerate(final)],
                            {"encode_query": (t1 - t0) * 1e3, "score": (t2 - t1) * 1e3, "mmr": (t3 - t2) * 1e3},
                            {"query_embedding_cached": cached})

    def describe(self) -> dict[str, Any]:
        return {"name": "mmr", "lambda": self.lam, "candidates": self.candidates,
                "score": "rank-derived (k - rank + 1)", "embedder": self.dense.embedder.stats()}

    def close(self) -> None:
        self.dense.embedder.flush()
