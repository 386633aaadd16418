"""Token-window chunking with the embedder's real tokenizer."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from lethebench.chunking import ChunkParams, chunk_corpus, chunk_text, hf_token_spans, map_qrels, semantic_breaks


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
    src = pd.DataFrame(
        [
            {
                "doc_id": "s:0",
                "scope_id": "s",
                "position": 0,
                "text": "short turn",
                "kind": "turn",
                "speaker": None,
                "timestamp": None,
                "source_id": "s:0",
                "entities": [],
                "meta": "{}",
            },
            {
                "doc_id": "s:1",
                "scope_id": "s",
                "position": 1,
                "text": long,
                "kind": "turn",
                "speaker": None,
                "timestamp": None,
                "source_id": "s:1",
                "entities": [],
                "meta": "{}",
            },
        ]
    )
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


# --- sentence and semantic strategies (seed 004), on hand-built text with one "token" per word -----------------------

TEXT = "One two three. Four five. Six seven eight nine. Ten."  # sentences of 3, 2, 4, 1 words


def test_sentence_spans_and_windows_by_hand():
    from lethebench.chunking import sentence_spans

    assert [TEXT[a:b] for a, b in sentence_spans(TEXT)] == [
        "One two three.",
        "Four five.",
        "Six seven eight nine.",
        "Ten.",
    ]
    p = ChunkParams(size=6, overlap=1, strategy="sentences", overlap_sentences=1)
    # pack to <= 6 words: [3+2] (adding 4 would make 9); next starts one sentence back: [2+4]; then [4+1]
    assert chunk_text(TEXT, ws_spans, p) == [
        ("One two three. Four five.", 5),
        ("Four five. Six seven eight nine.", 6),
        ("Six seven eight nine. Ten.", 5),
    ]
    no_overlap = ChunkParams(size=6, overlap=1, strategy="sentences", overlap_sentences=0)
    assert [t for t, _ in chunk_text(TEXT, ws_spans, no_overlap)] == [
        "One two three. Four five.",
        "Six seven eight nine. Ten.",
    ]


def test_semantic_cuts_where_adjacent_sentences_differ():
    vec = {"One two three.": [1, 0], "Four five.": [1, 0], "Six seven eight nine.": [0, 1], "Ten.": [0, 1]}
    embed = lambda texts: np.array([vec[t] for t in texts], dtype=float)  # noqa: E731
    p = ChunkParams(size=8, overlap=1, strategy="semantic", semantic_threshold=0.5)
    # similarities 1, 0, 1: one cut, between sentence 2 and 3; sizes 5 and 5 fit in 8
    assert chunk_text(TEXT, ws_spans, p, embed) == [("One two three. Four five.", 5), ("Six seven eight nine. Ten.", 5)]
    tight = ChunkParams(size=4, overlap=1, strategy="semantic", semantic_threshold=0.5)
    assert [t for t, _ in chunk_text(TEXT, ws_spans, tight, embed)] == [
        "One two three.",
        "Four five.",
        "Six seven eight nine.",
        "Ten.",
    ]
    with pytest.raises(ValueError, match="embedder"):
        chunk_text(TEXT, ws_spans, p)


def test_a_sentence_longer_than_a_chunk_is_cut_into_token_windows():
    long = "a b c d e f g. h i."
    p = ChunkParams(size=4, overlap=1, strategy="sentences", overlap_sentences=0)
    assert chunk_text(long, ws_spans, p) == [("a b c d", 4), ("d e f g.", 4), ("h i.", 2)]


def test_strategy_key_keeps_token_window_keys():
    assert ChunkParams(320, 64).key() == [320, 64]  # the build key every dataset had before the strategies
    assert ChunkParams(320, 64, strategy="sentences", overlap_sentences=2).key() == ["sentences", 320, 2]
    assert ChunkParams(320, 64, strategy="semantic", semantic_threshold=0.4).key() == ["semantic", 320, 0.4]
    with pytest.raises(ValueError, match="strategy"):
        ChunkParams(strategy="paragraphs")


def test_strategy_enters_the_build_key_and_the_run_hash():
    from experiments.config import load_config, to_dict
    from experiments.datasets import dataset_build_key
    from experiments.run_identity import config_hash, hashed_config
    from tests.conftest import DATA_ROOT

    base = [f"data.root={DATA_ROOT}", "dataset=locomo"]
    default, sent = load_config(base), load_config([*base, "chunking.strategy=sentences"])
    assert dataset_build_key(default) != dataset_build_key(sent)
    assert hashed_config(to_dict(default), "k")["chunking"] == to_dict(default.chunking)  # the whole section
    assert config_hash(hashed_config(to_dict(sent), "k")) != config_hash(hashed_config(to_dict(default), "k"))


def test_percentile_breakpoints_cut_only_at_the_sources_largest_shifts():
    """A fixed threshold cuts wherever similarity is below it; the label-free percentile breakpoint cuts only at
    the distances above the source's own percentile, whatever their absolute level."""
    text = "A a. B b. C c. D d. E e."
    # adjacent similarities 0.30, 0.35, 0.05, 0.32: all below a 0.5 threshold, one clear topic shift
    sims = np.array([0.30, 0.35, 0.05, 0.32])
    angles = np.concatenate([[0.0], np.cumsum(np.arccos(sims))])
    vec = {s: [np.cos(a), np.sin(a)] for s, a in zip(["A a.", "B b.", "C c.", "D d.", "E e."], angles, strict=True)}
    embed = lambda texts: np.array([vec[t] for t in texts], dtype=float)  # noqa: E731
    fixed = ChunkParams(size=8, overlap=1, strategy="semantic", semantic_threshold=0.5)
    assert len(chunk_text(text, ws_spans, fixed, embed)) == 5  # the degenerate case: one sentence per chunk
    p = ChunkParams(size=8, overlap=1, strategy="semantic", semantic_breakpoint="percentile", semantic_percentile=75)
    assert semantic_breaks(sims, p).tolist() == [False, False, True, False]
    assert chunk_text(text, ws_spans, p, embed) == [("A a. B b. C c.", 6), ("D d. E e.", 4)]
    assert p.key() == ["semantic", 8, "percentile", 75]
    assert fixed.key() == ["semantic", 8, 0.5]  # the key threshold builds always had
    with pytest.raises(ValueError, match="semantic_breakpoint"):
        ChunkParams(strategy="semantic", semantic_breakpoint="gradient")
    with pytest.raises(ValueError, match="semantic_percentile"):
        ChunkParams(strategy="semantic", semantic_percentile=100)
