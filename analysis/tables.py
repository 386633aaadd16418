"""Tables 1-4 of the paper, regenerated from results folders only (CSV, Markdown, LaTeX).

A cell whose metric was not measured for a run says "n/m" (footnoted); nothing is filled by a
formula. Numbers are formatted deterministically so two runs of the analysis give identical bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from analysis import gates as G
from analysis import stats
from analysis import supervision as SUP
from analysis.declared_runs import RunRef
from analysis.formatting import NM, NOT_DECLARED, fmt, llm_failure_cell
from analysis.instruments import hallucination_judge_unfit
from analysis.iteration4 import hallucination_cell
from analysis.metric_names import display_metric
from analysis.views import DatasetView, cached_mean_ci, method_order, paired_row
from lethebench.runs import timings_frame

FOOTNOTE_TIMING = (
    "‡ = latency measured under contention (jobs run concurrently on one machine, or other processes "
    "busy on over a quarter of the cores: the manifest's timing_valid=false); not comparable with the others."
)


def latency_cell(ms: float | None, timing_valid: bool | None) -> str:
    """A latency in ms (2 decimals), marked ‡ when its run's manifest says ``timing_valid: false``."""
    if ms is None:
        return NM
    return fmt(ms, 2) + ("‡" if timing_valid is False else "")


def table1(
    v: DatasetView, cfg: Mapping[str, Any], studies: Mapping[str, Mapping[str, Any]] | None = None
) -> pd.DataFrame:
    """Performance summary: nDCG@10 with BCa CI, R@50, Coverage@N, P95 latency, contradiction, hallucination with
    its Wilson interval, marked when the judge failed its validation on ``studies`` (the finished studies' JSON
    documents by name; None: not validated) (metric headers in ir_measures form)."""
    n, k = int(cfg["coverage_n"]), int(cfg["contradiction_k"])
    ndcg, r50 = display_metric("ndcg@10"), display_metric("recall@50")
    rows = []
    for m in method_order(list(v.per_query), cfg):
        pq = v.per_query[m]
        ci = cached_mean_ci(pq["ndcg@10"].to_numpy(float), cfg)
        lat = v.runs[m].metrics.get("latency_ms") or {}
        cov = pq[f"coverage@{n}"].dropna() if f"coverage@{n}" in pq else pd.Series(dtype=float)
        con = pq[f"contradiction@{k}"].dropna() if f"contradiction@{k}" in pq else pd.Series(dtype=float)
        rows.append(
            {
                "method": m,
                "supervision": SUP.cell(v, m),
                "n": int(len(pq)),
                ndcg: fmt(ci["mean"]),
                f"{ndcg} 95% CI": f"[{fmt(ci['ci_low'])}, {fmt(ci['ci_high'])}]",
                r50: fmt(float(pq["recall@50"].mean())) if "recall@50" in pq else NM,
                f"Coverage@{n}": fmt(float(cov.mean())) if len(cov) else NM,
                "P95 latency (ms, this machine)": latency_cell(lat.get("p95"), v.runs[m].manifest.get("timing_valid")),
                f"Contradiction@{k}": fmt(float(con.mean())) if len(con) else NM,
                "Hallucination": hallucination_cell(pq, cfg, hallucination_judge_unfit(cfg, studies)),
                "LLM no answer / fallback": llm_failure_cell(v.runs[m].metrics),
                f"vs first stage ({display_metric(cfg['gate_metric'])})": G.first_stage_cell(v, m, cfg),
            }
        )
    return pd.DataFrame(rows)


def best_baseline(v: DatasetView, cfg: Mapping[str, Any], gated: bool = True, method: str | None = None) -> str | None:
    """The baseline of ``v`` with the highest mean ``best_baseline_metric`` (ties: the first in the declared
    ``baselines`` order, which lists simpler methods first: a reranker whose chosen weight left its first stage's
    ranking as it was is not named in that first stage's place); a
    reranker below its own first stage (analysis.gates) is not eligible unless ``gated`` is false. With ``method``:
    only among the baselines with the same or more label supervision than it (:mod:`analysis.supervision`), the
    supervision-matched best baseline; None when no such baseline has a finished run."""
    metric = cfg["best_baseline_metric"]
    out = set(G.excluded_from_best(v, cfg)) if gated else set()
    cands = {
        b: float(pq[metric].mean())
        for b, pq in v.per_query.items()
        if b in cfg["baselines"] and b not in out and SUP.eligible(v, b, method)
    }
    return max((b for b in cfg["baselines"] if b in cands), key=lambda m: cands[m]) if cands else None


MATCHED, OVERALL = "best with as much supervision", "best overall"  # Table 2's `versus` column


