"""A tier against its expected scores: verification, writing the expected-scores file, recording iteration 4's
reach, and storing the tier in the reference store."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from omegaconf import DictConfig

from analysis import expected as E
from analysis.label_metrics import label_params
from analysis.report import load_cfg
from experiments import reference_store as RS
from experiments.config import to_dict
from experiments.prerequisites import prepare_file, prepare_steps, read_json
from experiments.reference import ResolvedRun, Tier, matches, selected_studies
from experiments.reproduce_settings import verify_metrics
from experiments.store_seal import write_seal
from experiments.study_jobs import study_done, study_folder
from lethe.core.atomic import atomic_write_text
from lethe.core.paths import Paths, machine_roots
from lethebench.runs import RunFolder
from lethebench.studies import StudyFolder


def verify_tier(
    tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig, write: bool = True, kept: Sequence[str] = ()
) -> tuple[bool, str]:
    """(passed, markdown table) of ``tier``'s runs against its expected-scores file; the table is written to
    ``<out_dir>/verification/<tier>.md`` only for the whole tier (a ``select`` prints it, and leaves the committed
    table of every run alone). ``kept``: declared runs (and studies) a selective store kept, verified from their
    stored folders, so the table covers the whole tier."""
    paths = Paths.of(cfg)
    path = paths.resolve(cfg.expected_dir) / f"{tier.name}.yaml"
    expected = E.read_expected(path)
    store = paths.reference_store
    index = (RS.read_index(store).get(tier.name) or {}).get("runs", {})
    stored = {k: RS.run_folder(store, tier.name, k) for k in index}
    for r in runs:
        if r.blocked:
            print(f"MISSING {r.blocked}", file=sys.stderr, flush=True)
    made = {r.key: r.folder if r.blocked is None and RunFolder(r.folder).is_done else None for r in runs}
    made.update({k: stored.get(k) for k in kept if k not in made})
    order = [d.key for d in tier.runs if d.key in made]
    df = E.verify(
        [(k, made[k]) for k in order],
        expected,
        verify_metrics(cfg),
        list(cfg.answer_metrics),
        {k: v for k, v in stored.items() if k not in kept},
    )
    chosen = selected_studies(tier.studies, cfg.select)
    folders = {st.key: study_folder(st, cfg) for st in chosen if study_done(st, cfg)}  # the studies made here
    folders.update({st.key: RS.study_folder(store, tier.name, st.name) for st in tier.studies if st.key in kept})
    studies = [st for st in tier.studies if st in chosen or st.key in kept]
    if studies:
        items = [
            (st.key, E.measure_study(folders[st.key], st.row_key, st.metrics) if st.key in folders else None, None)
            for st in studies
        ]
        df = pd.concat([df, E.compare(items, expected)], ignore_index=True)
    text = E.format_verification(
        df,
        f"tier {tier.name} against {path.relative_to(paths.root)}"
        if path.is_relative_to(paths.root)
        else f"tier {tier.name} against {path}",
    )
    if write and (not cfg.select or kept):
        atomic_write_text(paths.resolve(str(cfg.out_dir[tier.report])) / "verification" / f"{tier.name}.md", text)
    return E.passed(df), text


def kept_entries(runs: Sequence[ResolvedRun], old: Mapping[str, Any], select: Sequence[str]) -> set[str]:
    """Keys of the runs whose expected entries a selective write keeps: those only read by a selected study (``select``
    does not name them) whose entry has their config hash. Their scores and recorded times stay as written."""
    if not select:
        return set()
    return {
        r.key for r in runs if not matches(r.key, select) and (old.get(r.key) or {}).get("config_hash") == r.config_hash
    }


def write_expected_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig) -> Path:
    """Write (or, with ``select``, update) ``tier``'s expected-scores file from its finished runs."""
    paths = Paths.of(cfg)
    _replays_only(tier, cfg, "write_expected")
    missing = [r.key for r in runs if not r.done]
    if missing:
        raise SystemExit(
            f"tier {tier.name}: {len(missing)} declared run(s) are not finished, e.g. {missing[:5]}; "
            f"run them first (python -m experiments.reproduce tier={tier.name} action=run)"
        )
    rules = yaml.safe_load((paths.resolve(cfg.reference_dir) / "tolerances.yaml").read_text())
    path = paths.resolve(cfg.expected_dir) / f"{tier.name}.yaml"
    old = E.read_expected(path)
    entries = dict(old["runs"]) if cfg.select else {}
    classes: dict[str, E.Tolerance] = {}
    for name, c in (old.get("tolerance_classes") or {}).items() if cfg.select else ():
        classes[name] = E.Tolerance(name, float(c["tolerance"]), str(c["why"]))
    kept = kept_entries(runs, old["runs"], list(cfg.select or []))
    for r in runs:
        if r.key in kept:
            continue
        tol = E.tolerance_for(r.declared.label, rules)
        answer_tol = E.tolerance_for(r.declared.label, rules, answers=True)
        classes.update({tol.klass: tol, answer_tol.klass: answer_tol})
        entries[r.key] = E.expected_record(
            r.folder, tol, answer_tol, verify_metrics(cfg), list(cfg.answer_metrics), previous=old["runs"].get(r.key)
        )
    for st in selected_studies(tier.studies, cfg.select):
        if not study_done(st, cfg):
            raise SystemExit(f"tier {tier.name}: study {st.name} is not finished; run the tier first")
        tol = E.tolerance_for(st.module.rsplit(".", 1)[-1], rules)
        classes[tol.klass] = tol
        folder = study_folder(st, cfg)
        entries[st.key] = {
            "class": tol.klass,
            "tolerance": tol.value,
            "metrics": E.measure_study(folder, st.row_key, st.metrics),
            "seconds": StudyFolder(folder).seconds,
        }
    dirty = [r.key for r in runs if r.key not in kept and E.provenance(r.folder)["dirty"]]
    if dirty:
        print(f"warning: {len(dirty)} run(s) were made from a dirty tree, e.g. {dirty[:3]}", file=sys.stderr)
    keys = [d.key for d in tier.runs] + [
        st.key for st in tier.studies
    ]  # the tier's declared order, whatever the selection
    order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    entries = dict(sorted(entries.items(), key=lambda kv: order.get(kv[0], len(order))))
    measured = read_json(prepare_file(list(runs)))
    plan = prepare_steps(runs)
    recorded = dict(old.get("prepare_seconds") or {})  # only the current prerequisites: renamed ones drop out
    prep = {
        s.name: measured.get(s.name, recorded.get(s.name)) for s in plan if s.name in measured or s.name in recorded
    }
    if cfg.select:  # part of the tier: the other runs' prerequisites keep their recorded times
        prep = {**recorded, **prep}
    E.write_expected(path, tier.name, entries, classes, prep)
    print(f"written: {path} ({len(runs)} runs)")
    return path


