"""Candidate generation of the Lethe pipeline: its BM25 parameters, and what it knows about a query before
fusion (per-sub-query candidates and their scores)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lethe.stages.boost import QuerySignals
from lethe.stages.planning import PlanInputs
from lethe.stages.understanding.base import Understanding


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


@dataclass
class Prepared:
    """Everything about a query that does not depend on alpha or lambda."""

    understanding: Understanding | None
    plan: str | None
    inputs: PlanInputs
    signals: QuerySignals
    query_entities: frozenset[str]
    subs: list[SubCandidates]
    timings_ms: dict[str, float]
    n_docs: int
    n_analyzed: int  # distinct analyzed terms of the (rewritten) query
