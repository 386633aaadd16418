"""The embedding cache: hits after the first encode, no partial entry after a crash, and a damaged
shard is set aside (quarantined, logged, counted) and its vectors recomputed instead of stopping
every run of the model."""

from __future__ import annotations

import logging
import os

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


def _damage(shard, how: str) -> None:
    data = bytearray(shard.read_bytes())
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "flipped":  # a byte inside the keys array: the zip's CRC-32 no longer matches
        data[60] ^= 0xFF
    elif how == "empty":
        data = bytearray()
    elif how in ("mismatched", "nan", "wrong size"):  # readable zips: arrays that disagree, NaN, 3 columns not 4
        import io

        vecs = {
            "mismatched": np.ones((2, 4), np.float32),
            "nan": np.array([[np.nan] * 4, [1, 0, 0, 0]], np.float32),
            "wrong size": np.ones((1, 3), np.float32),
        }[how]
        buf = io.BytesIO()
        np.savez(buf, keys=np.array([text_key("a")] * (2 if how == "nan" else 1)), vecs=vecs)
        data = bytearray(buf.getvalue())
    elif how == "folder":  # a folder where the shard should be
        shard.unlink()
        shard.mkdir()
        return
    shard.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "flipped", "empty", "mismatched", "nan", "wrong size", "folder"])
def test_a_damaged_shard_is_quarantined_and_recomputed(tmp_path, how, caplog):
    """Before: BadZipFile ('Bad CRC-32', 'File is not a zip file') naming no path, on every run; NaN vectors were
    used (nDCG@10 0.5455 -> 0.2331, the run marked DONE); a shard of another size or a folder crashed every run."""
    c = EmbeddingCache(tmp_path, NS)
    good, bad = [text_key("good")], [text_key("a"), text_key("b")]
    c.put(good, np.ones((1, 4), np.float32))
    c.flush()
    c.put(bad, np.eye(2, 4, dtype=np.float32))
    c.flush()
    shard = next(s for s in c.dir.glob("*.npz") if bad[0] in np.load(s)["keys"].tolist())
    kept = shard.read_bytes()
    _damage(shard, how)
    damaged = shard.read_bytes() if shard.is_file() else None

    fresh = EmbeddingCache(tmp_path, NS, dim=4)
    with caplog.at_level(logging.WARNING, logger="lethe.core.embedding_cache"):
        got = fresh.get(good + bad)
    assert np.array_equal(got[0], np.ones(4)) and got[1:] == [None, None]  # misses, for the caller to recompute
    assert (fresh.hits, fresh.misses, fresh.quarantined) == (1, 2, 1)
    moved = c.dir / "quarantine" / shard.name
    assert not shard.exists() and (moved.is_dir() if damaged is None else moved.read_bytes() == damaged)  # kept
    assert str(shard) in caplog.text and str(moved) in caplog.text
    fresh.put(bad, np.eye(2, 4, dtype=np.float32))  # the recomputed vectors
    fresh.flush()
    assert shard.read_bytes() == kept  # the same shard again, whole
    again = EmbeddingCache(tmp_path, NS, dim=4)
    assert all(v is not None for v in again.get(good + bad)) and again.quarantined == 0


def test_a_shard_damaged_twice_keeps_both_copies(tmp_path):
    c = EmbeddingCache(tmp_path, NS)
    c.put([text_key("a")], np.ones((1, 4), np.float32))
    c.flush()
    shard = next(c.dir.glob("*.npz"))
    for _ in range(2):
        shard.write_bytes(b"not a zip")
        assert EmbeddingCache(tmp_path, NS).get([text_key("a")]) == [None]
    assert {p.name for p in (c.dir / "quarantine").iterdir()} == {shard.name, f"{shard.stem}.1.npz"}


def test_an_unreadable_shard_is_not_taken_for_damage(tmp_path):
    """A permission problem is not corruption: it is raised (with the path), the shard stays."""
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    c = EmbeddingCache(tmp_path, NS)
    c.put([text_key("a")], np.ones((1, 4), np.float32))
    c.flush()
    shard = next(c.dir.glob("*.npz"))
    shard.chmod(0)
    try:
        with pytest.raises(PermissionError, match=shard.name):
            EmbeddingCache(tmp_path, NS).get([text_key("a")])
    finally:
        shard.chmod(0o644)
    assert shard.exists() and not (c.dir / "quarantine").exists()


def test_embedder_recomputes_a_damaged_shard_and_reports_it(tmp_path, embedder):
    e = Embedder(embedder.model, cache_dir=tmp_path, show_progress=False)
    e._st = embedder.st
    texts = ["Caroline went to a support group.", "Melanie painted a sunrise."]
    v1 = e.encode(texts, "doc")
    e.flush()
    assert e.stats()["cache"]["doc"]["quarantined"] == 0
    (shard,) = e._cache("doc").dir.glob("*.npz")
    _damage(shard, "flipped")
    e2 = Embedder(embedder.model, cache_dir=tmp_path, show_progress=False)
    e2._st = embedder.st
    v2 = e2.encode(texts, "doc")
    assert e2.encoded_texts == 2 and np.allclose(v1, v2, atol=1e-6)
    stats = e2.stats()["cache"]["doc"]
    assert (stats["quarantined"], stats["misses"], stats["hits"]) == (1, 2, 0)


def test_ragged_values_round_trip_and_a_damaged_ragged_shard_is_quarantined(tmp_path):
    """The cross-encoder's logit cache: one 1-D array of any length per key, under its own kind."""
    c = EmbeddingCache(tmp_path, NS, kind="scores", ragged=True)
    keys = [text_key(t) for t in ("a", "b", "c")]
    values = [np.array([1.5, -2.0], np.float32), np.zeros(0, np.float32), np.arange(5, dtype=np.float32)]
    c.put(keys, values)
    c.flush()
    assert c.dir.parent.name == "scores"
    got = EmbeddingCache(tmp_path, NS, kind="scores", ragged=True).get(keys)
    assert all(np.array_equal(g, v) and g.dtype == np.float32 for g, v in zip(got, values, strict=True))
    assert EmbeddingCache(tmp_path, NS).get(keys[:1]) == [None]  # embeddings of the same namespace: another folder
    shard = next(c.dir.glob("*.npz"))
    with np.load(shard) as z:
        arrays = dict(z)
    np.savez(shard, **{**arrays, "lengths": arrays["lengths"][:-1]})  # lengths that do not cover the values
    fresh = EmbeddingCache(tmp_path, NS, kind="scores", ragged=True)
    assert fresh.get(keys) == [None] * 3 and fresh.quarantined == 1
