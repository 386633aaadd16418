"""LongMemEval's retrieval metrics, as its official evaluation defines them (``src/retrieval/eval_utils.py`` of
xiaowu0162/LongMemEval), on a run's rankings and binary qrels over the units of ``lethebench.loaders.longmemeval``.

For a query with relevant units R and the ranking's top k:

- ``recall_any@k``: 1 if any unit of R is in the top k, else 0;
- ``recall_all@k``: 1 if every unit of R is, else 0;
- ``ndcg_any@k``: DCG of the top k over the ideal DCG of R, with the official discount: the first two ranks
  undiscounted, rank i >= 2 divided by log2(i) (DCG = rel_1 + sum_{i=2..k} rel_i / log2(i)); not trec_eval's
  nDCG@k (log2(i + 1) from rank 1), so the two differ.

Turn-level runs are also scored at session level as the official code does (:func:`session_level`): each ranked turn
stands for its session, a session counts as retrieved only through a turn marked ``has_answer`` (the official ids
rename the other turns of an evidence session), and the cut grows until the top holds k distinct such session
ids. Abstention questions have no qrels (the loader), so they are not scored here: every function takes the
evaluated queries with qrels only, and the official averages leave abstention out the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

KS = (1, 3, 5, 10, 30, 50)  # the cutoffs the official evaluation reports
METRICS = ("recall_any", "recall_all", "ndcg_any")


def _dcg(rels: Sequence[int]) -> float:
    """The official DCG: rel_1 + sum over ranks i >= 2 of rel_i / log2(i)."""
    return float(sum(r if i == 0 else r / math.log2(i + 1) for i, r in enumerate(rels) if r))


def scores(ranked: Sequence[str], relevant: set[str], k: int, n_relevant: int | None = None) -> dict[str, float]:
    """``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` of one ranked list of unit ids against the relevant
    ``relevant`` (``n_relevant``: the relevant units of the whole collection, default ``len(relevant)``, for the
    ideal DCG). ``ranked`` may repeat an id (a session standing for several of its turns): each rank is scored."""
    top = list(ranked[:k])
    hit = set(top) & relevant
    ideal = _dcg([1] * min(k, len(relevant) if n_relevant is None else n_relevant))
    return {
        f"recall_any@{k}": float(bool(hit)),
        f"recall_all@{k}": float(relevant <= set(top)),
        f"ndcg_any@{k}": _dcg([int(d in relevant) for d in top]) / ideal if ideal else 0.0,
    }


def session_level(
    ranked: Sequence[str], relevant: set[str], session_of: Callable[[str], str], k: int
) -> dict[str, float]:
    """The official turn-to-session scores at k of a turn ranking: each turn maps to ``session_of(turn)`` when it is
    relevant and to a key of its own session's other turns when not (the official ``answer``/``noans`` ids), and the
    cut grows until it holds k distinct keys (or the ranking ends)."""
    keys = [session_of(d) if d in relevant else f"{session_of(d)}#other" for d in ranked]
    cut = k
    while cut < len(keys) and len(set(keys[:cut])) < k:
        cut += 1
    sessions = {session_of(d) for d in relevant}
    got = scores(keys, sessions, cut, n_relevant=len(relevant))
    return {name.split("@")[0] + f"@{k}": value for name, value in got.items()}


def per_query(
    run: Mapping[str, Sequence[tuple[str, float]]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Sequence[int] = KS,
    session_of: Callable[[str], str] | None = None,
) -> pd.DataFrame:
    """One row per query with qrels (index query_id): every metric at every k of ``ks``; with ``session_of`` (a
    turn-level run), also each at session level, prefixed ``session_``. A query the run did not answer scores 0."""
    rows = {}
    for qid, grades in qrels.items():
        relevant = {d for d, g in grades.items() if g > 0}
        ranked = [d for d, _ in run.get(qid, [])]
        row: dict[str, float] = {}
        for k in ks:
            row.update(scores(ranked, relevant, k))
            if session_of is not None:
                row.update({f"session_{n}": v for n, v in session_level(ranked, relevant, session_of, k).items()})
        rows[qid] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("query_id")


def session_of_turn(doc_id: str) -> str:
    """The session of a turn unit id ``<question id>:<session id>_<turn>`` (``lethebench.loaders.longmemeval``)."""
    return doc_id.rsplit("_", 1)[0]
