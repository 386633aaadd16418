"""Simple hybrid: BM25 (the in-memory, Lucene-exact scorer) fused with dense cosine.

convex: alpha * minmax(BM25) + (1 - alpha) * cosine over the union of both candidate lists (each
of depth ``depth``); BM25 is min-max normalized over that union, cosine is used as is.
rrf: reciprocal rank fusion of the two lists (k = ``rrf_k``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.protocol import Doc, Query, SearchResult
from lethe.retrieval.bm25 import BM25Index
from lethe.retrieval.dense import DenseIndex, make_embedder
from lethe.retrieval.embedder import Embedder
from lethe.retrieval.fusion import minmax, rrf
from lethe.retrieval.ranking import top_indices, top_k


@dataclass
class Candidates:
    """One query's first stage: BM25 scores ``lex`` and cosines ``cos`` over every indexed doc (shape (n_docs,)),
    the top-``depth`` indices of each list, stage timings (ms) and whether the query embedding came from the cache."""

    lex: np.ndarray
    cos: np.ndarray
    lex_top: list[int]
    dense_top: list[int]
    timings: dict[str, float]
    query_embedding_cached: bool


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

    def candidates(self, query: Query) -> Candidates:
        """Both first-stage lists of ``query`` and their scores (BM25 matches only on the lexical side)."""
        t0 = time.perf_counter()
        lex = self.bm25.score(query.text)
        lex_top = [i for i in top_indices(lex, self.depth) if lex[i] > 0]  # BM25 matches only
        t1 = time.perf_counter()
        q, cached = self.dense.query(query.text)
        cos = self.dense.scores(q)
        dense_top = list(top_indices(cos, self.depth))
        t2 = time.perf_counter()
        timings = {"bm25": (t1 - t0) * 1e3, "encode_query": (t2 - t1) * 1e3}
        return Candidates(lex, cos, lex_top, dense_top, timings, cached)

    def fuse(
        self, c: Candidates, k: int, alpha: float | None = None, rrf_k: int | None = None
    ) -> list[tuple[str, float]]:
        """The top ``k`` (doc_id, score) of the fused lists, with this method's ``alpha``/``rrf_k`` unless given."""
        alpha = self.alpha if alpha is None else float(alpha)
        ids = self.dense.ids
        if self.fusion == "rrf":
            fused = rrf(
                [[ids[i] for i in c.lex_top], [ids[i] for i in c.dense_top]],
                self.rrf_k if rrf_k is None else int(rrf_k),
            )
        else:
            union = np.array(sorted(set(c.lex_top) | set(c.dense_top)), dtype=np.int64)
            s = alpha * minmax(c.lex[union]) + (1 - alpha) * c.cos[union].astype(np.float64)
            fused = {ids[i]: float(x) for i, x in zip(union, s, strict=True)}
        return top_k(fused, k)

    def search(self, query: Query, k: int) -> SearchResult:
        c = self.candidates(query)
        t2 = time.perf_counter()
        out = self.fuse(c, k)
        return self._result(c, out, t2)

    def _result(self, c: Candidates, out: list[tuple[str, float]], t_fuse: float, **flags: Any) -> SearchResult:
        return SearchResult(
            out,
            {**c.timings, "fusion": (time.perf_counter() - t_fuse) * 1e3},
            {"query_embedding_cached": c.query_embedding_cached, "bm25_matches": len(c.lex_top), **flags},
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
