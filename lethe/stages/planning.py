"""Adaptive planning (paper Eq. 2): VERIFY, EXPLORE or EXPLOIT per query, and its fusion weight.

    plan = VERIFY   if overlap > theta_v and query_terms < theta_s
           EXPLORE  if overlap < theta_e and novelty >= theta_n
           EXPLOIT  otherwise

The paper leaves its inputs informal; here they are exactly:

- ``overlap`` = |E_q ∩ E_h| / |E_q|, the share of the query's entities already present in the
  history (0 when the query has no entity). E_q and E_h come from ``lethe.text.entities.entities``;
  E_h is the union over the history: the query's explicit history turns and, with
  ``history_docs`` on (default), the docs indexed for the query (the conversation so far; for a
  document collection, the collection). The paper writes |E_q ∩ E_h| > 0.4 with a threshold
  below 1, which only makes sense for a ratio, hence the normalization.
- ``query_terms`` = |Q_q|, the number of whitespace-separated tokens of the query.
- ``novelty`` = share of the query's distinct analyzed terms (Lucene English analysis: lowercase,
  stopwords removed, Porter stems) that occur nowhere in the history; 0 for a query with no
  analyzed term. novel(Q_q) holds when novelty >= theta_n.

The method YAML's values are the paper's appendix A.2: theta_v = 0.4, theta_e = 0.1, theta_s = 10, and
alpha (the BM25 weight of Eq. 3) = 0.7 / 0.3 / 0.5 for VERIFY / EXPLORE / EXPLOIT. theta_n = 0.5
is ours (the paper gives none).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Set
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from lethe.core.protocol import PLANS
from lethe.text.analyzer import analyze
from lethe.text.entities import entities

if TYPE_CHECKING:
    from lethe.stages.state import QueryState


@dataclass(frozen=True)
class Planner:
    """The planning stage: thresholds of Eq. 2 and per-plan BM25 weights (values: the method YAML,
    ``conf/method/lethe_iter1.yaml``); ``enabled=False`` uses ``static_alpha`` for every query."""

    phase: ClassVar[str] = "prepare"

    enabled: bool
    theta_v: float
    theta_e: float
    theta_s: int
    theta_n: float
    alpha: Mapping[str, float]
    static_alpha: float
    history_docs: bool

    def __post_init__(self) -> None:
        if set(self.alpha) != set(PLANS):
            raise ValueError(f"planning.alpha needs exactly the keys {PLANS}, got {sorted(self.alpha)}")
        for name, a in [*self.alpha.items(), ("static_alpha", self.static_alpha)]:
            if not 0.0 <= float(a) <= 1.0:
                raise ValueError(f"planning alpha {name}={a} is outside [0, 1]")
        if not 0.0 <= self.theta_e <= 1.0 or not 0.0 <= self.theta_v <= 1.0 or not 0.0 <= self.theta_n <= 1.0:
            raise ValueError("planning thresholds theta_v, theta_e, theta_n must lie in [0, 1]")

    def step(self, s: QueryState) -> None:
        """The plan's inputs (recorded whether planning is on or off), the plan and its BM25 weight ``s.alpha``."""
        t0 = time.perf_counter()
        col, query = s.collection, s.query
        s.history_entities = (col.all_entities if self.history_docs else frozenset()).union(
            *(entities(h) for h in query.history)
        )
        hist_vocab: Any = col.vocab if self.history_docs else frozenset()
        if query.history:
            hist_vocab = set(hist_vocab) | {t for h in query.history for t in analyze(h)}
        q_terms = analyze(s.text)
        s.n_analyzed = len(set(q_terms))
        s.inputs = plan_inputs(s.text, s.query_entities, s.history_entities, q_terms, hist_vocab)
        s.plan = self.plan(s.inputs)
        s.alpha = self.alpha_for(s.plan)
        s.timings["plan"] = (time.perf_counter() - t0) * 1e3
        s.flags.update({"plan": s.plan, "plan_inputs": as_dict(s.inputs)})

    def plan(self, x: PlanInputs) -> str | None:
        """Eq. 2: 'verify', 'explore' or 'exploit'; None when planning is off."""
        if not self.enabled:
            return None
        if x.overlap > self.theta_v and x.query_terms < self.theta_s:
            return "verify"
        if x.overlap < self.theta_e and x.novelty >= self.theta_n:
            return "explore"
        return "exploit"

    def alpha_for(self, plan: str | None) -> float:
        """BM25 weight of Eq. 3 for ``plan`` (``static_alpha`` when planning is off or plan is None)."""
        if not self.enabled or plan is None:
            return float(self.static_alpha)
        return float(self.alpha[plan])


@dataclass(frozen=True)
class PlanInputs:
    """The three inputs of Eq. 2 for one query."""

    overlap: float
    query_terms: int
    novelty: float


def plan_inputs(
    query: str,
    query_entities: Set[str],
    history_entities: Set[str],
    query_analyzed: set[str] | list[str],
    history_vocab: Set[str] | Mapping[str, Any],
) -> PlanInputs:
    """Overlap, length and novelty of ``query`` against a history (its entities and analyzed vocabulary)."""
    overlap = len(query_entities & history_entities) / len(query_entities) if query_entities else 0.0
    terms = set(query_analyzed)
    novelty = sum(t not in history_vocab for t in terms) / len(terms) if terms else 0.0
    return PlanInputs(float(overlap), len(query.split()), float(novelty))


def as_dict(x: PlanInputs) -> dict[str, float]:
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(x).items()}
