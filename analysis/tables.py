"""Tables 1-4 of the paper, regenerated from results folders only (CSV, Markdown, LaTeX).

A cell whose metric was not measured for a run says "n/m" (footnoted); nothing is filled by a
formula. Numbers are formatted deterministically so two runs of the analysis give identical bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from analysis import stats
from analysis.labels import contradiction_at_k, coverage_at_n, read_contradictions
from analysis.results import RunInfo, RunRef, load_declared

NM = "n/m"
NOT_DECLARED = "-"
FOOTNOTE_NM = "n/m = not measured for this run (no labels for it in this dataset, or the stage does not exist yet)."
FOOTNOTE_MISSING = ("n/m† = declared in the reproduction contract but not run here (`make reproduce TIER=<tier>`, the tier "
                    "is named in the setup table); - = not declared for this dataset.")


@dataclass
class DatasetView:
    """Everything the tables need about one dataset: its queries and each method's per-query scores."""

    name: str
    queries: pd.DataFrame
    runs: dict[str, RunInfo]
    per_query: dict[str, pd.DataFrame] = field(default_factory=dict)  # method -> indexed by query_id
    label_metrics: list[str] = field(default_factory=list)
    missing: dict[str, RunRef] = field(default_factory=dict)  # declared labels without a finished run


def method_order(methods: list[str], cfg: Mapping[str, Any]) -> list[str]:
    known = list(cfg["baselines"]) + list(cfg["lethe"])
    return [m for m in known if m in methods] + sorted(m for m in methods if m not in known)


def main_family(cfg: Mapping[str, Any]) -> list[str]:
    """The paper's methods in their fixed order: the baselines, then the Lethe iterations."""
    return list(cfg["baselines"]) + list(cfg["lethe"])


def collect(cfg: Mapping[str, Any], refs: list[RunRef]) -> dict[str, DatasetView]:
    """The declared runs per dataset, with Coverage@N / contradiction@k added where labelled.

    Only ``refs`` are read; a declared run without a finished folder is kept in ``missing``. A
    dataset with no finished run has no view (its missing runs are listed by the report)."""
    found, missing = load_declared(refs)
    views: dict[str, DatasetView] = {}
    for (ds, method), run in sorted(found.items()):
        if ds not in views:
            folder = run.dataset_folder
            q = pd.read_parquet(folder / "queries.parquet")
            views[ds] = DatasetView(ds, q, {})
            views[ds]._corpus = pd.read_parquet(folder / "corpus.parquet", columns=["doc_id", "text"])  # type: ignore[attr-defined]
            views[ds]._contra = read_contradictions(folder)  # type: ignore[attr-defined]
        v = views[ds]
        v.runs[method] = run
        pq = run.per_query.set_index("query_id")
        n, k = int(cfg["coverage_n"]), int(cfg["contradiction_k"])
        evaluated = v.queries[v.queries["query_id"].isin(pq.index)]
        cov = coverage_at_n(run.run, evaluated, v._corpus, n)  # type: ignore[attr-defined]
        if len(cov):
            pq[f"coverage@{n}"] = cov.reindex(pq.index)
        con = contradiction_at_k(run.run, v._contra, list(pq.index), k)  # type: ignore[attr-defined]
        if len(con):
            pq[f"contradiction@{k}"] = con.reindex(pq.index)
        v.per_query[method] = pq
    for ref in missing:
        if ref.dataset in views:
            views[ref.dataset].missing[ref.label] = ref
    for v in views.values():
        v.label_metrics = sorted({c for pq in v.per_query.values() for c in pq.columns if c.startswith(("coverage@", "contradiction@"))})
    return views


_CI_CACHE: dict[tuple, dict[str, Any]] = {}


