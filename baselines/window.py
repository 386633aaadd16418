"""Recency window: the k most recent eligible docs, newest first (score = position)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lethe.core.protocol import Doc, Query, SearchResult


class Window:
    """Ignores the query; ranks eligible docs by position, latest first.

    Chunks of one source share a position; among them the later chunk ranks first.
    """

    def __init__(self, cache_dir: str | Path | None = None, progress: bool = True):
        self._ranked: list[tuple[str, float]] = []

    def index(self, docs: Sequence[Doc]) -> None:
        order = sorted(range(len(docs)), key=lambda i: (docs[i].position, i), reverse=True)
        n = len(order)
        # score = rank from the end, so scores are strictly decreasing and ties cannot reorder them
        self._ranked = [(docs[i].doc_id, float(n - r)) for r, i in enumerate(order)]

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        out = self._ranked[:k]
        return SearchResult(out, {"select": (time.perf_counter() - t0) * 1e3})

    def describe(self) -> dict[str, Any]:
        return {"name": "window", "order": "position descending"}

    def close(self) -> None:
        pass
