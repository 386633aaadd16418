"""BM25 with Pyserini (Lucene): the field's reference implementation.

One Lucene index per set of indexed docs, cached on disk under
``<cache_dir>/indexes/lucene/<key>`` where ``key`` hashes the doc ids and texts and the
indexing parameters; Anserini's default analysis (Porter stemming, Lucene English stopwords).
``conf/method/bm25.yaml`` and ``conf/method/bm25_beir.yaml`` (Anserini's BEIR regression settings) configure it.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from baselines.pyserini_jvm import ensure_jvm
from lethe.core.atomic import atomic_dir
from lethe.core.protocol import Doc, Query, SearchResult

log = logging.getLogger(__name__)
INDEX_VERSION = "1"


@dataclass(frozen=True)
class Rm3:
    """RM3's settings (Pyserini's and Anserini's defaults: 10 terms from 10 docs, the original query weighted 0.5)."""

    fb_terms: int = 10
    fb_docs: int = 10
    original_query_weight: float = 0.5


class PyseriniBM25:
    """Lucene BM25 (k1, b) over the indexed docs; scores are Lucene's float32 BM25.

    ``remove_query``: drop the hit whose doc id is the query's id, as Pyserini's ``--remove-query`` and Anserini's
    ``-removeQuery`` do in the BEIR regressions (in ArguAna and Quora a query is also a corpus document); one more
    hit is retrieved so the ranking still holds ``k`` docs.

    ``rm3``: RM3 pseudo-relevance feedback as Pyserini's ``LuceneSearcher.set_rm3`` runs it (``fb_terms``
    expansion terms from the top ``fb_docs`` docs, the original query weighted ``original_query_weight``); None for
    plain BM25. The index then stores document vectors (RM3 reads them), under its own cache key.
    """

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        remove_query: bool = False,
        rm3: Mapping[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        self.k1, self.b = float(k1), float(b)
        self.remove_query = bool(remove_query)
        self.rm3 = None if rm3 is None else Rm3(**rm3)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._tmp: str | None = None
        self._searcher = None
        self._n_docs = 0
        self.indexes_built = 0
        self.indexes_reused = 0
        ensure_jvm()

    def _index_dir(self, docs: Sequence[Doc]) -> Path:
        # an index with document vectors (RM3) has its own key; plain BM25's keys are unchanged
        h = hashlib.sha256(f"pyserini-1.6.0/{INDEX_VERSION}{'/docvectors' if self.rm3 else ''}".encode())
        for d in docs:
            h.update(d.doc_id.encode() + b"\0" + d.text.encode() + b"\0")
        key = h.hexdigest()[:24]
        if self.cache_dir is None:
            if self._tmp is None:
                self._tmp = tempfile.mkdtemp(prefix="lethe-lucene-")
            return Path(self._tmp) / key
        return self.cache_dir / "indexes" / "lucene" / key

    def index(self, docs: Sequence[Doc]) -> None:
        from pyserini.index.lucene import LuceneIndexer
        from pyserini.search.lucene import LuceneSearcher

        self._close_searcher()
        self._n_docs = len(docs)
        if not docs:
            return
        final = self._index_dir(docs)
        if (final / "DONE").is_file():
            self.indexes_reused += 1
        else:
            # one atomic swap (lethe.core.atomic): a leftover without DONE is replaced, concurrent builders
            # of the same index never fail, and the folder gets the umask's mode
            with atomic_dir(final) as tmp:
                if self.rm3 is None:
                    writer = LuceneIndexer(str(tmp), threads=1)
                else:  # RM3 reads each feedback doc's term vector
                    writer = LuceneIndexer(args=["-index", str(tmp), "-storeDocvectors"], threads=1)
                writer.add_batch_dict([{"id": d.doc_id, "contents": d.text} for d in docs])
                writer.close()
                (tmp / "DONE").write_text("ok\n")
            self.indexes_built += 1
        self._searcher = LuceneSearcher(str(final))
        self._searcher.set_bm25(self.k1, self.b)
        if self.rm3 is not None:
            self._searcher.set_rm3(self.rm3.fb_terms, self.rm3.fb_docs, self.rm3.original_query_weight)

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        if self._searcher is None or self._n_docs == 0:
            return SearchResult([], {"search": 0.0})
        if self.remove_query:
            hits = [h for h in self._searcher.search(query.text, k=k + 1) if h.docid != query.query_id][:k]
        else:
            hits = self._searcher.search(query.text, k=k)
        ranking = [(h.docid, float(h.score)) for h in hits]
        return SearchResult(ranking, {"search": (time.perf_counter() - t0) * 1e3})

    def _close_searcher(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None

    def describe(self) -> dict[str, Any]:
        import importlib.metadata as md

        return {
            "name": "bm25",
            "implementation": f"pyserini {md.version('pyserini')} (Lucene)",
            "k1": self.k1,
            "b": self.b,
            "remove_query": self.remove_query,
            "rm3": None if self.rm3 is None else asdict(self.rm3),
            "analyzer": "Anserini default (Porter stemmer, Lucene English stopwords)",
            "indexes_built": self.indexes_built,
            "indexes_reused": self.indexes_reused,
        }

    def close(self) -> None:
        self._close_searcher()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