def _replays_only(tier: Tier, cfg: DictConfig, action: str) -> None:
    """SystemExit when ``action`` would file wall-clock runs where the tier declares replays: the store and the
    expected scores hold the deterministic replays (budget=replay), never a CPU-dependent reach."""
    if str(cfg.budget) != "replay" and any(r.replay for r in tier.runs):
        raise SystemExit(
            f"action={action} budget={cfg.budget}: tier {tier.name} declares replay runs, and the store and "
            f"its expected scores hold their replays; drop budget={cfg.budget} (after action=record_reach)"
        )


def record_reach_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig) -> list[Path]:
    """Write the reach each finished wall-clock run of ``tier``'s ``replay: true`` runs recorded per query into the
    reference store (``<store>/<tier>/<dataset>/<label>/reach.json``), where budget=replay reads it; the files."""
    if str(cfg.budget) != "wallclock":
        raise SystemExit("action=record_reach reads the wall-clock runs: add budget=wallclock")
    replays = [r for r in runs if r.declared.replay]
    missing = [r.key for r in replays if not r.done]
    if missing:
        raise SystemExit(
            f"tier {tier.name}: {len(missing)} wall-clock run(s) are not finished, e.g. {missing[:5]}; run "
            f"them first (python -m experiments.reproduce tier={tier.name} budget=wallclock action=run)"
        )
    store, files = Paths.of(cfg).reference_store, []
    for r in replays:
        dest = RS.run_folder(store, tier.name, r.key)
        if not RS.write_reach(dest, RunFolder(r.folder).per_query):
            raise SystemExit(f"{r.key}: its run ({r.folder}) recorded no reach for some query; make it again")
        files.append(dest / RS.REACH)
    if tier.name in RS.read_index(store):  # a stored tier is sealed again with its reach (else action=store seals it)
        write_seal(store, tier.name)
    print(f"recorded: the reach of {len(files)} wall-clock run(s) of tier {tier.name} -> {store}")
    return files


