"""How the report writes numbers and tables: n/m cells, fixed decimals, Markdown, LaTeX and CSV.

Formatting is deterministic, so two runs of the analysis give identical bytes. Written tables name
retrieval metrics in ir_measures form (``nDCG@10``, ``R@50``, ``RR@10``, ``P@10``; :func:`printed`);
the DataFrames the analysis computes with keep the canonical ranx keys (``ndcg@10``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.metric_names import display_metric, display_text
from lethe.core.atomic import atomic_write_text

NM = "n/m"
NOT_DECLARED = "-"
FOOTNOTE_NM = "n/m = not measured for this run (no labels for it in this dataset, or the stage does not exist yet)."
FOOTNOTE_MISSING = (
    "n/m† = declared in the reproduction contract but not run here (`make reproduce TIER=<tier>`, the tier "
    "is named in the setup table); - = not declared for this dataset."
)


def fmt(x: float | None, nd: int = 4) -> str:
    """``x`` with ``nd`` decimals, or n/m when it was not measured (None or NaN)."""
    return NM if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"


def fmt_p(p: float | None) -> str:
    """A p-value with 4 decimals, in scientific notation with 2 significant digits below 0.001 (the confirmatory
    family's sign-flip tests resolve down to 5e-6), n/m when missing."""
    if p is None or np.isnan(p):
        return NM
    return f"{p:.1e}" if p < 1e-3 else f"{p:.4f}"


def with_p_strings(show: pd.DataFrame) -> pd.DataFrame:
    """``show`` rounded to 4 decimals for a markdown table, its ``p_*`` columns as ``fmt_p`` strings."""
    out = show.round(4).astype(object)
    for c in [c for c in show.columns if c.startswith("p_")]:
        out[c] = show[c].map(fmt_p)
    return out


def _fmt_cell(x: Any) -> str:
    if isinstance(x, float):
        return "nan" if np.isnan(x) else f"{x:.4g}"
    return str(x)


def printed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as written: every ranx metric name in a column header and every value of a ``metric`` column
    in ir_measures form (header ``reranker ndcg@10`` -> ``reranker nDCG@10``, value ``recall@50`` ->
    ``R@50``); other text unchanged."""
    out = df.rename(columns=lambda c: display_text(c) if isinstance(c, str) else c)
    if "metric" in out.columns:
        out["metric"] = out["metric"].map(display_metric)
    return out


def markdown_table(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> list[str]:
    """The lines of a Markdown table: ``header``, its rule, one line per row; cells as ``str`` (format them first).
    The one table writer of every report and study page."""
    out = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(map(str, row)) + " |" for row in rows]


def to_markdown(df: pd.DataFrame, footnote: str | None = None) -> str:
    df = printed(df)
    lines = markdown_table(list(df.columns), ([_fmt_cell(x) for x in row] for row in df.itertuples(index=False)))
    if footnote:
        lines += ["", footnote]
    return "\n".join(lines) + "\n"


def to_latex(df: pd.DataFrame, caption: str) -> str:
    def esc(s: str) -> str:
        return (
            s.replace("\\", "\\textbackslash{}")
            .replace("_", "\\_")
            .replace("%", "\\%")
            .replace("&", "\\&")
            .replace("#", "\\#")
        )

    df = printed(df)
    cols = list(df.columns)
    out = [
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
        f"\\caption{{{esc(caption)}}}",
        "\\begin{tabular}{" + "l" * len(cols) + "}",
        "\\toprule",
        " & ".join(esc(str(c)) for c in cols) + " \\\\",
        "\\midrule",
    ]
    out += [" & ".join(esc(_fmt_cell(x)) for x in row) + " \\\\" for row in df.itertuples(index=False)]
    out += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(out) + "\n"


def write_table(
    df: pd.DataFrame, out_dir: Path, name: str, caption: str, footnote: str | None = FOOTNOTE_NM
) -> dict[str, Path]:
    """Write ``name``.csv / .md / .tex; floats formatted with 6 significant digits in CSV."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out_dir / f"{name}.csv", "md": out_dir / f"{name}.md", "tex": out_dir / f"{name}.tex"}
    # each file replaced whole (lethe.core.atomic): a crash never leaves a truncated table
    atomic_write_text(paths["csv"], printed(df).to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    atomic_write_text(paths["md"], f"**{caption}**\n\n" + to_markdown(df, footnote))
    atomic_write_text(paths["tex"], to_latex(df, caption))
    return paths


def llm_failure_cell(metrics: Mapping[str, Any]) -> str:
    """Shares of the run's LLM-using queries whose LLM call got no answer / whose unparseable answer a
    fallback replaced ("degraded" past run.max_parse_fallback_share); "-" for a run without LLM calls,
    n/m for a run made before these were counted."""
    llm = metrics.get("llm")
    if llm is None:
        return NM
    if not llm.get("queries"):
        return "-"
    cell = f"{100 * llm['infra_failure_share']:.1f}% / {100 * llm['parse_fallback_share']:.1f}%"
    return cell + " (degraded)" if llm.get("degraded") else cell


def flatten(obj: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted (key, value) pairs of nested mappings, in key order; lists stay whole."""
    out: list[tuple[str, Any]] = []
    for k in sorted(obj, key=str):
        v = obj[k]
        name = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += flatten(v, name + ".")
        else:
            out.append((name, v))
    return out
