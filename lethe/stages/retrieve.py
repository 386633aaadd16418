"""The candidate stage of the Lethe pipeline: per sub-query, BM25's and the dense model's top ``depth`` (paper Eq. 1;
``lethe.retrieval.bm25.BM25Index``, Lucene-exact, fitted on the docs the query may see, or with collection IDF when
``bm25.idf_scope=corpus``; cosine over ``lethe.retrieval.embedder`` vectors), their union with both scores and the
query's exact-match signals (the boost stage adds to them)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np

from lethe.core.protocol import Doc
from lethe.retrieval.bm25 import BM25Index
from lethe.retrieval.embedder import Embedder
from lethe.retrieval.ranking import top_indices
from lethe.stages.boost import query_signals
from lethe.stages.candidates import BM25Params, SubCandidates
from lethe.stages.state import Collection, QueryState, StageContext, empty_vectors


class Retrieve:
    """``depth``: candidates taken from each of the BM25 and dense lists, per sub-query; ``bm25``: its parameters.
    Values: the method YAML."""

    phase: ClassVar[str] = "prepare"

    def __init__(self, depth: int, bm25: BM25Params):
        if not isinstance(bm25, BM25Params):
            raise TypeError(f"retrieve.bm25 must be a built {BM25Params.__qualname__} (a section with _target_)")
        self.depth, self.bm25_params = int(depth), bm25
        self.bm25 = BM25Index(bm25.k1, bm25.b)
        self.vecs = empty_vectors()
        self._vecs: dict[str, np.ndarray] = {}
        self._embedder: Embedder | None = None
        self._collection_df: dict[str, int] | None = None
        self._collection_n = 0

    def base_params(self) -> dict[str, Any]:
        return {"depth": self.depth, "bm25": asdict(self.bm25_params)}

    def bind(self, ctx: StageContext) -> None:
        self._embedder = ctx.embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            raise RuntimeError("retrieve: no embedder bound (the pipeline binds it when it is built)")
        return self._embedder

    def set_collection(self, docs: Sequence[Doc], collection: Collection) -> None:
        """Collection statistics for ``bm25.idf_scope=corpus`` (the runner calls it once with every doc)."""
        if self.bm25_params.idf_scope != "corpus":
            return
        df: dict[str, int] = {}
        for d in docs:
            for t in set(collection.analyzed(d)):
                df[t] = df.get(t, 0) + 1
        self._collection_df, self._collection_n = df, sum(1 for d in docs if collection.analyzed(d))

    def on_collection(self, collection: Collection) -> None:
        self.bm25 = BM25Index(self.bm25_params.k1, self.bm25_params.b).fit_terms(collection.terms)
        if self._collection_df is not None:
            self.bm25.set_idf(self._collection_df, self._collection_n)
        missing = [d for d in collection.docs if d.doc_id not in self._vecs]
        if missing:
            for d, v in zip(missing, self.embedder.encode([d.text for d in missing], role="doc"), strict=True):
                self._vecs[d.doc_id] = v
        self.vecs = np.stack([self._vecs[d.doc_id] for d in collection.docs]) if collection.docs else empty_vectors()

    def step(self, s: QueryState) -> None:
        texts = s.understanding.subqueries if s.understanding else (s.text,)  # subqueries[0]: the query itself
        bm25_ms = enc_ms = 0.0
        for text in texts:
            t0 = time.perf_counter()
            lex = self.bm25.score(text)
            lex_top = np.array([i for i in top_indices(lex, self.depth) if lex[i] > 0], dtype=np.int64)
            t1 = time.perf_counter()
            q = self.embedder.encode([text], role="query")[0]
            cos = self.vecs @ q
            dense_top = top_indices(cos, self.depth)
            union = np.union1d(lex_top, dense_top).astype(np.int64)
            t2 = time.perf_counter()
            s.signals.append(query_signals(text))
            s.subs.append(
                SubCandidates(
                    text,
                    union,
                    lex[union].astype(np.float64),
                    cos[union].astype(np.float64),
                    np.zeros(len(union), dtype=np.float64),
                    lex_top,
                    dense_top,
                )
            )
            bm25_ms += (t1 - t0) * 1e3
            enc_ms += (t2 - t1) * 1e3
        s.list_depth = self.depth
        s.timings.update({"bm25": bm25_ms, "encode_query": enc_ms})
        s.flags.update(s.first_signals.as_record())
