"""The reproduction contract: run declared tiers, write the report from them, verify expected scores.

    python -m experiments.reproduce                          # tier core: run, report, verify (make reproduce)
    python -m experiments.reproduce tier=all                 # core, ablations, label_free, llm, seeds, seed003, judges (make reproduce-all)
    python -m experiments.reproduce tier=smoke               # the tests' tier, into its own folders
    python -m experiments.reproduce action=report            # the report only (from finished runs)
    python -m experiments.reproduce tier=all action=report reports=[seeds]   # the seed studies' report only
    python -m experiments.reproduce action=verify tier=all   # the verification table only
    python -m experiments.reproduce tier=core action=write_expected   # expected scores from finished runs
    python -m experiments.reproduce tier=core select=[locomo/bm25] overrides=[method.k1=0.9]

Settings: ``conf/reproduce.yaml``; tiers: ``conf/reference/<tier>.yaml``. Runs go through the same
runner as ``python -m experiments.run`` (resumable: a finished run is skipped), in the declared order,
after their prerequisites (processed datasets, the cross-encoder, learned-fusion models). One line
per finished job gives jobs done / total, elapsed time and an ETA from the recorded durations in
``results/expected/<tier>.yaml``. The exit code is non-zero when a run failed, a value FAILs, or a
declared run is MISSING. SIGTERM, SIGHUP or Ctrl-C stop it cleanly (exit 128 + the signal's number):
the job in flight leaves nothing behind and is marked ``stopped``, not failed (``experiments.stopping``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import hydra
import pandas as pd
import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

from analysis import expected as E
from analysis.metric_names import UnknownMetric, canonical_metrics
from analysis.report import build_report, load_cfg
from analysis.seed_report import build_seed_report, named_refs
from analysis.declared_runs import RunRef, undeclared
from analysis.studies import MANIFEST
from experiments.config import load_config, to_dict
from experiments import reference_store as RS
from experiments.datasets import dataset_build_key
from lethe.core.atomic import atomic_dir, atomic_write_text
from lethe.core.faults import disarm, kill_point
from lethe.core.paths import plain_name, project_path
from experiments.progress import Progress
from experiments.stopping import die_with_parent, stop_on_signals, stop_reason
from experiments.reference import (ResolvedRun, Study, Tier, load_tier, matches, processed_folder, report_tiers,
                                   resolve, select_with_studies, selected_studies, tier_names)
from lethe.core.arguments import check_arguments
from lethe.retrieval.crossencoder import FOLDS_JSON, set_folder
from lethebench.runs import RunFolder

log = logging.getLogger(__name__)
ACTIONS = ("all", "run", "report", "verify", "write_expected", "store", "record_reach")
SOURCES = ("runs", "store")   # where action=report reads the declared runs: results folders, or the reference store
PREPARE_FILE = ".reproduce/prepare_seconds.json"   # under the results dir: measured prerequisite times


@dataclass
class Step:
    """A job of a tier: its name (a run key, study key or prerequisite), whether it is done, and how to do it.
    ``model`` marks a model prerequisite (``(kind, run config)``, see :func:`build_model`): those may be
    built in worker processes."""

    name: str
    done: bool
    make: Callable[[], Any]
    model: tuple[str, DictConfig] | None = None


MODEL_KINDS = ("cross_encoder", "fusion")


def build_model(kind: str, cfg: DictConfig, threads: int | None) -> None:
    """Build one model prerequisite of ``kind`` (a cross-encoder model set or a learned-fusion model) from
    the run config ``cfg`` with ``threads`` torch threads and llama.cpp threads where an LLM config leaves them null
    (None: leave both settings); picklable, so a worker process can call it."""
    import torch

    from experiments import train_cross_encoder, train_fusion
    from lethe.llm.backends import set_default_threads

    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model prerequisite {kind!r}; one of {list(MODEL_KINDS)}")
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
        llm_before = set_default_threads(threads)   # the label-free questions' LLM keeps to the same budget
    try:
        if kind == "cross_encoder":
            train_cross_encoder.train_model_set(cfg)
        else:
            train_fusion.ensure_model(cfg)
    finally:
        torch.set_num_threads(before)
        if threads is not None:
            set_default_threads(llm_before)


def _base_overrides(cfg: DictConfig) -> list[str]:
    return ["run.print_summary=false", *[str(o) for o in cfg.overrides]]


def resolve_tiers(cfg: DictConfig) -> list[tuple[Tier, list[ResolvedRun]]]:
    """The selected tiers with their (selected) declared runs, resolved to results folders."""
    tiers = [load_tier(n, cfg.reference_dir) for n in tier_names(str(cfg.tier))]
    patterns = list(cfg.select) if cfg.select else []
    every = [r for t in tiers for r in t.runs]
    runs, _ = select_with_studies(every, [st for t in tiers for st in t.studies], patterns)
    chosen = {r.key + "@" + r.tier for r in runs}
    extra, store = _base_overrides(cfg), project_path(str(cfg.store_dir))
    return [(t, [resolve(r, extra, store, str(cfg.budget)) for r in t.runs if r.key + "@" + r.tier in chosen])
            for t in tiers]


def model_step(name: str, done: bool, kind: str, cfg: DictConfig, threads: int | None) -> Step:
    """The step that builds model prerequisite ``kind`` from ``cfg`` (here, or in a worker process)."""
    return Step(name, done, lambda: build_model(kind, cfg, threads), (kind, cfg))


def data_step(cfg: DictConfig, folder: Path, seen: set[str]) -> list[Step]:
    """The build of the processed dataset ``folder`` of ``cfg``, unless ``seen`` names it or it is a custom folder
    (built elsewhere); ``seen`` gains its name."""
    from experiments.datasets import prepare_dataset

    name = f"data {cfg.dataset.name} {folder.name}"
    if name in seen or cfg.dataset.get("folder"):
        return []
    seen.add(name)
    return [Step(name, (folder / "card.json").is_file(), lambda: prepare_dataset(cfg))]


def prepare_steps(runs: Sequence[ResolvedRun], threads: int | None = None) -> list[Step]:
    """Prerequisites of ``runs`` in order: datasets, cross-encoder model sets, learned-fusion models
    (each trained from the run's own config, with ``threads`` torch threads)."""
    from experiments import train_fusion

    steps: list[Step] = []
    seen: set[str] = set()
    for r in runs:
        steps += data_step(r.cfg, r.dataset_folder, seen)
    for r in runs:
        if OmegaConf.select(r.cfg, "method.model.train") is not None:
            folder = set_folder(to_dict(r.cfg.method.model), str(r.cfg.dataset.name), dataset_build_key(r.cfg))
            name = f"model cross_encoder {folder.parent.name}/{folder.name}"
            if name not in seen:
                seen.add(name)
                steps.append(model_step(name, (folder / FOLDS_JSON).is_file(), "cross_encoder", r.cfg, threads))
    for r in runs:
        if OmegaConf.select(r.cfg, "method.learned_fusion.enabled"):
            folder = train_fusion.model_folder(r.cfg)
            pool = folder.parent.name.partition("-")[2]   # the query pool it learns from ("" = every query)
            name = f"fusion {r.cfg.dataset.name} {folder.name}" + (f" pool {pool}" if pool else "")
            if name not in seen:
                seen.add(name)
                steps.append(model_step(name, (folder / "card.json").is_file(), "fusion", r.cfg, threads))
    return steps


def _prepare_file(runs: Sequence[ResolvedRun]) -> Path | None:
    return project_path(runs[0].cfg.results_dir) / PREPARE_FILE if runs else None


def _read_json(path: Path | None) -> dict[str, Any]:
    return json.loads(path.read_text()) if path is not None and path.is_file() else {}


def run_tier(tier: Tier, runs: list[ResolvedRun], cfg: DictConfig) -> list[str]:
    """Prepare and run what is missing of ``tier`` (prerequisites, runs, studies, in that order), and with
    ``run.overwrite=true`` its finished runs again; return the names of the jobs that failed."""
    from experiments.runner import run_job

    exp = E.read_expected(project_path(cfg.expected_dir) / f"{tier.name}.yaml")
    redo = {r.key for r in runs if r.done and r.cfg.run.get("overwrite")}   # run.overwrite=true: made again
    pending = [r for r in runs if not r.done or r.key in redo]
    threads = cfg.prepare.threads
    steps = prepare_steps(pending, None if threads is None else int(threads)) if pending else []
    studies = selected_studies(tier.studies, cfg.select)
    steps += study_data_steps([st for st in studies if not study_done(st, cfg)], cfg, {s.name for s in steps})
    recorded = {**(exp.get("prepare_seconds") or {}), **{k: (v or {}).get("seconds") for k, v in exp["runs"].items()}}
    jobs = steps + [Step(r.key, r.done and r.key not in redo, lambda r=r: run_job(r.cfg) if r.blocked is None
                         else _refuse(r.blocked)) for r in runs] \
        + [Step(st.key, study_done(st, cfg), lambda st=st: run_study(st, cfg)) for st in studies]
    print(f"== tier {tier.name}: {len(runs)} declared runs ({len(runs) - len(pending)} done), "
          f"{sum(not s.done for s in steps)} prerequisites to build, {len(studies)} studies ==", flush=True)
    progress = Progress([j.name for j in jobs], [0.0 if j.done else recorded.get(j.name) for j in jobs],
                        out=lambda line: print(line, flush=True))
    prep_file = _prepare_file(runs)
    measured = _read_json(prep_file)
    failed: list[str] = []

    def finish(i: int, seconds: float, exc: BaseException | None) -> None:
        job = jobs[i]
        if exc is not None:
            failed.append(job.name)
            progress.done(i, seconds, "FAILED")
            print(f"!! {job.name} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            traceback.print_exception(exc)
            if not cfg.keep_going:
                raise exc
            return
        progress.done(i, seconds)
        if i < len(steps) and prep_file is not None:   # prerequisite times, for the next ETA
            measured[job.name] = round(seconds, 1)
            prep_file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(prep_file, json.dumps(measured, indent=1, sort_keys=True) + "\n")

    workers = int(cfg.prepare.workers)
    in_pool = {i for i, j in enumerate(jobs) if j.model is not None and not j.done} if workers > 1 else set()
    for i, job in enumerate(jobs):
        if job.done:
            progress.done(i, 0.0, "skipped")
            continue
        if i in in_pool:
            if i == min(in_pool):
                order = longest_first(sorted(in_pool), [recorded.get(jobs[k].name) for k in sorted(in_pool)])
                build_in_workers([(k, jobs[k].model) for k in order], workers, threads, finish)
            continue
        t0 = time.perf_counter()
        try:
            job.make()
        except Exception as exc:  # noqa: BLE001 - one failing job must not cost the others
            finish(i, time.perf_counter() - t0, exc)
            continue
        except KeyboardInterrupt:   # Ctrl-C or a signal (experiments.stopping): nothing of this job is kept
            progress.done(i, time.perf_counter() - t0, "stopped")
            raise
        finish(i, time.perf_counter() - t0, None)
    return failed


def _refuse(reason: str) -> None:
    raise RuntimeError(reason)


def longest_first(indices: Sequence[int], seconds: Sequence[float | None]) -> list[int]:
    """``indices`` by recorded duration, longest first (unknown ones before all, then declared order): the
    order in which worker processes take prerequisites, so that they finish close together."""
    rank = {k: (-(s if s is not None else math.inf), n) for n, (k, s) in enumerate(zip(indices, seconds))}
    return sorted(indices, key=rank.__getitem__)


def _timed_build(kind: str, cfg: DictConfig, threads: int | None) -> float:
    t0 = time.perf_counter()
    build_model(kind, cfg, threads)
    return time.perf_counter() - t0


def worker_pool(workers: int) -> Any:
    """A ``ProcessPoolExecutor`` of ``workers`` spawned processes that end when this process ends, however it ends
    (``kill -9`` included: :func:`experiments.stopping.die_with_parent`), so no orphan goes on training."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker, initargs=(os.getpid(),))


def _start_worker(parent_pid: int) -> None:
    """A prerequisite worker's initializer: it dies with ``parent_pid`` and never acts on the parent's kill point."""
    die_with_parent(parent_pid)
    disarm()


def build_in_workers(models: Sequence[tuple[int, tuple[str, DictConfig]]], workers: int, threads: int | None,
                     finish: Callable[[int, float, BaseException | None], None]) -> None:
    """Build the model prerequisites ``models`` ((job index, (kind, run config))) in ``workers`` spawned
    processes (each with ``threads`` torch threads); ``finish(index, seconds, error)`` as each one ends.
    Runs are never built this way: their latencies are only comparable when they run alone."""
    from concurrent.futures import as_completed

    print(f"building {len(models)} model prerequisite(s) in {min(workers, len(models))} worker process(es), "
          f"{threads if threads is not None else 'default'} torch thread(s) each", flush=True)
    t0 = time.perf_counter()
    with worker_pool(min(workers, len(models))) as pool:
        futures = {pool.submit(_timed_build, kind, c, threads): i for i, (kind, c) in models}
        try:
            for fut in as_completed(futures):
                exc = fut.exception()
                finish(futures[fut], fut.result() if exc is None else time.perf_counter() - t0, exc)
                kill_point("model_built")
        except BaseException:
            for fut in futures:
                fut.cancel()
            # a stop must not wait for the models in training (minutes); each writes atomically, so nothing is half kept
            for proc in list((pool._processes or {}).values()):   # noqa: SLF001 - Python 3.11 has no terminate_workers()
                proc.terminate()
            raise


def write_cards(report: str, cfg: DictConfig, refs: Sequence[RunRef]) -> None:
    """Fill results/cards/<dataset>.md from the declared runs (``refs``) a tier names under ``difficulty`` (the
    core tier: window, BM25, vector), for every dataset where all of them are finished. Written with
    the report, after every run, so no run of the same reproduction sees a changed tracked file."""
    from experiments.difficulty import write_difficulty

    notes = (cfg.get("analysis") or {}).get("dataset_notes") or {}   # what a reader must know (conf/analysis)
    for t in report_tiers(report, cfg.reference_dir):
        if not t.difficulty:
            continue
        runs = [r for r in refs if r.tier == t.name and r.label in t.difficulty]
        for ds in dict.fromkeys(r.dataset for r in runs):
            folders = {r.label: r.folder for r in runs if r.dataset == ds and RunFolder(r.folder).is_whole}
            if len(folders) == len(t.difficulty):
                write_difficulty(ds, {m: folders[m] for m in t.difficulty}, report_dir(report, cfg) / "cards",
                                 beside_card=not from_store(cfg), note=notes.get(ds))


def from_store(cfg: DictConfig) -> bool:
    """Whether the report reads the reference store (``source=store``) rather than results folders."""
    source = str(cfg.get("source") or "runs")
    if source not in SOURCES:
        raise SystemExit(f"source={source!r} is not one of {list(SOURCES)}")
    return source == "store"


def _store_if_read(cfg: DictConfig) -> Path | None:
    return project_path(str(cfg.store_dir)) if from_store(cfg) else None


def report_dir(report: str, cfg: DictConfig) -> Path:
    """Where the report group ``report`` is written: from the reference store (``source=store``) the committed
    report (``committed_dir``), from results folders ``out_dir`` (``results/local``: a reproduction never rewrites
    the committed report). A report group of your own tier that ``out_dir`` does not name is written to
    ``<out_dir.reference>/<report>`` (``results/local/<report>``)."""
    committed = cfg.get("committed_dir") or {}
    if from_store(cfg) and report in committed:
        return project_path(str(committed[report]))
    if report in cfg.out_dir:
        return project_path(str(cfg.out_dir[report]))
    return project_path(str(cfg.out_dir.reference)) / plain_name(report, "report")


def study_folder(study: Study, cfg: DictConfig) -> Path:
    """``<results_dir>/studies/<name>`` of the run config the tier's runs use (``source=store``: the store's copy)."""
    if from_store(cfg):
        return RS.study_folder(project_path(str(cfg.store_dir)), study.tier, study.name)
    run_cfg = load_config([*_tier_overrides(study.tier, cfg), *_base_overrides(cfg)])
    return project_path(run_cfg.results_dir) / "studies" / study.name


def _tier_overrides(tier: str, cfg: DictConfig) -> list[str]:
    return list(load_tier(tier, cfg.reference_dir).overrides)


def _override_value(value: object) -> str:
    """``value`` as a Hydra override value: as is when plain, else single-quoted."""
    text = str(value)
    if re.fullmatch(r"[\w/.\-+@%:]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def study_dataset(study: Study, cfg: DictConfig) -> tuple[DictConfig, Path]:
    """The run config of the dataset ``study`` names (with the tier's and the command's overrides) and its
    processed folder."""
    ds_cfg = load_config([f"dataset={study.dataset}", *_tier_overrides(study.tier, cfg), *_base_overrides(cfg)])
    return ds_cfg, processed_folder(ds_cfg, dataset_build_key(ds_cfg))


def study_data_steps(studies: Sequence[Study], cfg: DictConfig, seen: set[str]) -> list[Step]:
    """The dataset builds the pending ``studies`` read and no step in ``seen`` makes (a tier of studies alone,
    such as ``judges``, starts from a fresh clone)."""
    return [step for st in studies if st.dataset for step in data_step(*study_dataset(st, cfg), seen)]


def study_command(study: Study, cfg: DictConfig, out_dir: Path | None = None) -> list[str]:
    """The study's command line: its declared overrides of its own top config, then its output folder
    (default: :func:`study_folder`), the run config's cache dir and (if named) processed dataset folder."""
    extra = [*_tier_overrides(study.tier, cfg), *_base_overrides(cfg)]
    run_cfg = load_config(extra)
    out = study_folder(study, cfg) if out_dir is None else out_dir
    cmd = [sys.executable, "-m", study.module, *study.overrides, f"out_dir={_override_value(out)}",
           f"cache_dir={_override_value(project_path(run_cfg.cache_dir))}"]
    if study.dataset:
        cmd.append(f"dataset_folder={_override_value(study_dataset(study, cfg)[1])}")
    if study.runs:
        declared = {r.key: r for r in load_tier(study.tier, cfg.reference_dir).runs}
        folders = {name: resolve(declared[key], _base_overrides(cfg)).folder for name, key in study.runs}
        cmd.append("run_folders={" + ", ".join(f"{n}: {_override_value(f)}" for n, f in folders.items()) + "}")
    return cmd


def run_study(study: Study, cfg: DictConfig) -> Path:
    """Run a study into a temporary folder renamed into place with ``DONE`` (a crash leaves nothing).
    The temporary folder's path, wherever the study wrote it (its manifest, tables), becomes the final one."""

    final = study_folder(study, cfg)
    t0 = time.perf_counter()
    with atomic_dir(final) as tmp:
        cmd = study_command(study, cfg, out_dir=tmp)
        print("$ " + " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, cwd=project_path("."), check=True)
        for f in [*tmp.glob("*.json"), *tmp.glob("*.md")]:
            f.write_text(f.read_text().replace(str(tmp), str(final)))
        (tmp / "command.txt").write_text(" ".join(["python", *cmd[1:]]).replace(str(tmp), str(final)) + "\n")
        (tmp / "seconds.txt").write_text(f"{time.perf_counter() - t0:.1f}\n")
        (tmp / "DONE").write_text("complete\n")
    return final


# Paths in a study's config that depend on where it ran, not on what it measured: compared by their last part (a
# run's or dataset's content hash), or not at all.
_STUDY_PATHS_BY_NAME = ("dataset_folder", "run_folders")
_STUDY_PATHS_IGNORED = ("out_dir", "cache_dir")


def _last_part(value: Any) -> Any:
    """A path's last part, or a mapping's paths' (``run_folders``: name -> folder)."""
    if isinstance(value, Mapping):
        return {k: Path(str(v)).name for k, v in value.items()}
    return Path(str(value)).name


def _comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in config.items() if k not in _STUDY_PATHS_IGNORED}
    for key in _STUDY_PATHS_BY_NAME:
        if out.get(key):
            out[key] = _last_part(out[key])
    return out


def study_drift(study: Study, cfg: DictConfig) -> list[str]:
    """The config keys whose values differ between a finished study's manifest and what its command composes now
    (a changed default, declared override or read run); [] when it matches or has not run."""
    man_path = study_folder(study, cfg) / MANIFEST
    if not man_path.is_file():
        return []
    made = _comparable(json.loads(man_path.read_text()).get("config") or {})
    now = _comparable(OmegaConf.to_container(load_config(study_command(study, cfg)[3:],
                                                         config_name=study.module.rsplit(".", 1)[-1]), resolve=True))
    return sorted(k for k in {*made, *now} if made.get(k) != now.get(k))


def study_done(study: Study, cfg: DictConfig) -> bool:
    """Finished (``DONE``) and made with the config its command composes now; a drifted study is made again
    (a study of the reference store is as it was stored)."""
    if not (study_folder(study, cfg) / "DONE").is_file():
        return False
    if from_store(cfg):
        return True
    drift = study_drift(study, cfg)
    if drift:
        print(f"study {study.name}: made with other settings ({', '.join(drift)}); it will be made again", flush=True)
    return not drift


def publish_studies(report: str, cfg: DictConfig, out_dir: Path) -> list[str]:
    """Copy each finished study's Markdown and JSON into the report folder; Markdown lines for the report."""
    lines = []
    for t in report_tiers(report, cfg.reference_dir):
        if not t.studies:
            continue
        roots = RS.machine_roots(to_dict(load_config([*_tier_overrides(t.name, cfg), *_base_overrides(cfg)])))
        for st in t.studies:
            folder = study_folder(st, cfg)
            dest = out_dir / st.publish
            if not (folder / "DONE").is_file():
                lines.append(f"- `{st.name}` (tier {t.name}): not run (n/m†)")
                continue
            dest.mkdir(parents=True, exist_ok=True)
            for f in sorted(folder.glob("*.md")) + sorted(folder.glob("*.json")):   # the manifest as <name>.manifest.json
                RS.publish_portable(f, dest / (f"{st.name}.{f.name}" if f.name == MANIFEST else f.name), roots)
            md = sorted(folder.glob("*.md"))
            link = f"{st.publish}/{md[0].name}" if md else st.publish
            command = RS.portable_text((folder / "command.txt").read_text().strip(), roots)
            lines.append(f"- [`{st.name}`]({link}) (tier {t.name}): `{command}`")
    return lines


def _finished_studies(report: str, cfg: DictConfig) -> Iterator[tuple[Study, Path]]:
    """(study, folder) of every study of the report group ``report`` whose folder is finished (``DONE``)."""
    for t in report_tiers(report, cfg.reference_dir):
        for st in t.studies:
            folder = study_folder(st, cfg)
            if (folder / "DONE").is_file():
                yield st, folder


def study_tables(report: str, cfg: DictConfig) -> dict[str, str]:
    """The Markdown table of every finished study of the report group ``report`` (its first .md file), by name."""
    out = {}
    for st, folder in _finished_studies(report, cfg):
        md = sorted(folder.glob("*.md"))
        if md:
            out[st.name] = md[0].read_text()
    return out


def study_docs(report: str, cfg: DictConfig) -> dict[str, dict]:
    """The JSON document of every finished study of the report group ``report`` (its first .json file other than
    the manifest), by name: what the claims table reads (analysis/claims.py)."""
    out = {}
    for st, folder in _finished_studies(report, cfg):
        docs = [f for f in sorted(folder.glob("*.json")) if f.name != MANIFEST]
        if docs:
            out[st.name] = json.loads(docs[0].read_text())
    return out


def refs_for(report: str, cfg: DictConfig) -> list[RunRef]:
    """Every declared run of the report group ``report``, located by config hash (``source=store``: in the
    reference store's index, without composing any config; a run the store lacks is not finished there)."""
    extra = _base_overrides(cfg)
    store = project_path(str(cfg.store_dir))
    index = RS.read_index(store) if from_store(cfg) else {}
    refs = []
    for t in report_tiers(report, cfg.reference_dir):
        for d in t.runs:
            if from_store(cfg):
                folder = RS.run_folder(store, t.name, d.key)
                stored = d.key in (index.get(t.name) or {}).get("runs", {})
                ds_folder = RunFolder(folder).dataset_folder if stored else store / RS.DATASETS / d.dataset
                refs.append(RunRef(RunFolder(folder).dataset if stored else d.dataset, d.label, d.tier,
                                   folder if stored else folder / "(not stored)", ds_folder, d.describe()))
                continue
            refs.append(resolve(d, extra).ref(d.tier))
    return refs


class ReportRefused(RuntimeError):
    """The report would be written from no finished run (it would replace the committed one with empty tables)."""


SEEDS_GROUP, SEEDS_FROM = "seeds", "reference"   # the seed studies' report, from runs of the reference group


def report_groups(tiers: Sequence[Tier], cfg: DictConfig) -> list[str]:
    """The report groups of ``tiers`` in order, the seed studies' report after the group it draws from."""
    groups = list(dict.fromkeys(t.report for t in tiers))
    if SEEDS_FROM in groups and SEEDS_GROUP in cfg.out_dir:
        groups.insert(groups.index(SEEDS_FROM) + 1, SEEDS_GROUP)
    only = cfg.get("reports")
    if only:
        unknown = sorted(set(only) - set(groups))
        if unknown:
            raise SystemExit(f"reports={list(only)}: {unknown} is not a report of tier={cfg.tier} (its reports: {groups})")
        groups = [g for g in groups if g in only]
    return groups


def _refuse_unless_finished(report: str, refs: Sequence[RunRef], out_dir: Path, store: Path | None = None) -> None:
    """ReportRefused when no declared run of ``report`` is finished (in the reference ``store`` when given)."""
    if any(RunFolder(r.folder).is_done for r in refs):
        return
    if store is not None:
        raise ReportRefused(f"the reference store {store} holds no run of the {report!r} report yet: a tier is stored "
                            "after it was made in one piece (python -m experiments.reproduce tier=<tier> action=store); "
                            f"the report in {out_dir} was left as it is")
    where = RunFolder(refs[0].folder).results_dir if refs else "(no declared runs)"
    raise ReportRefused(f"no declared run of the {report!r} report is finished under {where}: is results_dir "
                        f"mistyped, or were the runs not made yet? The report in {out_dir} was left as it is.")


def write_seed_report(cfg: DictConfig) -> Path:
    """The seed studies' report (analysis/seed_report.py) from the declared runs its seeds name."""
    out_dir = report_dir(SEEDS_GROUP, cfg)
    settings = load_cfg([f"out_dir={out_dir}"], base=cfg.analysis)
    refs = named_refs(settings, refs_for(SEEDS_FROM, cfg))
    _refuse_unless_finished(SEEDS_GROUP, refs, out_dir, _store_if_read(cfg))
    return build_seed_report(settings, refs, study_tables(SEEDS_FROM, cfg))


def write_report(report: str, cfg: DictConfig) -> Path:
    """The report of group ``report`` (reference, smoke or seeds) from exactly its declared runs."""
    if report == SEEDS_GROUP:
        return write_seed_report(cfg)
    refs = refs_for(report, cfg)
    out_dir = report_dir(report, cfg)
    _refuse_unless_finished(report, refs, out_dir, _store_if_read(cfg))
    write_cards(report, cfg, refs)
    studies = publish_studies(report, cfg, out_dir)
    extra = [("Studies", "Studies run outside the runner (most call the LLMs themselves); each table is regenerated "
              "by its tier from the command shown and verified like the runs (`results/verification/`).\n\n"
              + "\n".join(studies))] if studies else []
    pointer = []
    if report == SEEDS_FROM and SEEDS_GROUP in cfg.out_dir:
        rel = os.path.relpath(report_dir(SEEDS_GROUP, cfg) / "report.md", out_dir)
        pointer = [f"seeds_report={rel}"]
    path = build_report(load_cfg([f"out_dir={out_dir}", *pointer], base=cfg.analysis), refs, extra,
                        study_docs(report, cfg))
    if refs and not from_store(cfg):
        results_dir = RunFolder(refs[0].folder).results_dir
        extra = undeclared(results_dir, refs)
        if extra:
            print(f"{len(extra)} finished run(s) under {results_dir} are not declared and were left out of the report:")
            for r in extra:
                print(f"  {r.dataset}/{r.method}/{r.config_hash}")
    return path


def verify_metrics(cfg: DictConfig) -> list[str]:
    """``cfg.verify_metrics`` in canonical (ranx) names, the keys of metrics.json and the expected-scores
    files, whichever spelling was given (``nDCG@10`` or ``ndcg@10``); SystemExit naming the key otherwise."""
    try:
        return list(canonical_metrics(cfg.verify_metrics, "verify_metrics"))
    except UnknownMetric as exc:
        raise SystemExit(str(exc)) from exc


def verify_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig, write: bool = True) -> tuple[bool, str]:
    """(passed, markdown table) of ``tier``'s runs against its expected-scores file; the table is written to
    ``<out_dir>/verification/<tier>.md`` only for the whole tier (a ``select`` prints it, and leaves the committed
    table of every run alone)."""
    path = project_path(cfg.expected_dir) / f"{tier.name}.yaml"
    expected = E.read_expected(path)
    store = project_path(str(cfg.store_dir))
    index = (RS.read_index(store).get(tier.name) or {}).get("runs", {})
    stored = {k: RS.run_folder(store, tier.name, k) for k in index}
    for r in runs:
        if r.blocked:
            print(f"MISSING {r.blocked}", file=sys.stderr, flush=True)
    df = E.verify([(r.key, r.folder if r.blocked is None and RunFolder(r.folder).is_done else None) for r in runs], expected,
                  verify_metrics(cfg), list(cfg.answer_metrics), stored)
    studies = selected_studies(tier.studies, cfg.select)
    if studies:
        items = [(st.key, E.measure_study(study_folder(st, cfg), st.row_key, st.metrics) if study_done(st, cfg) else None,
                  None) for st in studies]
        df = pd.concat([df, E.compare(items, expected)], ignore_index=True)
    text = E.format_verification(df, f"tier {tier.name} against {path.relative_to(project_path('.'))}"
                                 if path.is_relative_to(project_path(".")) else f"tier {tier.name} against {path}")
    if write and not cfg.select:
        atomic_write_text(project_path(str(cfg.out_dir[tier.report])) / "verification" / f"{tier.name}.md", text)
    return E.passed(df), text


