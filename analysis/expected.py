"""Expected scores: measured from finished results folders, written to a file, and verified.

The file (``results/expected/<tier>.yaml``) holds, per declared run key ``<dataset>/<method label>``:
its config hash, its tolerance class, tolerance and why, the expected metrics (nDCG@10, R@50,
MRR@10, the number of evaluated queries and, where answers were generated, the answer metrics) and
the run's recorded wall time (used for ETAs, never verified). Verification compares a run's
measured values with the file: OK (identical), OKish (within the run's tolerance), FAIL, or
MISSING (no finished results folder), or DAMAGED (a finished folder missing or with an unreadable file). Latency and other machine-dependent figures are never compared.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from lethe.core.atomic import atomic_write_text
from lethe.text.collapse import collapse
from lethebench.runs import RUN_PARQUET, RUN_TREC, RunFolder
from lethebench.studies import StudyFolder

COUNT_KEYS = ("evaluated",)  # integers: always compared exactly
ANSWER_PREFIX = "answer_"  # answer metrics are stored as answer_<name>
STATUSES = ("OK", "OKish", "FAIL", "MISSING", "DAMAGED")


@dataclass(frozen=True)
class Tolerance:
    """An absolute tolerance on every verified metric of a run, with its class and reason."""

    klass: str
    value: float
    why: str


def tolerance_for(label: str, rules: Mapping[str, Any], answers: bool = False) -> Tolerance:
    """The tolerance of a run filed as ``label`` under ``rules`` (``conf/reference/tolerances.yaml``):
    the full label's class, else its method's (the part before ``+``), else exact (0).
    ``answers`` picks the class of the run's answer metrics instead."""
    classes = rules.get("classes") or {}
    methods = rules.get("methods") or {}
    name = rules.get("answer_metrics") if answers else methods.get(label, methods.get(label.split("+", 1)[0]))
    if not name:
        return Tolerance("exact", 0.0, "deterministic: the same code, data and settings give identical numbers")
    if name not in classes:
        raise ValueError(f"tolerance class {name!r} (for {label}) is not defined under classes:")
    c = classes[name]
    return Tolerance(str(name), float(c["tolerance"]), collapse(str(c["why"])))


def measure(folder: Path, metrics: Sequence[str], answer_metrics: Sequence[str]) -> dict[str, Any]:
    """The verified values of one finished run: the evaluated count and the retrieval metrics' means computed from
    its ``run.trec`` and ``qrels.trec`` (:func:`analysis.metrics.rescore`), never read from the ``metrics.json`` it
    wrote (so an edited run file FAILs and an edited summary cannot pass); the answer metrics' means, which no run
    file holds, from ``metrics.json``."""
    run = RunFolder(folder)
    out = retrieval_values(run, metrics)
    answers = run.metrics.get("answers") or {}
    for k in answer_metrics:
        if answers.get(k) is not None:
            out[ANSWER_PREFIX + k] = float(answers[k])
    return out


def retrieval_values(run: RunFolder, metrics: Sequence[str]) -> dict[str, Any]:
    """The evaluated count and the means of ``metrics`` computed from ``run``'s run.trec and qrels.trec; for a run of
    the reference store (no run files: experiments.reference_store), from its stored per-query values."""
    from analysis.metrics import rescore  # ranx compiles its kernels on first use: only when verifying

    if not (run.path / RUN_TREC).is_file() and not (run.path / RUN_PARQUET).is_file():
        pq = run.per_query.sort_values("query_id")  # rescore's order (sorted query ids): the same sum, bit for bit
        return {"evaluated": int(len(pq)), **{k: float(pq[k].mean()) if len(pq) else 0.0 for k in metrics}}
    scores = rescore(run, metrics)
    return {"evaluated": int(len(scores)), **{k: float(scores[k].mean()) if len(scores) else 0.0 for k in metrics}}


def provenance(folder: Path) -> dict[str, Any]:
    """Config hash, git commit, dirty flag, wall seconds and whether they were measured alone
    (``timing_valid``; None in manifests older than the field) of a finished run (from its manifest)."""
    man = RunFolder(folder).manifest
    git = man.get("git") or {}
    return {
        "config_hash": man.get("config_hash"),
        "commit": git.get("commit"),
        "dirty": git.get("dirty"),
        "seconds": man.get("wall_seconds"),
        "timing_valid": man.get("timing_valid"),
    }


