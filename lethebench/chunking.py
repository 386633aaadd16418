"""Chunking, identical for every method (DESIGN.md "Chunking").

Lengths are counted in tokens of a named tokenizer (default: the embedder's); a source of at most ``size``
tokens stays whole, whatever the strategy. Longer sources are cut by ``strategy``:

- ``tokens`` (the default): windows of ``size`` tokens with ``overlap`` tokens shared between neighbours.
- ``sentences``: the source's sentences (:func:`sentence_spans`) packed greedily into windows of at most
  ``size`` tokens, each window after the first starting ``overlap_sentences`` sentences before the previous
  one's end (when that still moves forward).
- ``semantic``: sentences packed greedily, a new chunk starting at a breakpoint between adjacent sentences or
  where ``size`` tokens would be exceeded. Breakpoints (``semantic_breakpoint``): ``threshold``, where the cosine
  similarity of their embeddings falls below ``semantic_threshold`` (a fixed value: on long technical text most
  adjacent sentences fall below 0.5, so units are one or two sentences); ``percentile``, where their cosine
  distance is above the source's own ``semantic_percentile``-th percentile of adjacent distances (label-free: the
  source's largest topic shifts, as LangChain's SemanticChunker does by default).

A single sentence longer than ``size`` tokens is cut into token windows. Chunk text is always an exact character
span of the source text.

Ids: a source kept whole keeps its ``source_id`` as ``doc_id``; a split source gives
``<source_id>#<i>`` (i from 0), so qrels on sources map to chunks deterministically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lethebench.trec import Qrels

# A tokenizer here is anything mapping text -> list of (char_start, char_end) per token.
TokenSpans = Callable[[str], list[tuple[int, int]]]


def hf_token_spans(tokenizer: Any) -> TokenSpans:
    """Adapt a Hugging Face *fast* tokenizer to :data:`TokenSpans` (no special tokens)."""

    def spans(text: str) -> list[tuple[int, int]]:
        # verbose=False: counting tokens of texts longer than the model's limit is the point here
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [tuple(o) for o in enc["offset_mapping"]]

    return spans


STRATEGIES = ("tokens", "sentences", "semantic")
BREAKPOINTS = ("threshold", "percentile")
# a sentence ends at ., ! or ? (optionally followed by closing quotes/brackets) before whitespace, or at a line break
_SENTENCE_END = re.compile(r"""[.!?]+["')\]]*(?=\s)|\n+""")
Embed = Callable[[list[str]], np.ndarray]  # texts -> L2-normalized vectors (n, dim)


