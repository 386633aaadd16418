"""The claims table: every printed claim of the paper (``../shared/paper/claims.yaml``) and of the seed studies
(``conf/reference/seed_claims.yaml``) with what the harness measured (95% CI, n) and its verdict under the one rule
of :mod:`analysis.verdicts`.

One row per claim (:func:`claims_tables`), measured as :data:`HOW` says. The paper's claims are measured on this
harness's LetheBench, not the paper's (which never existed as described); the seeds' on the declared runs the spec
names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from analysis import plans as P
from analysis import seeds as S
from analysis import stats
from analysis import verdicts as VD
from analysis.instruments import hallucination_judge_unfit
from analysis.iteration4 import hallucination
from analysis.metric_names import display_metric
from analysis.views import DatasetView, cached_mean_ci, paired_row

HOW = (
    "A printed value is set against the 95% CI of the measured mean (BCa over queries; a rate against its Wilson "
    "interval); a printed difference against the BCa CI of the paired difference on the queries both runs scored, its "
    "direction against the primary test (the paired randomization test; Table 2's adjusted p, the seeds' and the "
    "paper text's uncorrected: they are in no corrected family); an improvement in percent against that CI divided by "
    'the reference mean (the mean taken as fixed), its margin likewise; "A lost to B" in pairwise judgments against the '
    "Wilson interval of A's share of the pairs the judge decided and the exact sign test, once the judge passed its "
    "validation (seed_claims.yaml `judge_validation`). A row names a redefined metric; a quantity that is not the "
    "claimed one is `not comparable`, with the reason. A claim measured on several datasets is one row; its "
    "per-dataset rows follow the table."
)
COLUMNS = [
    "source",
    "claim",
    "claimed",
    "measured [95% CI]",
    "n",
    "verdict",
    "direction",
    "magnitude",
    "p",
    "CI vs test",
    "reason",
]
GROUP_COLUMNS = ["claim group", *COLUMNS]  # the per-dataset rows of a grouped claim, under the claim's text
NO_RUN = "no finished run of the declared method (n/m†)"
# the paper's Table 1 keys that are not the quantity measured here, and why
PAPER_NOT_COMPARABLE = {
    "latency_ms": "the paper's latency is a mean per query of a simulated pipeline with generation, on its machine; "
    "ours is the P95 of retrieval per query on this 2-core machine",
    "contradiction_rate": "the paper does not define its contradiction rate; ours (Contradiction@10) is the share of "
    "queries with a labelled stale doc in the top 10, a retrieval quantity",
}
PAPER_TABLE3 = (
    "the paper's stage times are simulated means on its machine (with generation); ours are this "
    "machine's per-stage timings (Table 3 of each dataset)"
)
# how the setting of the paper's absolute levels differs from ours (analysis.verdicts.comparable), {dataset}: ours
PAPER_DIFFERS = {
    "dataset": "the paper's LetheBench (500 queries, 4 domains x 125) never existed as described; its levels came "
    "from formulas and noise, ours from this harness's generated {dataset}",
}
HALLUCINATION_DIFFERS = {
    **PAPER_DIFFERS,
    "model": "the paper names no generator or judge; ours are Qwen2.5-Coder models",
}
SEED_NOT_COMPARABLE = {
    "p95_ms": "latency of another implementation (Node.js, SQLite) on another machine",
    "memory_mb": "memory of another implementation on another machine",
    "qps": "throughput of another implementation on another machine",
    "action_consistency": "redefined: the seed gives no definition; ours is action-pair recall@10, another quantity",
}
SEED_UNDEFINED = {"planning_coherence", "planning_pattern_coverage"}
NAMES = {
    "ndcg_at_10": "nDCG@10",
    "recall_at_50": "R@50",
    "coverage_at_n": "Coverage@N",
    "latency_ms": "latency (ms)",
    "f1": "answer F1",
    "rouge_l": "answer ROUGE-L",
    "similarity": "answer similarity",
    "p95_ms": "P95 latency (ms)",
    "memory_mb": "memory (MB)",
    "qps": "QPS",
}
GROUP = "_group"  # a row's key naming the claim it is one dataset's measurement of (grouped by :func:`group_rows`)


def name(key: str) -> str:
    """How a claim names a printed quantity (a claims-file key)."""
    return NAMES.get(key, key.replace("_", " "))


def _cell(est: float, lo: float, hi: float, pct: bool = False, signed: bool = False) -> str:
    f = (lambda x: f"{x:+.1%}") if pct else (lambda x: f"{x:+.4f}") if signed else (lambda x: f"{x:.4f}")
    if math.isnan(lo) or math.isnan(hi):
        return f(est)
    return f"{f(est)} [{f(lo)}, {f(hi)}]"


def rules(cfg: Mapping[str, Any]) -> VD.Rules:
    """The verdict rule's declared parameters (``cfg``: the report settings)."""
    return VD.Rules.from_cfg(cfg)


