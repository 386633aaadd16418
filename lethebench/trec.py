"""TREC-format qrels and runs: the interchange format any IR tool can read.

qrels line: ``qid 0 docid grade``; run line: ``qid Q0 docid rank score tag``.
Ids must not contain whitespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from lethe.core.atomic import atomic_write_text

Qrels = dict[str, dict[str, int]]
Ranking = list[tuple[str, float]]


def _check_id(x: str, what: str) -> None:
    if not x or any(c.isspace() for c in x):
        raise ValueError(f"{what} {x!r} is empty or contains whitespace; TREC files cannot hold it")


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> None:
    """Write qrels sorted by query then doc id (deterministic bytes)."""
    lines = []
    for qid in sorted(qrels):
        _check_id(qid, "query id")
        for did in sorted(qrels[qid]):
            _check_id(did, "doc id")
            lines.append(f"{qid} 0 {did} {int(qrels[qid][did])}\n")
    atomic_write_text(path, "".join(lines))


def _lines(path: str | Path) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})") from exc


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels; grades <= 0 are dropped (non-relevant). A malformed line raises ValueError
    naming the file and line."""
    out: Qrels = {}
    for n, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise ValueError(f"{path}:{n}: expected 'qid 0 docid grade', got {line!r}")
        qid, _, did, grade = parts
        try:
            g = int(grade)
        except ValueError:
            raise ValueError(
                f"{path}:{n}: grade {grade!r} is not an integer (line {line!r}; expected 'qid 0 docid "
                f"grade' with an integer grade, > 0 for relevant)"
            ) from None
        out.setdefault(qid, {})
        if g > 0:
            out[qid][did] = g
    return out


def write_run(run: Mapping[str, Sequence[tuple[str, float]]], path: str | Path, tag: str) -> None:
    """Write a run; each ranking must already be in final order (rank 1 first)."""
    lines = []
    for qid in sorted(run):
        for rank, (did, score) in enumerate(run[qid], 1):
            lines.append(f"{qid} Q0 {did} {rank} {score:.9g} {tag}\n")
    atomic_write_text(path, "".join(lines))


def read_run(path: str | Path) -> dict[str, Ranking]:
    """Read a TREC run into qid -> [(docid, score)] in file order."""
    out: dict[str, Ranking] = {}
    for n, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise ValueError(f"{path}:{n}: expected 'qid Q0 docid rank score tag', got {line!r}")
        try:
            score = float(parts[4])
        except ValueError:
            raise ValueError(f"{path}:{n}: score {parts[4]!r} is not a number (line {line!r})") from None
        out.setdefault(parts[0], []).append((parts[2], score))
    return out
