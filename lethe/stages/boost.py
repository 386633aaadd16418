"""Metadata boosting (Lethe iteration 1): chunk kind x query signals, and exact-match terms.

For a query with exact-match terms (``lethe.text.entities.exact_terms``: code symbols, error codes,
paths, versions, ...), each candidate doc gets

    boost(d) = exact * share of the query's exact terms found in d (case-insensitive substring)
             + kind  * [d.kind is preferred by one of the query's term kinds (``kind_affinity``)]

added to its fused score (which lies in [0, 1]). A query without exact-match terms gets no boost,
so conversational queries pay nothing (the keyword-boost study's design, seeds/001 section 5).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from lethe.text.entities import exact_terms

if TYPE_CHECKING:
    from lethe.stages.state import QueryState


@dataclass(frozen=True)
class MetadataBoost:
    """The boost stage. ``exact``: weight of the exact-term match share; ``kind``: weight of a kind match.

    ``kind_affinity`` maps a doc kind (the corpus ``kind`` column) to the query term kinds that
    prefer it; kinds absent from a dataset simply never match. Values: the method YAML.
    """

    phase: ClassVar[str] = "prepare"

    enabled: bool
    exact: float
    kind: float
    kind_affinity: Mapping[str, Sequence[str]]

    def step(self, s: QueryState) -> None:
        """Adds each sub-query's boost to its candidates (``s.subs[i].boost``, from its signals ``s.signals[i]``)."""
        t0 = time.perf_counter()
        col = s.collection
        for sig, c in zip(s.signals, s.subs, strict=True):
            c.boost = c.boost + self.scores(sig, [col.texts_lower[i] for i in c.idx], [col.kinds[i] for i in c.idx])
        s.timings["boost"] = (time.perf_counter() - t0) * 1e3

    def scores(self, signals: QuerySignals, texts_lower: Sequence[str], kinds: Sequence[str]) -> np.ndarray:
        """Additive boost per doc, shape (len(texts_lower),); zeros when the query has no signal."""
        out = np.zeros(len(texts_lower), dtype=np.float64)
        if not self.enabled or not signals.terms:
            return out
        if self.exact:
            for t in signals.terms:
                out += (
                    self.exact / len(signals.terms) * np.fromiter((t in x for x in texts_lower), bool, len(texts_lower))
                )
        if self.kind:
            preferred = {k for k, qk in self.kind_affinity.items() if signals.kinds & set(qk)}
            if preferred:
                out += self.kind * np.fromiter((k in preferred for k in kinds), bool, len(kinds))
        return out


@dataclass(frozen=True)
class QuerySignals:
    """The exact-match terms of a query (lowercased) and their kinds."""

    terms: tuple[str, ...]
    kinds: frozenset[str]

    def as_record(self) -> dict:
        return {"exact_terms": list(self.terms), "signal_kinds": sorted(self.kinds)}


def query_signals(text: str) -> QuerySignals:
    found = exact_terms(text)
    return QuerySignals(tuple(dict.fromkeys(t.lower() for _, t in found)), frozenset(k for k, _ in found))
