"""FAISS IndexIVFFlat with inner product on L2-normalized vectors (approximate cosine search)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.library_logs import quiet
from lethe.core.protocol import Doc, Query, SearchResult
from lethe.retrieval.dense import DenseIndex, make_embedder
from lethe.retrieval.embedder import Embedder

MIN_POINTS_PER_CENTROID = 39  # FAISS warns below this many training points per list


class FaissIVF:
    """IVF-Flat trained on the indexed docs' vectors; ``nlist`` lists, ``nprobe`` probed per query.

    A scope with fewer than ``MIN_POINTS_PER_CENTROID * nlist`` docs trains
    ``max(1, n // MIN_POINTS_PER_CENTROID)`` lists instead; the list count used is a per-query flag.
    """

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        nlist: int = 64,
        nprobe: int = 8,
        seed: int = 0,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        quiet("faiss.loader")  # its CPU-feature probes (lethe.core.library_logs)
        import faiss  # imported here: loading faiss is slow

        self.faiss = faiss
        self.nlist, self.nprobe, self.seed = int(nlist), int(nprobe), int(seed)
        self.dense = DenseIndex(make_embedder(embedder, cache_dir, progress))
        self.index_ = None
        self.nlist_used = 0
        self.reduced_scopes = 0

    def index(self, docs: Sequence[Doc]) -> None:
        self.dense.fit([d.doc_id for d in docs], [d.text for d in docs])
        n, dim = self.dense.vecs.shape
        self.nlist_used = max(1, min(self.nlist, n // MIN_POINTS_PER_CENTROID))
        self.reduced_scopes += self.nlist_used < self.nlist
        quantizer = self.faiss.IndexFlatIP(dim)
        ivf = self.faiss.IndexIVFFlat(quantizer, dim, self.nlist_used, self.faiss.METRIC_INNER_PRODUCT)
        ivf.cp.seed = self.seed
        x = np.ascontiguousarray(self.dense.vecs, dtype=np.float32)
        ivf.train(x)
        ivf.add(x)
        ivf.nprobe = min(self.nprobe, self.nlist_used)
        self._quantizer, self.index_ = quantizer, ivf  # keep the quantizer alive with the index

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        q, cached = self.dense.query(query.text)
        t1 = time.perf_counter()
        scores, idx = self.index_.search(np.ascontiguousarray(q[None, :], dtype=np.float32), k)
        t2 = time.perf_counter()
        ranking = [(self.dense.ids[i], float(s)) for s, i in zip(scores[0], idx[0], strict=True) if i >= 0]
        return SearchResult(
            ranking,
            {"encode_query": (t1 - t0) * 1e3, "search": (t2 - t1) * 1e3},
            {"query_embedding_cached": cached, "nlist_used": self.nlist_used, "nprobe_used": int(self.index_.nprobe)},
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": "faiss_ivf",
            "index": "IndexIVFFlat(METRIC_INNER_PRODUCT)",
            "nlist": self.nlist,
            "nprobe": self.nprobe,
            "seed": self.seed,
            "min_points_per_centroid": MIN_POINTS_PER_CENTROID,
            "index_calls_with_reduced_nlist": int(self.reduced_scopes),
            "embedder": self.dense.embedder.stats(),
        }

    def close(self) -> None:
        self.dense.embedder.flush()