def kept_entries(runs: Sequence[ResolvedRun], old: Mapping[str, Any], select: Sequence[str]) -> set[str]:
    """Keys of the runs whose expected entries a selective write keeps: those only read by a selected study (``select``
    does not name them) whose entry has their config hash. Their scores and recorded times stay as written."""
    if not select:
        return set()
    return {r.key for r in runs if not matches(r.key, select) and (old.get(r.key) or {}).get("config_hash") == r.config_hash}


def write_expected_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig) -> Path:
    """Write (or, with ``select``, update) ``tier``'s expected-scores file from its finished runs."""
    _replays_only(tier, cfg, "write_expected")
    missing = [r.key for r in runs if not r.done]
    if missing:
        raise SystemExit(f"tier {tier.name}: {len(missing)} declared run(s) are not finished, e.g. {missing[:5]}; "
                         f"run them first (python -m experiments.reproduce tier={tier.name} action=run)")
    rules = yaml.safe_load((project_path(cfg.reference_dir) / "tolerances.yaml").read_text())
    path = project_path(cfg.expected_dir) / f"{tier.name}.yaml"
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
        entries[r.key] = E.expected_record(r.folder, tol, answer_tol, verify_metrics(cfg), list(cfg.answer_metrics),
                                           previous=old["runs"].get(r.key))
    for st in selected_studies(tier.studies, cfg.select):
        if not study_done(st, cfg):
            raise SystemExit(f"tier {tier.name}: study {st.name} is not finished; run the tier first")
        tol = E.tolerance_for(st.module.rsplit(".", 1)[-1], rules)
        classes[tol.klass] = tol
        folder = study_folder(st, cfg)
        entries[st.key] = {"class": tol.klass, "tolerance": tol.value,
                           "metrics": E.measure_study(folder, st.row_key, st.metrics),
                           "seconds": float((folder / "seconds.txt").read_text())}
    dirty = [r.key for r in runs if r.key not in kept and E.provenance(r.folder)["dirty"]]
    if dirty:
        print(f"warning: {len(dirty)} run(s) were made from a dirty tree, e.g. {dirty[:3]}", file=sys.stderr)
    keys = [d.key for d in tier.runs] + [st.key for st in tier.studies]   # the tier's declared order, whatever the selection
    order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    entries = dict(sorted(entries.items(), key=lambda kv: order.get(kv[0], len(order))))
    measured = _read_json(_prepare_file(list(runs)))
    plan = prepare_steps(runs)
    recorded = dict(old.get("prepare_seconds") or {})   # only the current prerequisites: renamed ones drop out
    prep = {s.name: measured.get(s.name, recorded.get(s.name)) for s in plan if s.name in measured or s.name in recorded}
    if cfg.select:   # part of the tier: the other runs' prerequisites keep their recorded times
        prep = {**recorded, **prep}
    E.write_expected(path, tier.name, entries, classes, prep)
    print(f"written: {path} ({len(runs)} runs)")
    return path


