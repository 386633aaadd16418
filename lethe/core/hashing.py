"""sha256 of files, read in 1 MiB blocks: the one implementation every content hash and manifest uses."""

from __future__ import annotations

import hashlib
import os
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
