"""``seeds/report.md``: the seed studies (../shared/seeds/, their claims in ``conf/reference/seed_claims.yaml``) set beside
what the harness measured, from exactly the declared runs they name (:func:`analysis.seeds.seed_sections`).

A report of its own, apart from the reference report: it needs only the runs its seeds name, so it regenerates
after those runs alone. A named run that is not finished shows n/m†.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from analysis import formatting as F
from analysis import seeds as SEEDS
from analysis import views as V
from analysis.declared_runs import RunRef
from analysis.report import setup_section
from lethe.core.atomic import atomic_write_text


def named_refs(cfg: Mapping[str, Any], refs: list[RunRef]) -> list[RunRef]:
    """The runs of ``refs`` that the seeds of ``cfg["seeds"]`` name."""
    named = SEEDS.run_keys(yaml.safe_load(Path(cfg["seeds"]).read_text()) or {})
    return [r for r in refs if r.key in named]


def build_seed_report(cfg: Mapping[str, Any], refs: list[RunRef], studies: Mapping[str, str] | None = None) -> Path:
    """Write ``<out_dir>``/report.md and ``<out_dir>``/tables from the declared runs ``refs`` (those the seeds name;
    the others are ignored); ``studies`` maps a finished study's name to its Markdown table."""
    t0 = time.perf_counter()
    out = Path(cfg["out_dir"])
    spec = yaml.safe_load(Path(cfg["seeds"]).read_text()) or {}
    refs = named_refs(cfg, refs)
    views = V.collect(cfg, refs)
    md = [
        "# Lethe harness: the seed studies, claimed and measured",
        "",
        "Every measured number here was computed from the declared runs (their results folders, or their copy in the "
        "committed reference store `results/reference/`, `make report`) by "
        "`python -m experiments.reproduce action=report`; the seeds' printed numbers (`../shared/seeds/`, copied into "
        "`conf/reference/seed_claims.yaml`) appear only as claims beside them. Statistics are paired per query: means with "
        f"{cfg['confidence']:.0%} BCa bootstrap CIs ({cfg['bootstrap_resamples']} resamples, seed {cfg['seed']}), "
        "Wilcoxon signed-rank; quality numbers are verified against `results/expected/`.",
        "",
        "## Runs",
        "",
        setup_section(views, refs, cfg),
    ]
    for title, body, frames in SEEDS.seed_sections(views, spec, cfg, studies, {r.key for r in refs}):
        for name, frame in frames:
            F.write_table(frame, out / "tables", f"table_{name}", f"{title}: {name}", footnote=SEEDS.NOTE)
        md += [f"## {title}", "", body]
    report = out / "report.md"
    atomic_write_text(report, "\n".join(md))
    print(
        f"seed studies: {sum(len(v.runs) for v in views.values())} of {len(refs)} named runs finished -> {report} "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    return report
