"""Token-window chunking, identical for every method (DESIGN.md "Chunking").

Windows are counted in tokens of a named tokenizer (default: the embedder's), ``size`` tokens
with ``overlap`` tokens shared between neighbours; a source of at most ``size`` tokens stays
whole. Chunk text is the exact character span of its tokens in the source text.

Ids: a source kept whole keeps its ``source_id`` as ``doc_id``; a split source gives
``<source_id>#<i>`` (i from 0), so qrels on sources map to chunks deterministically.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

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


@dataclass(frozen=True)
class ChunkParams:
    size: int = 320
    overlap: int = 64

    def __post_init__(self) -> None:
        if self.size < 1 or not 0 <= self.overlap < self.size:
            raise ValueError(f"chunking needs size >= 1 and 0 <= overlap < size, got {self}")


def chunk_text(text: str, spans: TokenSpans, params: ChunkParams) -> list[tuple[str, int]]:
    """Split ``text`` into windows; returns [(chunk_text, n_tokens)]."""
    toks = spans(text)
    n = len(toks)
    if n <= params.size:
        return [(text, n)]
    out = []
    step = params.size - params.overlap
    start = 0
    while True:
        end = min(start + params.size, n)
        out.append((text[toks[start][0] : toks[end - 1][1]], end - start))
        if end == n:
            break
        start += step
    return out


def chunk_corpus(
    sources: pd.DataFrame, spans: TokenSpans, params: ChunkParams, max_seq_length: int | None = None
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
        pieces = chunk_text(r["text"], spans, params)
        ids = [r["source_id"]] if len(pieces) == 1 else [f"{r['source_id']}#{i}" for i in range(len(pieces))]
        src_to_docs[r["source_id"]] = ids
        for i, (doc_id, (text, ntok)) in enumerate(zip(ids, pieces)):
            meta = json.loads(r["meta"])
            if len(pieces) > 1:
                meta = {**meta, "chunk": i, "chunks": len(pieces)}
            rows.append({**r, "doc_id": doc_id, "text": text, "meta": json.dumps(meta, sort_keys=True)})
            lengths.append(ntok)
    corpus = pd.DataFrame(rows, columns=list(sources.columns))
    corpus["position"] = corpus["position"].astype("int64")
    arr = np.asarray(lengths)
    stats = {
        "size_tokens": params.size,
        "overlap_tokens": params.overlap,
        "sources": int(len(sources)),
        "chunks": int(len(corpus)),
        "sources_split": int(sum(len(v) > 1 for v in src_to_docs.values())),
        "tokens_p50": float(np.percentile(arr, 50)) if len(arr) else 0.0,
        "tokens_p95": float(np.percentile(arr, 95)) if len(arr) else 0.0,
        "tokens_max": int(arr.max()) if len(arr) else 0,
    }
    if max_seq_length:
        stats["embedder_max_seq_length"] = int(max_seq_length)
        stats["share_longer_than_embedder_max"] = float((arr > max_seq_length).mean()) if len(arr) else 0.0
    return corpus, src_to_docs, stats


def map_qrels(source_qrels: Qrels, src_to_docs: dict[str, list[str]]) -> Qrels:
    """Give every chunk of a relevant source the source's grade.

    Datasets with chunk-level relevance (e.g. by answer overlap) build their own qrels instead.
    """
    return {q: {d: g for s, g in docs.items() for d in src_to_docs[s]} for q, docs in source_qrels.items()}