def row(
    source: str,
    claim: str,
    claimed: VD.Claim | str,
    m: VD.Measured | None = None,
    *,
    judged: VD.Judgement | None = None,
    fixed: tuple[str, str] | None = None,
    shown: float | None = None,
    pct: bool = False,
    note: str = "",
    group: str | None = None,
    differs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One claims-table row: ``judged`` (:func:`analysis.verdicts.judge` of ``claimed`` against ``m``), or ``fixed``
    (verdict, reason) when the rule decides without an interval (``shown``: a value shown beside it); ``group`` the
    claim this row is one dataset's measurement of. A level whose setting ``differs`` from the claim's is not
    comparable before anything else (the rule's step 1), measured or not."""
    why = VD.comparable(differs) if isinstance(claimed, VD.Claim) and claimed.null is None else None
    if why:
        fixed, judged = (VD.NOT_COMPARABLE, why), None
    if fixed is not None:
        judged = VD.Judgement(*fixed)
    if judged is None:
        raise ValueError(f"claim {claim!r}: a row needs a judgement or a fixed verdict")
    signed = isinstance(claimed, VD.Claim) and claimed.null == 0.0  # a difference
    if m is not None and m.has_interval:
        measured = _cell(m.est, m.ci_low, m.ci_high, pct, signed)
    elif shown is not None and not (isinstance(shown, float) and math.isnan(shown)):
        measured = _cell(shown, math.nan, math.nan, pct, signed)
    else:
        measured = "-"
    text = claimed.describe() if isinstance(claimed, VD.Claim) else str(claimed)
    if pct and isinstance(claimed, VD.Claim):
        text = " to ".join(dict.fromkeys(f"{x:+.1%}" for x in (claimed.low, claimed.high) if math.isfinite(x)))
    p = m.p if m is not None and m.p is not None and not math.isnan(m.p) else None
    out = {
        "source": source,
        "claim": claim,
        "claimed": text,
        "measured [95% CI]": measured,
        "n": "-" if m is None or not m.has_interval else int(m.n),
        "p": "-" if p is None else f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}",
        "direction": judged.direction or "-",
        "magnitude": judged.magnitude or "-",
        "CI vs test": judged.discordance,
        "verdict": judged.verdict,
        "reason": judged.reason + (f"; {note}" if note else ""),
    }
    if group:
        out[GROUP] = group
    return out


def mean_row(
    source: str,
    claim: str,
    value: float,
    x: pd.Series,
    cfg: Mapping[str, Any],
    metric: str,
    note: str = "",
    differs: Mapping[str, str] | None = None,
) -> dict:
    """A printed value against the BCa CI of the mean of ``x`` (NaN dropped), on ``metric``'s margin; ``differs``:
    how the claim's setting differs from the measurement's (analysis.verdicts.comparable)."""
    x = x.dropna().astype(float)
    if x.empty:
        fixed = (VD.NOT_MEASURED, "no measured value")
        return row(source, claim, VD.Claim.point(value), fixed=fixed, note=note, differs=differs)
    ci = cached_mean_ci(x.to_numpy(), cfg)
    m = VD.Measured(ci["mean"], ci["ci_low"], ci["ci_high"], ci["n"])
    j = VD.judge(VD.Claim.point(value), m, rules(cfg), metric, differs=differs)
    return row(source, claim, VD.Claim.point(value), m, judged=j, note=note)


def share_row(
    source: str,
    claim: str,
    value: float,
    k: int,
    n: int,
    cfg: Mapping[str, Any],
    note: str = "",
    differs: Mapping[str, str] | None = None,
    unfit: str | None = None,
) -> dict:
    """A printed rate against the Wilson interval of ``k / n`` (margin ``share``)."""
    if n == 0:
        fixed = (VD.NOT_MEASURED, "nothing was judged")
        return row(source, claim, VD.Claim.point(value), fixed=fixed, note=note, differs=differs)
    ci = stats.proportion_ci(k, n, float(cfg["confidence"]))
    m = VD.Measured(ci["share"], ci["ci_low"], ci["ci_high"], n, interval="wilson")
    j = VD.judge(VD.Claim.point(value), m, rules(cfg), "share", differs=differs, unfit=unfit)
    return row(source, claim, VD.Claim.point(value), m, judged=j, note=note)


def shift_test(d: np.ndarray, cfg: Mapping[str, Any], primary: str = "randomization") -> Callable[[float], float]:
    """x -> the primary test's p of "the mean of the paired differences ``d`` is x" (the test of ``d - x`` against
    no difference; analysis.stats.paired_test), computed when asked."""
    d = np.asarray(d, dtype=float)

    def p(x: float) -> float:
        t = stats.paired_test(
            d, np.full(d.size, float(x)), int(cfg["permutation_resamples"]), int(cfg["seed"]), float(cfg["confidence"])
        )
        return float(t[f"p_{primary}"])

    return p


def diff_row(
    source: str,
    claim: str,
    claimed: VD.Claim,
    t: Mapping[str, Any] | None,
    cfg: Mapping[str, Any],
    metric: str,
    *,
    relative: bool = False,
    acted: bool = True,
    note: str = "",
    d: np.ndarray | None = None,
    p: float | None = None,
    p_label: str = "p (randomization, uncorrected)",
    group: str | None = None,
    table: str = "seeds",
) -> dict:
    """A printed difference (or, ``relative``, an improvement as a fraction of the reference mean) against a paired
    test ``t`` (``analysis.stats.paired_test`` or ``analysis.views.paired_row`` keys; None = not measured): direction
    by the primary test (``p``, default its unadjusted p), magnitude by the CI against ``metric``'s margin, or, for
    few pairs, the primary test shifted over ``d`` (the per-query differences, when at hand)."""
    if t is None or t.get("n", 0) < 2:
        why = "fewer than two queries both runs scored"
        return row(source, claim, claimed, fixed=(VD.NOT_MEASURED, why), pct=relative, note=note, group=group)
    primary = str((cfg.get("primary_test") or {}).get(table, "randomization"))
    p_raw = float(t[f"p_{primary}"])
    est, lo, hi, scale = t["mean_diff"], t["ci_low"], t["ci_high"], 1.0
    if relative:
        ref = t.get("mean_b", t.get("baseline_mean"))
        if not ref:
            why = "the reference mean is 0: no relative change"
            return row(source, claim, claimed, fixed=(VD.NOT_MEASURED, why), pct=True, note=note, group=group)
        scale = float(ref)
    shifted = None
    if d is not None:
        base = shift_test(d, cfg, primary)
        shifted = (lambda x: base(x * scale)) if relative else base
    m = VD.Measured(
        est / scale,
        lo / scale,
        hi / scale,
        int(t["n"]),
        p=p_raw if p is None else float(p),
        p_raw=p_raw,
        p_label=p_label,
        n_nonzero=t.get("n_nonzero"),
        shifted_p=shifted,
    )
    R = rules(cfg)
    j = VD.judge(claimed, m, R, metric, margin=R.margin(metric) / scale, acted=acted)
    return row(source, claim, claimed, m, judged=j, pct=relative, note=note, group=group)


def _diffs(a: pd.Series, b: pd.Series) -> np.ndarray:
    """The per-query differences a - b on the queries both scored."""
    common = a.dropna().index.intersection(b.dropna().index)
    return a.loc[common].to_numpy(float) - b.loc[common].to_numpy(float)


def group_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per claim, the per-dataset rows of grouped claims): rows naming a group (:data:`GROUP`) become one
    row at the place of the first, its verdict combined from theirs (analysis.verdicts.combine_group)."""
    members: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get(GROUP):
            members.setdefault((r["source"], r[GROUP]), []).append(r)
    main: list[dict[str, Any]] = []
    detail: list[dict[str, Any]] = []
    done: set[tuple[str, str]] = set()
    for r in rows:
        key = (r["source"], r.get(GROUP) or "")
        if not r.get(GROUP):
            main.append(r)
            continue
        if key in done:
            continue
        done.add(key)
        part = members[key]
        verdict, why = VD.combine_group([x["verdict"] for x in part])
        each = "; ".join(f"{x['claim']}: {x['verdict']}" for x in part)
        disc = sum(bool(x["CI vs test"]) for x in part)
        main.append(
            {
                "source": r["source"],
                "claim": key[1],
                "claimed": part[0]["claimed"],
                "measured [95% CI]": f"{len(part)} rows (per-dataset rows below the table)",
                "n": "-",
                "p": "-",
                "direction": "-",
                "magnitude": "-",
                "CI vs test": f"{disc} of {len(part)} rows" if disc else "",
                "verdict": verdict,
                "reason": f"{why} (rule: {VD.GROUP_RULE}): {each}",
            }
        )
        detail += [{"claim group": key[1], **{c: x[c] for c in COLUMNS}} for x in part]
    return main, detail


# --------------------------------------------------------------------------- the paper


def no_run(v: DatasetView | None, methods: list[str], dataset: str) -> str:
    """Why a paper claim about ``methods`` has no measurement on ``dataset`` (its view ``v``): a method the reference
    tiers do not declare there, or one declared and not finished (:data:`NO_RUN`; also when ``dataset`` has no
    finished run at all, so no view tells what is declared)."""
    if v is None:
        return NO_RUN
    declared = set(v.per_query) | set(v.missing)
    undeclared = [m for m in methods if m not in declared]
    if undeclared:
        return f"{', '.join(undeclared)} not declared on {dataset}, the dataset the paper's claims are judged on"
    return NO_RUN


def paper_rows(
    views: Mapping[str, DatasetView],
    t2: pd.DataFrame,
    claims: Mapping[str, Any],
    cfg: Mapping[str, Any],
    dataset: str | None = None,
    studies: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The rows of the paper's Tables 1-4 (``claims``: the parsed ``claims.yaml``), measured on ``dataset``
    (default: ``cfg["paper_dataset"]``); ``studies``: the finished studies (the hallucination judge's validation)."""
    dataset = dataset or str(cfg["paper_dataset"])
    v = views.get(dataset)
    n_cov = int(cfg["coverage_n"])
    metric_of = {"ndcg_at_10": "ndcg@10", "recall_at_50": "recall@50", "coverage_at_n": f"coverage@{n_cov}"}
    differs = {k: x.format(dataset=dataset) for k, x in PAPER_DIFFERS.items()}
    out: list[dict[str, Any]] = []
    t1 = claims.get("table1_performance_summary") or {}
    for method, values in (t1.get("rows") or {}).items():
        claim = dict(zip(t1["columns"], values, strict=True))
        pq = v.per_query.get(method) if v is not None else None
        for key, value in claim.items():
            if key.endswith(("_ci_low", "_ci_high")):
                continue
            src, text = "paper Table 1", f"{method}: {name(key)} = {value}"
            if key in PAPER_NOT_COMPARABLE:  # shown beside: our P95 latency (ms), which is not the claimed quantity
                p95 = (v.runs[method].metrics.get("latency_ms") or {}).get("p95") if pq is not None else None
                shown = p95 if key == "latency_ms" else None
                out.append(
                    row(src, text, str(value), shown=shown, fixed=(VD.NOT_COMPARABLE, PAPER_NOT_COMPARABLE[key]))
                )
            elif pq is None:
                fixed = (VD.NOT_MEASURED, no_run(v, [method], dataset))
                out.append(row(src, text, VD.Claim.point(value), fixed=fixed, differs=differs))
            elif key == "hallucination_rate":
                rate, n = hallucination(pq)
                if rate is None:
                    why = "no judged answers: this method's LetheBench run generates none"
                    out.append(row(src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, why), differs=differs))
                else:
                    h_differs = {k: x.format(dataset=dataset) for k, x in HALLUCINATION_DIFFERS.items()}
                    out.append(
                        share_row(
                            src,
                            text,
                            value,
                            round(rate * n),
                            n,
                            cfg,
                            note="unsupported share of the judged answers (LLM judge)",
                            differs=h_differs,
                            unfit=hallucination_judge_unfit(cfg, studies),
                        )
                    )
            elif metric_of.get(key) in pq:
                note = f"Coverage@N with N = {n_cov}" if key == "coverage_at_n" else ""
                out.append(mean_row(src, text, value, pq[metric_of[key]], cfg, metric_of[key], note, differs))
            else:
                fixed = (VD.NOT_MEASURED, f"{key} not in the run")
                out.append(row(src, text, VD.Claim.point(value), fixed=fixed, differs=differs))
    out += _paper_table2(views, t2, claims.get("table2_significance_vs_best_baseline") or {}, metric_of, dataset, cfg)
    for method, stages in (claims.get("table3_latency_breakdown_ms") or {}).items():
        out.append(
            row(
                "paper Table 3",
                f"{method}: stage latency (retrieval, ML, LLM rerank, generation, total) = {stages} ms",
                str(stages[-1]),
                fixed=(VD.NOT_COMPARABLE, PAPER_TABLE3),
            )
        )
    out += _paper_table4(v, claims.get("table4_ndcg_at_10_by_domain") or {}, cfg, dataset)
    return out


