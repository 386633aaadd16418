"""The claims table: every printed claim of the paper (``../shared/paper/claims.yaml``) and of the seed studies
(``conf/reference/seed_claims.yaml``) with what the harness measured (95% CI, n) and its verdict under the one rule
of :mod:`analysis.verdicts`.

One row per claim (:func:`claims_table`), measured as :data:`HOW` says. The paper's claims are measured on this
harness's LetheBench, not the paper's (which never existed as described); the seeds' on the declared runs the spec
names.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from analysis import seeds as S
from analysis import stats
from analysis import verdicts as VD
from analysis.iteration4 import hallucination
from analysis.metric_names import display_metric
from analysis.views import DatasetView, cached_mean_ci, paired_row

HOW = (
    "A printed value is tested against the 95% CI of the measured mean (BCa over queries; a rate against its Wilson "
    "interval); a printed difference against the BCa CI of the paired difference on the queries both runs scored; an "
    'improvement in percent against that CI divided by the reference mean (the mean taken as fixed); "A lost to B" '
    "in pairwise judgments against the Wilson interval of A's share of the pairs the judge decided, once the judge passed "
    "its validation (seed_claims.yaml `judge_validation`). A row names a "
    "redefined metric; a quantity that is not the claimed one is `not comparable`, with the reason."
)
COLUMNS = ["source", "claim", "claimed", "measured [95% CI]", "n", "verdict", "reason"]
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


def name(key: str) -> str:
    """How a claim names a printed quantity (a claims-file key)."""
    return NAMES.get(key, key.replace("_", " "))


def _cell(est: float, lo: float, hi: float, pct: bool = False, signed: bool = False) -> str:
    f = (lambda x: f"{x:+.1%}") if pct else (lambda x: f"{x:+.4f}") if signed else (lambda x: f"{x:.4f}")
    if math.isnan(lo) or math.isnan(hi):
        return f(est)
    return f"{f(est)} [{f(lo)}, {f(hi)}]"


def row(
    source: str,
    claim: str,
    claimed: VD.Claim | str,
    est: float | None = None,
    lo: float = math.nan,
    hi: float = math.nan,
    n: int | None = None,
    *,
    fixed: tuple[str, str] | None = None,
    acted: bool = True,
    unfit: str | None = None,
    pct: bool = False,
    note: str = "",
) -> dict[str, Any]:
    """One claims-table row: the verdict of ``claimed`` against ``[lo, hi]`` (:func:`analysis.verdicts.verdict`), or
    ``fixed`` (verdict, reason) when the rule's first two steps decide it without an interval."""
    if fixed is not None:
        verdict, reason = fixed
    elif isinstance(claimed, VD.Claim):
        verdict, reason = VD.verdict(claimed, lo, hi, acted, unfit)
    else:
        raise ValueError(f"claim {claim!r}: a claim without an interval needs a fixed verdict")
    signed = isinstance(claimed, VD.Claim) and claimed.null == 0.0  # a difference
    measured = "-" if est is None or (isinstance(est, float) and math.isnan(est)) else _cell(est, lo, hi, pct, signed)
    shown = claimed.describe() if isinstance(claimed, VD.Claim) else str(claimed)
    if pct and isinstance(claimed, VD.Claim):
        shown = " to ".join(dict.fromkeys(f"{x:+.1%}" for x in (claimed.low, claimed.high) if math.isfinite(x)))
    return {
        "source": source,
        "claim": claim,
        "claimed": shown,
        "measured [95% CI]": measured,
        "n": "-" if n is None else int(n),
        "verdict": verdict,
        "reason": reason + (f"; {note}" if note else ""),
    }


def mean_row(source: str, claim: str, value: float, x: pd.Series, cfg: Mapping[str, Any], note: str = "") -> dict:
    """A printed value against the BCa CI of the mean of ``x`` (NaN dropped)."""
    x = x.dropna().astype(float)
    if x.empty:
        return row(source, claim, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, "no measured value"), note=note)
    ci = cached_mean_ci(x.to_numpy(), cfg)
    return row(source, claim, VD.Claim.point(value), ci["mean"], ci["ci_low"], ci["ci_high"], ci["n"], note=note)


