"""A static, browsable copy of the report: ``<report dir>/site/`` (open ``index.html`` from disk; no server, no CDN).

Built by ``python -m experiments.reproduce tier=all action=report source=store`` (``make report``) after the report,
from what that report wrote and the declared runs it read, never recomputing a statistic:

- the tables: every ``tables/*.csv`` the report wrote (and the seed report's), with the caption and footnote of
  its ``.md`` twin, one sortable page each; the figures with the report's captions (linked, not copied);
- the verification: each tier's committed ``verification/<tier>.md`` (``action=store`` writes it), per run its mark,
  expected against measured, and the command that makes the run again;
- one page per declared run: its declaration, verification rows, ``metrics.json``, manifest fields, hashed config
  and per-query scores (rounded to 4 decimals, to keep the site small); a run the store lacks is shown as missing;
- one page per declared study: its stored Markdown tables, command and verification rows.

Every page is a pure function of those files (sorted, no time stamp, no path of the machine), so two builds are
byte-identical; the pages are written to a temporary folder that replaces the old site whole.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import expected as E
from analysis import html_page as H
from analysis.declared_runs import DAMAGED_FOLDER, RunRef
from analysis.findings import FULL_FAMILY, SETUP_HEADING
from analysis.formatting import flatten
from analysis.metric_names import canonical_or_other, display_metric
from lethe.core.atomic import atomic_dir
from lethebench.runs import RunFolder
from lethebench.studies import StudyFolder

SITE = "site"
MARK_ORDER = ("FAIL", "DAMAGED", "MISSING", "OKish", "OK")  # a run's mark is the worst of its rows
PER_QUERY_SKIPPED = ("latency_ms",)  # a per-query time, not a score (the manifest and Table 3 give latencies)
PER_QUERY_TEXT = ("category", "status", "answer_supported")  # text columns shown beside the scores
MANIFEST_TABLES = ("config", "hashed_config")  # not flattened with the other fields (hashed_config has its own table)


@dataclass(frozen=True)
class SiteStudy:
    """A declared study: its tier, name and (stored) folder, which may not exist."""

    tier: str
    name: str
    folder: Path

    @property
    def key(self) -> str:
        return f"study/{self.name}"


@dataclass(frozen=True)
class SiteTier:
    """A tier of the report: its declared runs (as the report read them) and studies."""

    name: str
    description: str
    runs: tuple[RunRef, ...]
    studies: tuple[SiteStudy, ...] = ()


def command(tier: str, key: str) -> str:
    """The command that makes a declared run (or ``study/<name>``) again, after its prerequisites, and prints its
    verification rows (docs/reproduction.md)."""
    return f'python -m experiments.reproduce tier={tier} "select=[{key}]"'


def store_command(tier: str) -> str:
    """The command that stores a tier made in one piece (and writes its verification table)."""
    return f"python -m experiments.reproduce tier={tier} action=store"


REPORT_COMMAND = "python -m experiments.reproduce tier=all action=report source=store"  # make report: the site too


# Modules that moved after a stored study was made: its stored command line (command.txt or manifest.json in the
# reference store, never edited by hand) names the old module, which no longer exists. The judges tier's studies were
# made at 42af4ac, before 57293af moved the LLM studies from analysis/ to experiments/studies/ (issue 37 item 3); the
# printed command names the module that runs now (remaking the tier rewrites the stored lines). Applied wherever a
# stored command is printed (the report's Studies section, the site's study pages); tests/analysis/
# test_printed_commands.py checks that every printed command's module exists and its config composes.
MOVED_MODULES = {
    "analysis.contradiction_detection": "experiments.studies.contradiction_detection",
    "analysis.judge_agreement": "experiments.studies.judge_agreement",
    "analysis.judge_validation": "experiments.studies.judge_validation",
    "analysis.pairwise_answers": "experiments.studies.pairwise_answers",
}


def override_words(text: str) -> list[str]:
    """Hydra overrides joined by spaces (as a study records its command line: experiments.studies.common.command_line,
    unquoted) split back into one word per override: at spaces outside brackets, braces, parentheses and quotes."""
    words, word, depth, quote = [], "", 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote and not word.endswith("\\") else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == " " and depth == 0:
            words += [word] if word else []
            word = ""
            continue
        word += ch
    return words + [word] if word else words


def _shell_word(word: str) -> str:
    """``word`` as the shell passes it on: as is when it would, else single-quoted."""
    try:
        if shlex.split(word) == [word]:
            return word
    except ValueError:  # an unbalanced quote
        pass
    return shlex.quote(word)


def printed_command(stored: str) -> str:
    """A stored command line as printed: ``python -m <module> ...`` with a moved module (:data:`MOVED_MODULES`)
    replaced by the one that runs now, and an override the shell would split (``run_folders={a: <folder>, ...}``)
    single-quoted; anything else as stored."""
    m = re.match(r"\s*python -m (\S+)(.*)", stored, re.S)
    if m is None:
        return stored
    words = [_shell_word(w) for w in override_words(m.group(2).strip())]
    return " ".join(["python", "-m", MOVED_MODULES.get(m.group(1), m.group(1)), *words])


def run_page(tier: str, key: str) -> str:
    """A run's page, from the site's folder (``runs/<tier>/<dataset>/<label>.html``)."""
    return f"runs/{tier}/{key}.html"


def study_page(tier: str, name: str) -> str:
    return f"studies/{tier}/{name}.html"


def fmt_value(x: Any) -> str:
    """A manifest or metrics value as written: floats in full (repr), lists and mappings as JSON, None as n/m."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/m"
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, (list, tuple, dict)):
        return json.dumps(x, sort_keys=True, ensure_ascii=False)
    return str(x)