def table2_p(t: Mapping[str, Any]) -> tuple[float, str]:
    """A Table 2 row's primary p as the verdict reads it, adjusted within its family (``p_adj``, else the older
    ``p_holm``), and how to name it."""
    if t.get("p_adj") is not None and not pd.isna(t.get("p_adj")):
        fam = ", ".join(str(x) for x in (t.get("correction"), t.get("family")) if x is not None and not pd.isna(x))
        return float(t["p_adj"]), f"p adjusted ({fam})" if fam else "p adjusted"
    return float(t["p_holm"]), "p adjusted (Holm over Table 2)"


def _paper_table2(
    views: Mapping[str, DatasetView],
    t2: pd.DataFrame,
    spec: Mapping[str, Any],
    metric_of: Mapping[str, str],
    dataset: str,
    cfg: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The paper's Table 2: each iteration beats the best baseline by the printed difference (p < 0.001): direction
    by Table 2's adjusted primary p, magnitude by its CI."""
    out = []
    v = views.get(dataset)
    for key, cells in spec.items():
        metric = metric_of.get(key, key)
        base_value = float(cells["baseline"])
        for it, (value, p, _d) in ((k, c) for k, c in cells.items() if k != "baseline"):
            method = f"lethe_{it}"
            claimed = VD.Claim.point(round(float(value) - base_value, 6), null=0.0)
            text = f"{method} beats the best baseline, {display_metric(metric)}: {value} - {base_value} (p {p})"
            hit = (
                t2[(t2["dataset"] == dataset) & (t2["metric"] == metric) & (t2["method"] == method)]
                if not t2.empty
                else t2
            )
            if not len(hit):
                out.append(row("paper Table 2", text, claimed, fixed=(VD.NOT_MEASURED, no_run(v, [method], dataset))))
                continue
            t = hit.iloc[0].to_dict()
            p_adj, label = table2_p(t)
            d = None
            if v is not None and method in v.per_query and t["baseline"] in v.per_query:
                a, b = v.per_query[method], v.per_query[t["baseline"]]
                if metric in a and metric in b:
                    d = _diffs(a[metric], b[metric])
            note = f"our best baseline: {t['baseline']}"
            out.append(
                diff_row(
                    "paper Table 2",
                    text,
                    claimed,
                    t,
                    cfg,
                    metric,
                    note=note,
                    d=d,
                    p=p_adj,
                    p_label=label,
                    table="table2",
                )
            )
    return out


def _paper_table4(
    v: DatasetView | None, spec: Mapping[str, Any], cfg: Mapping[str, Any], dataset: str
) -> list[dict[str, Any]]:
    out = []
    dom = v.queries.set_index("query_id")["domain"] if v is not None and "domain" in v.queries else None
    for domain, (hybrid, iter4) in spec.items():
        text = f"{domain}: lethe_iter4 - hybrid, nDCG@10: {iter4} - {hybrid}"
        claimed = VD.Claim.point(round(float(iter4) - float(hybrid), 6), null=0.0)
        if v is None or dom is None or not {"lethe_iter4", "hybrid"} <= set(v.per_query):
            why = no_run(v, ["lethe_iter4", "hybrid"], dataset)
            out.append(row("paper Table 4", text, claimed, fixed=(VD.NOT_MEASURED, why)))
            continue
        sub = {m: v.per_query[m][v.per_query[m].index.map(dom) == domain] for m in ("lethe_iter4", "hybrid")}
        if sub["lethe_iter4"].empty:
            why = f"no query of domain {domain!r} in LetheBench (its domains: {sorted(dom.dropna().unique())})"
            out.append(row("paper Table 4", text, claimed, fixed=(VD.NOT_MEASURED, why)))
            continue
        part = DatasetView(v.name, v.queries, v.runs, sub, list(v.label_metrics))
        t = paired_row(part, v.name, "lethe_iter4", "hybrid", "ndcg@10", cfg)
        d = _diffs(sub["lethe_iter4"]["ndcg@10"], sub["hybrid"]["ndcg@10"])
        out.append(
            diff_row("paper Table 4", text, claimed, t, cfg, "ndcg@10", note="on iteration 4's query sample", d=d)
        )
    return out


# --------------------------------------------------------------------------- the seeds


def seed_rows(
    views: Mapping[str, DatasetView],
    spec: Mapping[str, Any],
    cfg: Mapping[str, Any],
    studies: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The rows of every seed's printed numbers (``spec``: the parsed seed_claims.yaml); ``studies`` maps a
    finished study's name to its JSON document (seed 003's pairwise judgments). Rows of one claim measured on several
    datasets name it (:data:`GROUP`)."""
    out: list[dict[str, Any]] = []
    for seed, s in spec.items():
        if s.get("kind") == "paper_text":
            out += _paper_text_rows(views, s, cfg)
            continue
        if s.get("kind") == "agent":
            out += _agent_rows(views, seed, s, cfg)
            continue
        for table in s.get("tables") or []:
            src = f"{seed}: {table['name']}"
            by_name = {r["row"]: r for r in table["rows"]}
            for r in table["rows"]:
                out += _seed_row_claims(views, src, r, by_name, table, cfg, s.get("levels_differ"))
        if s.get("study"):
            out += _pairwise_rows(seed, s, (studies or {}).get(s["study"]), cfg, studies or {})
        for c in s.get("not_run_claims") or []:
            lo, hi = VD.parse_range(c["improvement"])
            out.append(
                row(f"{seed}: not run", c["claim"], VD.Claim(lo, hi, 0.0), fixed=(VD.NOT_MEASURED, c["why"]), pct=True)
            )
    return out


def fidelity_lines(spec: Mapping[str, Any]) -> list[str]:
    """One Markdown bullet per seed of ``spec`` that states what its study approximates (its ``fidelity``)."""
    return [f"- {seed}: {s['fidelity']}" for seed, s in spec.items() if s.get("fidelity")]


def _series(views: Mapping[str, DatasetView], key: str | None, col: str, answered: bool) -> pd.Series | None:
    """Run ``key``'s per-query ``col`` (only the answered questions when ``answered``; an agent metric computed by
    analysis.seeds.agent_scores when the run does not hold it); None when not measured."""
    v, label = S.resolve_run(views, key)
    if v is None:
        return None
    pq = v.per_query[label]
    if col not in pq:
        if col not in S.AGENT_COLUMNS:
            return None
        try:
            return S.agent_scores(v, label)[col]
        except KeyError:  # a stored run without the agent metrics
            return None
    if answered and "answer_status" in pq:
        pq = pq[pq["answer_status"] == "ok"]
    return pq[col]


def _why_not(views: Mapping[str, DatasetView], *cells: tuple[str | None, str]) -> str:
    """Why a (run key, column) of ``cells`` has no values: the run is not finished (or stored only on another
    dataset: then not measured on this one), or it did not record the column."""
    for key, col in cells:
        v, label = S.resolve_run(views, key)
        if v is None:
            if key:
                ds, lab = key.split("/", 1)
                elsewhere = sorted(d for d, w in views.items() if lab in w.per_query and d != ds)
                if elsewhere:
                    fam = "held-out family" if ds.endswith("_heldout") else f"dataset {ds}"
                    return f"not measured on the {fam}: {lab} is stored only on {', '.join(elsewhere)}, not on {ds}"
            return NO_RUN
        if col not in v.per_query[label] and col not in S.AGENT_COLUMNS:
            return f"{key} records no {col} (answers off?)"
    return "no measured value"


def _seed_row_claims(views, src, r, by_name, table, cfg, differs=None) -> list[dict[str, Any]]:
    out = []
    claimed = r.get("claimed") or {}
    retrieval = table.get("kind") == "retrieval"
    for key, value in claimed.items():
        text = f"{r['row']}: {name(key)} = {value}"
        if key == "improvement":
            ref = by_name[r["versus"]]
            col = S.compared_metric(table, cfg) if retrieval else S.ANSWER_COLUMNS["f1"]
            text = (
                f"{r['row']} vs {r['versus']}: {display_metric(col) if retrieval else 'answer F1'} improvement {value}"
            )
            lo, hi = VD.parse_range(value)
            group = r.get("claim")
            a, b = _series(views, r.get("run"), col, not retrieval), _series(views, ref.get("run"), col, not retrieval)
            if a is None or b is None:
                why = _why_not(views, (r.get("run"), col), (ref.get("run"), col))
                out.append(row(src, text, VD.Claim(lo, hi, 0.0), fixed=(VD.NOT_MEASURED, why), pct=True, group=group))
                continue
            acted, note = True, ""
            v, label = S.resolve_run(views, r.get("run"))
            gen = v.runs[label].flag("generation") if not retrieval else None
            skipped = S.duplicates_skipped(gen) if gen is not None else None
            if skipped is not None:
                acted, note = skipped > 0, f"a duplicate was skipped for {skipped} of {len(gen)} questions"
            t, d = S.paired_on_common(a, b, cfg)
            out.append(
                diff_row(
                    src,
                    text,
                    VD.Claim(lo, hi, 0.0),
                    t,
                    cfg,
                    col,
                    relative=True,
                    acted=acted,
                    note=note,
                    d=d,
                    group=group,
                )
            )
        elif key == "activation":
            v, label = S.resolve_run(views, r.get("run"))
            counts = S.activation_counts(v, label) if v is not None else None
            if counts is None:
                out.append(row(src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, NO_RUN), differs=differs))
                continue
            note = "share of the sample's questions whose keyword boost ran"
            out.append(share_row(src, text, value, *counts, cfg, note=note, differs=differs))
        else:
            col = S.ANSWER_COLUMNS.get(key, key)
            x = _series(views, r.get("run"), col, True)
            out.append(
                mean_row(src, text, value, x, cfg, col, differs=differs)
                if x is not None
                else row(
                    src,
                    text,
                    VD.Claim.point(value),
                    fixed=(VD.NOT_MEASURED, _why_not(views, (r.get("run"), col))),
                    differs=differs,
                )
            )
    ref = by_name.get(r.get("versus"))
    if ref is not None and "f1" in claimed and "f1" in (ref.get("claimed") or {}):
        col = S.ANSWER_COLUMNS["f1"]
        c = VD.Claim.point(round(claimed["f1"] - ref["claimed"]["f1"], 6), null=0.0)
        text = f"{r['row']} - {r['versus']}: answer F1 {claimed['f1']} - {ref['claimed']['f1']}"
        a, b = _series(views, r.get("run"), col, True), _series(views, ref.get("run"), col, True)
        if a is not None and b is not None:
            t, d = S.paired_on_common(a, b, cfg)
            out.append(diff_row(src, text, c, t, cfg, col, d=d))
        else:
            out.append(
                row(src, text, c, fixed=(VD.NOT_MEASURED, _why_not(views, (r.get("run"), col), (ref.get("run"), col))))
            )
    return out


def _relative_claim(
    views: Mapping[str, DatasetView], src: str, c: Mapping[str, Any], col: str, cfg: Mapping[str, Any], note: str = ""
) -> dict[str, Any]:
    """A claim ``c`` that run ``c["run"]`` improves ``col`` over run ``c["versus"]`` by ``c["improvement"]`` (a
    relative change) or differs by ``c["difference"]`` (an absolute one; 0: no difference), paired per query."""
    relative = "improvement" in c
    lo, hi = VD.parse_range(c["improvement"]) if relative else VD.parse_range(str(c["difference"]))
    claimed = VD.Claim(lo, hi, 0.0)
    group = c.get("group")
    note = "; ".join(x for x in (note, c.get("note", "")) if x)
    a, b = _series(views, c["run"], col, False), _series(views, c["versus"], col, False)
    if a is None or b is None:
        why = _why_not(views, (c["run"], col), (c["versus"], col))
        return row(src, c["claim"], claimed, fixed=(VD.NOT_MEASURED, why), pct=relative, note=note, group=group)
    t, d = S.paired_on_common(a, b, cfg)
    return diff_row(src, c["claim"], claimed, t, cfg, col, relative=relative, note=note, d=d, group=group)


def _paper_text_rows(views: Mapping[str, DatasetView], s: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[dict]:
    """The testable claims of the paper's text (seed 000): a run against another on a metric."""
    src = str(s.get("source_label", "paper text"))
    out = []
    for c in s.get("claims") or []:
        note = f"{c['run']} against {c['versus']}, {display_metric(c['metric'])}"
        out.append(_relative_claim(views, src, c, str(c["metric"]), cfg, note))
    return out