def share_row(source: str, claim: str, value: float, k: int, n: int, cfg: Mapping[str, Any], note: str = "") -> dict:
    """A printed rate against the Wilson interval of ``k / n``."""
    if n == 0:
        return row(source, claim, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, "nothing was judged"), note=note)
    ci = stats.proportion_ci(k, n, float(cfg["confidence"]))
    return row(source, claim, VD.Claim.point(value), ci["share"], ci["ci_low"], ci["ci_high"], n, note=note)


def diff_row(
    source: str,
    claim: str,
    claimed: VD.Claim,
    t: Mapping[str, Any] | None,
    relative: bool = False,
    acted: bool = True,
    note: str = "",
) -> dict:
    """A printed difference (or, ``relative``, an improvement as a fraction of the reference mean) against a paired
    test's CI (``t``: ``analysis.stats.paired_test`` or ``analysis.views.paired_row`` keys; None = not measured)."""
    if t is None or t.get("n", 0) < 2:
        return row(
            source,
            claim,
            claimed,
            fixed=(VD.NOT_MEASURED, "fewer than two queries both runs scored"),
            pct=relative,
            note=note,
        )
    est, lo, hi = t["mean_diff"], t["ci_low"], t["ci_high"]
    ref = t.get("mean_b", t.get("baseline_mean"))
    if relative:
        if not ref:
            return row(
                source,
                claim,
                claimed,
                fixed=(VD.NOT_MEASURED, "the reference mean is 0: no relative change"),
                note=note,
            )
        est, lo, hi = est / ref, lo / ref, hi / ref
    return row(source, claim, claimed, est, lo, hi, t["n"], acted=acted, pct=relative, note=note)


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
) -> list[dict[str, Any]]:
    """The rows of the paper's Tables 1-4 (``claims``: the parsed ``claims.yaml``), measured on ``dataset``
    (default: ``cfg["paper_dataset"]``)."""
    dataset = dataset or str(cfg["paper_dataset"])
    v = views.get(dataset)
    n_cov = int(cfg["coverage_n"])
    metric_of = {"ndcg_at_10": "ndcg@10", "recall_at_50": "recall@50", "coverage_at_n": f"coverage@{n_cov}"}
    out: list[dict[str, Any]] = []
    t1 = claims.get("table1_performance_summary") or {}
    for method, values in (t1.get("rows") or {}).items():
        claim = dict(zip(t1["columns"], values))
        pq = v.per_query.get(method) if v is not None else None
        for key, value in claim.items():
            if key.endswith(("_ci_low", "_ci_high")):
                continue
            src, text = "paper Table 1", f"{method}: {name(key)} = {value}"
            if key in PAPER_NOT_COMPARABLE:  # shown beside: our P95 latency (ms), which is not the claimed quantity
                p95 = (v.runs[method].metrics.get("latency_ms") or {}).get("p95") if pq is not None else None
                out.append(
                    row(
                        src,
                        text,
                        str(value),
                        p95 if key == "latency_ms" else None,
                        fixed=(VD.NOT_COMPARABLE, PAPER_NOT_COMPARABLE[key]),
                    )
                )
            elif pq is None:
                out.append(row(src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, no_run(v, [method], dataset))))
            elif key == "hallucination_rate":
                rate, n = hallucination(pq)
                if rate is None:
                    out.append(
                        row(
                            src,
                            text,
                            VD.Claim.point(value),
                            fixed=(VD.NOT_MEASURED, "no judged answers: this method's LetheBench run generates none"),
                        )
                    )
                else:
                    out.append(
                        share_row(
                            src,
                            text,
                            value,
                            round(rate * n),
                            n,
                            cfg,
                            note="unsupported share of the judged answers (LLM judge)",
                        )
                    )
            elif metric_of.get(key) in pq:
                note = f"Coverage@N with N = {n_cov}" if key == "coverage_at_n" else ""
                out.append(mean_row(src, text, value, pq[metric_of[key]], cfg, note))
            else:
                out.append(row(src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, f"{key} not in the run")))
    out += _paper_table2(t2, claims.get("table2_significance_vs_best_baseline") or {}, metric_of, dataset)
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


