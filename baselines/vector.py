"""Exact dense retrieval: cosine similarity over L2-normalized embeddings (brute force)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.protocol import Doc, Query, SearchResult
from lethe.retrieval.dense import DenseIndex, make_embedder
from lethe.retrieval.embedder import Embedder
from lethe.retrieval.ranking import top_indices


class VectorSearch:
    """Embeds docs (cached) at index time and the query at search time; ranks by dot product."""

    def __init__(
        self, embedder: Mapping[str, Any] | Embedder, cache_dir: str | Path | None = None, progress: bool = True
    ):
        self.dense = DenseIndex(make_embedder(embedder, cache_dir, progress))

    def index(self, docs: Sequence[Doc]) -> None:
        self.dense.fit([d.doc_id for d in docs], [d.text for d in docs])

    def score_all(self, query: Query) -> tuple[np.ndarray, dict[str, float], dict[str, Any]]:
        """Cosine of every indexed doc (n,), stage timings (ms) and flags; shared with MMR."""
        t0 = time.perf_counter()
        q, cached = self.dense.query(query.text)
        t1 = time.perf_counter()
        scores = self.dense.scores(q)
        t2 = time.perf_counter()
        # a cached query embedding makes this query faster: flagged so latency reports can tell
        return scores, {"encode_query": (t1 - t0) * 1e3, "score": (t2 - t1) * 1e3}, {"query_embedding_cached": cached}

    def search(self, query: Query, k: int) -> SearchResult:
        scores, timings, flags = self.score_all(query)
        t0 = time.perf_counter()
        idx = top_indices(scores, k)
        timings["score"] += (time.perf_counter() - t0) * 1e3
        return SearchResult([(self.dense.ids[i], float(scores[i])) for i in idx], timings, flags)

    def describe(self) -> dict[str, Any]:
        return {
            "name": "vector",
            "similarity": "cosine (dot of L2-normalized vectors)",
            "embedder": self.dense.embedder.stats(),
        }

    def close(self) -> None:
        self.dense.embedder.flush()