LONG = 600  # characters: a longer manifest value (e.g. a cross-encoder's training cards) is cut, its file linked


def asked_metrics(manifest: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name as the run's ``run.metrics`` wrote it, its mean from metrics.json to 4 places, or n/m when the run did
    not store it) for each metric the run asked for."""
    asked = ((manifest.get("config") or {}).get("run") or {}).get("metrics") or []
    means = metrics.get("means") or {}
    values = ((str(m), means.get(canonical_or_other(str(m)), means.get(str(m)))) for m in asked)
    return [(m, "n/m" if v is None else f"{float(v):.4f}") for m, v in values]


def cut(text: str) -> str:
    """``text``, or its first characters and how long it is when it is longer than :data:`LONG`."""
    return text if len(text) <= LONG else f"{text[:200]} … ({len(text)} characters in all: see manifest.json)"


def score(x: Any) -> str:
    """A per-query value: 4 decimals without trailing zeros (0, 1, 0.1, 0.4270 -> 0.427); n/m when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/m"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float)):
        text = f"{float(x):.4f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text
    return str(x)


def worst(statuses: Iterable[str]) -> str:
    """The worst verification status among ``statuses`` (FAIL before DAMAGED, MISSING, OKish, OK)."""
    seen = set(statuses)
    return next((s for s in MARK_ORDER if s in seen), "MISSING")


