"""Exact dense retrieval: cosine similarity over L2-normalized embeddings (brute force)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lethe.embedder import Embedder
from lethe.method import Doc, Query, SearchResult


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first (ties: lower index first)."""
    k = min(k, len(scores))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return idx[np.lexsort((idx, -scores[idx]))]


class VectorSearch:
    """Embeds docs (cached) at index time and the query at search time; ranks by dot product."""

    def __init__(self, embedder: Mapping[str, Any] | Embedder, cache_dir: str | Path | None = None, progress: bool = True):
        if isinstance(embedder, Embedder):
            self.embedder = embedder
        else:
            cfg = dict(embedder)
            self.embedder = Embedder(cfg, cache_dir=Path(cache_dir) if cache_dir else None,
                                     batch_size=cfg.get("batch_size", 64), show_progress=progress)
        self._ids: list[str] = []
        self._mat = np.zeros((0, 1), np.float32)

    def index(self, docs: Sequence[Doc]) -> None:
        self._ids = [d.doc_id for d in docs]
        self._mat = self.embedder.encode([d.text for d in docs], role="doc")

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        q = self.embedder.encode([query.text], role="query")[0]
        t1 = time.perf_counter()
        scores = self._mat @ q
        idx = top_k(scores, k)
        t2 = time.perf_counter()
        # a cached query embedding makes this query faster: flagged so latency reports can tell
        return SearchResult([(self._ids[i], float(scores[i])) for i in idx],
                            {"encode_query": (t1 - t0) * 1e3, "score": (t2 - t1) * 1e3},
                            {"query_embedding_cached": self.embedder.last_cache_hits > 0})

    def describe(self) -> dict[str, Any]:
        return {"name": "vector", "similarity": "cosine (dot of L2-normalized vectors)", "embedder": self.embedder.stats()}

    def close(self) -> None:
        self.embedder.flush()