def _replays_only(tier: Tier, cfg: DictConfig, action: str) -> None:
    """SystemExit when ``action`` would file wall-clock runs where the tier declares replays: the store and the
    expected scores hold the deterministic replays (budget=replay), never a CPU-dependent reach."""
    if str(cfg.budget) != "replay" and any(r.replay for r in tier.runs):
        raise SystemExit(f"action={action} budget={cfg.budget}: tier {tier.name} declares replay runs, and the store and "
                         f"its expected scores hold their replays; drop budget={cfg.budget} (after action=record_reach)")


def record_reach_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig) -> list[Path]:
    """Write the reach each finished wall-clock run of ``tier``'s ``replay: true`` runs recorded per query into the
    reference store (``<store>/<tier>/<dataset>/<label>/reach.json``), where budget=replay reads it; the files."""
    if str(cfg.budget) != "wallclock":
        raise SystemExit("action=record_reach reads the wall-clock runs: add budget=wallclock")
    replays = [r for r in runs if r.declared.replay]
    missing = [r.key for r in replays if not r.done]
    if missing:
        raise SystemExit(f"tier {tier.name}: {len(missing)} wall-clock run(s) are not finished, e.g. {missing[:5]}; run "
                         f"them first (python -m experiments.reproduce tier={tier.name} budget=wallclock action=run)")
    store, files = project_path(str(cfg.store_dir)), []
    for r in replays:
        dest = RS.run_folder(store, tier.name, r.key)
        if not RS.write_reach(dest, RunFolder(r.folder).per_query):
            raise SystemExit(f"{r.key}: its run ({r.folder}) recorded no reach for some query; make it again")
        files.append(dest / RS.REACH)
    print(f"recorded: the reach of {len(files)} wall-clock run(s) of tier {tier.name} -> {store}")
    return files


