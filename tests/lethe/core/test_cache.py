"""The embedding cache: hits after the first encode, and no partial entry after a crash."""

from __future__ import annotations

import numpy as np
import pytest

from lethe.core import atomic
from lethe.core.embedding_cache import EmbeddingCache, text_key
from lethe.retrieval.embedder import Embedder

NS = {"model_sha256": "m", "role": "doc"}


def test_round_trip_and_counts(tmp_path):
    c = EmbeddingCache(tmp_path, NS, flush_every=2)
    keys = [text_key(t) for t in ("a", "b", "c")]
    c.put(keys, np.eye(3, dtype=np.float32))
    c.flush()
    fresh = EmbeddingCache(tmp_path, NS)
    got = fresh.get(keys + [text_key("d")])
    assert np.allclose(np.vstack(got[:3]), np.eye(3)) and got[3] is None
    assert (fresh.hits, fresh.misses) == (3, 1)
    assert EmbeddingCache(tmp_path, {**NS, "role": "query"}).get(keys[:1]) == [None]


def test_crash_during_write_leaves_no_entry(tmp_path, monkeypatch):
    c = EmbeddingCache(tmp_path, NS)
    c.put([text_key("x")], np.ones((1, 4), np.float32))

    def boom(*a, **k):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        c.flush()
    monkeypatch.undo()
    assert list(c.dir.glob("*.npz")) == []
    assert [p for p in c.dir.iterdir() if p.name.endswith(".tmp")] == []
    assert EmbeddingCache(tmp_path, NS).get([text_key("x")]) == [None]


def test_embedder_encodes_each_text_once(tmp_path, embedder):
    e = Embedder(embedder.model, cache_dir=tmp_path, show_progress=False, cache_roles=("doc", "query"))
    e._st = embedder.st  # share the loaded model; the cache is what is under test
    texts = ["Caroline went to a support group.", "Melanie painted a sunrise.", "Caroline went to a support group."]
    v1 = e.encode(texts, "doc")
    assert e.encoded_texts == 2 and v1.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v1, axis=1), 1, atol=1e-5)
    e.flush()
    e2 = Embedder(embedder.model, cache_dir=tmp_path, show_progress=False, cache_roles=("doc", "query"))
    e2._st = embedder.st
    v2 = e2.encode(texts, "doc")
    assert e2.encoded_texts == 0 and np.array_equal(v1, v2)
    bare = embedder.st.encode(texts, normalize_embeddings=True)
    assert np.allclose(v1, bare, atol=1e-6)
    e2.encode(texts[:1], "query")
    assert e2.encoded_texts == 1  # roles are cached apart
