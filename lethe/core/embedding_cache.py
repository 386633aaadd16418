"""Content-addressed embedding cache that survives crashes.

Layout: ``<root>/<kind>/<namespace>/<shard>.npz`` where ``kind`` is ``embeddings`` (or ``scores``: the
cross-encoder's logits of one query's candidate list), ``namespace`` hashes the model weights, the role
(query/doc) and encoding options, and each shard holds ``keys`` (sha256 of the text) and ``vecs``
(float32, one row per key); a ragged cache (values of any length) holds ``vecs`` as one flat float32
array and ``lengths`` (one per key). Each shard carries ``sha256``, the checksum of its keys and values
(:func:`shard_checksum`), checked on every read. Shards are written whole to a temporary file and renamed,
so a crash leaves either a complete shard or none.

A shard that cannot be read all the same (a disk error, a truncated copy, flipped bytes: a bad zip
or CRC, missing or mismatched arrays, vectors of another size than the model's or not finite, a folder where a
shard should be) or whose checksum is missing or differs (rewritten by hand or by another program, or written
before shards had checksums) must not stop every run of its model, nor enter its rankings: it is logged as a
warning with its path and the error, moved aside to ``<namespace>/quarantine/<shard>.npz`` (kept
for inspection, never deleted) and counted in :attr:`EmbeddingCache.quarantined`; its vectors are
then misses, recomputed by the caller and written to a new shard.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.atomic import atomic_write_bytes, atomic_write_text
from lethe.core.checksums import quarantine
from lethe.core.hashing import content_hash, sha256_text

log = logging.getLogger(__name__)

# what reading a damaged .npz raises: not a zip / bad CRC, a damaged deflate stream, a short file,
# a member that is not an array (or not there), arrays of different lengths
_CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError)


def shard_checksum(keys: Sequence[str], vecs: np.ndarray, lengths: np.ndarray | None = None) -> str:
    """sha256 hex of a shard's content: its keys (UTF-8, one per line), its values as little-endian float32 and, for
    a ragged shard, its lengths as little-endian int64."""
    h = hashlib.sha256("\n".join(keys).encode("utf-8"))
    h.update(np.ascontiguousarray(vecs, dtype="<f4").tobytes())
    if lengths is not None:
        h.update(np.ascontiguousarray(lengths, dtype="<i8").tobytes())
    return h.hexdigest()


def text_key(text: str) -> str:
    """sha256 hex of a text, the cache key of its embedding."""
    return sha256_text(text)


class EmbeddingCache:
    """Vectors for one namespace (model + role + options); loaded lazily, appended by shards."""

    def __init__(
        self,
        root: str | Path,
        namespace: Mapping[str, Any],
        flush_every: int = 512,
        dim: int | None = None,
        kind: str = "embeddings",
        ragged: bool = False,
    ):
        """``dim``: the model's vector size; a shard of another size is quarantined (None: not checked).
        ``ragged``: values are 1-D arrays of any length (``dim`` is then ignored), filed under ``kind``."""
        self.namespace = namespace
        self.dim = None if ragged else dim
        self.ragged = ragged
        self.flush_every = flush_every
        self._pending: list[tuple[str, np.ndarray]] = []
        ns = content_hash(namespace, 20)
        self.dir = Path(root) / kind / ns
        self._vecs: dict[str, np.ndarray] | None = None
        self.hits = 0
        self.misses = 0
        self.quarantined = 0  # unreadable shards this cache found and moved to quarantine/

    def _load(self) -> dict[str, np.ndarray]:
        if self._vecs is None:
            self._vecs = {}
            if self.dir.is_dir():
                for shard in sorted(self.dir.glob("*.npz")):
                    try:
                        with open(shard, "rb") as fh:
                            inode = os.fstat(fh.fileno()).st_ino
                            keys, vecs = _read_shard(fh, self.dim, self.ragged)
                    except FileNotFoundError:
                        continue  # quarantined by another process meanwhile
                    except IsADirectoryError as err:
                        self._quarantine(shard, os.stat(shard).st_ino, err)
                        continue
                    except _CORRUPT as err:
                        self._quarantine(shard, inode, err)
                        continue
                    self._vecs.update(zip(keys, vecs, strict=True))
        return self._vecs

    def _quarantine(self, shard: Path, inode: int, err: BaseException) -> None:
        """Move the unreadable ``shard`` to ``quarantine/`` (a new name if one is there already)."""
        self.quarantined += 1
        target = quarantine(shard, inode)
        if target is None:
            log.warning(
                "embedding cache: unreadable shard %s (%s: %s), already replaced or moved aside by "
                "another process; its vectors will be recomputed",
                shard,
                type(err).__name__,
                err,
            )
            return
        log.warning(
            "embedding cache: unreadable shard %s (%s: %s) moved to %s; its vectors will be recomputed",
            shard,
            type(err).__name__,
            err,
            target,
        )

    def get(self, keys: Sequence[str]) -> list[np.ndarray | None]:
        """Cached vector per key, or None; counts hits and misses."""
        vecs = self._load()
        out = [vecs.get(k) for k in keys]
        found = sum(v is not None for v in out)
        self.hits += found
        self.misses += len(out) - found
        return out

    def put(self, keys: Sequence[str], vecs: np.ndarray | Sequence[np.ndarray]) -> None:
        """Add vectors (rows of ``vecs``; ragged: one 1-D array per key); written as a shard once ``flush_every``
        are pending."""
        vecs = (
            [np.asarray(v, dtype=np.float32).reshape(-1) for v in vecs]
            if self.ragged
            else np.asarray(vecs, dtype=np.float32)
        )
        assert len(vecs) == len(keys), (len(vecs), len(keys))
        store = self._load()
        for k, v in zip(keys, vecs, strict=True):
            store[k] = v
            self._pending.append((k, v))
        if len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write pending vectors as one new shard, atomically (a crash loses only unflushed ones)."""
        if not self._pending:
            return
        keys = [k for k, _ in self._pending]
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "namespace.json"
        if not meta.exists():
            atomic_write_text(meta, json.dumps(self.namespace, indent=2, sort_keys=True) + "\n")
        shard_id = sha256_text("".join(keys))[:20]
        buf = io.BytesIO()
        if self.ragged:
            vecs = np.concatenate([v for _, v in self._pending])
            lengths = np.array([len(v) for _, v in self._pending], dtype=np.int64)
            sha = shard_checksum(keys, vecs, lengths)
            np.savez(buf, keys=np.array(keys), vecs=vecs, lengths=lengths, sha256=np.array(sha))
        else:
            vecs = np.vstack([v for _, v in self._pending])
            np.savez(buf, keys=np.array(keys), vecs=vecs, sha256=np.array(shard_checksum(keys, vecs)))
        atomic_write_bytes(self.dir / f"{shard_id}.npz", buf.getvalue())
        self._pending = []


