"""How each cross-encoder run's model set was chosen: its folds' dev numbers, read from the training
cards its manifest holds (``method.training_cards``), beside the run's own evaluated mean.

Per run (one regime on one dataset): the dev queries of every fold pooled (a fold's means weighted by
its dev queries), nDCG@10 of the BM25 order, of the chosen checkpoint alone, and of the checkpoint
interpolated with BM25 at the weight its fold chose (``selection.interpolation``). These dev numbers
are what the default regime and interpolation mode were chosen on; the evaluated column is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
            mixed = lambda c: (c["selection"].get("interpolation") or {}).get("score")  # noqa: E731
            pool = method.get("pool_selection")
            if pool:  # another first stage: the weights its folds chose on their dev queries over that pool
                by_dir = {f["dir"]: f for f in pool["folds"]}
                weights = [by_dir[c["fold"]["dir"]]["weight"] for c in cards]
                mixed = lambda c, by_dir=by_dir: by_dir[c["fold"]["dir"]]["selection"]["score"]  # noqa: E731
            mode = (method.get("interpolation") or {}).get("mode", "none")
            pq = v.per_query.get(label)
            rows.append(
                {
                    "dataset": ds,
                    "method": label,
                    "regime": (method.get("model") or {}).get("regime"),
                    "folds": len(cards),
                    "dev queries": sum(int(c["data"]["dev"]["queries"]) for c in cards),
                    "first stage": (method.get("first_stage") or {}).get("name"),
                    "depth": method.get("candidates"),
                    "dev BM25": fmt(_pooled(cards, lambda c: c["selection"].get("bm25_order"))),
                    "dev CE": fmt(_pooled(cards, lambda c: c["selection"].get("chosen_score"))),
                    "weights": ", ".join(f"{w:g}" for w in weights) if None not in weights else NM,
                    "dev CE+first stage": fmt(_pooled(cards, mixed)),
                    "mode": mode,
                    f"evaluated {metric}": fmt(float(pq[metric].mean())) if pq is not None and metric in pq else NM,
                }
            )
    return pd.DataFrame(rows)


NOTE = (
    "dev columns: nDCG@10 on each fold's own dev queries (pooled over folds, weighted by their dev queries), "
    "never on evaluated queries; `weights`: each fold's cross-encoder weight against the first stage chosen on those dev "
    "queries (1 = the cross-encoder alone; over a first stage other than BM25, chosen again on the same dev queries "
    "over that pool, `python -m experiments.ce_pool`); `dev BM25` and `dev CE` are the BM25 pool's; `mode`: what the run applied (none: the cross-encoder's logit alone; "
    "dev: the interpolation at each fold's weight). The dev scores of the chosen checkpoint and weight are "
    "maxima over what was tried, so they are optimistic; the evaluated column is the run's own mean."
)


def regime_table(
    views: Mapping[str, DatasetView], cfg: Mapping[str, Any], reranker: str = "cross_encoder", metric: str = "ndcg@10"
) -> pd.DataFrame:
    """Per dataset: the reranker's first stage, its random control and each training regime's run (the
    reranker's label and its ``<label>+<variant>`` runs, named by the regime in their manifests, else by
    the variant), mean
    ``metric`` on the evaluated queries; empty when no dataset has two regimes."""
    spec = (cfg.get("rerankers") or {}).get(reranker) or {}
    rows, regimes = [], []
    for ds, v in sorted(views.items()):
        labels = [m for m in sorted(v.runs) if m == reranker or m.startswith(reranker + "+")]
        row: dict[str, Any] = {"dataset": ds}
        for name, label in (("first stage", spec.get("first_stage")), ("random", spec.get("random"))):
            pq = v.per_query.get(label) if label else None
            row[f"{name} ({label})"] = fmt(float(pq[metric].mean())) if pq is not None else NM
        for label in labels:
            method = v.runs[label].manifest.get("method") or {}
            regime = (method.get("model") or {}).get("regime") or (label.split("+", 1)[1] if "+" in label else label)
            col = f"{regime}{' (default)' if label == reranker else ''}"
            regimes.append(col)
            row[col] = fmt(float(v.per_query[label][metric].mean()))
        rows.append(row)
    if len(set(regimes)) < 2:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    fixed = [c for c in df.columns if c == "dataset" or c.startswith(("first stage", "random"))]
    return df[fixed + sorted(c for c in df.columns if c not in fixed)].fillna(NM)


def regime_finding(table: pd.DataFrame) -> str:
    """Plain sentences: the datasets where no regime reaches the first stage's mean, and those where the
    default is below it while another regime reaches it."""
    if table.empty:
        return ""
    first = next(c for c in table.columns if c.startswith("first stage"))
    default = next((c for c in table.columns if c.endswith("(default)")), None)
    regimes = [c for c in table.columns if c != "dataset" and not c.startswith(("first stage", "random"))]

    def reaches(row: pd.Series, col: str) -> bool:
        return row[col] != NM and float(row[col]) >= float(row[first])

    rows = [r for _, r in table.iterrows() if r[first] != NM]
    none = [r["dataset"] for r in rows if not any(reaches(r, c) for c in regimes)]
    other = [
        f"{r['dataset']} ({', '.join(c for c in regimes if c != default and reaches(r, c))})"
        for r in rows
        if default and r[default] != NM and not reaches(r, default) and any(reaches(r, c) for c in regimes)
    ]
    out = []
    if none:
        out.append(
            f"Finding: on {', '.join(none)}, no training regime of the cross-encoder reaches its BM25 first stage."
        )
    if other:
        out.append(f"On {', '.join(other)}, the default is below its first stage while the regime(s) named reach it.")
    if not out:
        return "Every dataset has the default at or above its first stage."
    return " ".join(out) + (" Regimes were chosen and weighted on dev only; none was picked on these test numbers.")


def recipe(views: Mapping[str, DatasetView]) -> str:
    """The paragraph that opens the cross-encoder sections: the start checkpoint, the training data, epochs and length,
    and the pools reranked (depth and first stage), read from the runs' training cards and manifests; that no
    pretrained cross-encoder is available offline and which hub model the same config names (``model.hub_id``)."""
    cards, pools, hubs = [], set(), set()
    for v in views.values():
        for run in v.runs.values():
            method = run.manifest.get("method") or {}
            found = [c for c in method.get("training_cards") or [] if c]
            if found:
                cards += found
                pools.add(((method.get("first_stage") or {}).get("name"), method.get("candidates")))
                hub = (((run.manifest.get("config") or {}).get("method") or {}).get("model") or {}).get("hub_id")
                hubs |= {hub} if hub else set()
    if not cards:
        return ""
    base = sorted({str((c.get("base_model") or {}).get("name")) for c in cards})
    epochs = sorted({int((c.get("training") or {}).get("epochs", 0)) for c in cards})
    length = sorted({int(c["max_length"]) for c in cards if c.get("max_length")})
    queries = [sum(int(t.get("queries", 0)) for t in (c["data"].get("train") or {}).values()) for c in cards]
    pairs = [sum(int(t.get("pairs", 0)) for t in (c["data"].get("train") or {}).values()) for c in cards]
    rng = lambda xs: f"{min(xs)}" if min(xs) == max(xs) else f"{min(xs)}-{max(xs)}"  # noqa: E731
    pool_text = "; ".join(f"{fs or 'BM25'} top {d}" for fs, d in sorted(pools, key=lambda p: (str(p[0]), p[1] or 0)))
    hub = (
        f" Where a model hub is reachable, the same config scores with the pretrained {', '.join(sorted(hubs))} "
        "instead (`LETHE_ALLOW_HUB=true`, `conf/model/cross_encoder.yaml` `hub_id`)."
        if hubs
        else ""
    )
    return (
        f"**Recipe.** Every cross-encoder here is fine-tuned by this project from {', '.join(base)} (a bi-encoder "
        "checkpoint without cross-encoder or MS MARCO pretraining: no pretrained cross-encoder is available offline "
        f"and none ships on PyPI), {rng(epochs)} epoch(s), pairs of at most {rng(length)} tokens; per fold "
        f"{rng(queries)} training queries and {rng(pairs)} pairs (positives and BM25 negatives), the checkpoint and "
        f"the interpolation weight chosen on the fold's dev queries. Pools reranked (first stage, depth): {pool_text}."
        + hub
    )
