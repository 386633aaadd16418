"""What the harness found, in words: the report's first section, the site's first screen and the README's summary.

Read from the paired rows the report already computed (the confirmatory family of :mod:`analysis.families` and
Table 2's exploratory rows); nothing here computes a statistic or holds a number. Per dataset, each Lethe iteration
against the best baseline and against the iteration before (the primary metric, ``confirmatory.metrics[0]``), with
the difference, its 95% CI, the adjusted p and its family, and one plain sentence; where Lethe does not win, that
is said first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.families import CONFIRMATORY
from analysis.formatting import fmt_p
from analysis.metric_names import display_metric
from analysis.tables import MATCHED
from lethe.core.atomic import atomic_write_text

BETTER, WORSE, NO_DIFF = "better", "worse", "no significant difference"
COLUMNS = ["dataset", "method", "compared with", "role", "family", "n", "difference", "95% CI", "p_adj", "finding"]
README_START, README_END = "<!-- findings:start -->", "<!-- findings:end -->"
SETUP_HEADING = "## Appendix: setup and provenance"  # the report's provenance, after everything it found
FULL_FAMILY = "The confirmatory family, every row:"  # the line before the family's full table in the Findings section


def dataset_order(datasets: Sequence[str], cfg: Mapping[str, Any]) -> list[str]:
    """The paper's dataset (the held-out LetheBench family) first, then the others by name."""
    first = [d for d in [cfg.get("paper_dataset")] if d in datasets]
    return first + sorted(d for d in datasets if d not in first)


def dataset_label(ds: str, cfg: Mapping[str, Any]) -> str:
    """``ds`` with what a reader must know to weigh it (from ``findings.labels``), e.g. the dev family's caveat."""
    extra = (cfg.get("findings") or {}).get("labels", {}).get(ds)
    return f"{ds} ({extra})" if extra else ds


def _signed(x: float) -> str:
    return f"{x:+.4f}"


def outcome(diff: float, p_adj: float, alpha: float) -> str:
    """better / worse when the adjusted p is below ``alpha`` (by the sign of the difference), else no difference."""
    if p_adj is None or np.isnan(p_adj) or p_adj >= alpha:
        return NO_DIFF
    return BETTER if diff > 0 else WORSE


def findings_table(
    confirmatory: pd.DataFrame, t2: pd.DataFrame, best: Mapping[str, str | None], cfg: Mapping[str, Any]
) -> pd.DataFrame:
    """One row per (dataset, Lethe iteration, comparison): against the best baseline (confirmatory where declared,
    else Table 2's exploratory row) and against the iteration before (the confirmatory steps), on the primary metric,
    then the confirmatory answer-metric rows."""
    spec = cfg["confirmatory"]
    metric, alpha = spec["metrics"][0], float(spec["alpha"])
    frames = [f for f in (confirmatory, t2) if not f.empty]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    rows_by_key: dict[tuple, Mapping[str, Any]] = {}
    for f in frames:  # the confirmatory row wins over Table 2's copy of the same comparison
        for r in f.to_dict("records"):
            rows_by_key.setdefault((r["dataset"], r["method"], r["baseline"], r["metric"]), r)
    steps = {m: ref for m, ref in spec["steps"]}
    matched = {  # the supervision-matched best baseline, where it differs from the best of all (Table 2's `versus`)
        (r["dataset"], r["method"]): r["baseline"]
        for r in (t2.to_dict("records") if "versus" in t2 else [])
        if r["versus"] == MATCHED
    }
    out = []
    datasets = dataset_order(sorted({k[0] for k in rows_by_key}), cfg)
    for ds in datasets:
        wanted = []
        for m in cfg["lethe"]:
            wanted.append((m, best.get(ds), metric, "vs best baseline"))
            if (ds, m) in matched:
                wanted.append((m, matched[(ds, m)], metric, "vs best with as much supervision"))
            if m in steps:
                wanted.append((m, steps[m], metric, "step"))
        wanted += [(m, ref, am, "step") for am in spec.get("answer_metrics", []) for m, ref in steps.items()]
        for m, ref, met, role in wanted:
            r = rows_by_key.get((ds, m, ref, met))
            if r is None:
                continue
            p = float(r.get("p_adj", np.nan))
            out.append(
                {
                    "dataset": ds,
                    "method": m,
                    "compared with": ref,
                    "role": role,
                    "metric": met,
                    "family": r.get("family", ""),
                    "n": int(r["n"]),
                    "difference": float(r["mean_diff"]),
                    "ci_low": float(r["ci_low"]),
                    "ci_high": float(r["ci_high"]),
                    "p_adj": p,
                    "correction": r.get("correction", ""),
                    "finding": outcome(float(r["mean_diff"]), p, alpha),
                }
            )
    return pd.DataFrame(out)