HEADER = """\
# Expected scores of tier `{tier}`: one entry per declared run (conf/reference/{tier}.yaml).
# Written from finished results folders by
#   python -m experiments.reproduce tier={tier} action=write_expected
# Never edit by hand: if a change moves a number, find out why, then regenerate this file in the same
# commit and say in the commit message what moved and why. A run's `tolerance` (from its class, whose
# reason is given under tolerance_classes) is absolute, on every metric; the counts are always exact.
# `seconds` is the run's wall time on the reference machine (for ETAs, never verified), as are the
# prerequisites' prepare_seconds (datasets, models).
"""


def write_expected(
    path: Path,
    tier: str,
    entries: Mapping[str, Mapping[str, Any]],
    classes: Mapping[str, Tolerance],
    prepare_seconds: Mapping[str, float] | None = None,
) -> Path:
    """Write the expected-scores file of ``tier`` (entries: run key -> record; classes: the tolerance
    classes the entries name, written once with their reason)."""
    used = {e.get(k) for e in entries.values() for k in ("class", "answer_class")} - {None}
    doc: dict[str, Any] = {
        "tier": tier,
        "tolerance_classes": {c: {"tolerance": classes[c].value, "why": classes[c].why} for c in sorted(used)},
        "runs": {k: dict(v) for k, v in entries.items()},
    }
    if prepare_seconds:
        doc["prepare_seconds"] = {k: round(float(v), 1) for k, v in sorted(prepare_seconds.items())}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        path, HEADER.format(tier=tier) + yaml.safe_dump(doc, sort_keys=False, width=110, allow_unicode=True)
    )
    return path


