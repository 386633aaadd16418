"""Random reranking: the sanity control of a reranker. The first stage's top ``candidates`` (Pyserini BM25 by default,
:mod:`baselines.first_stage`) in a seeded random order.

It takes the same first stage and candidate depth as the reranker it controls (``baselines.cross_encoder``)
and replaces the reranker's scores by a random permutation, so a reranker can be set beside both the order
it started from and what reordering the same candidates without any signal gives. The permutation of a
query is drawn from ``seed`` and the query id alone (the text when a caller gives no id), so it is the same
whatever the other queries are or the order they come in.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines.first_stage import build_first_stage, plain, timing_name
from lethe.core.hashing import seed_of
from lethe.core.protocol import Doc, Query, SearchResult
from lethe.retrieval.ranking import canonical_order


def query_rng(seed: int, query: Query) -> np.random.Generator:
    """The generator of ``query``'s permutation: ``seed`` and sha256 of its id (else its text)."""
    key = query.query_id if query.query_id is not None else query.text
    digest = seed_of(key, byteorder="little")
    return np.random.default_rng([int(seed), digest])


class RandomRerank:
    """BM25 candidates (Pyserini ``first_stage`` k1, b) in a seeded random order.

    ``search(query, k)`` returns the BM25 top ``candidates`` permuted at random (scores ``n .. 1`` in the
    new order) and, if ``k > candidates``, the next BM25 hits in BM25 order below them (scores ``0, -1, ..``).
    """

    def __init__(
        self,
        first_stage: Mapping[str, Any],
        candidates: int,
        seed: int,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        self.candidates, self.seed = int(candidates), int(seed)
        if self.candidates < 1:
            raise ValueError(f"random_rerank: candidates must be >= 1, got {candidates}")
        self.first_stage_spec = plain(first_stage)
        self.first = build_first_stage(self.first_stage_spec, cache_dir, progress)

    def index(self, docs: Sequence[Doc]) -> None:
        self.first.index(docs)

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        hits = canonical_order(self.first.search(query, max(k, self.candidates)).ranking)
        t1 = time.perf_counter()
        head, tail = hits[: self.candidates], hits[self.candidates :]
        order = query_rng(self.seed, query).permutation(len(head))
        ranking = [(head[j][0], float(len(head) - i)) for i, j in enumerate(order)]
        ranking += [(d, float(-i)) for i, (d, _) in enumerate(tail)]
        t2 = time.perf_counter()
        return SearchResult(
            ranking[:k],
            {timing_name(self.first_stage_spec): (t1 - t0) * 1e3, "rerank": (t2 - t1) * 1e3},
            {"candidates": len(head)},
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": "random_rerank",
            "first_stage": self.first.describe(),
            "candidates": self.candidates,
            "seed": self.seed,
            "permutation": "numpy default_rng([seed, sha256(query id)[:8]]).permutation",
        }

    def close(self) -> None:
        self.first.close()
