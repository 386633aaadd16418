"""sha256 of files, read in 1 MiB blocks: the one implementation every content hash and manifest uses."""

from __future__ import annotations

import hashlib
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
