"""Candidate generation of the Lethe pipeline: its BM25 parameters and one sub-query's candidates with their scores
(``lethe.stages.retrieve`` makes them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BM25Params:
    """The lexical candidates' BM25 (Eq. 1; values: the method YAML). ``idf_scope``: 'session' =
    statistics of the docs the query may see; 'corpus' = IDF from the whole collection (needs the
    runner's ``set_collection`` call)."""

    k1: float
    b: float
    idf_scope: str

    def __post_init__(self) -> None:
        if self.idf_scope not in ("session", "corpus"):
            raise ValueError(f"bm25.idf_scope must be 'session' or 'corpus', got {self.idf_scope!r}")


@dataclass
class SubCandidates:
    """One sub-query's candidates: union indices (m,), raw BM25 (m,), cosine (m,), boost (m,)."""

    text: str
    idx: np.ndarray
    bm25: np.ndarray
    cos: np.ndarray
    boost: np.ndarray
    lex_top: np.ndarray
    dense_top: np.ndarray