def compared_baselines(v: DatasetView, cfg: Mapping[str, Any], m: str) -> list[tuple[str, str]]:
    """(baseline, role) pairs ``m`` is tested against: the best baseline of any supervision, then its
    supervision-matched best baseline where that differs (another baseline with other scores: one that scores every
    query as the best of all does, e.g. a reranker whose chosen weight kept its first stage's ranking, would repeat the
    same test). The matched one is never stronger (its mean is at most the best of all), so a gain over it alone would
    flatter a method: it is reported beside the best of all, which stays the reference of the findings and the
    confirmatory family; the pair separates a method's gain from the labels it saw."""
    overall, matched = best_baseline(v, cfg), best_baseline(v, cfg, method=m)
    out = [(overall, OVERALL)] if overall is not None else []
    if matched is None or matched == overall:
        return out
    metric = cfg["best_baseline_metric"]
    if overall is not None and v.per_query[matched][metric].equals(v.per_query[overall][metric]):
        return out
    return out + [(matched, MATCHED)]


def best_baseline_note(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> str:
    """The footnote of Table 2: the best baseline per dataset and each reranker kept out of that choice
    because it is below its own first stage (and what would have been chosen without the gate)."""
    parts = []
    for ds, v in sorted(views.items()):
        base, ungated = best_baseline(v, cfg), best_baseline(v, cfg, gated=False)
        out = [m for m in G.excluded_from_best(v, cfg) if m in cfg["baselines"]]
        matched = {m: best_baseline(v, cfg, method=m) for m in cfg["lethe"] if m in v.per_query}
        s = f"{ds}: {base}" + "".join(
            f"; for {m} ({SUP.cell(v, m)}) {b or 'none with as much supervision'}"
            for m, b in matched.items()
            if b != base
        )
        if out:
            s += f" ({', '.join(f'{m} {G.BELOW} excluded: below its first stage {G.gate(v, m, cfg).first_stage}' for m in out)}"
            s += f"; without the gate it would have been {ungated})" if ungated != base else ")"
        parts.append(s)
    return (
        (
            "Best baseline per dataset (highest mean "
            + display_metric(cfg["best_baseline_metric"])
            + " among the baselines, "
            "rerankers below their own first stage left out), and for a method with more label supervision the best "
            "among the baselines that saw at least as much (lethebench/supervision.py; `versus` says which a row "
            "tests; the best of all stays the reference of the findings): " + " | ".join(parts) + ". " + G.BELOW_NOTE
        )
        if parts
        else ""
    )


def table2(views: Mapping[str, DatasetView], cfg: Mapping[str, Any], baseline: str | None = None) -> pd.DataFrame:
    """Paired tests of every method against the best baseline of any supervision and, where that differs, its
    supervision-matched best baseline (:func:`compared_baselines`; or ``baseline``, a method label, where that
    dataset has it), the primary test family-corrected over all rows (``corrected``)."""
    rows = []
    metrics = list(cfg["family_metrics"])
    declared = set(cfg["baselines"]) | set(cfg["lethe"])
    for ds, v in sorted(views.items()):
        for m in method_order(list(v.per_query), cfg):
            if m not in declared:  # variants and side studies have their own family
                continue
            given = [(baseline, "given")] if baseline in v.per_query else []
            gate = G.gate(v, m, cfg)
            mark = f"{G.BELOW} below first stage {gate.first_stage}" if gate is not None and gate.below else ""
            rows += [
                {**r, "versus": role, "supervision": SUP.cell(v, m), "gate": mark}
                for base, role in (compared_baselines(v, cfg, m) if baseline is None else given)
                if base != m
                for metric in metrics
                if (r := paired_row(v, ds, m, base, metric, cfg))
            ]
    df = pd.DataFrame(rows)
    return df if df.empty else corrected(df, cfg, "table2")


def corrected(df: pd.DataFrame, cfg: Mapping[str, Any], table: str) -> pd.DataFrame:
    """``df`` (paired rows, the whole family) corrected over the primary test ``cfg.primary_test[table]``, with the
    CI-vs-test flag at 1 - confidence."""
    return stats.with_primary_test(df, cfg["primary_test"][table], 1.0 - float(cfg["confidence"]))


def tests_note(df: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """What a tested table's p columns mean: which test is primary (corrected over the family), which secondary, and
    how many rows the CI and the primary test disagree on."""
    primary, secondary = stats.test_order(df.attrs["primary_test"])
    conf = float(cfg["confidence"])
    flagged = int((df["ci_vs_test"] != "").sum())
    if "family" in df.columns:
        n_conf = int((df["family"] == "confirmatory").sum())
        adjusted = (
            f"`p_adj` is of it: Holm over the declared confirmatory family ({n_conf} rows here; the family and the "
            f"smallest adjusted p it can reach are in the Findings section), Benjamini-Hochberg over this table's "
            f"{len(df) - n_conf} exploratory rows."
        )
    else:
        adjusted = "the adjusted p-values (`p_holm`, `p_bh`, `p_bonferroni`) are of it, over the whole family."
    return (
        f"Primary test: {stats.TEST_NAMES[primary]} (`p_{primary}`); {adjusted} "
        f"Secondary, uncorrected: {stats.TEST_NAMES[secondary]} "
        f"(`p_{secondary}`). `ci_vs_test` flags a row whose {conf:.0%} BCa CI of the mean difference and unadjusted "
        f"primary p disagree at {1.0 - conf:g}: {flagged} of {len(df)} rows."
    )


def ablation_pairs(methods: list[str], cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(method, reference) pairs: each Lethe iteration against the previous one, and each variant
    ``name+x`` against ``name``."""
    lethe = [m for m in cfg["lethe"] if m in methods]
    pairs = list(zip(lethe[1:], lethe[:-1], strict=True))
    pairs += [(m, m.split("+", 1)[0]) for m in sorted(methods) if "+" in m and m.split("+", 1)[0] in methods]
    pairs += [(m, ref) for m, ref in (cfg.get("reference_pairs") or {}).items() if m in methods and ref in methods]
    return pairs


def table_ablations(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Paired tests of each step and ablation against its reference; a family of its own, corrected."""
    rows = []
    for ds, v in sorted(views.items()):
        for m, ref in ablation_pairs(list(v.per_query), cfg):
            rows += [r for metric in cfg["family_metrics"] if (r := paired_row(v, ds, m, ref, metric, cfg))]
    df = pd.DataFrame(rows)
    return (
        df
        if df.empty
        else corrected(
            df.rename(columns={"baseline": "reference", "baseline_mean": "reference_mean"}), cfg, "ablations"
        )
    )


def timing_mark(v: DatasetView, m: str) -> str:
    """``‡`` when ``m``'s run measured its latency under contention (its manifest's ``timing_valid`` is false;
    :data:`FOOTNOTE_TIMING`), else empty."""
    run = v.runs.get(m)
    return "‡" if run is not None and run.manifest.get("timing_valid") is False else ""


def table3(v: DatasetView, cfg: Mapping[str, Any], marked: bool = True) -> pd.DataFrame:
    """Mean per-stage latency (ms) grouped into the paper's columns, plus total P50/P95; with ``marked``, a method
    whose run measured under contention is marked ‡ (:func:`timing_mark`)."""
    groups: dict[str, list[str]] = {g: list(s) for g, s in cfg["stage_groups"].items()}
    rows = []
    for m in method_order(list(v.per_query), cfg):
        pq = v.per_query[m]
        stages = timings_frame(pq)
        row: dict[str, Any] = {"method": m + (timing_mark(v, m) if marked else "")}
        other = [c for c in stages.columns if not any(c in s for s in groups.values())]
        for g, names in groups.items():
            cols = [c for c in names if c in stages.columns]
            row[f"{g} (ms)"] = fmt(float(stages[cols].fillna(0).sum(axis=1).mean()), 2) if cols else NM
        row["other (ms)"] = fmt(float(stages[other].fillna(0).sum(axis=1).mean()), 2) if other else NM
        lat = pq["latency_ms"].dropna()
        row["total mean (ms)"] = fmt(float(lat.mean()), 2) if len(lat) else NM
        row["total P50 (ms)"] = fmt(float(lat.quantile(0.5)), 2) if len(lat) else NM
        row["total P95 (ms)"] = fmt(float(lat.quantile(0.95)), 2) if len(lat) else NM
        rows.append(row)
    return pd.DataFrame(rows)


def table4(v: DatasetView, cfg: Mapping[str, Any], metric: str = "ndcg@10") -> pd.DataFrame | None:
    """``metric`` by query domain (datasets whose queries carry a domain), one column per method."""
    dom = v.queries.set_index("query_id")["domain"]
    if dom.isna().all():
        return None
    rows = []
    for d in sorted(dom.dropna().unique()):
        row: dict[str, Any] = {"domain": d}
        for m in method_order(list(v.per_query), cfg):
            pq = v.per_query[m]
            ids = pq.index[pq.index.map(dom) == d]
            row[m] = fmt(float(pq.loc[ids, metric].mean())) if len(ids) else NM
        rows.append(row)
    return pd.DataFrame(rows)


def overview(
    views: Mapping[str, DatasetView], cfg: Mapping[str, Any], refs: list[RunRef], metric: str = "ndcg@10"
) -> pd.DataFrame:
    """``metric`` per declared method (rows) and dataset (columns), with what each method learns from: n/m† when
    declared but not run, - when not declared for that dataset."""
    declared = {(r.dataset, r.label) for r in refs}
    methods = method_order(sorted({r.label for r in refs}), cfg)
    datasets = sorted({r.dataset for r in refs})
    rows = []
    sup = SUP.by_method(views, methods)
    for m in methods:
        row: dict[str, Any] = {"method": m, "supervision": sup.get(m, SUP.NOT_DECLARED)}
        for ds in datasets:
            v = views.get(ds)
            if v is not None and m in v.per_query:
                row[ds] = fmt(float(v.per_query[m][metric].mean()))
            else:
                row[ds] = f"{NM}†" if (ds, m) in declared else NOT_DECLARED
        rows.append(row)
    return pd.DataFrame(rows)


def with_missing_rows(df: pd.DataFrame, v: DatasetView, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """``df`` (one row per method, column ``method``) plus an n/m† row per declared run of ``v`` that
    was not run, in method order."""
    if not v.missing:
        return df
    extra = pd.DataFrame([{c: (m if c == "method" else f"{NM}†") for c in df.columns} for m in v.missing])
    out = pd.concat([df, extra], ignore_index=True)
    order = {m: i for i, m in enumerate(method_order(list(out["method"]), cfg))}
    return out.sort_values("method", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