def printable(table: pd.DataFrame) -> pd.DataFrame:
    """``findings_table`` as printed: the difference with its CI and the adjusted p as text."""
    if table.empty:
        return pd.DataFrame(columns=COLUMNS)
    return pd.DataFrame(
        {
            "dataset": table["dataset"],
            "method": table["method"],
            "compared with": table["compared with"] + " (" + table["role"] + ")",
            "metric": table["metric"].map(display_metric),
            "family": table["family"] + " (" + table["correction"] + ")",
            "n": table["n"],
            "difference": table["difference"].map(_signed),
            "95% CI": [
                f"[{_signed(lo)}, {_signed(hi)}]" for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
            ],
            "p_adj": table["p_adj"].map(fmt_p),
            "finding": table["finding"],
        }
    )


def _phrase(r: Mapping[str, Any]) -> str:
    what = {BETTER: "better than", WORSE: "worse than", NO_DIFF: "not significantly different from"}[r["finding"]]
    fam = "Holm" if r["correction"] == "holm" else "BH, exploratory"
    return (
        f"{what} {r['compared with']} ({_signed(r['difference'])} [{_signed(r['ci_low'])}, {_signed(r['ci_high'])}], "
        f"n = {r['n']}, {fam} p {fmt_p(r['p_adj'])})"
    )