def _agent_rows(views, seed, s, cfg) -> list[dict[str, Any]]:
    out, src = [], f"{seed}: {str(s.get('title', seed)).split(': ', 1)[-1]}"
    scores = {}
    differs = s.get("levels_differ")
    for r in s["rows"]:
        v, label = S.resolve_run(views, r["run"])
        if v is not None:
            scores[r["row"]] = S.agent_scores(v, label)
    for r in s["rows"]:
        for key, value in (r.get("claimed") or {}).items():
            text = f"{r['row']}: {name(key)} = {value}"
            if key in SEED_UNDEFINED:
                out.append(row(src, text, str(value), fixed=(VD.NOT_MEASURED, S.UNDEFINED)))
            elif key in SEED_NOT_COMPARABLE:
                out.append(row(src, text, str(value), fixed=(VD.NOT_COMPARABLE, SEED_NOT_COMPARABLE[key])))
            elif r["row"] not in scores:
                out.append(
                    row(src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, _why_not(views, (r["run"], ""))))
                )
            else:
                col = S.AGENT_METRICS[key]
                note = f"measured as {col}" if col.split("@")[0] != key.replace("_", "-") else ""
                out.append(mean_row(src, text, value, scores[r["row"]][col], cfg, col, note=note, differs=differs))
    for h in s.get("headline") or []:
        text = h["claim"]
        lo, hi = VD.parse_range(h["improvement"])
        claimed = VD.Claim(lo, hi, 0.0)
        if h.get("not_measured"):
            out.append(row(src, text, claimed, fixed=(VD.NOT_MEASURED, h["not_measured"]), pct=True))
            continue
        col = S.AGENT_METRICS[h["metric"]]
        if h["row"] not in scores or h["versus"] not in scores:
            out.append(row(src, text, claimed, fixed=(VD.NOT_MEASURED, NO_RUN), pct=True))
            continue
        t, d = S.paired_on_common(scores[h["row"]][col], scores[h["versus"]][col], cfg)
        note = f"{h['row']} against {h['versus']}, {col}"
        out.append(diff_row(src, text, claimed, t, cfg, col, relative=True, note=note, d=d))
    for c in s.get("components") or []:  # the ablations of the seed's appendix: a run against its variant
        col = S.AGENT_METRICS.get(c["metric"], c["metric"])
        out.append(_relative_claim(views, src, c, col, cfg, f"{c['run']} against {c['versus']}, {col}"))
    for c in s.get("plan_shares") or []:
        out.append(_plan_share_row(views, src, c, cfg, differs))
    for c in s.get("fixed_claims") or []:
        out.append(row(src, c["claim"], str(c["claimed"]), fixed=(c["verdict"], c["why"])))
    return out


