"""Methods for runner tests: one records what it was shown, one tries to cheat."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lethe.core.protocol import Doc, Query, SearchResult


class SpyMethod:
    """Ranks indexed docs by word overlap and logs every index/search call to ``log_file``."""

    def __init__(self, log_file: str, cache_dir: Path | None = None, progress: bool = True):
        self.log_file = Path(log_file)
        self.docs: list[Doc] = []

    def _log(self, **rec: Any) -> None:
        with open(self.log_file, "a") as fh:
            fh.write(json.dumps(rec) + "\n")

    def index(self, docs: Sequence[Doc]) -> None:
        self.docs = list(docs)
        self._log(event="index", doc_ids=[d.doc_id for d in docs])

    def search(self, query: Query, k: int) -> SearchResult:
        self._log(event="search", query=query.text, visible=[d.doc_id for d in self.docs])
        q = set(query.text.lower().split())
        scored = [(d.doc_id, float(len(q & set(d.text.lower().split())))) for d in self.docs]
        return SearchResult(sorted(scored, key=lambda x: -x[1])[:k], {"overlap": 0.0})

    def describe(self) -> dict[str, Any]:
        return {"name": "spy"}

    def close(self) -> None:
        pass


class PeekingMethod(SpyMethod):
    """Returns a doc id it was never given: the runner must refuse."""

    def search(self, query: Query, k: int) -> SearchResult:
        return SearchResult([("chat:5", 1.0)])
