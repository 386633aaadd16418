"""sha256 of files (read in 1 MiB blocks) and of JSON-like values: the one implementation every content hash, key and
manifest uses."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def update_with_file(h: Any, path: str | os.PathLike) -> Any:
    """Feed the bytes of ``path`` into the hash object ``h``; returns ``h``."""
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return h


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of ``text``'s UTF-8 bytes."""
    return sha256_bytes(text.encode("utf-8"))


def seed_of(*parts: Any, byteorder: str = "big") -> int:
    """A 64-bit seed from ``parts``: the first 8 bytes of the sha256 of their ``str`` joined by ``/``, read in
    ``byteorder`` (the order each caller's seeds were first drawn with; changing it would move their numbers)."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode("utf-8")).digest()[:8], byteorder)  # type: ignore[arg-type]


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    return update_with_file(hashlib.sha256(), path).hexdigest()


# (resolved path, size, mtime_ns, inode) -> sha256, in memory only (nothing is written beside the file)
_CACHE: dict[tuple[str, int, int, int], str] = {}


def sha256_file_cached(path: str | os.PathLike) -> str:
    """:func:`sha256_file`, computed once per process until the file's size, mtime or inode changes."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    sha = _CACHE.get(key)
    if sha is None:
        sha = _CACHE[key] = sha256_file(p)
    return sha


def canonical_json(value: Any, compact: bool = False) -> str:
    """The one canonical JSON of configs, keys and payloads: keys sorted, a value JSON cannot hold as its ``str``;
    json's default separators and ASCII escapes, or with ``compact`` none and non-ASCII text as is (the LLM response
    cache's key text, lethe.llm.cache). Either spelling is part of keys on disk: changing one would orphan them."""
    if compact:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, sort_keys=True, default=str)


def content_hash(value: Any, length: int | None = None) -> str:
    """Hex sha256 of ``value``'s canonical JSON (keys sorted, json's default separators, a value JSON cannot hold
    as its ``str``), cut to its first ``length`` hex characters (None: all 64). The one hash of configs and keys:
    run identity (12), dataset builds, learned-fusion models, cross-encoder and question sets, ONNX exports (16),
    embedding-cache namespaces (20), dataset contents and source pins (64). The lengths are those the keys already
    on disk and in the committed expected files carry; changing one would orphan them."""
    return sha256_text(canonical_json(value))[:length]