class _Site:
    """The pages of one site, kept in memory until they are written whole (path -> text)."""

    def __init__(
        self,
        report_dir: Path,
        tiers: Sequence[SiteTier],
        metrics: Sequence[str],
        seeds_dir: Path | None,
        published: Path | None = None,
    ):
        self.report_dir = report_dir
        self.published = published or report_dir  # where report_dir is swapped in: verification/ and the store
        self.tiers = list(tiers)
        self.metrics = list(metrics)
        self.seeds_dir = seeds_dir if seeds_dir is not None and (seeds_dir / "report.md").is_file() else None
        self.pages: dict[str, str] = {}
        self.verification = {t.name: self._read_verification(t.name) for t in self.tiers}
        self.declared = {(t.name, r.key) for t in self.tiers for r in t.runs}
        self.declared |= {(t.name, st.key) for t in self.tiers for st in t.studies}
        self.rows_by_run: dict[tuple[str, str], list[dict[str, str]]] = {}
        for tier, rows in self.verification.items():
            for r in rows or []:
                self.rows_by_run.setdefault((tier, r["run"]), []).append(r)

    def link(self, tier: str, key: str, root: str) -> str:
        """A declared run's or study's key linked to its page (``root``: from the page to the site's folder); a key
        the tier does not declare (any more) as text."""
        if (tier, key) not in self.declared:
            return H.esc(key)
        page = study_page(tier, key.split("/", 1)[1]) if key.startswith("study/") else run_page(tier, key)
        return f'<a href="{H.href(root + page)}">{H.esc(key)}</a>'

    # paths -------------------------------------------------------------------------------------------------------
    def nav(self) -> list[tuple[str, str]]:
        return [
            ("Lethe results", "index.html"),
            ("Verification", "index.html#verification"),
            ("Tables", "index.html#tables"),
            ("Figures", "figures.html"),
            ("Runs", "runs/index.html"),
        ]

    def add(self, path: str, title: str, body: str) -> None:
        root = "../" * path.count("/")
        self.pages[path] = H.page(title, body, root, self.nav())

    def _read_verification(self, tier: str) -> list[dict[str, str]] | None:
        path = self.published / "verification" / f"{tier}.md"
        return E.parse_verification(path.read_text()) if path.is_file() else None

    # tables ------------------------------------------------------------------------------------------------------
    def table_pages(self) -> list[tuple[str, str, str]]:
        """(page, caption, group) of every table page, reference tables first, then the seed report's."""
        groups = [("tables", self.report_dir / "tables", "report")]
        if self.seeds_dir is not None:
            groups.append(("seeds", self.seeds_dir / "tables", "seed studies"))
        out = []
        for folder, src, group in groups:
            for csv_path in sorted(src.glob("*.csv")):
                caption, footnote = _caption(csv_path.with_suffix(".md"))
                page = f"{folder}/{csv_path.stem}.html"
                to_report = "../../" + _rel(src, self.report_dir)
                rows = list(csv.reader(io.StringIO(csv_path.read_text(), newline="")))
                header, body = (rows[0], rows[1:]) if rows else ([], [])
                files = " · ".join(
                    f'<a href="{H.href(to_report + csv_path.stem + ext)}">{ext[1:]}</a>'
                    for ext in (".csv", ".md", ".tex")
                    if csv_path.with_suffix(ext).is_file()
                )
                parts = [
                    f'<p class="note">{len(body)} rows. The {group}\'s table as written ({files}); click a column '
                    "header to sort.</p>",
                    H.table(header, body),
                    f'<p class="note">{H.inline_md(footnote, to_report)}</p>' if footnote else "",
                ]
                self.add(page, caption or csv_path.stem, "\n".join(p for p in parts if p))
                out.append((page, caption or csv_path.stem, group))
        return out

    # figures -----------------------------------------------------------------------------------------------------
    def figures_page(self, figures: list[tuple[str, str, str]]) -> None:
        parts = ['<p class="note">The report\'s figures with its captions (PNG; a PDF of each beside it).</p>']
        for name, path, caption in figures:
            src = "../" + path
            parts.append(
                f'<figure id="{H.esc(name)}"><a href="{H.href(src)}"><img src="{H.href(src)}" alt="{H.esc(name)}">'
                f"</a><figcaption>{H.inline_md(caption)}</figcaption></figure>"
            )
        if not figures:
            parts.append("<p>The report wrote no figure.</p>")
        self.add("figures.html", "Figures", "\n".join(parts))

    # verification ------------------------------------------------------------------------------------------------
    def counts(self, tier: str) -> dict[str, int] | None:
        rows = self.verification.get(tier)
        if rows is None:
            return None
        return {s: sum(r["status"] == s for r in rows) for s in E.STATUSES}

    def summary_row(self, tier: str, rows: list[dict[str, str]]) -> list[str]:
        """Per run of ``tier``'s verification table: run (link), mark, values, expected and measured of each summary
        metric, command."""
        out = []
        for key in dict.fromkeys(r["run"] for r in rows):
            mine = self.rows_by_run[(tier, key)]
            link = self.link(tier, key, "../")
            by_metric = {r["metric"]: r for r in mine}
            cells = [link, H.mark(worst(r["status"] for r in mine)), str(len(mine))]
            for m in self.metrics:
                r = by_metric.get(m)
                cells += [r["expected"], r["measured"]] if r else ["-", "-"]
            declared = (tier, key) in self.declared
            cells.append(
                f'<code class="cmd">{H.esc(command(tier, key))}</code>'
                if declared
                else f"not declared in tier {H.esc(tier)} now"
            )
            out.append(cells)
        return out

    def verification_page(self, tier: SiteTier) -> None:
        rows = self.verification[tier.name]
        src = f"../../verification/{tier.name}.md"
        declared = len(tier.runs) + len(tier.studies)
        stored = sum(RunFolder(r.folder).is_done for r in tier.runs) + sum(
            StudyFolder(s.folder).is_done for s in tier.studies
        )
        parts = [
            f"<p>{H.inline_md(tier.description)}</p>" if tier.description else "",
            f"<p>{declared} declared runs and studies; the reference store holds {stored} of them.</p>",
        ]
        if rows is None:
            parts.append(
                f"<p>No verification table: <code>verification/{tier.name}.md</code> does not exist (it is written "
                f"when the tier is stored: <code>{H.esc(store_command(tier.name))}</code>).</p>"
            )
        else:
            c = self.counts(tier.name) or {}
            table_keys = {r["run"] for r in rows}
            lines = (self.published / "verification" / f"{tier.name}.md").read_text().strip().splitlines()
            held = {r.key for r in tier.runs if RunFolder(r.folder).is_done}
            held |= {s.key for s in tier.studies if StudyFolder(s.folder).is_done}
            parts.append(
                f'<p>From <a href="{H.href(src)}">verification/{tier.name}.md</a>: {len(table_keys)} runs, '
                f"{len(rows)} values: "
                + ", ".join(f"{c[s]} {H.mark(s)}" for s in E.STATUSES if c[s] or s != "DAMAGED")
                + f". The reference store holds {len(table_keys & held)} of the {len(table_keys)} runs and studies "
                "it verifies.</p>"
            )
            parts.append(f'<p class="note">The file\'s own summary line: {H.esc(lines[-1] if lines else "")}</p>')
            absent = [r.key for r in tier.runs if r.key not in table_keys]
            absent += [s.key for s in tier.studies if s.key not in table_keys]
            if absent:
                parts.append(
                    f"<p>{len(absent)} declared runs or studies have no row in this table (e.g. "
                    f"{', '.join(f'<code>{H.esc(k)}</code>' for k in absent[:5])}).</p>"
                )
            header = ["run", "mark", "values"]
            for m in self.metrics:
                header += [f"{display_metric(m)} expected", f"{display_metric(m)} measured"]
            header.append("command (makes the run again and prints its verification)")
            raw = (0, 1, len(header) - 1)
            parts += [
                "<h2>Runs</h2>",
                H.table(header, self.summary_row(tier.name, rows), raw_cols=raw),
                "<h2>Every verified value</h2>",
                self.rows_table(rows, link_runs=tier.name),
            ]
        self.add(f"verification/{tier.name}.html", f"Verification: tier {tier.name}", "\n".join(p for p in parts if p))

    def rows_table(self, rows: list[dict[str, str]], link_runs: str | None = None) -> str:
        cols = list(E.VERIFICATION_COLUMNS)
        body = []
        for r in rows:
            cells = [H.esc(r[c]) for c in cols]
            if link_runs is not None:
                cells[0] = self.link(link_runs, r["run"], "../")
            cells[6] = H.mark(r["status"])
            body.append(cells)
        if link_runs is None:
            cols, body = cols[1:], [b[1:] for b in body]
        return H.table(cols, body, raw_cols=range(len(cols)))

    # runs --------------------------------------------------------------------------------------------------------
    def run_pages(self, tier: SiteTier) -> list[list[str]]:
        """Write a page per declared run of ``tier``; the runs index's rows."""
        index = []
        for ref in tier.runs:
            page = run_page(tier.name, ref.key)
            root = "../" * page.count("/")
            run = RunFolder(ref.folder)
            done = run.is_done
            rows = self.rows_by_run.get((tier.name, ref.key), [])
            mark = "DAMAGED" if ref.damage else worst(r["status"] for r in rows) if rows else None
            parts = [
                f'<p>Tier <a href="{H.href(root + f"verification/{tier.name}.html")}">{H.esc(tier.name)}</a>; '
                f"declared as <code>{H.esc(ref.declared or 'defaults')}</code>; "
                + (
                    f"config hash <code>{H.esc(run.config_hash)}</code>, in the reference store.</p>"
                    if done
                    else f"<strong>DAMAGED in the reference store</strong>: {H.esc(ref.damage)}; nothing of it is "
                    "read (n/m† in the report).</p>"
                    if ref.damage
                    else "<strong>not in the reference store</strong> (n/m† in the report).</p>"
                ),
                "<h2>Make it again</h2>",
                f"<pre>{H.esc(command(tier.name, ref.key))}</pre>",
                '<p class="note">Runs it after its prerequisites if it is not finished, and prints its verification '
                "rows against <code>results/expected/" + H.esc(tier.name) + ".yaml</code> (docs/reproduction.md).</p>",
                "<h2>Verification</h2>",
            ]
            if ref.damage:
                parts.append(f"<p>Mark: {H.mark('DAMAGED')} (its stored files differ from the tier's seal).</p>")
            elif rows:
                parts += [f"<p>Mark: {H.mark(mark or 'MISSING')}</p>", self.rows_table(rows)]
            else:
                parts.append(f"<p>No row in <code>verification/{H.esc(tier.name)}.md</code>.</p>")
            metrics = run.metrics if done else {}
            if done:
                man = run.manifest
                folder = root + "../" + _rel(ref.folder, self.published)
                files = " · ".join(
                    f'<a href="{H.href(folder + f.name)}">{H.esc(f.name)}</a>'
                    for f in sorted(Path(ref.folder).iterdir())
                    if f.suffix in (".json", ".parquet")
                )
                parts += [
                    "<h2>The metrics it asked for (run.metrics, as written)</h2>",
                    H.key_values(asked_metrics(man, metrics)),
                    "<h2>Metrics (metrics.json)</h2>",
                    H.key_values((k, fmt_value(v)) for k, v in flatten(metrics)),
                    "<h2>Manifest</h2>",
                    f"<p>Stored files: {files}; the manifest's full config is in manifest.json.</p>",
                    H.key_values(
                        (k, cut(fmt_value(v)))
                        for k, v in flatten({k: v for k, v in man.items() if k not in MANIFEST_TABLES})
                    ),
                    "<h2>Hashed config (what the config hash covers)</h2>",
                    H.key_values((k, fmt_value(v)) for k, v in flatten(man.get("hashed_config") or {})),
                    *self.per_query(run),
                ]
            self.add(page, f"{ref.key} ({tier.name})", "\n".join(parts))
            means = metrics.get("means") or {}
            evaluated = (metrics.get("queries") or {}).get("evaluated")
            index.append(
                [
                    H.esc(tier.name),
                    f'<a href="{H.href("../" + page)}">{H.esc(ref.key)}</a>',
                    "yes" if done else "no",
                    H.mark(mark) if mark else "-",
                    "n/m†" if not done else H.esc(evaluated),
                    *[
                        "n/m†" if not done else H.esc(f"{means[m]:.4f}" if m in means else "n/m")
                        for m in self.metrics
                        if m != "evaluated"
                    ],
                ]
            )
        return index

    def per_query(self, run: RunFolder) -> list[str]:
        pq = run.per_query
        text = [c for c in PER_QUERY_TEXT if c in pq.columns]
        same = {c: score(pq[c].iloc[0]) for c in text if len(pq) and pq[c].nunique(dropna=False) == 1}
        scores = [c for c in pq.columns if pq[c].dtype.kind == "f" and c not in PER_QUERY_SKIPPED]
        cols = ["query_id", *[c for c in text if c not in same], *scores]
        rows = (
            [H.esc(r[0]), *[H.esc(score(v)) for v in r[1:]]]
            for r in pq[cols].sort_values("query_id", kind="stable").itertuples(index=False)
        )
        return [
            f"<h2>Per-query scores ({len(pq)} queries)</h2>",
            '<p class="note">From the stored per-query table, rounded to 4 decimals (trailing zeros dropped); '
            "n/m = not measured for that query."
            + "".join(f" Every query's {H.esc(c)}: {H.esc(v)}." for c, v in same.items())
            + "</p>",
            H.table([display_metric(c) for c in cols], rows, raw_cols=range(len(cols)), compact=True),
        ]

    # studies -----------------------------------------------------------------------------------------------------
    def study_pages(self, tier: SiteTier) -> list[list[str]]:
        index = []
        for st in tier.studies:
            page = study_page(tier.name, st.name)
            folder = StudyFolder(st.folder)
            done = folder.is_done
            rows = self.rows_by_run.get((tier.name, st.key), [])
            parts = [
                f"<p>Study of tier {H.esc(tier.name)}; "
                + (
                    "in the reference store.</p>"
                    if done
                    else "<strong>DAMAGED in the reference store</strong> (its stored files differ from the tier's "
                    "seal; the console named them): nothing of it is read.</p>"
                    if folder.path.name == DAMAGED_FOLDER
                    else "<strong>not in the reference store</strong>.</p>"
                ),
                "<h2>Make it again</h2>",
                f"<pre>{H.esc(command(tier.name, st.key))}</pre>",
            ]
            if done and folder.command:
                own = printed_command(folder.command)
                parts.append(f'<p class="note">Its own command line: <code>{H.esc(own)}</code></p>')
            parts.append("<h2>Verification</h2>")
            if rows:
                parts += [f"<p>Mark: {H.mark(worst(r['status'] for r in rows))}</p>", self.rows_table(rows)]
            else:
                parts.append(f"<p>No row in <code>verification/{H.esc(tier.name)}.md</code>.</p>")
            if done:
                for md in folder.tables:
                    parts += [f"<h2>{H.esc(md.name)}</h2>", H.markdown(md.read_text())]
            self.add(page, f"Study {st.name} ({tier.name})", "\n".join(parts))
            index.append(
                [
                    H.esc(tier.name),
                    f'<a href="{H.href(page)}">{H.esc(st.name)}</a>',
                    "yes" if done else "no",
                    H.mark(worst(r["status"] for r in rows)) if rows else "-",
                ]
            )
        return index

    # index -------------------------------------------------------------------------------------------------------
    def build(self) -> None:
        report = self.report_dir / "report.md"
        text = report.read_text() if report.is_file() else ""
        title, headline = _headline(text)
        findings = _findings(text)
        overview = _overview(text)
        figures = _figures(text)
        self.figures_page(figures)
        tables = self.table_pages()
        for t in self.tiers:
            self.verification_page(t)
        run_rows = [row for t in self.tiers for row in self.run_pages(t)]
        study_rows = [row for t in self.tiers for row in self.study_pages(t)]
        header = ["tier", "run", "stored", "mark", "evaluated"] + [
            display_metric(m) for m in self.metrics if m != "evaluated"
        ]
        stored = sum(r[2] == "yes" for r in run_rows)
        self.add(
            "runs/index.html",
            "Declared runs",
            f"<p>{len(run_rows)} declared runs, {stored} in the reference store (their means from metrics.json, "
            "4 decimals; n/m† = not stored; the mark is the worst of the run's rows in its tier's verification "
            "table). Each run's page holds its manifest, config and per-query scores.</p>\n"
            + H.table(header, run_rows, raw_cols=range(len(header))),
        )
        ver_rows = []
        for t in self.tiers:
            c = self.counts(t.name)
            stored_t = sum(RunFolder(r.folder).is_done for r in t.runs) + sum(
                StudyFolder(s.folder).is_done for s in t.studies
            )
            link = f'<a href="{H.href(f"verification/{t.name}.html")}">{H.esc(t.name)}</a>'
            counts = [str(c[s]) for s in E.STATUSES] if c is not None else ["-"] * len(E.STATUSES)
            in_table = str(len({r["run"] for r in self.verification[t.name] or []})) if c is not None else "-"
            ver_rows.append([link, str(len(t.runs) + len(t.studies)), str(stored_t), in_table, *counts])
        body = [  # what was found first (the findings, then the overview table); where it comes from below
            f"<h2>{H.esc(title)}</h2>" if title else "",
            *(['<h2 id="findings">Findings</h2>', H.markdown(findings, "../")] if findings else []),
            *([f'<h2 id="overview">{H.esc(overview[0])}</h2>', H.markdown(overview[1], "../")] if overview else []),
            H.markdown(headline, "../"),
            '<p class="note">A static copy of <a href="../report.md">report.md</a>, written with it by <code>make report'
            f"</code> (<code>{H.esc(REPORT_COMMAND)}</code>) from the "
            "reference store: every table the report wrote (sortable), its figures, each tier's verification table, "
            "and a page per declared run and study (manifest, metrics, per-query scores). Nothing here is computed "
            "anew.</p>",
            '<h2 id="verification">Verification per tier</h2>',
            '<p class="note">Each tier\'s committed <code>verification/&lt;tier&gt;.md</code> (<code>action=store</code> '
            "writes it from the runs it stores): declared runs and studies, how many the reference store holds, how many the table verifies, and its "
            "values by mark (runs: evaluated queries, each verified metric and per-query agreement with the store; "
            "studies: each row's metrics). OK = identical, OKish = within the run's tolerance, FAIL, MISSING = not "
            "run or no expected value, DAMAGED = an unreadable run folder; - = the tier has no verification table.</p>",
            H.table(
                ["tier", "declared", "in the store", "in the table", *E.STATUSES],
                ver_rows,
                raw_cols=(0,),
            ),
            '<h2 id="tables">Tables</h2>',
            H.table(
                ["table", "from"],
                [[f'<a href="{H.href(p)}">{H.esc(c)}</a>', H.esc(g)] for p, c, g in tables],
                raw_cols=(0,),
            ),
            "<h2>Figures</h2>",
            "<ul>"
            + "".join(
                f'<li><a href="figures.html#{H.esc(n)}">{H.esc(n)}</a>: {H.inline_md(c)}</li>' for n, _, c in figures
            )
            + "</ul>",
            "<h2>Runs and studies</h2>",
            f'<p><a href="runs/index.html">All {len(run_rows)} declared runs</a> ({stored} in the reference store).</p>',
            H.table(["tier", "study", "stored", "mark"], study_rows, raw_cols=range(4)) if study_rows else "",
        ]
        self.add("index.html", "Lethe harness: results", "\n".join(b for b in body if b))