def store_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig) -> Path:
    """Write ``tier``'s part of the reference store (experiments.reference_store) from its finished declared runs and
    studies; the store's folder. Every declared run must be finished (the store holds a tier whole)."""
    from analysis import views as V

    if cfg.select:
        raise SystemExit("action=store writes a tier whole; drop select")
    _replays_only(tier, cfg, "store")
    missing = [r.key for r in runs if not r.done] + [st.key for st in tier.studies if not study_done(st, cfg)]
    if missing:
        raise SystemExit(f"tier {tier.name}: {len(missing)} declared run(s) or studies are not finished, e.g. "
                         f"{missing[:5]}; run them first (python -m experiments.reproduce tier={tier.name} action=run)")
    store = project_path(str(cfg.store_dir))
    settings = load_cfg(base=cfg.analysis)
    labels = {"coverage_n": int(settings["coverage_n"]), "contradiction_k": int(settings["contradiction_k"]),
              "answer_recall_chars": settings.get("answer_recall_chars")}
    roots = RS.machine_roots(to_dict(runs[0].cfg)) if runs else RS.machine_roots(None)
    refs = [r.ref(tier.name) for r in runs]
    views = V.collect(settings, refs)
    entries, keep = {}, set()
    for r in runs:
        run, view = RunFolder(r.folder), views[r.declared.dataset]
        dataset = RS.store_dataset(run.dataset_folder, r.declared.dataset, store, roots)
        dest = RS.run_folder(store, tier.name, r.key)
        RS.write_run(r.key, run, RS.stored_per_query(view, r.declared.label), labels, dataset, dest, roots)
        entries[r.key] = {"config_hash": r.config_hash, "folder": dest.relative_to(store).as_posix(),
                          "dataset": dataset.relative_to(store).as_posix()}
        keep.add(dest)
    for st in tier.studies:
        dest = RS.study_folder(store, tier.name, st.name)
        RS.write_study(study_folder(st, cfg), dest, roots)
        keep.add(dest)
    RS.remove_stale(store, tier.name, keep | {store / tier.name / RS.STUDIES})
    RS.write_index(store, tier.name, entries, [st.name for st in tier.studies])
    ok, text = verify_tier(tier, runs, cfg, write=False)   # against the store just written: every per-query row identical
    committed = cfg.get("committed_dir") or {}
    if tier.report in committed:
        atomic_write_text(project_path(str(committed[tier.report])) / "verification" / f"{tier.name}.md", text)
    if not ok:
        print(text)
        raise SystemExit(f"tier {tier.name} was stored, but its runs do not verify against its expected scores: "
                         "regenerate them (action=write_expected) if the change is right, then store again")
    print(f"stored: tier {tier.name}, {len(entries)} runs and {len(tier.studies)} studies -> {store}")
    return store


