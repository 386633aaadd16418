"""Entity-based diversification of a candidate pool (Lethe paper, Eq. 4).

Objective
---------
Given a pool of ``n`` candidates, the entities each one mentions (``D_e`` is the set of candidates
containing entity ``e``) and non-negative entity weights ``w_e``, the entity *coverage* of a
selection ``S`` is

    f(S) = sum_e w_e * min(1, |S ∩ D_e|)

i.e. the total weight of the entities mentioned by at least one selected candidate. Coverage is
traded off against relevance with ``lam`` in [0, 1]; the ranking is built greedily, each step
picking, over the not yet selected candidates ``i``,

    argmax  (1 - lam) * rel_norm[i] + lam * gain_i / W,     gain_i = f(S ∪ {i}) - f(S),  W = sum_e w_e.

Normalizations
--------------
- ``rel_norm`` is the min-max normalization of the relevance scores to [0, 1] (any input scale;
  higher is better). All-equal scores map to 1.0, as in :func:`lethe.retrieval.fusion.minmax`; a constant
  term does not change any argmax.
- ``gain_i / W`` is in [0, 1] as well, so ``lam`` weighs two terms on the same scale. ``W`` counts
  every weight, including entities that no candidate mentions (they can never be covered and only
  shrink the coverage term). ``W == 0`` makes the coverage term 0.

Ties
----
Objective values within ``TIE_EPS`` (1e-12, absolute, on the [0, 1] objective scale) of the step's
maximum are tied; ties go to the higher *raw* relevance, then to the lower index. The tolerance
absorbs floating-point rounding in the objective and its incremental updates, so a tie in exact
arithmetic stays a tie (e.g. ``.5 * .1 + .5 * .2`` vs ``.5 * .3``, which differ by one ulp in floats). Consequently ``lam == 0`` returns
exactly the relevance order (stable: equal scores keep index order), and once nothing more can be
covered the remaining picks follow the relevance order too.

Guarantee
---------
``f`` is a weighted coverage function: monotone (adding a candidate never lowers it) and
submodular (a candidate's gain can only shrink as ``S`` grows). The objective adds a modular
relevance term, so the step-wise argmax is the standard greedy for a monotone submodular function
(plus a modular term). For the coverage part alone (``lam == 1``) the first ``k`` picks reach at
least ``(1 - 1/e)`` of the best coverage of any ``k`` candidates (Nemhauser, Wolsey & Fisher, 1978).
For ``0 < lam < 1`` the same bound holds for the combined set objective
``(1 - lam) * sum_{i in S} rel_norm[i] + lam * f(S) / W``, which is still monotone submodular
(``rel_norm >= 0`` is a non-negative modular term).

Implementation
--------------
:func:`greedy_diversify` keeps a mask of the still uncovered entities and the current objective
of every candidate; after a pick, only the rows of the newly covered entities are subtracted from
the objectives (one small vector-matrix product over those entities, no Python loop over
entities). When no coverable entity is left, the remaining picks are taken in relevance order at
once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence, Set
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import scipy.sparse as sp

from lethe.retrieval.fusion import minmax

if TYPE_CHECKING:
    from lethe.stages.state import QueryState

WEIGHT_SCHEMES: tuple[str, ...] = ("uniform", "idf")
TIE_EPS = 1e-12


def _dense_bool(incidence: sp.spmatrix | sp.sparray | np.ndarray) -> np.ndarray:
    """(n_docs, n_entities) incidence as a dense boolean array."""
    arr = incidence.toarray() if sp.issparse(incidence) else np.asarray(incidence)
    if arr.ndim != 2:
        raise ValueError(f"incidence must be 2-D (n_docs, n_entities), got shape {arr.shape}")
    return arr.astype(bool, copy=False)


def entity_matrix(doc_entities: Sequence[frozenset[str]]) -> tuple[sp.csr_matrix, list[str]]:
    """Boolean incidence of documents and entities.

    doc_entities: one set of entity names per candidate (n_docs). Returns the (n_docs, n_entities)
    ``csr_matrix`` of dtype bool (cell [d, e] is True iff doc d mentions entity e) and the entity
    names of the columns, sorted (deterministic for a given input).
    """
    names = sorted(set().union(*doc_entities)) if len(doc_entities) else []
    col = {name: j for j, name in enumerate(names)}
    indptr = np.zeros(len(doc_entities) + 1, dtype=np.int64)
    indices: list[int] = []
    for d, ents in enumerate(doc_entities):
        indices.extend(sorted(col[e] for e in set(ents)))
        indptr[d + 1] = len(indices)
    data = np.ones(len(indices), dtype=bool)
    mat = sp.csr_matrix((data, np.asarray(indices, dtype=np.int64), indptr), shape=(len(doc_entities), len(names)))
    return mat, names


def coverage(selected: Sequence[int], incidence: sp.spmatrix | sp.sparray | np.ndarray, weights: np.ndarray) -> float:
    """f(S): total weight of the entities mentioned by at least one selected candidate.

    selected: candidate (row) indices, order irrelevant, duplicates ignored; incidence:
    (n_docs, n_entities) boolean; weights: (n_entities,). f(∅) = 0.
    """
    weights = np.asarray(weights, dtype=np.float64)
    idx = np.unique(np.asarray(selected, dtype=np.int64))
    if idx.size == 0:
        return 0.0
    rows = incidence[idx]
    rows = rows.toarray() if sp.issparse(rows) else np.asarray(rows)
    covered = rows.astype(bool, copy=False).any(axis=0)
    return float(weights[covered].sum())


def entity_weights(
    incidence: sp.spmatrix | sp.sparray | np.ndarray,
    scheme: str = "uniform",
    query_entities: Iterable[int] = (),
    query_weight: float = 1.0,
) -> np.ndarray:
    """(n_entities,) non-negative entity weights for the coverage term.

    scheme "uniform": w_e = 1. scheme "idf": w_e = log(1 + n_docs / df_e), df_e = number of pool
    candidates mentioning e (rarer entities count more); an entity no candidate mentions (df_e = 0,
    only possible with a hand-built incidence) gets 0, since it can never be covered.
    Entities whose column index is in ``query_entities`` (each counted once) get + query_weight.
    """
    if scheme not in WEIGHT_SCHEMES:
        raise ValueError(f"unknown weight scheme {scheme!r}; known schemes: {', '.join(WEIGHT_SCHEMES)}")
    if not (math.isfinite(query_weight) and query_weight >= 0):
        raise ValueError(f"query_weight must be finite and >= 0, got {query_weight}")
    n_docs, n_ent = incidence.shape
    if scheme == "uniform":
        w = np.ones(n_ent, dtype=np.float64)
    else:
        df = np.asarray(_dense_bool(incidence).sum(axis=0), dtype=np.float64).ravel()
        w = np.zeros(n_ent, dtype=np.float64)
        seen = df > 0
        w[seen] = np.log1p(n_docs / df[seen])
    q = np.asarray(list(query_entities), dtype=np.int64)
    if q.size:
        if q.min() < 0 or q.max() >= n_ent:
            raise ValueError(f"query entity index out of range [0, {n_ent}): {q.tolist()}")
        boost = np.zeros(n_ent, dtype=bool)
        boost[q] = True
        w[boost] += query_weight
    return w


def _relevance_order(idx: np.ndarray, relevance: np.ndarray) -> np.ndarray:
    """idx sorted by relevance descending, ties by lower index."""
    return idx[np.lexsort((idx, -relevance[idx]))]


def greedy_diversify(
    relevance: np.ndarray,
    incidence: sp.spmatrix | sp.sparray | np.ndarray,
    weights: np.ndarray,
    lam: float,
    k: int,
) -> list[int]:
    """Greedy relevance + entity-coverage ranking (see the module docstring for the objective).

    relevance: (n,) finite scores, higher is better, any scale; incidence: (n, n_entities)
    boolean; weights: (n_entities,) non-negative; lam in [0, 1] (0 = pure relevance, 1 = pure
    coverage); k >= 0. Returns min(k, n) candidate indices in selection order.
    """
    if not (0.0 <= lam <= 1.0):  # also rejects NaN
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    rel = np.asarray(relevance, dtype=np.float64)
    A = _dense_bool(incidence)
    w = np.asarray(weights, dtype=np.float64)
    n, m = A.shape
    if rel.shape != (n,):
        raise ValueError(f"relevance has shape {rel.shape}, expected ({n},) to match incidence {A.shape}")
    if w.shape != (m,):
        raise ValueError(f"weights has shape {w.shape}, expected ({m},) to match incidence {A.shape}")
    if not np.all(np.isfinite(rel)):
        raise ValueError("relevance must be finite")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0)):
        raise ValueError("weights must be finite and >= 0")
    k = min(k, n)
    if k == 0:
        return []

    rel_norm = minmax(rel)
    W = float(w.sum())
    scale = lam / W if W > 0 else 0.0

    # Uncovered entities that can still add something: positive weight and mentioned somewhere.
    uncovered = A.any(axis=0) & (w > 0)
    n_uncovered = int(uncovered.sum())
    selected: list[int] = []
    if scale > 0 and n_uncovered:
        AT = np.ascontiguousarray(A.T, dtype=np.float64)  # (n_entities, n): an entity's column is a row
        ws = scale * w  # (n_entities,) each entity's share of the coverage term
        # (n,) objective of every candidate given S = ∅; kept up to date as entities get covered,
        # selected candidates are set to -inf.
        obj = (1.0 - lam) * rel_norm + np.where(uncovered, ws, 0.0) @ AT
        while len(selected) < k:
            i = int(obj.argmax())  # first maximum = lowest index
            tied = np.flatnonzero(obj >= obj[i] - TIE_EPS)
            if tied.size > 1:
                i = int(tied[np.argmax(rel[tied])])  # higher relevance, then lowest index
            selected.append(i)
            obj[i] = -np.inf
            newly = np.flatnonzero(A[i] & uncovered)  # entities this pick covers first
            if newly.size:
                uncovered[newly] = False
                n_uncovered -= newly.size
                if not n_uncovered:
                    break  # every remaining gain is 0: the rest is the relevance order
                obj -= ws[newly] @ AT[newly]  # their weight leaves the gain of every candidate
    if len(selected) < k:
        avail = np.ones(n, dtype=bool)
        avail[selected] = False
        selected.extend(int(i) for i in _relevance_order(np.flatnonzero(avail), rel)[: k - len(selected)])
    return selected


@dataclass(frozen=True)
class EntityDiversifier:
    """The diversification stage (Eq. 4): greedy entity coverage over the top ``pool`` fused candidates.

    ``lam``: weight of the coverage gain vs relevance (the pipeline's lambda unless learned fusion
    predicts one); ``weights``: 'uniform' or 'idf'; ``query_weight``: extra weight of entities the
    query itself names. Values: the method YAML.
    """

    phase: ClassVar[str] = "rank"

    enabled: bool
    lam: float
    pool: int
    weights: str
    query_weight: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"diversify.lam must be in [0, 1], got {self.lam}")

    def base_params(self) -> dict[str, Any]:
        """Everything but ``lam``: learned fusion's grid sweeps it."""
        return {k: v for k, v in asdict(self).items() if k != "lam"}

    def lambda_applies(self) -> bool:
        return self.enabled

    def effective_lam(self, predicted: float | None) -> float:
        """The lambda used: ``predicted`` (learned fusion's) or ``lam``; 0 when diversification is off."""
        if not self.enabled:
            return 0.0
        return float(self.lam if predicted is None else predicted)

    def step(self, s: QueryState) -> None:
        """Re-orders the fused list (``s.fused``) and cuts it to ``s.depth``; scores become ``1 / rank``."""
        t0 = time.perf_counter()
        lam = self.effective_lam(s.lam)
        idx, rel = s.fused
        if lam > 0 and len(idx) > 1:
            col = s.collection
            ids = [col.docs[i].doc_id for i in idx]
            order = self.reorder(rel, [col.entities[i] for i in idx], s.query_entities, lam)
            s.ranking = [(ids[j], 1.0 / (r + 1)) for r, j in enumerate(order[: s.depth])]
        s.timings["diversify"] = (time.perf_counter() - t0) * 1e3
        s.flags["lambda"] = round(lam, 4)

    def reorder(
        self,
        relevance: np.ndarray,
        doc_entities: Sequence[frozenset[str]],
        query_entities: Set[str],
        lam: float,
    ) -> list[int]:
        """Positions 0..n-1 of the fused list (relevance (n,), descending) in diversified order: the
        greedy order over the top ``pool``, then the rest in fused order."""
        pool = min(self.pool, len(relevance))
        inc, names = entity_matrix(list(doc_entities[:pool]))
        q_cols = [j for j, e in enumerate(names) if e in query_entities]
        w = entity_weights(inc, self.weights, q_cols, self.query_weight)
        return greedy_diversify(relevance[:pool], inc, w, lam, pool) + list(range(pool, len(relevance)))