def expected_record(
    folder: Path,
    tol: Tolerance,
    answer_tol: Tolerance,
    metrics: Sequence[str],
    answer_metrics: Sequence[str],
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One run's entry of the expected-scores file. ``seconds`` is the run's wall time, unless the run was
    not timed alone (``timing_valid`` false) and ``previous`` (the entry it replaces) has a time: that one is kept."""
    vals = measure(folder, metrics, answer_metrics)
    prov = provenance(folder)
    rec: dict[str, Any] = {
        "config_hash": prov["config_hash"],
        "class": tol.klass,
        "tolerance": tol.value,
        "metrics": vals,
    }
    if any(k.startswith(ANSWER_PREFIX) for k in vals):
        rec.update({"answer_class": answer_tol.klass, "answer_tolerance": answer_tol.value})
    kept = (previous or {}).get("seconds")
    rec["seconds"] = kept if prov["timing_valid"] is False and kept is not None else prov["seconds"]
    return rec


def read_expected(path: Path) -> dict[str, Any]:
    """The expected-scores file (an empty one when the file does not exist yet)."""
    if not path.is_file():
        return {"runs": {}}
    doc = yaml.safe_load(path.read_text()) or {}
    doc.setdefault("runs", {})
    return doc


def _status(exp: float | int, got: float | int, tol: float) -> str:
    if exp == got:
        return "OK"
    floats = isinstance(exp, float) or isinstance(got, float)
    if floats and math.isfinite(float(exp)) and math.isfinite(float(got)) and abs(float(got) - float(exp)) <= tol:
        return "OKish"
    return "FAIL"


def measure_study(folder: Path, row_key: Sequence[str], metrics: Sequence[str]) -> dict[str, Any]:
    """The verified values of a finished study: ``<row key values>:<metric>`` for each row of its JSON
    output (the folder's one ``*.json`` besides ``manifest.json``) and each named metric the row has."""
    study = StudyFolder(folder)
    files = study.documents
    if len(files) != 1:
        raise ValueError(f"{folder}: a study folder holds exactly one JSON output, found {[f.name for f in files]}")
    out: dict[str, Any] = {}
    for row in (study.document or {}).get("rows", []):
        name = " | ".join(str(row.get(k)) for k in row_key)
        for m in metrics:
            if row.get(m) is not None:
                out[f"{name}: {m}"] = (
                    row[m] if isinstance(row[m], int) and not isinstance(row[m], bool) else float(row[m])
                )
    return out


def verify(
    runs: Sequence[tuple[str, Path | None]],
    expected: Mapping[str, Any],
    metrics: Sequence[str],
    answer_metrics: Sequence[str],
    stored: Mapping[str, Path] | None = None,
) -> pd.DataFrame:
    """One row per (run, metric): expected, measured, difference, tolerance, status and a note.

    ``runs`` lists (key, finished folder or None). A run without an entry in ``expected`` is
    MISSING on the expected side (its note says to write the file); a metric the file expects but
    the run lacks is FAIL. ``stored`` (key -> the run's folder in the reference store) adds one row per metric
    comparing every query (:func:`per_query_rows`): a per-query difference FAILs even where the means agree.
    """
    items = []
    runs = [(key, f, RunFolder(f).damage if f is not None else None) for key, f in runs]
    for key, f, damage in runs:
        if damage:  # listed, not read: its files cannot be trusted
            items.append((key, None, {"damaged": damage}))
            continue
        got = measure(f, metrics, answer_metrics) if f is not None else None
        prov = {**provenance(f), "stored_differs": stored_differs(f, got)} if f is not None else None
        items.append((key, got, prov))
    df = compare(items, expected, ["evaluated", *metrics])
    extra = [
        row
        for key, f, damage in runs
        if f is not None and not damage and key in (stored or {})
        for row in per_query_rows(
            key, f, stored[key], metrics, float((expected["runs"].get(key) or {}).get("tolerance", 0.0))
        )
    ]
    if not extra:
        return df
    order = {key: i for i, (key, _, _) in enumerate(runs)}
    out = pd.concat([df, pd.DataFrame(extra, columns=df.columns)], ignore_index=True)
    return out.sort_values("run", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


PER_QUERY_PREFIX = "per-query "  # rows comparing a run's per-query values with the store's: counts of queries


def per_query_rows(key: str, folder: Path, stored: Path, metrics: Sequence[str], tol: float) -> list[dict[str, Any]]:
    """For each metric, a row comparing the run's per-query values (computed from its run files) with the reference
    store's: expected = the stored query count, measured = how many queries agree within ``tol``, diff = the
    largest absolute difference; OK when every query is identical, OKish when every one is within ``tol``."""
    from analysis.metrics import rescore

    mine = rescore(RunFolder(folder), metrics)
    ref = RunFolder(stored).per_query.set_index("query_id")
    rows = []
    for m in metrics:
        if m not in ref.columns:
            continue
        a, b = mine[m].reindex(ref.index), ref[m]
        diff = (a - b).abs()
        same_queries = set(mine.index) == set(ref.index)
        agree = int(((diff <= tol) & a.notna()).sum())
        if not same_queries:
            status, note = "FAIL", f"other queries than the store's ({len(mine)} against {len(ref)})"
        elif bool((a == b).all()):
            status, note = "OK", ""
        else:
            worst = diff.idxmax()
            status = "OKish" if agree == len(ref) else "FAIL"
            note = f"{int((a != b).sum())} queries differ; largest on {worst}"
        rows.append(
            {
                "run": key,
                "metric": f"{PER_QUERY_PREFIX}{m}",
                "expected": len(ref),
                "measured": agree,
                "diff": float(diff.max()) if len(diff) else 0.0,
                "tolerance": tol,
                "status": status,
                "note": note,
            }
        )
    return rows


def stored_differs(folder: Path, measured: Mapping[str, Any]) -> list[str]:
    """The verified values whose copy in the run's ``metrics.json`` differs from ``measured`` (computed from its run
    files): the sign of a damaged or edited folder."""
    m = RunFolder(folder).metrics
    stored = {"evaluated": (m.get("queries") or {}).get("evaluated"), **(m.get("means") or {})}
    return [k for k, v in measured.items() if k in stored and stored[k] != v]


def compare(
    items: Sequence[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]],
    expected: Mapping[str, Any],
    default_names: Sequence[str] = (),
) -> pd.DataFrame:
    """Verification rows for (key, measured values or None when not run, provenance or None)."""
    rows: list[dict[str, Any]] = []
    exp_runs = expected.get("runs") or {}
    for key, got, prov in items:
        exp = exp_runs.get(key)
        names = (list(exp["metrics"]) if exp else list(got or {}) or list(default_names)) or ["-"]
        if got is None:
            damage = (prov or {}).get("damaged")
            status, note = (
                ("DAMAGED", f"{damage}: running it again (make reproduce) replaces the folder")
                if damage
                else ("MISSING", "not run (no finished results folder)")
            )
            rows += [
                {
                    "run": key,
                    "metric": n,
                    "expected": (exp or {}).get("metrics", {}).get(n),
                    "measured": None,
                    "diff": None,
                    "tolerance": None,
                    "status": status,
                    "note": note,
                }
                for n in names
            ]
            continue
        prov = prov or {}
        notes = ["made from a dirty tree"] if prov.get("dirty") else []
        if prov.get("stored_differs"):
            notes.append(
                f"metrics.json differs from the run files on {', '.join(prov['stored_differs'])} "
                "(the measured value is computed from run.trec and qrels.trec)"
            )
        if exp is None:
            rows += [
                {
                    "run": key,
                    "metric": n,
                    "expected": None,
                    "measured": got.get(n),
                    "diff": None,
                    "tolerance": None,
                    "status": "MISSING",
                    "note": "no expected value: write the expected-scores file",
                }
                for n in names
            ]
            continue
        if exp.get("config_hash") and prov.get("config_hash") and exp["config_hash"] != prov["config_hash"]:
            notes.append(f"config changed: hash {prov['config_hash']}, expected {exp['config_hash']}")
        for n in names:
            e, g = exp["metrics"].get(n), got.get(n)
            tol = (
                0.0
                if n in COUNT_KEYS
                else float(exp.get("answer_tolerance" if n.startswith(ANSWER_PREFIX) else "tolerance", 0.0))
            )
            if g is None:
                status, diff = "FAIL", None
                note = notes + ["not measured by this run"]
            else:
                status = _status(e, g, tol)
                diff = (g - e) if isinstance(g, (int, float)) and isinstance(e, (int, float)) else None
                note = notes
            rows.append(
                {
                    "run": key,
                    "metric": n,
                    "expected": e,
                    "measured": g,
                    "diff": diff,
                    "tolerance": tol,
                    "status": status,
                    "note": "; ".join(note),
                }
            )
    # object columns: a count (an int, e.g. a study's judged pairs) stays an int beside the float means
    return pd.DataFrame(
        rows, columns=["run", "metric", "expected", "measured", "diff", "tolerance", "status", "note"], dtype=object
    )


def _cell(x: Any, metric: str) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if metric in COUNT_KEYS or metric.startswith(PER_QUERY_PREFIX) or isinstance(x, int):  # counts: queries
        return str(int(x))
    return f"{float(x):.6f}"


def format_verification(df: pd.DataFrame, title: str) -> str:
    """Markdown table of :func:`verify`'s rows plus one summary line."""
    lines = [
        f"### Verification: {title}",
        "",
        "| run | metric | expected | measured | diff | tolerance | status | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in df.itertuples(index=False):
        diff = (
            "-"
            if r.diff is None or (isinstance(r.diff, float) and math.isnan(r.diff))
            else ("0" if r.diff == 0 else f"{r.diff:+.2e}")
        )
        tol = (
            "-"
            if r.tolerance is None or (isinstance(r.tolerance, float) and math.isnan(r.tolerance))
            else f"{r.tolerance:g}"
        )
        metric = str(r.metric).replace("|", "\\|")  # a study's row key joins its fields with " | "
        lines.append(
            f"| {r.run} | {metric} | {_cell(r.expected, r.metric)} | {_cell(r.measured, r.metric)} | {diff} | "
            f"{tol} | {r.status} | {r.note or ''} |"
        )
    lines += ["", summary_line(df)]
    return "\n".join(lines) + "\n"


VERIFICATION_COLUMNS = ("run", "metric", "expected", "measured", "diff", "tolerance", "status", "note")


def parse_verification(text: str) -> list[dict[str, str]]:
    """The rows of a table :func:`format_verification` wrote, as its cells' text. A study's metric name joins its row
    key with `` | ``, written as ``\\|`` (tables written before that hold it bare, so the status cell, the first
    status word from the seventh cell on, tells where the metric ends). Other lines (title, summary) are skipped."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| run | metric |"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        at = next((i for i in range(6, len(cells)) if cells[i] in STATUSES), None)
        if at is None:
            continue
        metric = " | ".join(cells[1 : at - 4])
        rows.append(
            dict(
                zip(
                    VERIFICATION_COLUMNS,
                    [cells[0], metric, *cells[at - 4 : at + 1], " | ".join(cells[at + 1 :])],
                    strict=True,
                )
            )
        )
    return rows


def summary_line(df: pd.DataFrame) -> str:
    """'N runs, M values: a OK, b OKish, c FAIL, d MISSING' ('1 run, ...'), and ', e DAMAGED' when there are any."""
    counts = {s: int((df["status"] == s).sum()) for s in STATUSES} if len(df) else {s: 0 for s in STATUSES}
    if not counts["DAMAGED"]:
        del counts["DAMAGED"]
    runs = df["run"].nunique() if len(df) else 0
    return f"{runs} run{'' if runs == 1 else 's'}, {len(df)} values: " + ", ".join(
        f"{v} {k}" for k, v in counts.items()
    )


def passed(df: pd.DataFrame) -> bool:
    """True when every value is OK or OKish (no FAIL, nothing MISSING or DAMAGED)."""
    return bool(len(df) == 0 or df["status"].isin(["OK", "OKish"]).all())