def _rel(path: Path, start: Path) -> str:
    """``path`` relative to ``start``, with a trailing slash (``""`` when equal)."""
    rel = Path(os.path.relpath(path, start)).as_posix()
    return "" if rel == "." else rel + "/"


def _caption(md: Path) -> tuple[str, str]:
    """(caption, footnote) of a table's Markdown twin (formatting.write_table: ``**caption**``, table, footnote)."""
    if not md.is_file():
        return "", ""
    lines = md.read_text().splitlines()
    caption = lines[0][2:-2] if lines and lines[0].startswith("**") and lines[0].endswith("**") else ""
    last = max((i for i, line in enumerate(lines) if line.startswith("|")), default=len(lines) - 1)
    return caption, "\n".join(line for line in lines[last + 1 :] if line.strip())


def _headline(report: str) -> tuple[str, str]:
    """The report's title and headline Markdown: its opening paragraph and the setup's summary lines."""
    lines = report.splitlines()
    title = next((line[2:] for line in lines if line.startswith("# ")), "")
    out: list[str] = []
    section = ""
    for line in lines:
        if line.startswith("#"):
            section = line
            continue
        if section.startswith("# ") and line.strip():
            out += [line, ""]
        elif section in ("## Setup", SETUP_HEADING) and line.startswith("- "):
            out.append(line)
    return title, "\n".join(out)