def _read_shard(fh, dim: int | None = None, ragged: bool = False) -> tuple[list[str], np.ndarray | list[np.ndarray]]:
    """The keys and vectors of one shard, checked whole: its checksum, matching lengths, ``dim`` columns when given,
    finite values (raises one of ``_CORRUPT`` if damaged). Ragged: one 1-D array per key."""
    with np.load(fh) as z:
        keys, vecs = z["keys"].tolist(), z["vecs"]
        lengths = z["lengths"] if ragged else None
        recorded = str(z["sha256"]) if "sha256" in z.files else None
    if recorded is None:
        raise ValueError("no checksum (written before shards had one, or by another program)")
    if not isinstance(keys, list) or recorded != shard_checksum([str(k) for k in keys], vecs, lengths):
        raise ValueError("checksum mismatch: its keys or values are not those it was written with")
    if ragged:
        assert lengths is not None
        if (
            vecs.ndim != 1
            or lengths.ndim != 1
            or len(keys) != len(lengths)
            or int(lengths.sum()) != len(vecs)
            or (lengths < 0).any()
            or not all(isinstance(k, str) for k in keys)
        ):
            raise ValueError(
                f"{len(keys)} keys, {len(lengths)} lengths summing to {int(lengths.sum())} for {vecs.shape} values"
            )
        if not np.isfinite(vecs).all():
            raise ValueError(f"{int((~np.isfinite(vecs)).sum())} of {len(vecs)} values not finite")
        return keys, np.split(vecs, np.cumsum(lengths)[:-1]) if len(lengths) else []
    if vecs.ndim != 2 or len(keys) != len(vecs) or not all(isinstance(k, str) for k in keys):
        raise ValueError(f"{len(keys)} keys for vectors of shape {vecs.shape}")
    if dim is not None and vecs.shape[1] != dim:
        raise ValueError(f"vectors of size {vecs.shape[1]}, the model's are {dim}")
    if not np.isfinite(vecs).all():
        raise ValueError(f"{int((~np.isfinite(vecs)).any(axis=1).sum())} of {len(vecs)} vectors not finite")
    return keys, vecs
