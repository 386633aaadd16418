"""Lucene's ``BM25Similarity`` in memory: the scores of Pyserini 1.6.0 / Anserini 1.7.1 (Lucene 9.9.1).

``BM25Index``: ``fit(texts)`` then ``score(query_text) -> float32 (n_docs,)``, with Lucene's float32
arithmetic, the one-byte length norm (``SmallFloat.intToByte4``), ``docCount``/``avgdl`` over docs with
at least one term, and Anserini's bag-of-words query (a term repeated c times is one clause with
boost c). Terms come from ``lethe.text.analyzer.analyze`` (or, with ``analyzer``, one of its variants).
The method wrapper with Anserini's ranking is ``baselines.bm25_memory.InMemoryBM25``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from lethe.text.analyzer import get_analyzer

# ---------------------------------------------------------------------------------------------
# Lucene's one-byte length norm (org.apache.lucene.util.SmallFloat)
# ---------------------------------------------------------------------------------------------


def _long_to_int4(i: int) -> int:
    num_bits = i.bit_length()
    if num_bits < 4:
        return i
    shift = num_bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_NUM_FREE_VALUES = 255 - _long_to_int4(2**31 - 1)  # 24: lengths below this are stored exactly


def int_to_byte4(i: int) -> int:
    """``SmallFloat.intToByte4``: a doc length (tokens, >= 0) as an unsigned byte 0..255."""
    if i < 0:
        raise ValueError("length must be >= 0")
    return i if i < _NUM_FREE_VALUES else _NUM_FREE_VALUES + _long_to_int4(i - _NUM_FREE_VALUES)


def byte4_to_int(b: int) -> int:
    """``SmallFloat.byte4ToInt``: the (lossy) length a norm byte 0..255 stands for."""
    return b if b < _NUM_FREE_VALUES else _NUM_FREE_VALUES + _int4_to_long(b - _NUM_FREE_VALUES)


#: ``BM25Similarity.LENGTH_TABLE``: decoded length per norm byte, float32 (256,).
LENGTH_TABLE: np.ndarray = np.array([byte4_to_int(i) for i in range(256)], dtype=np.float32)
_BYTE_UPPER = np.array([byte4_to_int(i) for i in range(256)], dtype=np.int64)


def encode_lengths(lengths: np.ndarray) -> np.ndarray:
    """Vectorized ``int_to_byte4`` of int lengths (n,) -> uint8 (n,)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    # byte4ToInt is increasing and intToByte4 rounds down: the byte is the last b with decode(b) <= len
    return (np.searchsorted(_BYTE_UPPER, lengths, side="right") - 1).astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------


class BM25Index:
    """Lucene ``BM25Similarity`` over one set of docs, held as term-major postings.

    ``fit(texts)`` (or ``fit_terms``) builds the index; ``score(query_text)`` returns float32
    scores of shape (n_docs,), 0 for docs matching no query term, equal to Lucene's bit for bit.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75, analyzer: str = "english"):
        """``analyzer``: a name of ``lethe.text.analyzer.ANALYZERS`` (english = Anserini's, Pyserini's BM25)."""
        self.k1, self.b = float(k1), float(b)
        self.analyzer = analyzer
        self.analyze = get_analyzer(analyzer)
        self.fit_terms([])

    def fit(self, texts: Sequence[str]) -> BM25Index:
        """Analyze and index ``texts`` (n docs, in order)."""
        return self.fit_terms([self.analyze(t) for t in texts])

    def fit_terms(self, docs_terms: Sequence[Sequence[str]]) -> BM25Index:
        """Index already analyzed docs: one list of terms per doc."""
        vocab: dict[str, int] = {}
        lengths = np.fromiter((len(t) for t in docs_terms), dtype=np.int64, count=len(docs_terms))
        ids = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for terms in docs_terms for t in terms),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
        n = len(docs_terms)
        doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys, freq = np.unique(ids * max(n, 1) + doc_of, return_counts=True)  # sorted: term, then doc
        term_of, self.post_docs = np.divmod(keys, max(n, 1))
        self.vocab = vocab
        self.n_docs = n
        self.indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_of, minlength=len(vocab)), out=self.indptr[1:])
        self.doc_lengths = lengths
        self.norms = encode_lengths(lengths)
        # Lucene's collection statistics count only docs with at least one term in the field
        self.doc_count = int(np.count_nonzero(lengths))
        self.sum_total_term_freq = int(lengths.sum())
        df = np.diff(self.indptr).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.idf = np.log(1.0 + (self.doc_count - df + 0.5) / (df + 0.5)).astype(np.float32)
            self.avgdl = np.float32(self.sum_total_term_freq / self.doc_count) if self.doc_count else np.float32(0)
            k1, b = np.float32(self.k1), np.float32(self.b)
            # BM25Similarity.scorer: cache[i] = 1f / (k1 * ((1 - b) + b * LENGTH_TABLE[i] / avgdl))
            self.norm_inverse = np.float32(1) / (k1 * ((np.float32(1) - b) + b * LENGTH_TABLE / self.avgdl))
            # per posting: 1f + freq * normInverse, as in BM25Scorer.score
            self.post_denom = np.float32(1) + freq.astype(np.float32) * self.norm_inverse[self.norms[self.post_docs]]
        return self

    def set_idf(self, df: Mapping[str, int], n_docs: int) -> BM25Index:
        """Replace the IDF with one from outside collection statistics (``df``: term -> doc count
        over ``n_docs`` docs), e.g. a whole corpus instead of this session; lengths stay local."""
        terms = sorted(self.vocab, key=self.vocab.get)
        d = np.array([max(df.get(t, 0), 1) for t in terms], dtype=np.float64)
        self.idf = np.log(1.0 + (n_docs - d + 0.5) / (d + 0.5)).astype(np.float32)
        return self

    def query_weights(self, query_terms: Iterable[str]) -> list[tuple[int, np.float32]]:
        """(term id, boost * idf as float32) per distinct indexed query term, in first-seen order."""
        counts: dict[str, int] = {}
        for t in query_terms:
            counts[t] = counts.get(t, 0) + 1
        out = []
        for t, c in counts.items():
            tid = self.vocab.get(t)
            if tid is not None:
                out.append((tid, np.float32(c) * self.idf[tid]))
        return out

    def score_terms(self, query_terms: Iterable[str]) -> np.ndarray:
        """float32 scores (n_docs,) for an analyzed query (a repeated term counts as its boost)."""
        weights = self.query_weights(query_terms)
        if len(weights) == 1:  # a single clause is scored in float directly
            tid, w = weights[0]
            s, e = self.indptr[tid], self.indptr[tid + 1]
            out = np.zeros(self.n_docs, dtype=np.float32)
            out[self.post_docs[s:e]] = w - w / self.post_denom[s:e]
            return out
        acc = np.zeros(self.n_docs, dtype=np.float64)  # Lucene sums clause scores in double
        for tid, w in weights:
            s, e = self.indptr[tid], self.indptr[tid + 1]
            acc[self.post_docs[s:e]] += w - w / self.post_denom[s:e]
        return acc.astype(np.float32)

    def score(self, query_text: str) -> np.ndarray:
        """float32 scores (n_docs,) of ``query_text`` for every doc (0 where no term matches)."""
        return self.score_terms(self.analyze(query_text))