def _paper_table2(
    t2: pd.DataFrame, spec: Mapping[str, Any], metric_of: Mapping[str, str], dataset: str
) -> list[dict[str, Any]]:
    out = []
    for key, cells in spec.items():
        metric = metric_of.get(key, key)
        base_value = float(cells["baseline"])
        for it, (value, p, _d) in ((k, c) for k, c in cells.items() if k != "baseline"):
            method = f"lethe_{it}"
            claimed = VD.Claim.point(round(float(value) - base_value, 6), null=0.0)
            text = f"{method} - best baseline, {display_metric(metric)}: {value} - {base_value} (p {p})"
            hit = (
                t2[(t2["dataset"] == dataset) & (t2["metric"] == metric) & (t2["method"] == method)]
                if not t2.empty
                else t2
            )
            if not len(hit):
                out.append(row("paper Table 2", text, claimed, fixed=(VD.NOT_MEASURED, NO_RUN)))
                continue
            t = hit.iloc[0].to_dict()
            out.append(diff_row("paper Table 2", text, claimed, t, note=f"our best baseline: {t['baseline']}"))
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
            out.append(
                row(
                    "paper Table 4",
                    text,
                    claimed,
                    fixed=(
                        VD.NOT_MEASURED,
                        f"no query of domain {domain!r} in LetheBench (its domains: {sorted(dom.dropna().unique())})",
                    ),
                )
            )
            continue
        part = DatasetView(v.name, v.queries, v.runs, sub, list(v.label_metrics))
        t = paired_row(part, v.name, "lethe_iter4", "hybrid", "ndcg@10", cfg)
        out.append(diff_row("paper Table 4", text, claimed, t, note="on iteration 4's query sample"))
    return out


# --------------------------------------------------------------------------- the seeds


def seed_rows(
    views: Mapping[str, DatasetView],
    spec: Mapping[str, Any],
    cfg: Mapping[str, Any],
    studies: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The rows of every seed's printed numbers (``spec``: the parsed seed_claims.yaml); ``studies`` maps a
    finished study's name to its JSON document (seed 003's pairwise judgments)."""
    out: list[dict[str, Any]] = []
    for seed, s in spec.items():
        if s.get("kind") == "agent":
            out += _agent_rows(views, seed, s, cfg)
            continue
        for table in s.get("tables") or []:
            src = f"{seed}: {table['name']}"
            by_name = {r["row"]: r for r in table["rows"]}
            for r in table["rows"]:
                out += _seed_row_claims(views, src, r, by_name, table, cfg)
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
    """Run ``key``'s per-query ``col`` (only the answered questions when ``answered``); None when not measured."""
    v, label = S.resolve_run(views, key)
    if v is None or col not in v.per_query[label]:
        return None
    pq = v.per_query[label]
    if answered and "answer_status" in pq:
        pq = pq[pq["answer_status"] == "ok"]
    return pq[col]


def _why_not(views: Mapping[str, DatasetView], *cells: tuple[str | None, str]) -> str:
    """Why a (run key, column) of ``cells`` has no values: the run is not finished, or it did not record the column."""
    for key, col in cells:
        v, label = S.resolve_run(views, key)
        if v is None:
            return NO_RUN
        if col not in v.per_query[label]:
            return f"{key} records no {col} (answers off?)"
    return "no measured value"