def reproduce(cfg: DictConfig) -> int:
    """Carry out ``cfg.action`` for ``cfg.tier``; the process exit code."""
    if cfg.action not in ACTIONS:
        raise SystemExit(f"action={cfg.action!r} is not one of {list(ACTIONS)}")
    verify_metrics(cfg)   # a mistyped name fails now, not after the tier has run
    t_start = time.perf_counter()
    if cfg.action == "report" and from_store(cfg):   # the store's index locates the runs: no config is composed
        tiers = [(load_tier(n, cfg.reference_dir), []) for n in tier_names(str(cfg.tier))]
    else:
        tiers = resolve_tiers(cfg)
    code = 0
    if cfg.action == "write_expected":
        for tier, runs in tiers:
            write_expected_tier(tier, runs, cfg)
        return 0
    if cfg.action == "store":
        for tier, runs in tiers:
            store_tier(tier, runs, cfg)
        return 0
    if cfg.action == "record_reach":
        for tier, runs in tiers:
            record_reach_tier(tier, runs, cfg)
        return 0
    if cfg.action in ("all", "run"):
        failed = [k for tier, runs in tiers for k in run_tier(tier, runs, cfg)]
        if failed:
            print(f"{len(failed)} step(s) or run(s) failed: {failed}", file=sys.stderr)
            code = 1
        tiers = resolve_tiers(cfg)   # done flags after running
    if cfg.action == "report" or (cfg.action == "all" and not cfg.select):
        for report in report_groups([t for t, _ in tiers], cfg):
            try:
                write_report(report, cfg)
            except ReportRefused as exc:
                # the seed report comes with every reference tier unasked; its runs are other tiers' (TIER=label_free)
                if report == SEEDS_GROUP and not cfg.get("reports"):
                    print(f"the seed studies' report was not written: {exc} (its runs come with the core, seeds and "
                          "seed003 tiers)", file=sys.stderr)
                    continue
                print(f"report refused: {exc}", file=sys.stderr)
                code = 2
            except Exception as exc:  # noqa: BLE001 - a broken report must not hide the verification below
                traceback.print_exception(exc)
                print(f"!! the {report!r} report failed: {type(exc).__name__}: {exc}; the verification follows",
                      file=sys.stderr, flush=True)
                code = 2
    elif cfg.action == "all":
        print("report skipped: `select` runs part of a tier (python -m experiments.reproduce action=report writes it)")
    if cfg.action in ("all", "verify"):
        for tier, runs in tiers:
            ok, text = verify_tier(tier, runs, cfg)
            print(text, flush=True)
            code = code or (0 if ok else 1)
    print(f"reproduce tier={cfg.tier} action={cfg.action}: {'OK' if code == 0 else 'FAILED'} in "
          f"{time.perf_counter() - t_start:.0f} s", flush=True)
    return code


