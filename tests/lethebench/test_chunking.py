"""Token-window chunking with the embedder's real tokenizer."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lethebench.chunking import ChunkParams, chunk_corpus, chunk_text, hf_token_spans, map_qrels


def ws_spans(text):
    out, i = [], 0
    for tok in text.split():
        i = text.index(tok, i)
        out.append((i, i + len(tok)))
        i += len(tok)
    return out


def test_windows_overlap_and_cover_everything():
    text = " ".join(f"w{i}" for i in range(1000))
    chunks = chunk_text(text, ws_spans, ChunkParams(320, 64))
    assert [n for _, n in chunks] == [320, 320, 320, 232]
    words = [c.split() for c, _ in chunks]
    assert words[0][0] == "w0" and words[1][0] == "w256" and words[3][-1] == "w999"
    assert words[0][-64:] == words[1][:64]


def test_short_text_stays_whole_byte_for_byte():
    text = "  Caroline: hi   there!  "
    assert chunk_text(text, ws_spans, ChunkParams(320, 64)) == [(text, 3)]


def test_bad_params():
    with pytest.raises(ValueError):
        ChunkParams(10, 10)


def test_real_tokenizer_and_ids(embedder):
    spans = hf_token_spans(embedder.tokenizer)
    long = "The deployment failed because the configuration file was missing. " * 60
    src = pd.DataFrame([
        {"doc_id": "s:0", "scope_id": "s", "position": 0, "text": "short turn", "kind": "turn", "speaker": None,
         "timestamp": None, "source_id": "s:0", "entities": [], "meta": "{}"},
        {"doc_id": "s:1", "scope_id": "s", "position": 1, "text": long, "kind": "turn", "speaker": None,
         "timestamp": None, "source_id": "s:1", "entities": [], "meta": "{}"},
    ])
    corpus, src_to_docs, stats = chunk_corpus(src, spans, ChunkParams(320, 64), embedder.max_seq_length)
    n_tok = len(spans(long))
    assert n_tok > 320
    assert src_to_docs["s:0"] == ["s:0"]
    assert src_to_docs["s:1"] == [f"s:1#{i}" for i in range(len(src_to_docs["s:1"]))]
    assert len(src_to_docs["s:1"]) == -(-(n_tok - 64) // 256)
    assert list(corpus["position"]) == [0] + [1] * len(src_to_docs["s:1"])
    assert json.loads(corpus.iloc[1]["meta"]) == {"chunk": 0, "chunks": len(src_to_docs["s:1"])}
    assert stats["embedder_max_seq_length"] == 256
    assert stats["share_longer_than_embedder_max"] > 0
    assert map_qrels({"q": {"s:1": 2}}, src_to_docs) == {"q": {d: 2 for d in src_to_docs["s:1"]}}
