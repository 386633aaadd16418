"""The seed studies' report sections (analysis/seed_report.py): each seed study's printed numbers ("claimed") beside the harness's measurements.

The spec (``conf/reference/seed_claims.yaml``) lists, per seed, tables of rows; a row names a declared run on the seed's
sample (``run``, answers on), optionally the same method on the full data (``full``, retrieval only), the seed's
printed numbers (``claimed``) and the row it is compared with (``versus``).

Per row (:func:`seed_table`): the answered questions ``n``; answer token F1, ROUGE-L (LoCoMo protocol) and the
MiniLM answer similarity ("SBERT") as means with BCa intervals over the answered questions
(``analysis.stats.mean_ci``); for keyword-boost rows the activation rate (share of the sample's queries whose boost
ran, flag ``keyword_boost``) with a Wilson interval; nDCG@10 on the sample and on the full data.

Tables of ``kind: retrieval`` (:func:`retrieval_table`, seed 004) compare retrieval on the full data instead: per row
the evaluated queries, nDCG@10 and R@50 with BCa intervals (and, for a table compared on answer recall, that too),
the number of docs (chunks) indexed, and against its ``versus`` row the paired difference of the table's ``metric``
(:func:`compared_metric`: nDCG@10 unless named) (BCa interval, randomization and Wilcoxon p, uncorrected) and its size
relative to the reference mean, beside the seed's claimed improvement; also the median tokens per doc unit (the
processed dataset's card), the index build time (the run's manifest; this machine's, never verified) and, for runs
with LLM calls, their failure and fallback shares.

Per compared row (:func:`comparison_table`): the paired answer-F1 difference on the questions both rows answered
(``analysis.stats.paired_test``: mean, BCa interval, randomization and Wilcoxon p, uncorrected), the seed's own
difference, and the power line: the smallest mean difference a paired t-test at alpha = 0.05 detects with 80% power
on that many questions, from the measured standard deviation of the per-question differences
(``analysis.stats.min_detectable_difference``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis import stats
from analysis.formatting import NM, fmt, fmt_p, llm_failure_cell
from analysis.iteration4 import mean_cell
from analysis.metric_names import display_metric
from analysis.views import DatasetView
from lethebench.schema import read_table

ANSWER_COLUMNS = {"f1": "answer_f1", "rouge_l": "answer_rouge_l", "similarity": "answer_similarity"}
NOTE = (
    "Claimed = printed in the seed (copied, never measured here); measured = this harness, means with 95% BCa "
    "intervals over the answered questions (n). Answers: Qwen2.5-Coder-0.5B from each ranking's top 5 passages "
    "(conf/answers/default.yaml), scored with LoCoMo's protocol; similarity = cosine of MiniLM embeddings of answer "
    "and gold (the seed's SBERT); s per answer: mean time of a generation on this machine, as llama.cpp timed it "
    "(model loading excluded; an answer replayed from the response cache counts its original generation's time, "
    "so a replay states the same cost). LLM no answer / fallback: shares of the run's LLM-using questions whose "
    "call got no answer / whose unparseable reply a fallback replaced (degraded past "
    "run.max_parse_fallback_share). Activation: share of the sample's questions whose keyword boost ran (Wilson "
    "interval). nDCG@10 sample: on the seed-sized sample; full: the same method on every question. n/m† = declared, "
    "not run yet."
)


def resolve_run(views: Mapping[str, DatasetView], key: str | None) -> tuple[DatasetView | None, str | None]:
    """(view, label) of the finished run ``<dataset>/<label>`` among ``views``; (None, None) when not finished."""
    if not key:
        return None, None
    ds, label = key.split("/", 1)
    v = views.get(ds)
    return (v, label) if v is not None and label in v.per_query else (None, None)


def _claim(row: Mapping[str, Any], key: str) -> str:
    v = (row.get("claimed") or {}).get(key)
    return "-" if v is None else f"{v:.4f}" if key != "activation" else f"{v:.0%}"


def activation_counts(v: DatasetView, label: str) -> tuple[int, int] | None:
    """(questions whose keyword boost ran, questions with the flag) of a run; None when it has no boost."""
    fl = v.runs[label].flags()
    if "keyword_boost" not in fl:
        return None
    on = fl["keyword_boost"].dropna().astype(bool)
    return int(on.sum()), int(len(on))


def _activation(v: DatasetView, label: str) -> str:
    counts = activation_counts(v, label)
    if counts is None:
        return "-"
    ci = stats.proportion_ci(*counts)
    return f"{ci['share']:.0%} ({ci['k']}/{ci['n']}) [{ci['ci_low']:.0%}, {ci['ci_high']:.0%}]"


def duplicates_skipped(gen: pd.DataFrame) -> int | None:
    """With context deduplication on: how many rows of ``gen`` (questions' ``generation`` flags) had a
    near-duplicate doc skipped; None when the run does not deduplicate."""
    if "duplicates_skipped" not in gen:
        return None
    return int((gen["duplicates_skipped"].fillna(0) > 0).sum())


def _duplicates_skipped(gen: pd.DataFrame) -> str | None:
    """:func:`duplicates_skipped` over the answered questions (the rows of ``gen``) as ``k/n``."""
    k = duplicates_skipped(gen)
    return None if k is None else f"{k}/{len(gen)}"


def _seconds_per_answer(gen: pd.DataFrame) -> str:
    """Mean generation time per answered question (the rows of ``gen``, their ``generation`` flag) in s, from
    the backend's own time (``model_ms``; for a response-cache hit, the original generation's), so that a replay
    from the cache states the same cost; n/m for a run made before it was recorded."""
    ms = gen.get("model_ms")
    return fmt(float(ms.mean()) / 1e3, 1) if ms is not None and ms.notna().any() else NM


def _add_llm_failures(out: dict[str, Any], metrics: Mapping[str, Any]) -> None:
    """The "LLM no answer / fallback" cell, for a run that made LLM calls (answers or the method's own) only, so
    that tables of runs without any have no such column."""
    if (metrics.get("llm") or {}).get("queries"):
        out["LLM no answer / fallback"] = llm_failure_cell(metrics)


def seed_table(views: Mapping[str, DatasetView], table: Mapping[str, Any], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per spec row: claimed and measured answer metrics, activation, nDCG@10 on the sample and full data."""
    rows = []
    for r in table["rows"]:
        v, label = resolve_run(views, r.get("run"))
        out: dict[str, Any] = {"row": r["row"], "run": r.get("run")}
        if v is None:
            out.update({"n": "n/m†"})
            rows.append(out)
            continue
        pq = v.per_query[label]
        answered = pq[pq["answer_status"] == "ok"] if "answer_status" in pq else pq.iloc[0:0]
        out["n"] = int(answered["answer_f1"].notna().sum()) if "answer_f1" in answered else 0
        for key, col in ANSWER_COLUMNS.items():
            out[f"{key} claimed"] = _claim(r, key)
            out[f"{key} measured"] = mean_cell(answered[col], cfg) if col in answered else NM
        if "activation" in (r.get("claimed") or {}) or "keyword_boost" in label:
            out["activation claimed"] = _claim(r, "activation")
            out["activation measured"] = _activation(v, label)
        gen = v.runs[label].flag("generation").reindex(answered.index)  # parsed once: both cells read it
        skipped = _duplicates_skipped(gen)
        if skipped is not None:
            out["answers with a duplicate skipped"] = skipped
        out["s per answer"] = _seconds_per_answer(gen)
        _add_llm_failures(out, v.runs[label].metrics)
        out["nDCG@10 sample"] = fmt(float(pq["ndcg@10"].mean())) if "ndcg@10" in pq else NM
        fv, flabel = resolve_run(views, r.get("full"))
        out["nDCG@10 full"] = (
            f"{fmt(float(fv.per_query[flabel]['ndcg@10'].mean()))} (n={len(fv.per_query[flabel])})"
            if fv is not None
            else ("n/m†" if r.get("full") else "-")
        )
        rows.append(out)
    return pd.DataFrame(rows).fillna("-")


def paired_on_common(a: pd.Series, b: pd.Series, cfg: Mapping[str, Any]) -> tuple[dict[str, Any] | None, np.ndarray]:
    """``analysis.stats.paired_test`` of ``a`` against ``b`` on the queries both scored (None under 2 queries), and
    the per-query differences a - b on those queries."""
    common = a.dropna().index.intersection(b.dropna().index)
    xa, xb = a.loc[common].to_numpy(float), b.loc[common].to_numpy(float)
    if len(common) < 2:
        return None, xa - xb
    return stats.paired_test(
        xa, xb, int(cfg["permutation_resamples"]), int(cfg["seed"]), float(cfg["confidence"])
    ), xa - xb


TEST_COLUMNS = {"randomization": "p (randomization)", "wilcoxon": "p (Wilcoxon)"}
EXPLORATORY = "exploratory: p-values not corrected for multiple comparisons"


def p_cells(t: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, str]:
    """A paired test's two p-values as table cells, the seeds' primary test (``cfg.primary_test.seeds``) first."""
    return {TEST_COLUMNS[x]: fmt_p(t[f"p_{x}"]) for x in stats.test_order(cfg["primary_test"]["seeds"])}


def _chunk_tokens_p50(folder: Path) -> Any:
    """Median tokens per doc unit of a processed dataset (its card's ``chunking.tokens_p50``), NM if unrecorded."""
    card = folder / "card.json"
    if not card.is_file():
        return NM
    return (json.loads(card.read_text()).get("chunking") or {}).get("tokens_p50", NM)


def compared_metric(table: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    """The per-query column a retrieval table's rows are compared on (its ``metric``): ndcg@10, or ``answer_recall``
    for the answer recall at the configured text budget (``answer_recall_chars``: chunkings of different unit sizes)."""
    name = table.get("metric", "ndcg@10")
    if name == "answer_recall":
        if not cfg.get("answer_recall_chars"):
            raise ValueError(f"table {table.get('name')!r} compares answer recall, but answer_recall_chars is not set")
        return f"answer_recall@{int(cfg['answer_recall_chars'])}c"
    return str(name)


def retrieval_table(views: Mapping[str, DatasetView], table: Mapping[str, Any], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """``kind: retrieval`` tables (module docstring)."""
    by_name = {r["row"]: r for r in table["rows"]}
    metric = compared_metric(table, cfg)
    recall = metric if metric.startswith("answer_recall@") else None
    rows = []
    for r in table["rows"]:
        v, label = resolve_run(views, r.get("run"))
        out: dict[str, Any] = {"row": r["row"], "run": r.get("run")}
        if v is None:
            out["n"] = "n/m†"
            rows.append(out)
            continue
        pq = v.per_query[label]
        out["n"] = int(pq["ndcg@10"].notna().sum())
        out["nDCG@10"] = mean_cell(pq["ndcg@10"], cfg)
        out["R@50"] = mean_cell(pq["recall@50"], cfg) if "recall@50" in pq else NM
        if recall:
            out[recall] = mean_cell(pq[recall], cfg) if recall in pq else NM
        run = v.runs[label]
        out["docs"] = (run.manifest["dataset"].get("card_counts") or {}).get("docs", NM)
        out["doc tokens p50"] = _chunk_tokens_p50(run.dataset_folder)
        secs = run.manifest.get("index_build_seconds")
        out["index s (this machine)"] = f"{secs:.1f}" if isinstance(secs, (int, float)) else NM
        if r.get("versus"):
            vb, lb = resolve_run(views, by_name[r["versus"]].get("run"))
            have = vb is not None and metric in pq and metric in vb.per_query[lb]
            t = paired_on_common(pq[metric], vb.per_query[lb][metric], cfg)[0] if have else None
            head = f"vs reference: {display_metric(metric)} difference [95% CI]"
            if t is None:
                out[head] = "n/m†" if vb is None else NM
            else:
                out[head] = f"{t['mean_diff']:+.4f} [{fmt(t['ci_low'])}, {fmt(t['ci_high'])}] (n={t['n']})"
                out["relative"] = f"{t['mean_diff'] / t['mean_b']:+.1%}" if t["mean_b"] else "-"
                out.update(p_cells(t, cfg))
        _add_llm_failures(out, run.metrics)
        out["claimed improvement"] = (r.get("claimed") or {}).get("improvement", "-")
        rows.append(out)
    return pd.DataFrame(rows).fillna("-")


def comparison_table(
    views: Mapping[str, DatasetView], table: Mapping[str, Any], cfg: Mapping[str, Any], metric: str = "f1"
) -> pd.DataFrame:
    """Paired answer-``metric`` differences of each row with ``versus`` against that row, with the power line."""
    by_name = {r["row"]: r for r in table["rows"]}
    col = ANSWER_COLUMNS[metric]
    rows = []
    for r in table["rows"]:
        if not r.get("versus"):
            continue
        ref = by_name[r["versus"]]
        out: dict[str, Any] = {"row": r["row"], "versus": r["versus"]}
        claimed_a, claimed_b = (r.get("claimed") or {}).get(metric), (ref.get("claimed") or {}).get(metric)
        out["seed's difference"] = (
            f"{claimed_a - claimed_b:+.4f}"
            if None not in (claimed_a, claimed_b)
            else (r.get("claimed") or {}).get("improvement", "-")
        )
        (va, la), (vb, lb) = resolve_run(views, r.get("run")), resolve_run(views, ref.get("run"))
        if va is None or vb is None or col not in va.per_query[la] or col not in vb.per_query[lb]:
            out.update({"n": "n/m†"})
            rows.append(out)
            continue
        t, d = paired_on_common(va.per_query[la][col], vb.per_query[lb][col], cfg)
        out["n"] = int(len(d))
        if t is None:
            rows.append(out)
            continue
        sd = float(np.std(d, ddof=1))
        mde = stats.min_detectable_difference(sd, len(d))
        out.update(
            {
                "measured difference [95% CI]": f"{t['mean_diff']:+.4f} [{fmt(t['ci_low'])}, {fmt(t['ci_high'])}]",
                **p_cells(t, cfg),
                "sd of differences": fmt(sd),
                "smallest detectable difference (80% power)": fmt(mde),
            }
        )
        if claimed_a is not None and claimed_b is not None:
            gap = abs(claimed_a - claimed_b)
            out["could n show the seed's difference?"] = "yes" if gap >= mde else f"no: {gap:.4f} < {mde:.4f}"
        rows.append(out)
    return pd.DataFrame(rows).fillna("-")


def power_line(cmp: pd.DataFrame) -> str:
    """One sentence per comparison with a measured sample: what its number of questions can and cannot show."""
    key = "smallest detectable difference (80% power)"
    if cmp.empty or key not in cmp:
        return ""
    parts = [
        f"{r['row']} vs {r['versus']}: "
        + (
            f"identical F1 on all {r['n']} paired questions (no spread to size a test from)"
            if r.get("sd of differences") == fmt(0.0)
            else f"with n = {r['n']} paired questions a difference below {r[key]} F1 goes undetected more often than one "
            "time in five"
        )
        for _, r in cmp.iterrows()
        if r.get(key, "-") != "-"
    ]
    return (
        (
            "Power: " + "; ".join(parts) + " (paired t-test, alpha = 0.05, 80% power, from the measured spread of the "
            "per-question differences)."
        )
        if parts
        else ""
    )


def run_keys(spec: Mapping[str, Any]) -> set[str]:
    """Every run key (``<dataset>/<method label>``) the seeds of ``spec`` name in a row's ``run`` or ``full``."""
    out: set[str] = set()
    for s in spec.values():
        for t in s.get("tables") or [{"rows": s.get("rows") or []}]:
            out |= {r.get(k) for r in t["rows"] for k in ("run", "full")} - {None}
        # claims that set a run against another run (the paper text's, seed 002's components and plan shares)
        for c in [*(s.get("claims") or []), *(s.get("components") or []), *(s.get("plan_shares") or [])]:
            out |= {c.get(k) for k in ("run", "versus")} - {None}
    return out


def seed_sections(
    views: Mapping[str, DatasetView],
    spec: Mapping[str, Any],
    cfg: Mapping[str, Any],
    studies: Mapping[str, str] | None = None,
    declared: set[str] | None = None,
) -> list[tuple[str, str, list[tuple[str, pd.DataFrame]]]]:
    """(title, Markdown, [(table name, frame)]) per seed of ``spec`` whose runs the report declares (``declared``: run
    keys; None = every seed); ``studies`` maps a study name to its published Markdown table (seed 003's pairwise
    judgments, and the dev studies of ``decision_studies`` that chose how the judge decodes), or is missing it when
    the study has not run."""
    from analysis.formatting import to_markdown

    out = []
    for seed, s in spec.items():
        if s.get("kind") == "paper_text":  # claims only: they appear in the claims table, not as a seed study
            continue
        if declared is not None and not run_keys({seed: s}) & declared:
            continue
        fidelity = [f"What this approximates: {s['fidelity']}", ""] if s.get("fidelity") else []
        if s.get("kind") == "agent":
            tables_ = agent_tables(views, s, cfg)
            md = [f"Seed: `{s['source']}`. " + str(s.get("note", "")), "", *fidelity]
            for title, frame in tables_:
                md += [
                    f"**{title}**",
                    "",
                    to_markdown(frame) if not frame.empty else "No finished runs yet (n/m†).",
                    "",
                ]
            out.append((s["title"], "\n".join(md), [(f"{seed}_{i + 1}", f) for i, (_, f) in enumerate(tables_)]))
            continue
        md: list[str] = [f"Seed: `{s['source']}`. " + NOTE, "", *fidelity]
        frames: list[tuple[str, pd.DataFrame]] = []
        for i, table in enumerate(s["tables"]):
            if table.get("kind") == "retrieval":
                t = retrieval_table(views, table, cfg)
                md += [f"**{table['name']}** (the seed's {table['source']}; {EXPLORATORY})", "", to_markdown(t)]
                frames.append((f"{seed}_{i + 1}", t))
                continue
            t = seed_table(views, table, cfg)
            md += [f"**{table['name']}** (the seed's {table['source']})", "", to_markdown(t)]
            frames.append((f"{seed}_{i + 1}", t))
            cmp = comparison_table(views, table, cfg)
            if not cmp.empty:
                md += [
                    f"Paired answer-F1 differences on the questions both rows answered ({EXPLORATORY}):",
                    "",
                    to_markdown(cmp),
                ]
                line = power_line(cmp)
                if line:
                    md += [line, ""]
                frames.append((f"{seed}_{i + 1}_paired", cmp))
        if s.get("not_run_note"):
            md += [str(s["not_run_note"]), ""]
        if s.get("not_run_claims"):
            md += [
                "Not run, with the improvement the seed expected:",
                "",
                *(f"- {c['claim']}: {c['why']}" for c in s["not_run_claims"]),
                "",
            ]
        if s.get("not_run"):
            md += [
                f"Not run: the seed's UltraDomain domains {', '.join(s['not_run'])} are not in `../shared/data` (the "
                "loader accepts them where present).",
                "",
            ]
        decided = s.get("decision_studies") or {}
        if decided:
            md += [str(decided["note"]), ""]
            for name in decided["studies"]:
                table_md = (studies or {}).get(name)
                md += [f"Study `{name}`:", "", table_md if table_md else f"`{name}` not run (n/m†).", ""]
        if s.get("study"):
            table_md = (studies or {}).get(s["study"])
            md += [
                f"Pairwise judgments (study `{s['study']}`):",
                "",
                table_md if table_md else f"`{s['study']}` not run (n/m†).",
                "",
            ]
        out.append((s["title"], "\n".join(md), frames))
    return out


def is_study_label(label: str, patterns: Sequence[str]) -> bool:
    """Whether a method label belongs to a seed study (its runs are shown only in the seed sections)."""
    from fnmatch import fnmatch

    return any(fnmatch(label, p) for p in patterns)


# --------------------------------------------------------------------------- seed 002: agent-context metrics

AGENT_METRICS = {  # claim key -> (column, how it is measured)
    "tool_result_recall": "tool-result recall@10",
    "action_consistency": "action-pair recall@10",
    "entity_coverage": "coverage@10",
    "tool_diversity": "tool diversity@20",
}
UNDEFINED = "not defined (no label supports it)"


AGENT_COLUMNS = ("tool-result recall@10", "action-pair recall@10", "tool diversity@20")


@lru_cache(maxsize=8)
def has_tool_docs(folder: Path) -> bool:
    """Whether the processed dataset in ``folder`` holds tool results (docs of kind ``tool``): the agent metrics' labels."""
    corpus = read_table(folder, "corpus", ["kind"], optional=True)
    return corpus is not None and bool((corpus["kind"] == "tool").any())


@lru_cache(maxsize=4)
def _agent_corpus(folder: Path) -> pd.DataFrame:
    """The labels the agent metrics read from a processed dataset's corpus (read once per dataset, not per run)."""
    return read_table(folder, "corpus", ["doc_id", "scope_id", "position", "kind", "entities"])


def agent_scores(v: DatasetView, label: str) -> pd.DataFrame:
    """Per query of one run: the agent metrics of analysis.agent_metrics (NaN where a metric is undefined)."""
    from analysis import agent_metrics as A

    run = v.runs[label]
    evaluated = v.queries[v.queries["query_id"].isin(v.per_query[label].index)]
    if run.stored_labels is not None:  # a reference-store run: computed by this function when it was stored
        cols = {c: v.per_query[label][c] for c in AGENT_COLUMNS}
    else:
        corpus = _agent_corpus(run.dataset_folder)
        qrels = {q: r for q, r in run.qrels.items() if q in set(evaluated["query_id"])}
        cols = dict(
            zip(
                AGENT_COLUMNS,
                (
                    A.tool_result_recall(run.run, qrels, corpus, 10),
                    A.action_pair_recall(run.run, qrels, evaluated, 10),
                    A.tool_diversity(run.run, evaluated, corpus, 20),
                ),
                strict=True,
            )
        )
    out = pd.DataFrame(cols).reindex(evaluated["query_id"])
    if "coverage@10" in v.per_query[label]:
        out["coverage@10"] = v.per_query[label]["coverage@10"]
    return out


def agent_tables(
    views: Mapping[str, DatasetView], s: Mapping[str, Any], cfg: Mapping[str, Any]
) -> list[tuple[str, pd.DataFrame]]:
    """Seed 002's three tables (claimed beside measured) and the paired tests of each Lethe row against the best
    baseline row per metric (Holm and BH over that family)."""
    from analysis.agent_metrics import peak_memory_mb

    rows = s["rows"]
    scores: dict[str, pd.DataFrame] = {}
    for r in rows:
        v, label = resolve_run(views, r["run"])
        if v is not None:
            scores[r["row"]] = agent_scores(v, label)
    t1, t2, t3 = [], [], []
    for r in rows:
        c = r.get("claimed") or {}
        sc = scores.get(r["row"])
        cell = lambda col, sc=sc: (  # noqa: E731
            mean_cell(sc[col], cfg)
            if sc is not None and col in sc and sc[col].notna().any()
            else ("n/m†" if sc is None else NM)
        )
        claim = lambda key, c=c: "-" if c.get(key) is None else f"{c[key]:g}"  # noqa: E731
        t1.append(
            {
                "method (seed)": r["row"],
                "run": r["run"],
                "tool-result recall@10 claimed": claim("tool_result_recall"),
                "tool-result recall@10 measured": cell("tool-result recall@10"),
                "planning coherence claimed": claim("planning_coherence"),
                "planning coherence measured": UNDEFINED,
                "action consistency claimed": claim("action_consistency"),
                "action-pair recall@10 measured": cell("action-pair recall@10"),
            }
        )
        t3.append(
            {
                "method (seed)": r["row"],
                "run": r["run"],
                "entity coverage@10 claimed": claim("entity_coverage"),
                "entity coverage@10 measured": cell("coverage@10"),
                "tool diversity@20 claimed": claim("tool_diversity"),
                "tool diversity@20 measured": cell("tool diversity@20"),
                "planning pattern coverage claimed": claim("planning_pattern_coverage"),
                "planning pattern coverage measured": UNDEFINED,
            }
        )
        v, label = resolve_run(views, r["run"])
        if v is None:
            t2.append(
                {
                    "method (seed)": r["row"],
                    "run": r["run"],
                    "P95 ms claimed": claim("p95_ms"),
                    "P95 ms measured": "n/m†",
                }
            )
            continue
        run = v.runs[label]
        lat = run.metrics.get("latency_ms") or {}
        mark = "" if run.manifest.get("timing_valid", True) else " ‡"
        mem = peak_memory_mb(run.manifest)
        t2.append(
            {
                "method (seed)": r["row"],
                "run": r["run"],
                "P95 ms claimed": claim("p95_ms"),
                "P95 ms measured": f"{lat['p95']:.1f}{mark}" if lat.get("p95") is not None else NM,
                "memory MB claimed": claim("memory_mb"),
                "peak memory MB measured": "-" if mem is None else f"{mem:g}",
                "QPS claimed": claim("qps"),
                "QPS measured": f"{run.metrics['qps']:.1f}{mark}" if run.metrics.get("qps") else NM,
            }
        )
    tests = []
    lethe = [r["row"] for r in rows if r.get("lethe") and r["row"] in scores]
    base = [r["row"] for r in rows if not r.get("lethe") and r["row"] in scores]
    for col in AGENT_METRICS.values():
        have = [b for b in base if col in scores[b] and scores[b][col].notna().any()]
        if not have:
            continue
        best = max(have, key=lambda b: scores[b][col].mean())
        for m in lethe:
            if col not in scores[m]:
                continue
            t = paired_on_common(scores[m][col], scores[best][col], cfg)[0]
            if t is not None:
                tests.append(
                    {
                        "metric": col,
                        "method": m,
                        "best baseline": best,
                        "n": t["n"],
                        "difference": t["mean_diff"],
                        "ci_low": t["ci_low"],
                        "ci_high": t["ci_high"],
                        "p_randomization": t["p_randomization"],
                        "p_wilcoxon": t["p_wilcoxon"],
                    }
                )
    tt = pd.DataFrame(tests)
    primary = cfg["primary_test"]["seeds"]
    if not tt.empty:
        tt = stats.with_primary_test(tt, primary, 1.0 - float(cfg["confidence"])).drop(columns="p_bonferroni")
        for c in ("difference", "ci_low", "ci_high"):
            tt[c] = tt[c].map(fmt)
        for c in ("p_randomization", "p_wilcoxon", "p_holm", "p_bh"):
            tt[c] = tt[c].map(fmt_p)
    return [
        ("Table 1: agent quality (claimed beside measured, 95% BCa intervals, n queries)", pd.DataFrame(t1)),
        (
            "Table 2: efficiency on this machine (warm P95 per query, peak RSS the run added, queries per second; "
            "‡ = measured while other work ran)",
            pd.DataFrame(t2),
        ),
        ("Table 3: agent coverage", pd.DataFrame(t3)),
        (
            f"Paired tests of the Lethe iterations against the best baseline per metric (primary test: "
            f"{stats.TEST_NAMES[primary]}; its Holm and BH over this family; ci_vs_test: the CI and the primary test "
            "disagree)",
            tt,
        ),
    ]
