"""Cross-encoder reranking: Pyserini BM25 top ``candidates``, reordered by a cross-encoder's score.

The model is resolved with :func:`lethe.core.models.resolve_model` (``conf/model/cross_encoder.yaml``):
its ``path`` (default ``<cache_dir>/models/ce-minilm-lethebench``, written by ``make models``),
else the hub id when ``allow_hub`` is true. A relative ``path`` is taken relative to the project
root, like every relative path of the harness. Scores are the model's raw logits.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from baselines.bm25 import PyseriniBM25
from lethe.retrieval.crossencoder import load_cross_encoder, read_model_card, rerank, resolve_cross_encoder
from lethe.retrieval.ranking import canonical_order
from lethe.core.protocol import Doc, Query, SearchResult

DEFAULT_FIRST_STAGE = {"k1": 1.2, "b": 0.75}


class CrossEncoderRerank:
    """BM25 candidates (Pyserini, k1 1.2, b 0.75 by default) reranked by a cross-encoder.

    ``search(query, k)`` scores the BM25 top ``candidates`` with the cross-encoder (query text only)
    and returns them best first; if ``k > candidates`` the next BM25 hits follow in BM25 order with
    scores below every reranked one.
    """

    def __init__(self, model: Mapping[str, Any], first_stage: Mapping[str, Any] | None = None, candidates: int = 100,
                 batch_size: int = 32, cache_dir: str | Path | None = None, progress: bool = True):
        self.model_cfg = dict(model)
        self.resolved = resolve_cross_encoder(self.model_cfg)
        self.card = read_model_card(self.resolved.path) if self.resolved.path.is_dir() else None
        self.max_length = self.model_cfg.get("max_length")
        self.candidates, self.batch_size = int(candidates), int(batch_size)
        self.bm25 = PyseriniBM25(**{**DEFAULT_FIRST_STAGE, **dict(first_stage or {})}, cache_dir=cache_dir, progress=progress)
        self.model = load_cross_encoder(self.resolved.path, max_length=int(self.max_length) if self.max_length else None,
                                        offline=self.resolved.source != "hub")
        self._text: dict[str, str] = {}
        self.pairs_scored = 0

    def index(self, docs: Sequence[Doc]) -> None:
        self.bm25.index(docs)
        self._text = {d.doc_id: d.text for d in docs}

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        hits = canonical_order(self.bm25.search(query, max(k, self.candidates)).ranking)
        t1 = time.perf_counter()
        head, tail = hits[: self.candidates], hits[self.candidates:]
        ranking = rerank(self.model, query.text, [(d, self._text[d]) for d, _ in head], self.batch_size)
        self.pairs_scored += len(head)
        if tail:
            floor = min((s for _, s in ranking), default=0.0)
            ranking += [(d, floor - (i + 1)) for i, (d, _) in enumerate(tail)]
        t2 = time.perf_counter()
        return SearchResult(ranking[:k], {"bm25": (t1 - t0) * 1e3, "rerank": (t2 - t1) * 1e3},
                            {"candidates": len(head)})

    def describe(self) -> dict[str, Any]:
        return {"name": "cross_encoder", "first_stage": self.bm25.describe(), "candidates": self.candidates,
                "batch_size": self.batch_size, "max_length": self.max_length, "score": "raw logit (query text only)",
                "model": self.resolved.describe(), "pairs_scored": self.pairs_scored, "training_card": self.card}

    def close(self) -> None:
        self.bm25.close()
