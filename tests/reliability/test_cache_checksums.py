"""Caches carry their own checksums (issue 58, item 3): an embedding shard rewritten with random unit vectors of the
right shape was used silently (LoCoMo vector nDCG@10 0.2607 -> 0.0 under the same config hash), and a cached ONNX
export or cross-encoder model set was reused without a check. Each is now written with its checksum and checked on
read; what differs is quarantined (kept, never deleted) and made again, and a warning says so."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from experiments.runner import run_experiment
from lethe.core.checksums import CHECKSUMS, QUARANTINE, folder_damage, sealed, unsealed
from lethe.core.embedding_cache import EmbeddingCache, shard_checksum, text_key
from lethebench.runs import RunFolder
from tests.conftest import overrides_for

NS = {"model": "test", "role": "doc"}


def _random_unit(shape: tuple[int, int], seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _rewrite(shard: Path, how: str) -> None:
    """Replace a shard's vectors by random unit vectors of the same shape: without a checksum (another program), or
    keeping the checksum it was written with (an edit that leaves it in place)."""
    with np.load(shard) as z:
        arrays = dict(z)
    arrays["vecs"] = _random_unit(arrays["vecs"].shape, 0)
    if how == "no checksum":
        arrays.pop("sha256", None)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    shard.write_bytes(buf.getvalue())


@pytest.mark.parametrize("how", ["no checksum", "old checksum"])
def test_a_shard_rewritten_with_other_vectors_is_quarantined_and_recomputed(tmp_path, how, caplog):
    c = EmbeddingCache(tmp_path, NS, dim=4)
    keys = [text_key(t) for t in ("a", "b", "c")]
    c.put(keys, np.eye(3, 4, dtype=np.float32))
    c.flush()
    (shard,) = c.dir.glob("*.npz")
    with np.load(shard) as z:
        assert str(z["sha256"]) == shard_checksum(keys, np.eye(3, 4, dtype=np.float32))
    _rewrite(shard, how)
    fresh = EmbeddingCache(tmp_path, NS, dim=4)
    with caplog.at_level(logging.WARNING, logger="lethe.core.embedding_cache"):
        assert fresh.get(keys) == [None, None, None]  # misses: the caller computes them again
    assert fresh.quarantined == 1 and (c.dir / QUARANTINE / shard.name).is_file() and not shard.exists()
    assert "checksum" in caplog.text and "will be recomputed" in caplog.text


def test_a_vector_run_over_a_rewritten_cache_scores_as_before(tmp_path, work, caplog):
    """The attack end to end on real data: the run that reads the rewritten shards equals the first one."""
    base = overrides_for(
        {**work, "cache": tmp_path / "cache", "results": tmp_path / "results"},
        "method=vector",
        "dataset=locomo",
        "dataset.scopes=[conv-26]",
    )
    from experiments.config import load_config

    first = RunFolder(run_experiment(load_config(base)))
    want = first.per_query["ndcg@10"].tolist()  # read now: the second run rewrites the same folder
    assert first.metrics["means"]["ndcg@10"] > 0.2
    shards = sorted((tmp_path / "cache" / "embeddings").glob("*/*.npz"))
    assert shards
    for shard in shards:
        _rewrite(shard, "no checksum")
    with caplog.at_level(logging.WARNING, logger="lethe.core.embedding_cache"):
        again = RunFolder(run_experiment(load_config([*base, "run.overwrite=true"])))
    assert again.path == first.path  # the same config hash
    assert again.per_query["ndcg@10"].tolist() == want  # before the checksums: nDCG@10 0.2797 -> 0.0052
    assert len(list((tmp_path / "cache" / "embeddings").glob(f"*/{QUARANTINE}/*.npz"))) == len(shards)
    quarantined = {r: c["quarantined"] for r, c in again.manifest["method"]["embedder"]["cache"].items() if c}
    assert sum(quarantined.values()) == len(shards), quarantined


def test_a_sealed_json_refuses_an_edit_and_a_missing_checksum(tmp_path):
    doc = sealed({"folds": [{"dir": "fold0", "weight": 0.3}]})
    assert unsealed(json.loads(json.dumps(doc)), "w.json") == {"folds": [{"dir": "fold0", "weight": 0.3}]}
    edited = {**doc, "folds": [{"dir": "fold0", "weight": 1.0}]}
    with pytest.raises(ValueError, match="w.json: its content is not what was written"):
        unsealed(edited, "w.json")
    with pytest.raises(ValueError, match="no content_sha256"):
        unsealed({"folds": []}, "w.json")


def test_folder_checksums_name_what_changed(tmp_path):
    from lethe.core.checksums import write_checksums

    (tmp_path / "fold0").mkdir()
    (tmp_path / "fold0" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "folds.json").write_text("{}")
    write_checksums(tmp_path)
    assert folder_damage(tmp_path) == []
    (tmp_path / "fold0" / "model.safetensors").write_bytes(b"weightz")
    (tmp_path / "folds.json").unlink()
    (tmp_path / "extra.bin").write_bytes(b"x")
    assert folder_damage(tmp_path) == ["missing folds.json", "unexpected extra.bin", "edited fold0/model.safetensors"]
    (tmp_path / CHECKSUMS).unlink()
    assert folder_damage(tmp_path) == ["no readable checksums.json"]


def test_a_cached_onnx_export_that_was_edited_is_exported_again(tmp_path, caplog):
    from experiments.config import load_config
    from lethe.retrieval.embedder import Embedder
    from lethe.retrieval.onnx_backend import ONNX_FILE

    cfg = dict(load_config([]).embedder)
    texts = ["Caroline went to a support group.", "db2 error SQL0805N"]  # queries: never read from the vector cache
    want = Embedder(cfg, cache_dir=None, show_progress=False).encode(texts, "query")  # torch
    onnx_cache = tmp_path / "onnx"

    def onnx_embedder() -> Embedder:
        return Embedder(cfg, cache_dir=onnx_cache, show_progress=False, backend="onnx", onnx=cfg["onnx"])

    assert np.allclose(onnx_embedder().encode(texts, "query"), want, atol=1e-4)
    (folder,) = (onnx_cache / "models" / "onnx").glob("*/")
    assert folder_damage(folder) == []
    model = folder / ONNX_FILE
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the weights
    model.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="lethe.retrieval.onnx_backend"):
        assert np.allclose(onnx_embedder().encode(texts, "query"), want, atol=1e-4)
    assert "is damaged (edited model.onnx)" in caplog.text and "exporting again" in caplog.text
    assert folder_damage(folder) == [] and len(list((folder.parent / QUARANTINE).iterdir())) == 1