def _findings(report: str) -> str:
    """The report's Findings section (analysis/findings.py) as Markdown, without the confirmatory family's full
    table that follows it ("" when the report has none)."""
    m = re.search(r"^## Findings\n(.*?)(?=^## |\Z)", report, re.S | re.M)
    if not m:
        return ""
    return m.group(1).split(FULL_FAMILY, 1)[0].strip()


def _overview(report: str) -> tuple[str, str] | None:
    """The report's overview section (its heading without ``## ``, and its Markdown), or None when it has none."""
    m = re.search(r"^## (Overview[^\n]*)\n(.*?)(?=^## |\Z)", report, re.S | re.M)
    return (m.group(1), m.group(2).strip()) if m else None


def _figures(report: str) -> list[tuple[str, str, str]]:
    """(name, path in the report's folder, caption) of each figure of the report's Figures section."""
    out = []
    m = re.search(r"^## Figures\n(.*?)(?=^## |\Z)", report, re.S | re.M)
    lines = m.group(1).splitlines() if m else []
    for i, line in enumerate(lines):
        fig = re.match(r"^!\[([^\]]*)\]\(([^)]+)\)$", line.strip())
        if fig:
            caption = next((c.strip() for c in lines[i + 1 :] if c.strip()), "")
            out.append((fig.group(1), fig.group(2), "" if caption.startswith("![") else caption))
    return out


