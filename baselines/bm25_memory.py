"""BM25 held in memory (``bm25_memory``): Pyserini's rankings and scores without a JVM or disk index.

``InMemoryBM25`` ranks like Anserini (score descending, ties by doc id ascending) over
``lethe.retrieval.bm25.BM25Index``; ``anserini_adjust_ties`` rounds and tie-perturbs the scores as
Anserini's ``ScoreTiesAdjusterReranker`` does, so rankings and scores equal the ``bm25`` baseline's.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import regex

from lethe.core.protocol import Doc, Query, SearchResult
from lethe.retrieval.bm25 import BM25Index
from lethe.retrieval.ranking import top_indices


def anserini_adjust_ties(scores: np.ndarray) -> np.ndarray:
    """Anserini's ``ScoreTiesAdjusterReranker`` on a ranked float32 list (best first).

    Rounds each score to 1e-4 (``(float) (Math.round(s * 1e4) / 1e4)``, in double) and subtracts
    1e-6 per position inside a run of equal rounded scores, so the scores alone reproduce the
    ranking (ties by doc id ascending) whatever tie rule an evaluation tool applies.
    float32 (n,) in, float32 (n,) out.
    """
    x = np.asarray(scores, dtype=np.float32).astype(np.float64) * 1e4  # exact: 24-bit mantissa times 1e4
    out = (np.floor(x + 0.5) / 1e4).astype(np.float32)  # Math.round(double) = floor(x + 0.5)
    eps, tol = np.float32(1e-6), np.float32(1e-4)
    apart = (out[:-1] - out[1:]) > tol
    if apart.all():
        return out
    dup = 0
    for i in range(int(np.argmin(apart)) + 1, len(out)):  # before the first near tie nothing changes
        if out[i - 1] - out[i] > tol:
            dup = 0
        else:
            dup += 1
            out[i] = out[i] - eps * np.float32(dup)
    return out


ANALYZER_STEPS = {
    "english": "StandardTokenizer, EnglishPossessive, LowerCase, Lucene English stopwords, Porter",
    "no_stem": "StandardTokenizer, EnglishPossessive, LowerCase, Lucene English stopwords",
    "no_stopwords": "StandardTokenizer, EnglishPossessive, LowerCase, Porter",
    "simple": "runs of letters and digits, lowercased",
    "whitespace": "lowercased, split on whitespace (punctuation stays on words)",
}


class InMemoryBM25:
    """Method: Anserini-equivalent BM25 (k1, b) held in memory; one index per ``index()`` call.

    Ranking as Pyserini's ``LuceneSearcher.search``: Lucene float32 scores, ties by doc id
    ascending; with ``anserini_scores`` (default) the returned scores are then rounded and
    tie-perturbed like Anserini's (``anserini_adjust_ties``), so rankings and scores equal the
    ``bm25`` baseline's; otherwise the raw Lucene scores are returned.

    Analyzed docs are cached by text across ``index()`` calls, so re-indexing growing prefixes of
    a conversation only analyzes new turns. ``cache_dir`` and ``progress`` are accepted for the
    runner's uniform constructor call; nothing is written to disk.
    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        cache_dir: str | Path | None = None,
        progress: bool = True,
        anserini_scores: bool = True,
        analyzer: str = "english",
    ):
        self.k1, self.b = float(k1), float(b)
        self.anserini_scores = bool(anserini_scores)
        self._index = BM25Index(self.k1, self.b, analyzer)
        self._ids: list[str] = []
        self._tie_rank = np.zeros(0, dtype=np.int64)
        self._analyzed: OrderedDict[str, list[str]] = OrderedDict()
        self._analyzed_max = 200_000
        self.indexes_built = 0

    def _terms(self, text: str) -> list[str]:
        terms = self._analyzed.get(text)
        if terms is None:
            terms = self._index.analyze(text)
            self._analyzed[text] = terms
            if len(self._analyzed) > self._analyzed_max:
                self._analyzed.popitem(last=False)
        return terms

    def index(self, docs: Sequence[Doc]) -> None:
        """Index exactly ``docs`` (replaces the previous index)."""
        self._ids = [d.doc_id for d in docs]
        self._index.fit_terms([self._terms(d.text) for d in docs])
        # Anserini breaks score ties by the docid field, ascending (string order)
        self._tie_rank = np.empty(len(docs), dtype=np.int64)
        self._tie_rank[sorted(range(len(docs)), key=self._ids.__getitem__)] = np.arange(len(docs))
        self.indexes_built += 1

    def search(self, query: Query, k: int) -> SearchResult:
        """Top ``k`` docs containing a query term: [(doc_id, score)], best first."""
        t0 = time.perf_counter()
        all_scores = self._index.score(query.text)
        idx = top_indices(all_scores, k, self._tie_rank, positive_only=True)
        scores = all_scores[idx]
        if self.anserini_scores:
            scores = anserini_adjust_ties(scores)
        ranking = [(self._ids[i], float(s)) for i, s in zip(idx.tolist(), scores.tolist(), strict=True)]
        return SearchResult(ranking, {"search": (time.perf_counter() - t0) * 1e3})

    def describe(self) -> dict[str, Any]:
        return {
            "name": "bm25_memory",
            "implementation": "lethe.retrieval.bm25 (in-memory; Lucene 9.9.1 BM25Similarity, "
            "Anserini 1.7.1 DefaultEnglishAnalyzer, as in pyserini 1.6.0)",
            "k1": self.k1,
            "b": self.b,
            "anserini_scores": self.anserini_scores,
            "analyzer": self._index.analyzer,
            "analyzer_steps": ANALYZER_STEPS[self._index.analyzer],
            "unicode": f"regex {regex.__version__} + Unicode 9 corrections",
            "indexes_built": self.indexes_built,
        }

    def close(self) -> None:
        self._analyzed.clear()