def kept_store_entries(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig, store: Path) -> dict[str, Any]:
    """The index entries a selective store (``select``) keeps: every declared run of ``tier`` the selection does not
    name, whose stored entry has the config hash the run resolves to now (the same computation, not made again).
    SystemExit naming the unselected runs whose entry is missing or was made with another config: select them too."""
    from experiments.reference import resolve
    from experiments.reproduce_settings import base_overrides

    chosen = {r.key for r in runs}
    old = (RS.read_index(store).get(tier.name) or {}).get("runs") or {}
    extra = base_overrides(cfg)
    kept, stale = {}, []
    for d in tier.runs:
        if d.key in chosen:
            continue
        r = resolve(d, extra, store, str(cfg.budget))
        entry = old.get(d.key) or {}
        if entry.get("config_hash") == r.config_hash and (store / str(entry.get("folder", "\0"))).is_dir():
            kept[d.key] = entry
        else:
            stale.append(d.key)
    if stale:
        raise SystemExit(
            f"action=store select=...: {len(stale)} unselected run(s) of tier {tier.name} have no stored entry with "
            f"the config they resolve to now, e.g. {stale[:5]}; select them too (or drop select to store the tier whole)"
        )
    return kept


def store_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig) -> Path:
    """Write ``tier``'s part of the reference store (experiments.reference_store) from its finished declared runs and
    studies; the store's folder. Every declared run must be finished (the store holds a tier whole), except with
    ``select``: then the selected runs and studies are written and every other run keeps its stored entry, which
    must have been made with the config it resolves to now (:func:`kept_store_entries`)."""
    paths = Paths.of(cfg)
    from analysis import views as V

    _replays_only(tier, cfg, "store")
    studies = selected_studies(tier.studies, cfg.select) if cfg.select else list(tier.studies)
    missing = [r.key for r in runs if not r.done] + [st.key for st in studies if not study_done(st, cfg)]
    if missing:
        raise SystemExit(
            f"tier {tier.name}: {len(missing)} declared run(s) or studies are not finished, e.g. "
            f"{missing[:5]}; run them first (python -m experiments.reproduce tier={tier.name} action=run)"
        )
    store = paths.reference_store
    kept = kept_store_entries(tier, runs, cfg, store) if cfg.select else {}
    settings = load_cfg(base=cfg.analysis)
    labels = label_params(settings)  # the label metrics' settings, stored beside their columns
    roots = machine_roots(to_dict(runs[0].cfg)) if runs else machine_roots(None)
    refs = [r.ref(tier.name) for r in runs]
    views = V.collect(settings, refs)
    entries, keep = dict(kept), {store / e["folder"] for e in kept.values()}
    for r in runs:
        run, view = RunFolder(r.folder), views[r.declared.dataset]
        dataset = RS.store_dataset(run.dataset_folder, r.declared.dataset, store, roots)
        dest = RS.run_folder(store, tier.name, r.key)
        RS.write_run(r.key, run, RS.stored_per_query(view, r.declared.label), labels, dataset, dest, roots)
        entries[r.key] = {
            "config_hash": r.config_hash,
            "folder": dest.relative_to(store).as_posix(),
            "dataset": dataset.relative_to(store).as_posix(),
        }
        keep.add(dest)
    for st in tier.studies:  # with select, the unselected studies keep their stored folders
        dest = RS.study_folder(store, tier.name, st.name)
        if st in studies:
            RS.write_study(study_folder(st, cfg), dest, roots)
        keep.add(dest)
    RS.remove_stale(store, tier.name, keep | {store / tier.name / RS.STUDIES})
    RS.write_index(store, tier.name, entries, [st.name for st in tier.studies])
    for gone in RS.remove_unreferenced_datasets(store):
        print(f"removed from the store: {gone.relative_to(store)} (no stored run reads this build any more)")
    write_seal(store, tier.name)  # what make report checks every stored file against
    kept_keys = [*kept, *(st.key for st in tier.studies if st not in studies)]
    ok, text = verify_tier(
        tier, runs, cfg, write=False, kept=kept_keys
    )  # against the store just written: every per-query row identical; kept entries from the store
    committed = cfg.get("committed_dir") or {}
    if tier.report in committed:
        atomic_write_text(paths.resolve(str(committed[tier.report])) / "verification" / f"{tier.name}.md", text)
    if not ok:
        print(text)
        raise SystemExit(
            f"tier {tier.name} was stored, but its runs do not verify against its expected scores: "
            "regenerate them (action=write_expected) if the change is right, then store again"
        )
    print(f"stored: tier {tier.name}, {len(entries)} runs and {len(tier.studies)} studies -> {store}")
    return store