def build_site(
    report_dir: Path,
    tiers: Sequence[SiteTier],
    metrics: Sequence[str] = ("evaluated", "ndcg@10", "recall@50", "mrr@10"),
    seeds_dir: Path | None = None,
    published: Path | None = None,
) -> Path:
    """Write ``<report_dir>/site/`` from the report in ``report_dir`` (report.md, tables/, figures/), the
    verification tables in ``<published>/verification/`` (``published``: where ``report_dir`` will be swapped in;
    default ``report_dir``), the seed report in ``seeds_dir`` and the declared runs and studies of ``tiers``;
    ``metrics`` are the verified values each run's summary row shows. Returns the site's folder."""
    t0 = time.perf_counter()
    site = _Site(Path(report_dir), tiers, metrics, seeds_dir, published)
    site.build()
    site.pages["site.css"], site.pages["site.js"] = H.CSS, H.JS
    final = Path(report_dir) / SITE
    with atomic_dir(final) as tmp:
        for path, text in sorted(site.pages.items()):
            out = tmp / path
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
    size = sum(len(t.encode()) for t in site.pages.values())
    where = Path(published or report_dir) / SITE  # where it is read once swapped in (experiments.report_staging)
    print(f"site: {len(site.pages)} files, {size / 1e6:.1f} MB -> {where} ({time.perf_counter() - t0:.1f} s)")
    return final