def dataset_sentence(ds: str, rows: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """One plain sentence on ``ds``: the confirmatory iterations against the best baseline, then the steps."""
    metric = display_metric(cfg["confirmatory"]["metrics"][0])
    parts = []
    for m in cfg["confirmatory"]["versus_best_baseline"]:
        r = rows[
            (rows["method"] == m)
            & (rows["role"] == "vs best baseline")
            & (rows["metric"] == cfg["confirmatory"]["metrics"][0])
        ]
        parts.append(f"{m} is {_phrase(r.iloc[0])}" if len(r) else f"{m} was not run here")
    steps = rows[(rows["role"] == "step") & (rows["family"] == CONFIRMATORY)]
    sig = [
        f"{r['method']} vs {r['compared with']} on {display_metric(r['metric'])} {_signed(r['difference'])} ({r['finding']})"
        for _, r in steps.iterrows()
        if r["finding"] != NO_DIFF
    ]
    if len(steps) and not sig:
        parts.append(f"no step between iterations is significant after Holm ({len(steps)} tested)")
    elif sig:
        parts.append(f"significant steps after Holm: {'; '.join(sig)} (of {len(steps)} tested)")
    return f"**{dataset_label(ds, cfg)}** ({metric}): " + "; ".join(parts) + "."


def headline(table: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """Where Lethe does not beat the best baseline, first; then where it does (confirmatory rows only)."""
    metric = cfg["confirmatory"]["metrics"][0]
    out = []
    for m in cfg["confirmatory"]["versus_best_baseline"]:
        rows = table[
            (table["method"] == m)
            & (table["role"] == "vs best baseline")
            & (table["metric"] == metric)
            & (table["family"] == CONFIRMATORY)
        ]
        if rows.empty:
            continue
        by = {f: list(rows.loc[rows["finding"] == f, "dataset"]) for f in (WORSE, NO_DIFF, BETTER)}
        n = len(rows)
        lost = len(by[WORSE]) + len(by[NO_DIFF])
        s = (
            f"{m} does not beat the best baseline on {lost} of {n} datasets"
            if lost
            else f"{m} beats the best baseline on all {n} datasets"
        )
        bits = []
        if by[WORSE]:
            bits.append(f"it is significantly worse on {', '.join(by[WORSE])}")
        if by[NO_DIFF]:
            bits.append(f"not significantly different on {', '.join(by[NO_DIFF])}")
        if by[BETTER] and lost:
            bits.append(f"significantly better on {', '.join(by[BETTER])}")
        out.append(s + (": " + "; ".join(bits) if bits else "") + ".")
    missing = [
        m
        for m in cfg["confirmatory"]["versus_best_baseline"]
        if not ((table["method"] == m) & (table["family"] == CONFIRMATORY)).any()
    ]
    if missing:
        out.append(f"Not run on any dataset of this report: {', '.join(missing)}.")
    return " ".join(out)


def section(table: pd.DataFrame, cfg: Mapping[str, Any], notes: Mapping[str, str] | None = None) -> str:
    """The report's Findings section (Markdown): the headline, one sentence per dataset (plus ``notes`` per dataset:
    what a stage did there), then the table."""
    if table.empty:
        return "No Lethe iteration and best baseline have finished runs on a common dataset yet: nothing to report.\n"
    alpha = float(cfg["confirmatory"]["alpha"])
    lines = [
        headline(table, cfg),
        "",
        *[
            f"- {dataset_sentence(ds, table[table['dataset'] == ds], cfg)}"
            + (f" {notes[ds]}" if notes and ds in notes else "")
            for ds in dataset_order(sorted(set(table["dataset"])), cfg)
        ],
        "",
        f"A difference is `better`/`worse` when its adjusted p is below {alpha:g}: Holm over the declared confirmatory "
        "family, or Benjamini-Hochberg over Table 2's exploratory rows (marked so; a screen, not a confirmation). "
        "The best baseline is the best of all baselines per dataset (Table 2's footnote); where it saw less label "
        "supervision than an iteration (the `supervision` column of Tables 1 and 2), a `vs best with as much "
        "supervision` row follows (exploratory: that baseline is never the stronger one, so it cannot be the "
        "reference of a claim). Differences are paired per query "
        "(method - reference) with 95% BCa CIs.",
        "",
    ]
    return "\n".join(lines)


def readme_summary(table: pd.DataFrame, cfg: Mapping[str, Any], report: str = "results/report.md") -> str:
    """The README's short findings block (between :data:`README_START` and :data:`README_END`)."""
    if table.empty:
        return f"{README_START}\nNo findings yet: see [{report}]({report}).\n{README_END}"
    body = [
        headline(table, cfg),
        "",
        *[
            f"- {dataset_sentence(ds, table[table['dataset'] == ds], cfg)}"
            for ds in dataset_order(sorted(set(table["dataset"])), cfg)
        ],
        "",
        f"Generated by `make report` from the committed store; the tables, tests and caveats are in [{report}]({report}#findings).",
    ]
    return "\n".join([README_START, *body, README_END])


def with_readme_summary(readme: str, summary: str) -> str:
    """``readme`` with its findings block replaced by ``summary`` (ValueError when the markers are missing)."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"README has no {README_START} ... {README_END} block to write the findings into")
    return readme[:start] + summary + readme[end + len(README_END) :]


def write_readme_findings(readme: Path, findings_json: Path, cfg: Mapping[str, Any]) -> None:
    """Rewrite ``readme``'s findings block from the committed report's ``findings.json`` (the rows of
    :func:`findings_table`); written only by the committed report (``make report``), never by a test's report."""
    table = pd.read_json(findings_json, orient="records") if findings_json.is_file() else pd.DataFrame()
    text = readme.read_text()
    new = with_readme_summary(text, readme_summary(table, cfg))
    if new != text:
        atomic_write_text(readme, new)
