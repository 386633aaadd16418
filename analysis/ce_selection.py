"""How each cross-encoder run's model set was chosen: its folds' dev numbers, read from the training
cards its manifest holds (``method.training_cards``), beside the run's own evaluated mean.

Per run (one regime on one dataset): the dev queries of every fold pooled (a fold's means weighted by
its dev queries), nDCG@10 of the BM25 order, of the chosen checkpoint alone, and of the checkpoint
interpolated with BM25 at the weight its fold chose (``selection.interpolation``). These dev numbers
are what the default regime and interpolation mode were chosen on; the evaluated column is not.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from analysis.formatting import NM, fmt
from analysis.views import DatasetView


def _pooled(cards: list[Mapping[str, Any]], get: Any) -> float | None:
    """Mean of ``get(card)`` over folds weighted by their dev queries (None if any fold lacks it)."""
    pairs = [(get(c), int(c["data"]["dev"]["queries"])) for c in cards]
    if not pairs or any(v is None for v, _ in pairs) or not sum(n for _, n in pairs):
        return None
    return sum(v * n for v, n in pairs) / sum(n for _, n in pairs)


def selection_table(views: Mapping[str, DatasetView], metric: str = "ndcg@10") -> pd.DataFrame:
    """One row per cross-encoder run (a run whose manifest has ``method.training_cards``)."""
    rows = []
    for ds, v in sorted(views.items()):
        for label, run in sorted(v.runs.items()):
            method = run.manifest.get("method") or {}
            cards = [c for c in method.get("training_cards") or [] if c]
            if not cards:
                continue
            sel = [c.get("selection") or {} for c in cards]
            weights = [((s.get("interpolation") or {}).get("weight")) for s in sel]
            mode = (method.get("interpolation") or {}).get("mode", "none")
            pq = v.per_query.get(label)
            rows.append({
                "dataset": ds, "method": label, "regime": (method.get("model") or {}).get("regime"),
                "folds": len(cards), "dev queries": sum(int(c["data"]["dev"]["queries"]) for c in cards),
                "depth": method.get("candidates"),
                "dev BM25": fmt(_pooled(cards, lambda c: c["selection"].get("bm25_order"))),
                "dev CE": fmt(_pooled(cards, lambda c: c["selection"].get("chosen_score"))),
                "weights": ", ".join(f"{w:g}" for w in weights) if None not in weights else NM,
                "dev CE+BM25": fmt(_pooled(cards, lambda c: (c["selection"].get("interpolation") or {}).get("score"))),
                "mode": mode,
                f"evaluated {metric}": fmt(float(pq[metric].mean())) if pq is not None and metric in pq else NM,
            })
    return pd.DataFrame(rows)


NOTE = ("dev columns: nDCG@10 on each fold's own dev queries (pooled over folds, weighted by their dev queries), "
        "never on evaluated queries; `weights`: each fold's cross-encoder weight against BM25 chosen on those dev "
        "queries (1 = the cross-encoder alone); `mode`: what the run applied (none: the cross-encoder's logit alone; "
        "dev: the interpolation at each fold's weight). The dev scores of the chosen checkpoint and weight are "
        "maxima over what was tried, so they are optimistic; the evaluated column is the run's own mean.")