def cached_mean_ci(x: np.ndarray, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """stats.mean_ci with the configured resamples/confidence/seed, memoized on the values
    (tables and figures ask for the same CIs)."""
    x = np.ascontiguousarray(x, dtype=float)
    key = (x.tobytes(), int(cfg["bootstrap_resamples"]), float(cfg["confidence"]), int(cfg["seed"]))
    if key not in _CI_CACHE:
        _CI_CACHE[key] = stats.mean_ci(x, resamples=key[1], confidence=key[2], seed=key[3])
    return _CI_CACHE[key]


def _f(x: float | None, nd: int = 4) -> str:
    return NM if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"


def _p(p: float | None) -> str:
    if p is None or np.isnan(p):
        return NM
    return "<1e-4" if p < 1e-4 else f"{p:.4f}"


def table1(v: DatasetView, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Performance summary: nDCG@10 with BCa CI, Recall@50, Coverage@N, P95 latency, contradiction, hallucination."""
    n, k = int(cfg["coverage_n"]), int(cfg["contradiction_k"])
    rows = []
    for m in method_order(list(v.per_query), cfg):
        pq = v.per_query[m]
        ci = cached_mean_ci(pq["ndcg@10"].to_numpy(float), cfg)
        lat = v.runs[m].metrics.get("latency_ms") or {}
        cov = pq[f"coverage@{n}"].dropna() if f"coverage@{n}" in pq else pd.Series(dtype=float)
        con = pq[f"contradiction@{k}"].dropna() if f"contradiction@{k}" in pq else pd.Series(dtype=float)
        rows.append({
            "method": m, "n": int(len(pq)),
            "nDCG@10": _f(ci["mean"]), "nDCG@10 95% CI": f"[{_f(ci['ci_low'])}, {_f(ci['ci_high'])}]",
            "Recall@50": _f(float(pq["recall@50"].mean())) if "recall@50" in pq else NM,
            f"Coverage@{n}": _f(float(cov.mean())) if len(cov) else NM,
            "P95 latency (ms, this machine)": _f(lat.get("p95"), 2) if lat.get("p95") is not None else NM,
            f"Contradiction@{k}": _f(float(con.mean())) if len(con) else NM,
            "Hallucination": hallucination_cell(pq),
        })
    return pd.DataFrame(rows)


def hallucination_cell(pq: pd.DataFrame) -> str:
    from analysis.iteration4 import hallucination_cell as cell  # iteration 4's own module owns the rule

    return cell(pq)


def best_baseline(v: DatasetView, cfg: Mapping[str, Any]) -> str | None:
    metric = cfg["best_baseline_metric"]
    cands = {m: float(pq[metric].mean()) for m, pq in v.per_query.items() if m in cfg["baselines"]}
    return max(sorted(cands), key=lambda m: cands[m]) if cands else None


def table2(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Paired tests of every method against the best baseline of its dataset, family-corrected."""
    rows = []
    metrics = list(cfg["family_metrics"])
    declared = set(cfg["baselines"]) | set(cfg["lethe"])
    for ds, v in sorted(views.items()):
        base = best_baseline(v, cfg)
        if base is None:
            continue
        for m in method_order(list(v.per_query), cfg):
            if m == base or m not in declared:  # variants and side studies have their own family
                continue
            rows += [r for metric in metrics if (r := _paired_row(v, ds, m, base, metric, cfg))]
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return stats.correct_family(df, p_col="p_wilcoxon")


def _paired_row(v: DatasetView, ds: str, m: str, base: str, metric: str, cfg: Mapping[str, Any]) -> dict | None:
    """One paired comparison of method ``m`` against ``base`` on ``metric`` (None if not measurable)."""
    if metric not in v.per_query[m] or metric not in v.per_query[base]:
        return None
    # label metrics exist only for labelled queries (NaN elsewhere); the labelled set must
    # then be identical for both systems, which align() enforces
    frames = {"a": v.per_query[m][[metric]].dropna(), "b": v.per_query[base][[metric]].dropna()}
    if frames["a"].empty:
        return None
    subset_note = ""
    ia, ib = set(frames["a"].index), set(frames["b"].index)
    if ia != ib:  # runs on (different) samples: compare on the queries both scored (per-query scores do not depend on others)
        common = sorted(ia & ib)
        if not common:
            return None
        if ia < ib:
            subset_note = f"paired on the method's {len(ia)}-query subset; "
        elif ib < ia:
            subset_note = f"paired on the reference's {len(ib)}-query subset; "
        else:
            subset_note = f"paired on the {len(common)} queries both runs scored; "
        frames = {k: f.loc[common] for k, f in frames.items()}
    pair = stats.align(frames, metric)
    t = stats.paired_test(pair["a"].to_numpy(float), pair["b"].to_numpy(float),
                          resamples=int(cfg["permutation_resamples"]), seed=int(cfg["seed"]),
                          confidence=float(cfg["confidence"]))
    return {"dataset": ds, "metric": metric, "baseline": base, "method": m, "n": t["n"],
            "baseline_mean": float(pair["b"].mean()), "method_mean": float(pair["a"].mean()),
            "mean_diff": t["mean_diff"], "ci_low": t["ci_low"], "ci_high": t["ci_high"],
            "p_wilcoxon": t["p_wilcoxon"], "n_nonzero": t["n_nonzero"],
            "p_randomization": t["p_randomization"], "d_z": t["d_z"],
            "wins": t["wins"], "ties": t["ties"], "losses": t["losses"],
            "ci_method": t["ci_method"], "wilcoxon_method": t["wilcoxon_method"],
            "notes": subset_note + (t["notes"] or "")}


def ablation_pairs(methods: list[str], cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(method, reference) pairs: each Lethe iteration against the previous one, and each variant
    ``name+x`` against ``name``."""
    lethe = [m for m in cfg["lethe"] if m in methods]
    pairs = list(zip(lethe[1:], lethe[:-1]))
    pairs += [(m, m.split("+", 1)[0]) for m in sorted(methods) if "+" in m and m.split("+", 1)[0] in methods]
    pairs += [(m, ref) for m, ref in (cfg.get("reference_pairs") or {}).items() if m in methods and ref in methods]
    return pairs


def table_ablations(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Paired tests of each step and ablation against its reference; a family of its own, corrected."""
    rows = []
    for ds, v in sorted(views.items()):
        for m, ref in ablation_pairs(list(v.per_query), cfg):
            rows += [r for metric in cfg["family_metrics"] if (r := _paired_row(v, ds, m, ref, metric, cfg))]
    df = pd.DataFrame(rows)
    return df if df.empty else stats.correct_family(df.rename(columns={"baseline": "reference",
                                                                        "baseline_mean": "reference_mean"}),
                                                    p_col="p_wilcoxon")


def table3(v: DatasetView, cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Mean per-stage latency (ms) grouped into the paper's columns, plus total P50/P95."""
    groups: dict[str, list[str]] = {g: list(s) for g, s in cfg["stage_groups"].items()}
    rows = []
    for m in method_order(list(v.per_query), cfg):
        pq = v.per_query[m]
        stages = pd.DataFrame([json.loads(t) if isinstance(t, str) else {} for t in pq["timings_ms"]])
        row: dict[str, Any] = {"method": m}
        other = [c for c in stages.columns if not any(c in s for s in groups.values())]
        for g, names in groups.items():
            cols = [c for c in names if c in stages.columns]
            row[f"{g} (ms)"] = _f(float(stages[cols].fillna(0).sum(axis=1).mean()), 2) if cols else NM
        row["other (ms)"] = _f(float(stages[other].fillna(0).sum(axis=1).mean()), 2) if other else NM
        lat = pq["latency_ms"].dropna()
        row["total mean (ms)"] = _f(float(lat.mean()), 2) if len(lat) else NM
        row["total P50 (ms)"] = _f(float(lat.quantile(0.5)), 2) if len(lat) else NM
        row["total P95 (ms)"] = _f(float(lat.quantile(0.95)), 2) if len(lat) else NM
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
            row[m] = _f(float(pq.loc[ids, metric].mean())) if len(ids) else NM
        rows.append(row)
    return pd.DataFrame(rows)


def overview(views: Mapping[str, DatasetView], cfg: Mapping[str, Any], refs: list[RunRef],
             metric: str = "ndcg@10") -> pd.DataFrame:
    """``metric`` per declared method (rows) and dataset (columns): n/m† when declared but not run,
    - when not declared for that dataset."""
    declared = {(r.dataset, r.label) for r in refs}
    methods = method_order(sorted({r.label for r in refs}), cfg)
    datasets = sorted({r.dataset for r in refs})
    rows = []
    for m in methods:
        row: dict[str, Any] = {"method": m}
        for ds in datasets:
            v = views.get(ds)
            if v is not None and m in v.per_query:
                row[ds] = _f(float(v.per_query[m][metric].mean()))
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


def _fmt_cell(x: Any) -> str:
    if isinstance(x, float):
        return _p(x) if False else ("nan" if np.isnan(x) else f"{x:.4g}")
    return str(x)


def to_markdown(df: pd.DataFrame, footnote: str | None = None) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt_cell(x) for x in row) + " |" for row in df.itertuples(index=False)]
    if footnote:
        lines += ["", footnote]
    return "\n".join(lines) + "\n"


def to_latex(df: pd.DataFrame, caption: str) -> str:
    def esc(s: str) -> str:
        return s.replace("\\", "\\textbackslash{}").replace("_", "\\_").replace("%", "\\%").replace("&", "\\&").replace("#", "\\#")

    cols = list(df.columns)
    out = ["\\begin{table}[t]", "\\centering", "\\small", f"\\caption{{{esc(caption)}}}",
           "\\begin{tabular}{" + "l" * len(cols) + "}", "\\toprule",
           " & ".join(esc(str(c)) for c in cols) + " \\\\", "\\midrule"]
    out += [" & ".join(esc(_fmt_cell(x)) for x in row) + " \\\\" for row in df.itertuples(index=False)]
    out += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(out) + "\n"


def write_table(df: pd.DataFrame, out_dir: Path, name: str, caption: str, footnote: str | None = FOOTNOTE_NM) -> dict[str, Path]:
    """Write ``name``.csv / .md / .tex; floats formatted with 6 significant digits in CSV."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out_dir / f"{name}.csv", "md": out_dir / f"{name}.md", "tex": out_dir / f"{name}.tex"}
    df.to_csv(paths["csv"], index=False, float_format="%.6g", lineterminator="\n")
    paths["md"].write_text(f"**{caption}**\n\n" + to_markdown(df, footnote))
    paths["tex"].write_text(to_latex(df, caption))
    return paths