def _seed_row_claims(views, src, r, by_name, table, cfg) -> list[dict[str, Any]]:
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
            a, b = _series(views, r.get("run"), col, not retrieval), _series(views, ref.get("run"), col, not retrieval)
            if a is None or b is None:
                why = _why_not(views, (r.get("run"), col), (ref.get("run"), col))
                out.append(row(src, text, VD.Claim(lo, hi, 0.0), fixed=(VD.NOT_MEASURED, why), pct=True))
                continue
            acted, note = True, ""
            v, label = S.resolve_run(views, r.get("run"))
            gen = v.runs[label].flag("generation") if not retrieval else None
            skipped = S.duplicates_skipped(gen) if gen is not None else None
            if skipped is not None:
                acted, note = skipped > 0, f"a duplicate was skipped for {skipped} of {len(gen)} questions"
            out.append(
                diff_row(
                    src,
                    text,
                    VD.Claim(lo, hi, 0.0),
                    S.paired_on_common(a, b, cfg)[0],
                    relative=True,
                    acted=acted,
                    note=note,
                )
            )
        elif key == "activation":
            v, label = S.resolve_run(views, r.get("run"))
            counts = S.activation_counts(v, label) if v is not None else None
            if counts is None:
                out.append(row(src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, NO_RUN)))
                continue
            out.append(
                share_row(
                    src, text, value, *counts, cfg, note="share of the sample's questions whose keyword boost ran"
                )
            )
        else:
            col = S.ANSWER_COLUMNS.get(key, key)
            x = _series(views, r.get("run"), col, True)
            out.append(
                mean_row(src, text, value, x, cfg)
                if x is not None
                else row(
                    src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, _why_not(views, (r.get("run"), col)))
                )
            )
    ref = by_name.get(r.get("versus"))
    if ref is not None and "f1" in claimed and "f1" in (ref.get("claimed") or {}):
        col = S.ANSWER_COLUMNS["f1"]
        c = VD.Claim.point(round(claimed["f1"] - ref["claimed"]["f1"], 6), null=0.0)
        text = f"{r['row']} - {r['versus']}: answer F1 {claimed['f1']} - {ref['claimed']['f1']}"
        a, b = _series(views, r.get("run"), col, True), _series(views, ref.get("run"), col, True)
        out.append(
            diff_row(src, text, c, S.paired_on_common(a, b, cfg)[0])
            if a is not None and b is not None
            else row(src, text, c, fixed=(VD.NOT_MEASURED, _why_not(views, (r.get("run"), col), (ref.get("run"), col))))
        )
    return out


def _agent_rows(views, seed, s, cfg) -> list[dict[str, Any]]:
    out, src = [], f"{seed}: {str(s.get('title', seed)).split(': ', 1)[-1]}"
    scores = {}
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
                out.append(row(src, text, VD.Claim.point(value), fixed=(VD.NOT_MEASURED, NO_RUN)))
            else:
                col = S.AGENT_METRICS[key]
                out.append(
                    mean_row(
                        src,
                        text,
                        value,
                        scores[r["row"]][col],
                        cfg,
                        note=f"measured as {col}" if col.split("@")[0] != key.replace("_", "-") else "",
                    )
                )
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
        t = S.paired_on_common(scores[h["row"]][col], scores[h["versus"]][col], cfg)[0]
        out.append(diff_row(src, text, claimed, t, relative=True, note=f"{h['row']} against {h['versus']}, {col}"))
    return out


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
        out.append(
            row(
                src,
                text,
                VD.Claim.loses(0.5),
                ci["share"],
                ci["ci_low"],
                ci["ci_high"],
                decided,
                unfit=unfit[str(r["judge"])],
                note=f"the modified run's share of {decided} decided pairs ({r['ties']} ties left out)",
            )
        )
    return out


# --------------------------------------------------------------------------- the table


def claims_table(
    views: Mapping[str, DatasetView],
    t2: pd.DataFrame,
    paper: Mapping[str, Any] | None,
    seeds: Mapping[str, Any] | None,
    cfg: Mapping[str, Any],
    studies: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Every claim's row (:data:`COLUMNS`): the paper's, then the seeds'."""
    rows = (paper_rows(views, t2, paper, cfg) if paper else []) + (
        seed_rows(views, seeds, cfg, studies) if seeds else []
    )
    return pd.DataFrame(rows, columns=COLUMNS)


def verdict_counts(table: pd.DataFrame) -> str:
    """ "N claims: a consistent, b contradicted, ..." over the table's rows."""
    counts = table["verdict"].value_counts()
    return f"{len(table)} claims: " + ", ".join(f"{int(counts.get(v, 0))} {v}" for v in VD.VERDICTS)
