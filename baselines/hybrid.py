"""Simple hybrid: BM25 (the in-memory, Lucene-exact scorer) fused with dense cosine.

convex: alpha * minmax(BM25) + (1 - alpha) * cosine over the union of both candidate lists (each
of depth ``depth``); BM25 is min-max normalized over that union, cosine is used as is.
rrf: reciprocal rank fusion of the two lists (k = ``rrf_k``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lethe.retrieval.bm25 import BM25Index
from lethe.retrieval.dense import DenseIndex, make_embedder
from lethe.retrieval.embedder import Embedder
from lethe.retrieval.fusion import minmax, rrf
from lethe.retrieval.ranking import top_indices, top_k
from lethe.core.protocol import Doc, Query, SearchResult


class HybridSearch:
    """BM25 + vector fusion by a convex combination (default) or RRF."""

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        alpha: float = 0.5,
        fusion: str = "convex",
        depth: int = 100,
        rrf_k: int = 60,
        k1: float = 1.2,
        b: float = 0.75,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        if fusion not in ("convex", "rrf"):
            raise ValueError(f"fusion must be 'convex' or 'rrf', got {fusion!r}")
        if not 0.0 <= float(alpha) <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        self.alpha, self.fusion, self.depth, self.rrf_k = float(alpha), fusion, int(depth), int(rrf_k)
        self.k1, self.b = float(k1), float(b)
        self.dense = DenseIndex(make_embedder(embedder, cache_dir, progress))
        self.bm25 = BM25Index(self.k1, self.b)

    def index(self, docs: Sequence[Doc]) -> None:
        texts = [d.text for d in docs]
        self.bm25 = BM25Index(self.k1, self.b).fit(texts)
        self.dense.fit([d.doc_id for d in docs], texts)

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        lex = self.bm25.score(query.text)
        lex_top = [i for i in top_indices(lex, self.depth) if lex[i] > 0]  # BM25 matches only
        t1 = time.perf_counter()
        q, cached = self.dense.query(query.text)
        cos = self.dense.scores(q)
        dense_top = list(top_indices(cos, self.depth))
        t2 = time.perf_counter()
        ids = self.dense.ids
        if self.fusion == "rrf":
            fused = rrf([[ids[i] for i in lex_top], [ids[i] for i in dense_top]], self.rrf_k)
        else:
            union = np.array(sorted(set(lex_top) | set(dense_top)), dtype=np.int64)
            s = self.alpha * minmax(lex[union]) + (1 - self.alpha) * cos[union].astype(np.float64)
            fused = {ids[i]: float(x) for i, x in zip(union, s)}
        out = top_k(fused, k)
        t3 = time.perf_counter()
        return SearchResult(
            out,
            {"bm25": (t1 - t0) * 1e3, "encode_query": (t2 - t1) * 1e3, "fusion": (t3 - t2) * 1e3},
            {"query_embedding_cached": cached, "bm25_matches": len(lex_top)},
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": "hybrid",
            "fusion": self.fusion,
            "alpha": self.alpha,
            "depth": self.depth,
            "rrf_k": self.rrf_k,
            "bm25": {
                "implementation": "lethe.retrieval.bm25.BM25Index (Lucene-compatible)",
                "k1": self.k1,
                "b": self.b,
            },
            "embedder": self.dense.embedder.stats(),
        }

    def close(self) -> None:
        self.dense.embedder.flush()