@dataclass(frozen=True)
class ChunkParams:
    size: int = 320
    overlap: int = 64
    strategy: str = "tokens"
    overlap_sentences: int = 1
    semantic_threshold: float = 0.5
    semantic_breakpoint: str = "threshold"
    semantic_percentile: float = 95.0

    def __post_init__(self) -> None:
        if self.size < 1 or not 0 <= self.overlap < self.size:
            raise ValueError(f"chunking needs size >= 1 and 0 <= overlap < size, got {self}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"chunking.strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.overlap_sentences < 0:
            raise ValueError(f"chunking.overlap_sentences must be >= 0, got {self.overlap_sentences}")
        if not -1.0 <= self.semantic_threshold <= 1.0:
            raise ValueError(f"chunking.semantic_threshold must be in [-1, 1], got {self.semantic_threshold}")
        if self.semantic_breakpoint not in BREAKPOINTS:
            raise ValueError(
                f"chunking.semantic_breakpoint must be one of {BREAKPOINTS}, got {self.semantic_breakpoint!r}"
            )
        if not 0.0 < self.semantic_percentile < 100.0:
            raise ValueError(f"chunking.semantic_percentile must be in (0, 100), got {self.semantic_percentile}")

    def key(self) -> list[Any]:
        """What identifies the chunking in a build key: [size, overlap] for token windows (the key every build had
        before the other strategies), else the strategy and its own parameters."""
        if self.strategy == "tokens":
            return [self.size, self.overlap]
        if self.strategy == "sentences":
            return ["sentences", self.size, self.overlap_sentences]
        if self.semantic_breakpoint == "threshold":  # the key semantic builds had before percentile breakpoints
            return ["semantic", self.size, self.semantic_threshold]
        return ["semantic", self.size, "percentile", self.semantic_percentile]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the sentences of ``text`` (module docstring), whitespace trimmed."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append((start, m.end()))
        start = m.end()
    out.append((start, len(text)))
    spans = []
    for a, b in out:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            spans.append((a, b))
    return spans


def chunk_text(text: str, spans: TokenSpans, params: ChunkParams, embed: Embed | None = None) -> list[tuple[str, int]]:
    """Split ``text`` by ``params.strategy`` (module docstring); returns [(chunk_text, n_tokens)]. ``embed`` is
    needed by the semantic strategy."""
    toks = spans(text)
    n = len(toks)
    if n <= params.size:
        return [(text, n)]
    if params.strategy != "tokens":
        return _sentence_chunks(text, spans, params, embed)
    return _windows(text, toks, params.size, params.overlap)


def _windows(text: str, toks: list[tuple[int, int]], size: int, overlap: int) -> list[tuple[str, int]]:
    n = len(toks)
    if n <= size:
        return [(text[toks[0][0] : toks[-1][1]] if toks else text, n)]
    out = []
    step = size - overlap
    start = 0
    while True:
        end = min(start + size, n)
        out.append((text[toks[start][0] : toks[end - 1][1]], end - start))
        if end == n:
            break
        start += step
    return out


def semantic_breaks(sims: np.ndarray, params: ChunkParams) -> np.ndarray:
    """Per adjacent-sentence pair (``sims``: their cosine similarities, shape (n - 1,)): whether a chunk starts
    after the first sentence of the pair (module docstring, ``semantic_breakpoint``)."""
    if params.semantic_breakpoint == "threshold":
        return sims < params.semantic_threshold
    distances = 1.0 - sims
    return distances > np.percentile(distances, params.semantic_percentile)


def _sentence_chunks(text: str, spans: TokenSpans, params: ChunkParams, embed: Embed | None) -> list[tuple[str, int]]:
    """The sentences and semantic strategies (module docstring)."""
    sents = sentence_spans(text)
    counts = [len(spans(text[a:b])) for a, b in sents]
    breaks = set()
    if params.strategy == "semantic":
        if embed is None:
            raise ValueError("chunking.strategy=semantic needs sentence embeddings (an embedder)")
        if len(sents) > 1:
            vecs = np.asarray(embed([text[a:b] for a, b in sents]), dtype=np.float64)
            sims = np.einsum("ij,ij->i", vecs[:-1], vecs[1:])
            breaks = {i + 1 for i in np.flatnonzero(semantic_breaks(sims, params))}
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(sents):
        if counts[i] > params.size:  # one sentence longer than a chunk: token windows of it
            a, b = sents[i]
            toks = [(x + a, y + a) for x, y in spans(text[a:b])]
            out += _windows(text, toks, params.size, params.overlap)
            i += 1
            continue
        j, total = i, 0
        while j < len(sents) and total + counts[j] <= params.size and (j == i or j not in breaks):
            total += counts[j]
            j += 1
        out.append((text[sents[i][0] : sents[j - 1][1]], total))
        if j >= len(sents):
            break
        back = params.overlap_sentences if params.strategy == "sentences" else 0
        i = max(j - back, i + 1)
    return out


def chunk_corpus(
    sources: pd.DataFrame,
    spans: TokenSpans,
    params: ChunkParams,
    max_seq_length: int | None = None,
    embed: Embed | None = None,
) -> tuple[pd.DataFrame, dict[str, list[str]], dict[str, Any]]:
    """Chunk a source-level corpus (corpus columns, ``doc_id == source_id``).

    Returns the chunk-level corpus (chunks keep their source's ``position``, so eligibility
    ``position < p`` means the same for sources and chunks),
    a map source_id -> [doc_id], and statistics (token lengths, share of chunks longer than
    ``max_seq_length``, the embedder's limit, where the model truncates).
    """
    rows, lengths = [], []
    src_to_docs: dict[str, list[str]] = {}
    ordered = sources.sort_values(["scope_id", "position"], kind="stable")
    for r in ordered.to_dict("records"):
        pieces = chunk_text(r["text"], spans, params, embed)
        ids = [r["source_id"]] if len(pieces) == 1 else [f"{r['source_id']}#{i}" for i in range(len(pieces))]
        src_to_docs[r["source_id"]] = ids
        for i, (doc_id, (text, ntok)) in enumerate(zip(ids, pieces, strict=True)):
            meta = json.loads(r["meta"])
            if len(pieces) > 1:
                meta = {**meta, "chunk": i, "chunks": len(pieces)}
            rows.append({**r, "doc_id": doc_id, "text": text, "meta": json.dumps(meta, sort_keys=True)})
            lengths.append(ntok)
    corpus = pd.DataFrame(rows, columns=list(sources.columns))
    corpus["position"] = corpus["position"].astype("int64")
    arr = np.asarray(lengths)
    stats = {
        **({"strategy": params.strategy} if params.strategy != "tokens" else {}),
        "size_tokens": params.size,
        "overlap_tokens": params.overlap,
        **({"overlap_sentences": params.overlap_sentences} if params.strategy == "sentences" else {}),
        **(
            {"semantic_threshold": params.semantic_threshold}
            if params.strategy == "semantic" and params.semantic_breakpoint == "threshold"
            else {}
        ),
        **(
            {"semantic_breakpoint": "percentile", "semantic_percentile": params.semantic_percentile}
            if params.strategy == "semantic" and params.semantic_breakpoint == "percentile"
            else {}
        ),
        "sources": int(len(sources)),
        "chunks": int(len(corpus)),
        "sources_split": int(sum(len(v) > 1 for v in src_to_docs.values())),
        **_length_stats(arr, max_seq_length),
    }
    return corpus, src_to_docs, stats


def _length_stats(arr: np.ndarray, max_seq_length: int | None) -> dict[str, Any]:
    """Token-length percentiles of the docs and, given the embedder's limit, the share longer than it."""
    stats: dict[str, Any] = {
        "tokens_p50": float(np.percentile(arr, 50)) if len(arr) else 0.0,
        "tokens_p95": float(np.percentile(arr, 95)) if len(arr) else 0.0,
        "tokens_max": int(arr.max()) if len(arr) else 0,
    }
    if max_seq_length:
        stats["embedder_max_seq_length"] = int(max_seq_length)
        stats["share_longer_than_embedder_max"] = float((arr > max_seq_length).mean()) if len(arr) else 0.0
    return stats


def whole_corpus(
    sources: pd.DataFrame, spans: TokenSpans, max_seq_length: int | None = None
) -> tuple[pd.DataFrame, dict[str, list[str]], dict[str, Any]]:
    """Every source as one doc, whatever its length (``doc_id == source_id``), in :func:`chunk_corpus`'s order and
    shape: the corpus, source_id -> [doc_id], and statistics (token lengths in ``spans``' tokens; the share longer
    than ``max_seq_length``, the part an embedder with that limit never reads)."""
    corpus = sources.sort_values(["scope_id", "position"], kind="stable").reset_index(drop=True)
    corpus["position"] = corpus["position"].astype("int64")
    arr = np.asarray([len(spans(t)) for t in corpus["text"]])
    stats = {
        "whole_documents": True,
        "note": "the loader asked for whole documents: no source was chunked, whatever its length",
        "sources": int(len(sources)),
        "docs": int(len(corpus)),
        **_length_stats(arr, max_seq_length),
    }
    return corpus, {d: [d] for d in corpus["doc_id"]}, stats


def map_qrels(source_qrels: Qrels, src_to_docs: dict[str, list[str]]) -> Qrels:
    """Give every chunk of a relevant source the source's grade.

    Datasets with chunk-level relevance (e.g. by answer overlap) build their own qrels instead.
    """
    return {q: {d: g for s, g in docs.items() for d in src_to_docs[s]} for q, docs in source_qrels.items()}
