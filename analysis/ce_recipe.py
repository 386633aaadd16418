"""The cross-encoder's recipe chosen on recipe-dev queries and reported on the others.

The cross-encoder's global recipe (training regime; its logit alone or interpolated with BM25) is set in config,
after pooled dev-fold numbers were read; on datasets without their own dev split those dev folds are evaluated
queries (UltraDomain cs: all 100). So per dataset a seeded share of the evaluated queries (``cfg.ce_recipe.share``)
is set aside as **recipe-dev**, in whole groups (:func:`lethebench.folds.assign_folds`: scopes when there are enough,
else queries sharing a gold source document). Among the candidate runs present (``cfg.ce_recipe.candidates``) the
recipe with the highest mean ``metric`` on recipe-dev is chosen (ties: the first in candidate order), and every
candidate is reported on the **remaining** queries only, paired with the reranker's first stage and random control
on exactly those queries. Each candidate scores every query out of fold (never with a model that trained on it or
chose its checkpoint or weight on it), so choosing among them on recipe-dev reads no label of the reported queries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from analysis.formatting import NM, fmt, fmt_p
from analysis.views import DatasetView, paired_row
from lethebench.folds import GROUP_COLUMN, assign_folds, query_gold_groups
from lethebench.schema import read_dataset


def query_groups(v: DatasetView, label: str) -> dict[str, str]:
    """query_id -> gold group of ``v``'s dataset: the reference store's ``gold_group`` column, else computed from
    the processed dataset of ``label``'s run (the same function wrote the column)."""
    if GROUP_COLUMN in v.queries.columns:
        return dict(zip(v.queries["query_id"].astype(str), v.queries[GROUP_COLUMN].astype(str), strict=True))
    ds = read_dataset(v.runs[label].dataset_folder)
    return query_gold_groups(ds.queries, ds.qrels, ds.corpus)


def recipe_dev_ids(queries: pd.DataFrame, groups: Mapping[str, str], share: float, seed: int) -> tuple[set[str], str]:
    """The recipe-dev queries among ``queries`` (columns query_id, scope_id) and the grouping used: whole groups
    (scopes, else ``groups``) dealt into round(1/share) folds (:func:`lethebench.folds.assign_folds`), fold 0 kept."""
    if not 0 < share <= 0.5:
        raise ValueError(f"analysis.ce_recipe.share={share}: expected a share in (0, 0.5]")
    meta = pd.DataFrame(
        {"scope_id": queries["scope_id"].astype(str).to_numpy(), "query_id": queries["query_id"].astype(str).to_numpy()}
    )
    folds, grouping = assign_folds(meta, round(1 / share), seed, groups)
    return set(meta["query_id"][folds == 0]), grouping


def restricted(v: DatasetView, keep: set[str]) -> DatasetView:
    """``v`` with every method's per-query scores restricted to the query ids ``keep``."""
    return DatasetView(
        v.name,
        v.queries,
        dict(v.runs),
        {m: pq.loc[pq.index.isin(keep)] for m, pq in v.per_query.items()},
        list(v.label_metrics),
        dict(v.missing),
    )


def recipe_table(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (dataset, candidate run): its mean on recipe-dev, whether it was chosen there, and on the
    reported queries its mean and its paired difference with the first stage and the random control."""
    spec = cfg["ce_recipe"]
    metric, share, seed = str(spec["metric"]), float(spec["share"]), int(spec["seed"])
    gate = (cfg.get("rerankers") or {}).get(str(spec["reranker"])) or {}
    first, rnd = gate.get("first_stage"), gate.get("random")
    rows = []
    for name, v in sorted(views.items()):
        cands = [c for c in spec["candidates"] if c in v.per_query and metric in v.per_query[c]]
        if not cands:
            continue
        ids = sorted(set.intersection(*(set(v.per_query[c].index.astype(str)) for c in cands)))
        queries = v.queries.assign(query_id=v.queries["query_id"].astype(str))
        queries = queries.set_index("query_id").loc[ids].reset_index()
        dev, grouping = recipe_dev_ids(queries, query_groups(v, cands[0]), share, seed)
        on_dev = {c: float(v.per_query[c].loc[v.per_query[c].index.isin(dev), metric].mean()) for c in cands}
        chosen = max(cands, key=lambda c: (on_dev[c], -cands.index(c)))
        rest = restricted(v, set(ids) - dev)
        for c in cands:
            t = paired_row(rest, name, c, first, metric, cfg) if first in rest.per_query else None
            r = paired_row(rest, name, c, rnd, metric, cfg) if rnd and rnd in rest.per_query else None
            rows.append(
                {
                    "dataset": name,
                    "candidate": c,
                    "regime": ((v.runs[c].manifest.get("method") or {}).get("model") or {}).get("regime") or NM,
                    "mode": ((v.runs[c].manifest.get("method") or {}).get("interpolation") or {}).get("mode", NM),
                    "recipe-dev n": len(dev),
                    "grouping": grouping,
                    f"recipe-dev {metric}": fmt(on_dev[c]),
                    "chosen": "yes" if c == chosen else "",
                    "reported n": t["n"] if t else len(ids) - len(dev),
                    f"reported {metric}": fmt(t["method_mean"]) if t else NM,
                    f"{first} {metric}": fmt(t["baseline_mean"]) if t else NM,
                    f"- {first} [95% CI]": f"{t['mean_diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]"
                    if t
                    else NM,
                    "p (randomization)": fmt_p(t["p_randomization"]) if t else NM,
                    f"- {rnd} [95% CI]": f"{r['mean_diff']:+.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]"
                    if r
                    else NM,
                }
            )
    return pd.DataFrame(rows)


def note(cfg: Mapping[str, Any]) -> str:
    spec = cfg["ce_recipe"]
    return (
        f"Recipe-dev: a seeded {float(spec['share']):.0%} of each dataset's evaluated queries (seed {spec['seed']}), "
        "in whole groups (`grouping`: conversations or sessions when there are enough, else queries sharing a gold "
        "source document); the chosen candidate (`chosen`) has the highest recipe-dev mean. The `reported` columns "
        "and the paired differences (95% BCa CIs, randomization p, unadjusted: exploratory) are on the other "
        "queries only, which no choice of recipe looked at. Every candidate scores each query with a fold model "
        "that never trained or selected on it. The overview and Table 1 keep all evaluated queries."
    )


def finding(table: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """One sentence per dataset: the chosen recipe and whether it is above its first stage on reported queries."""
    if table.empty:
        return ""
    first = str(((cfg.get("rerankers") or {}).get(str(cfg["ce_recipe"]["reranker"])) or {}).get("first_stage"))
    col = f"- {first} [95% CI]"
    out = []
    for _, r in table[table["chosen"] == "yes"].iterrows():
        cell = str(r[col])
        if cell == NM:
            out.append(f"{r['dataset']}: {r['candidate']} chosen (no first stage to compare)")
            continue
        lo, hi = (float(x) for x in cell.split("[", 1)[1].rstrip("]").split(","))
        verdict = "above" if lo > 0 else "below" if hi < 0 else "not distinguishable from"
        out.append(f"{r['dataset']}: {r['candidate']} chosen, {verdict} {first} on the reported queries ({cell})")
    return "Chosen on recipe-dev: " + "; ".join(out) + "."