OWN_KEYS = ("tier", "action", "budget", "select", "reports", "overrides", "prepare", "keep_going", "reference_dir", "expected_dir", "out_dir",
            "analysis", "verify_metrics", "answer_metrics", "source", "store_dir", "committed_dir")


def forwarded(task_overrides: Sequence[str]) -> list[str]:
    """The command-line overrides meant for the runs: every one whose key is not reproduce's own."""
    out = []
    for o in task_overrides:
        key = o.split("=", 1)[0].lstrip("+~").split("@", 1)[0]
        if key.split(".", 1)[0] not in OWN_KEYS:
            out.append(o)
    return out


def load(overrides: Sequence[str] = ()) -> DictConfig:
    """The reproduce config with command-line style overrides (for tests and tools): reproduce's own
    keys set it, every other override is passed on to the declared runs."""
    own = [o for o in overrides if o not in forwarded([o])]
    cfg = load_config(own, config_name="reproduce")
    with open_dict(cfg):
        cfg.overrides = [*cfg.overrides, *forwarded(overrides)]
    return cfg


@hydra.main(config_path="../conf", config_name="reproduce", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    logging.getLogger("experiments").setLevel(logging.INFO)
    for noisy in ("fontTools", "matplotlib", "sentence_transformers", "lethebench.build"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with open_dict(cfg):
        cfg.overrides = [*cfg.overrides, *forwarded(HydraConfig.get().overrides.task)]
    with stop_on_signals():
        try:
            code = reproduce(cfg)
        except KeyboardInterrupt as exc:
            name, code = stop_reason(exc)
            print(f"reproduce tier={cfg.tier} action={cfg.action}: stopped by {name}; finished runs, models and "
                  "studies are kept, the one in flight left nothing: the same command resumes", file=sys.stderr, flush=True)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    check_arguments(sys.argv[1:])   # before Hydra: no credential, every override parseable
    main()
