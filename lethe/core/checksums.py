"""Checksums a cache entry or stored folder is written with and checked against when it is read.

A folder's checksums are ``{relative posix path: sha256}`` of its regular files (:func:`tree_sha256`), saved as JSON
beside or inside it; :func:`tree_damage` says in words what differs (edited, missing, unexpected or not a regular
file). A file is never followed through a symlink. What is damaged is moved aside with :func:`quarantine` (kept for
inspection, never deleted) so that its maker can write it again; the caller logs what it found.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from lethe.core.atomic import atomic_write_text
from lethe.core.hashing import content_hash, sha256_file_cached

CHECKSUMS = "checksums.json"
QUARANTINE = "quarantine"
CONTENT_SHA256 = "content_sha256"  # the key of a sealed JSON document's own checksum (:func:`sealed`)


def tree_files(folder: str | os.PathLike, skip: Collection[str] = ()) -> list[str]:
    """Relative posix paths of every file and symlink under ``folder`` (sorted; symlinks listed, never followed), except
    ``skip`` entries (a file's relative path or a folder's, with everything under it) and hidden lock files."""
    folder = Path(folder)
    out = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel_root = Path(root).relative_to(folder)
        dirs[:] = [d for d in dirs if (rel_root / d).as_posix() not in skip]
        for name in files + [d for d in dirs if (Path(root) / d).is_symlink()]:
            rel = (rel_root / name).as_posix()
            if rel not in skip and not (name.startswith(".") and name.endswith(".lock")):
                out.append(rel)
    return sorted(out)


def tree_sha256(folder: str | os.PathLike, skip: Collection[str] = ()) -> dict[str, str]:
    """``{relative path: sha256}`` of the regular files under ``folder`` (:func:`tree_files`); ValueError naming a
    symlink or special file, which is never hashed through."""
    folder = Path(folder)
    out = {}
    for rel in tree_files(folder, skip):
        path = folder / rel
        if path.is_symlink() or not path.is_file():
            raise ValueError(f"{path}: not a regular file (symlink or special file); nothing is hashed through it")
        out[rel] = sha256_file_cached(path)
    return out


def tree_damage(folder: str | os.PathLike, recorded: Mapping[str, str], skip: Collection[str] = ()) -> list[str]:
    """What differs between ``folder`` and the checksums ``recorded`` for it, one phrase per file (``edited x``,
    ``missing x``, ``unexpected x``, ``not a regular file x``); empty when every file is as written."""
    folder = Path(folder)
    found = set(tree_files(folder, skip))
    problems = [f"missing {rel}" for rel in sorted(set(recorded) - found)]
    for rel in sorted(found):
        path = folder / rel
        if path.is_symlink() or not path.is_file():
            problems.append(f"not a regular file {rel}")
        elif rel not in recorded:
            problems.append(f"unexpected {rel}")
        elif sha256_file_cached(path) != recorded[rel]:
            problems.append(f"edited {rel}")
    return problems


def write_checksums(folder: str | os.PathLike, skip: Collection[str] = ()) -> dict[str, str]:
    """Write ``<folder>/checksums.json`` for the files under ``folder`` (itself and ``skip`` left out); returns them."""
    folder = Path(folder)
    sums = tree_sha256(folder, {CHECKSUMS, *skip})
    atomic_write_text(folder / CHECKSUMS, json.dumps(sums, indent=2, sort_keys=True) + "\n")
    return sums


def read_checksums(folder: str | os.PathLike) -> dict[str, str] | None:
    """The checksums ``<folder>/checksums.json`` records, or None when it has none or they are not a JSON object of
    strings."""
    try:
        sums: Any = json.loads((Path(folder) / CHECKSUMS).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(sums, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in sums.items()):
        return None
    return sums


def folder_damage(folder: str | os.PathLike, skip: Collection[str] = ()) -> list[str]:
    """:func:`tree_damage` of ``folder`` against its own ``checksums.json``; ``["no checksums.json"]`` when it has
    none (written before checksums, or by hand)."""
    sums = read_checksums(folder)
    if sums is None:
        return [f"no readable {CHECKSUMS}"]
    return tree_damage(folder, sums, {CHECKSUMS, *skip})


def sealed(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` as JSON holds it, with ``content_sha256``: the checksum of everything else in it (:func:`unsealed`)."""
    plain = json.loads(json.dumps(dict(doc), default=str))
    plain.pop(CONTENT_SHA256, None)
    return {**plain, CONTENT_SHA256: content_hash(plain)}


def unsealed(doc: Any, where: str | os.PathLike) -> dict[str, Any]:
    """The document a :func:`sealed` JSON holds, its checksum checked; ValueError naming ``where`` when it has none or
    another (edited by hand, or written before checksums)."""
    if not isinstance(doc, dict) or CONTENT_SHA256 not in doc:
        raise ValueError(f"{where}: no {CONTENT_SHA256} (written before checksums, or by hand); it is not read")
    rest = {k: v for k, v in doc.items() if k != CONTENT_SHA256}
    if content_hash(rest) != doc[CONTENT_SHA256]:
        raise ValueError(f"{where}: its content is not what was written with it ({CONTENT_SHA256} differs)")
    return rest


def quarantine(path: str | os.PathLike, inode: int | None = None) -> Path | None:
    """Move ``path`` (a file or folder) to ``<parent>/quarantine/<name>`` (a file's
    ``<stem>.1<suffix>``, a folder's ``<name>.1``, ``.2`` ... when taken); the new path, or None when ``path`` is gone already (another process moved it first) or, given the
    ``inode`` it was read from, was rewritten whole since (not the damaged file)."""
    path = Path(path)
    qdir = path.parent / QUARANTINE
    qdir.mkdir(exist_ok=True)
    target, n = qdir / path.name, 0
    while target.exists() or target.is_symlink():
        n += 1
        target = qdir / (f"{path.stem}.{n}{path.suffix}" if path.is_file() else f"{path.name}.{n}")
    try:
        if inode is not None and os.stat(path).st_ino != inode:
            return None
        os.rename(path, target)
    except FileNotFoundError:
        return None
    return target
