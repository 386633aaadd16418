"""Publishing a tier's report groups: the declared runs each report reads (results folders or the reference store),
where each is written, the dataset cards' difficulty tables, and the report and seed report themselves."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from analysis.declared_runs import DAMAGED_FOLDER, RunRef, undeclared
from analysis.findings import write_readme_findings
from analysis.report import build_report, load_cfg
from analysis.seed_report import build_seed_report, named_refs
from analysis.site import SiteStudy, SiteTier, build_site
from experiments import reference_store as RS
from experiments.reference import Tier, report_tiers, resolve
from experiments.reproduce_settings import base_overrides, from_store, store_if_read, verify_metrics
from experiments.store_seal import sealed_damage
from experiments.study_jobs import publish_studies, study_docs, study_folder, study_tables
from lethe.core.paths import PROJECT_ROOT, Paths, plain_name
from lethebench.runs import RunFolder


def write_cards(report: str, cfg: DictConfig, refs: Sequence[RunRef]) -> None:
    """Fill results/cards/<dataset>.md from the declared runs (``refs``) a tier names under ``difficulty`` (the
    core tier: window, BM25, vector), for every dataset where all of them are finished. Written with
    the report, after every run, so no run of the same reproduction sees a changed tracked file."""
    from experiments.difficulty import write_difficulty

    notes = (cfg.get("analysis") or {}).get("dataset_notes") or {}  # what a reader must know (conf/analysis)
    for t in report_tiers(report, cfg.reference_dir):
        if not t.difficulty:
            continue
        runs = [r for r in refs if r.tier == t.name and r.label in t.difficulty]
        for ds in dict.fromkeys(r.dataset for r in runs):
            folders = {r.label: r.folder for r in runs if r.dataset == ds and RunFolder(r.folder).is_whole}
            if len(folders) == len(t.difficulty):
                write_difficulty(
                    ds,
                    {m: folders[m] for m in t.difficulty},
                    report_dir(report, cfg) / "cards",
                    beside_card=not from_store(cfg),
                    note=notes.get(ds),
                )


def report_dir(report: str, cfg: DictConfig) -> Path:
    """Where the report group ``report`` is written: from the reference store (``source=store``) the committed
    report (``committed_dir``), from results folders ``out_dir`` (``results/local``: a reproduction never rewrites
    the committed report). A report group of your own tier that ``out_dir`` does not name is written to
    ``<out_dir.reference>/<report>`` (``results/local/<report>``)."""
    paths = Paths.of(cfg)
    committed = cfg.get("committed_dir") or {}
    if from_store(cfg) and report in committed:
        return paths.resolve(str(committed[report]))
    if report in cfg.out_dir:
        return paths.resolve(str(cfg.out_dir[report]))
    return paths.resolve(str(cfg.out_dir.reference)) / plain_name(report, "report")


def refs_for(report: str, cfg: DictConfig) -> list[RunRef]:
    """Every declared run of the report group ``report``, located by config hash (``source=store``: in the
    reference store's index, without composing any config; a run the store lacks is not finished there)."""
    extra = base_overrides(cfg)
    store = Paths.of(cfg).reference_store
    index = RS.read_index(store) if from_store(cfg) else {}
    refs = []
    for t in report_tiers(report, cfg.reference_dir):
        damage = sealed_damage(store, t.name) if from_store(cfg) else None
        for d in t.runs:
            if damage is not None:
                folder = RS.run_folder(store, t.name, d.key)
                stored = d.key in (index.get(t.name) or {}).get("runs", {})
                why = damage.of_run(d.key) if stored else None
                readable = stored and why is None
                refs.append(
                    RunRef(
                        RunFolder(folder).dataset if readable else d.dataset,
                        d.label,
                        d.tier,
                        folder if readable else folder / (DAMAGED_FOLDER if why else "(not stored)"),
                        RunFolder(folder).dataset_folder if readable else store / RS.DATASETS / d.dataset,
                        d.describe(),
                        why,
                    )
                )
                continue
            refs.append(resolve(d, extra).ref(d.tier))
    return refs


class ReportRefused(RuntimeError):
    """The report would be written from no finished run (it would replace the committed one with empty tables)."""


SEEDS_GROUP, SEEDS_FROM = "seeds", "reference"  # the seed studies' report, from runs of the reference group


def report_groups(tiers: Sequence[Tier], cfg: DictConfig) -> list[str]:
    """The report groups of ``tiers`` in order, the seed studies' report after the group it draws from."""
    groups = list(dict.fromkeys(t.report for t in tiers))
    if SEEDS_FROM in groups and SEEDS_GROUP in cfg.out_dir:
        groups.insert(groups.index(SEEDS_FROM) + 1, SEEDS_GROUP)
    only = cfg.get("reports")
    if only:
        unknown = sorted(set(only) - set(groups))
        if unknown:
            raise SystemExit(
                f"reports={list(only)}: {unknown} is not a report of tier={cfg.tier} (its reports: {groups})"
            )
        groups = [g for g in groups if g in only]
    return groups


def _refuse_unless_finished(report: str, refs: Sequence[RunRef], out_dir: Path, store: Path | None = None) -> None:
    """ReportRefused when no declared run of ``report`` is finished (in the reference ``store`` when given)."""
    if any(RunFolder(r.folder).is_done for r in refs):
        return
    if store is not None:
        raise ReportRefused(
            f"the reference store {store} holds no run of the {report!r} report yet: a tier is stored "
            "after it was made in one piece (python -m experiments.reproduce tier=<tier> action=store); "
            f"the report in {out_dir} was left as it is"
        )
    where = RunFolder(refs[0].folder).results_dir if refs else "(no declared runs)"
    raise ReportRefused(
        f"no declared run of the {report!r} report is finished under {where}: is results_dir "
        f"mistyped, or were the runs not made yet? The report in {out_dir} was left as it is."
    )


def write_seed_report(cfg: DictConfig) -> Path:
    """The seed studies' report (analysis/seed_report.py) from the declared runs its seeds name."""
    out_dir = report_dir(SEEDS_GROUP, cfg)
    settings = load_cfg([f"out_dir={out_dir}"], base=cfg.analysis)
    refs = named_refs(settings, refs_for(SEEDS_FROM, cfg))
    _refuse_unless_finished(SEEDS_GROUP, refs, out_dir, store_if_read(cfg))
    return build_seed_report(settings, refs, study_tables(SEEDS_FROM, cfg))


def write_report(report: str, cfg: DictConfig) -> Path:
    """The report of group ``report`` (reference, smoke or seeds) from exactly its declared runs."""
    if report == SEEDS_GROUP:
        return write_seed_report(cfg)
    refs = refs_for(report, cfg)
    out_dir = report_dir(report, cfg)
    _refuse_unless_finished(report, refs, out_dir, store_if_read(cfg))
    write_cards(report, cfg, refs)
    studies = publish_studies(report, cfg, out_dir)
    extra = (
        [
            (
                "Studies",
                "Studies run outside the runner (most call the LLMs themselves); each table is regenerated "
                "by its tier from the command shown and verified like the runs (`results/verification/`).\n\n"
                + "\n".join(studies),
            )
        ]
        if studies
        else []
    )
    pointer = []
    if report == SEEDS_FROM and SEEDS_GROUP in cfg.out_dir:
        rel = os.path.relpath(report_dir(SEEDS_GROUP, cfg) / "report.md", out_dir)
        pointer = [f"seeds_report={rel}"]
    settings = load_cfg([f"out_dir={out_dir}", *pointer], base=cfg.analysis)
    path = build_report(settings, refs, extra, study_docs(report, cfg))
    if refs and not from_store(cfg):
        results_dir = RunFolder(refs[0].folder).results_dir
        extra = undeclared(results_dir, refs)
        if extra:
            print(f"{len(extra)} finished run(s) under {results_dir} are not declared and were left out of the report:")
            for r in extra:
                print(f"  {r.dataset}/{r.method}/{r.config_hash}")
    return path


def site_wanted(report: str, cfg: DictConfig) -> bool:
    """Whether the report group ``report`` gets a static site: the committed report, written from the reference store
    (``make report``); the seed report's tables join the reference report's site."""
    return from_store(cfg) and report in (cfg.get("committed_dir") or {}) and report != SEEDS_GROUP


def write_readme(report: str, cfg: DictConfig) -> None:
    """The README's findings block from the committed report just published (``make report``); nothing for another."""
    out_dir = report_dir(report, cfg)
    if site_wanted(report, cfg) and out_dir.resolve() == (PROJECT_ROOT / "results").resolve():
        settings = load_cfg([f"out_dir={out_dir}"], base=cfg.analysis)
        write_readme_findings(PROJECT_ROOT / "README.md", out_dir / "tables" / "findings.json", settings)


def write_site(report: str, cfg: DictConfig, published: Path | None = None) -> Path:
    """``<report folder>/site/`` (analysis/site.py) from the report just written there, the seed report beside it and
    the declared runs and studies of the report's tiers, as the report read them; ``published``: where the report
    folder will be once swapped in (experiments.report_staging), which its links to the store and the verification
    tables start from (default: where it is written)."""
    refs = refs_for(report, cfg)
    tiers = [
        SiteTier(
            t.name,
            t.description,
            tuple(r for r in refs if r.tier == t.name),
            tuple(SiteStudy(t.name, st.name, study_folder(st, cfg)) for st in t.studies),
        )
        for t in report_tiers(report, cfg.reference_dir)
    ]
    seeds = report_dir(SEEDS_GROUP, cfg) if report == SEEDS_FROM and SEEDS_GROUP in cfg.out_dir else None
    return build_site(report_dir(report, cfg), tiers, ["evaluated", *verify_metrics(cfg)], seeds, published)