def _plan_share_row(views, src, c, cfg, differs) -> dict[str, Any]:
    """A seed's share of queries of a kind that got a plan (H4): among run ``c["run"]``'s evaluated queries whose gold
    plan label is ``c["gold"]``, the share whose recorded plan is ``c["plan"]`` (Wilson interval)."""
    v, label = S.resolve_run(views, c["run"])
    if v is None:
        return row(
            src, c["claim"], VD.Claim.point(c["value"]), fixed=(VD.NOT_MEASURED, _why_not(views, (c["run"], "")))
        )
    plans = P.recorded_plans(v.per_query[label])
    gold = v.queries.set_index("query_id")["plan_label"] if "plan_label" in v.queries else pd.Series(dtype=object)
    gold = gold.reindex(plans.index)
    have = plans.notna() & gold.eq(c["gold"])
    k, n = int((plans[have] == c["plan"]).sum()), int(have.sum())
    note = f"share of {n} queries labelled {c['gold']} whose recorded plan is {c['plan']} ({c['run']})"
    return share_row(src, c["claim"], float(c["value"]), k, n, cfg, note=note, differs=differs)


def judge_unfit(model: str, spec: Mapping[str, Any] | None, studies: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why pairwise judge ``model`` cannot count as evidence under ``spec`` (a seed's ``judge_validation``: its
    ``studies`` and ``min_accuracy``), or None when it passed. It passes when, on every validation study, the lower
    bound of the 95% CI of its accuracy over all perturbations (the known-better answer chosen in both orders) is at
    least ``min_accuracy``; an unfinished study, or one without the model, leaves it unvalidated."""
    if not spec:
        return None
    need, failed = float(spec["min_accuracy"]), []
    for name in spec["studies"]:
        doc = studies.get(name)
        if doc is None:
            return f"its validation (study {name}) was not run"
        got = [
            r
            for r in doc["rows"]
            if r.get("judge") == "pairwise" and r.get("model") == model and r.get("perturbation") == "all"
        ]
        if not got:
            return f"study {name} did not validate {model}"
        r = got[0]
        if not float(r["accuracy_low"]) >= need:
            failed.append(
                f"{r['accuracy']:.2f} [{r['accuracy_low']:.2f}, {r['accuracy_high']:.2f}] of {r['n']} pairs ({name})"
            )
    if failed:
        return (
            f"it chose the known-better answer in both orders in {' and '.join(failed)}, the CI's lower bound "
            f"below the {need:g} required"
        )
    return None


def _pairwise_rows(seed, s, doc, cfg, studies) -> list[dict[str, Any]]:
    """Seed 003's claim that the modified (HyDE) prompts lost: per pair and criterion, B's (the modified run's) share
    of the pairs the judge decided, against "below one half"; inconclusive when the judge failed its validation
    (:func:`judge_unfit`)."""
    claim = s.get("pairwise_claim") or {}
    src, text0 = f"{seed}: pairwise judgments ({s['study']})", claim.get("text", "the modified prompts lost")
    if doc is None:
        return [row(src, text0, VD.Claim.loses(0.5), fixed=(VD.NOT_MEASURED, f"study {s['study']} not run (n/m†)"))]
    unfit = {j: judge_unfit(j, s.get("judge_validation"), studies) for j in {str(r["judge"]) for r in doc["rows"]}}
    out = []
    for r in doc["rows"]:
        decided = int(r["a_wins"]) + int(r["b_wins"])
        text = f"{r['pair']}, {r['criterion']}: {text0} (judge {r['judge']})"
        if decided == 0:
            out.append(row(src, text, VD.Claim.loses(0.5), fixed=(VD.NOT_MEASURED, "the judge decided no pair")))
            continue
        ci = stats.proportion_ci(int(r["b_wins"]), decided, float(cfg["confidence"]))
        p = stats.sign_test(int(r["b_wins"]), int(r["a_wins"]))
        m = VD.Measured(
            ci["share"], ci["ci_low"], ci["ci_high"], decided, interval="wilson", p=p, p_label="p (exact sign test)"
        )
        j = VD.judge(VD.Claim.loses(0.5), m, rules(cfg), "share", unfit=unfit[str(r["judge"])])
        note = f"the modified run's share of {decided} decided pairs ({r['ties']} ties left out)"
        out.append(row(src, text, VD.Claim.loses(0.5), m, judged=j, note=note))
    return out


# --------------------------------------------------------------------------- the table


def claims_tables(
    views: Mapping[str, DatasetView],
    t2: pd.DataFrame,
    paper: Mapping[str, Any] | None,
    seeds: Mapping[str, Any] | None,
    cfg: Mapping[str, Any],
    studies: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per claim (:data:`COLUMNS`), the paper's then the seeds'; the per-dataset rows of the claims measured
    on several datasets (:data:`GROUP_COLUMNS`), each under its claim's text)."""
    rows = (paper_rows(views, t2, paper, cfg, studies=studies) if paper else []) + (
        seed_rows(views, seeds, cfg, studies) if seeds else []
    )
    main, detail = group_rows(rows)
    return pd.DataFrame(main, columns=COLUMNS), pd.DataFrame(detail, columns=GROUP_COLUMNS)


def verdict_counts(table: pd.DataFrame) -> str:
    """ "N claims: a consistent, b direction consistent, magnitude exceeded, ..." over the table's rows (one per
    claim), every verdict of analysis.verdicts.VERDICTS named."""
    n = VD.counts(list(table["verdict"]))
    return f"{len(table)} claims: " + ", ".join(f"{n[v]} {v}" for v in VD.VERDICTS)


def source_counts(table: pd.DataFrame) -> str:
    """Per source (the paper, each seed): its claims' verdicts, "paper: 3 consistent, 40 not comparable; seed001:
    ..." (only the verdicts that occur)."""
    key = table["source"].map(lambda x: "paper" if str(x).startswith("paper") else str(x).split(":")[0])
    parts = []
    for src in dict.fromkeys(key):
        n = VD.counts(list(table.loc[key == src, "verdict"]))
        parts.append(f"{src}: " + ", ".join(f"{k} {v}" for v, k in n.items() if k))
    return "; ".join(parts)
