"""The reproduction contract: run declared tiers, write the report from them, verify expected scores.

    python -m experiments.reproduce                          # tier core: run, report, verify (make reproduce)
    python -m experiments.reproduce tier=all                 # core, ablations, regimes, label_free, rerank_pool, llm, llm_studies, seeds, seed003, judges (make reproduce-all)
    python -m experiments.reproduce tier=smoke               # the tests' tier, into its own folders
    python -m experiments.reproduce action=report            # the report only (from finished runs)
    python -m experiments.reproduce tier=all action=report reports=[seeds]   # the seed studies' report only
    python -m experiments.reproduce action=verify tier=all   # the verification table only
    python -m experiments.reproduce tier=core action=write_expected   # expected scores from finished runs
    python -m experiments.reproduce tier=all action=rekey    # after a change of the identity rules (experiments/rekey.py)
    python -m experiments.reproduce tier=all action=retier   # after runs moved to another tier (experiments/retier.py)
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
import sys
import time
import traceback
from collections.abc import Sequence

import hydra
import yaml
from omegaconf import DictConfig, open_dict

from analysis import expected as E
from experiments import reference_store as RS
from experiments.config import load_config
from experiments.expected_scores import record_reach_tier, store_tier, verify_tier, write_expected_tier
from experiments.prerequisites import Step, build_in_workers, longest_first, prepare_file, prepare_steps, read_json
from experiments.progress import Progress
from experiments.publishing import (
    SEEDS_GROUP,
    ReportRefused,
    refs_for,
    report_groups,
    site_wanted,
    write_readme,
    write_report,
    write_site,
)
from experiments.reference import (
    ResolvedRun,
    Tier,
    load_tier,
    resolve,
    select_with_studies,
    selected_studies,
    tier_names,
)
from experiments.rekey import print_rekeyed, recomputed, rekey_tier
from experiments.report_staging import staged_reports
from experiments.reproduce_settings import ACTIONS, STORE_READERS, base_overrides, from_store, verify_metrics
from experiments.retier import print_retiered, retier, sources
from experiments.stopping import stop_on_signals, stop_reason
from experiments.store_seal import write_seal
from experiments.study_jobs import run_study, study_data_steps, study_done
from lethe.core.arguments import check_arguments
from lethe.core.atomic import atomic_write_text
from lethe.core.overrides import override_keys
from lethe.core.paths import CONF_DIR, Paths

__all__ = [
    "load",
    "reproduce",
    "resolve_tiers",
    "run_tier",
    "refs_for",
    "report_groups",
    "ReportRefused",
    "SEEDS_GROUP",
    "write_report",
    "main",
]  # refs_for & co.: the names notebooks and tools use through this module

log = logging.getLogger(__name__)


def resolve_tiers(cfg: DictConfig) -> list[tuple[Tier, list[ResolvedRun]]]:
    """The selected tiers with their (selected) declared runs, resolved to results folders."""
    tiers = [load_tier(n, cfg.reference_dir) for n in tier_names(str(cfg.tier))]
    patterns = list(cfg.select) if cfg.select else []
    every = [r for t in tiers for r in t.runs]
    runs, _ = select_with_studies(every, [st for t in tiers for st in t.studies], patterns)
    chosen = {r.key + "@" + r.tier for r in runs}
    extra, store = base_overrides(cfg), Paths.of(cfg).reference_store
    return [
        (t, [resolve(r, extra, store, str(cfg.budget)) for r in t.runs if r.key + "@" + r.tier in chosen])
        for t in tiers
    ]


def run_tier(tier: Tier, runs: list[ResolvedRun], cfg: DictConfig) -> list[str]:
    """Prepare and run what is missing of ``tier`` (prerequisites, runs, studies, in that order), and with
    ``run.overwrite=true`` its finished runs again; return the names of the jobs that failed."""
    from experiments.runner import run_job

    exp = E.read_expected(Paths.of(cfg).resolve(cfg.expected_dir) / f"{tier.name}.yaml")
    redo = {r.key for r in runs if r.done and r.cfg.run.get("overwrite")}  # run.overwrite=true: made again
    pending = [r for r in runs if not r.done or r.key in redo]
    threads = cfg.prepare.threads
    steps = prepare_steps(pending, None if threads is None else int(threads)) if pending else []
    studies = selected_studies(tier.studies, cfg.select)
    steps += study_data_steps([st for st in studies if not study_done(st, cfg)], cfg, {s.name for s in steps})
    recorded = {**(exp.get("prepare_seconds") or {}), **{k: (v or {}).get("seconds") for k, v in exp["runs"].items()}}
    jobs = (
        steps
        + [
            Step(
                r.key,
                r.done and r.key not in redo,
                lambda r=r: run_job(r.cfg) if r.blocked is None else _refuse(r.blocked),
            )
            for r in runs
        ]
        + [Step(st.key, study_done(st, cfg), lambda st=st: run_study(st, cfg)) for st in studies]
    )
    print(
        f"== tier {tier.name}: {len(runs)} declared runs ({len(runs) - len(pending)} done), "
        f"{sum(not s.done for s in steps)} prerequisites to build, {len(studies)} studies ==",
        flush=True,
    )
    progress = Progress(
        [j.name for j in jobs],
        [0.0 if j.done else recorded.get(j.name) for j in jobs],
        out=lambda line: print(line, flush=True),
    )
    prep_file = prepare_file(runs)
    measured = read_json(prep_file)
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
        if i < len(steps) and prep_file is not None:  # prerequisite times, for the next ETA
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
        except KeyboardInterrupt:  # Ctrl-C or a signal (experiments.stopping): nothing of this job is kept
            progress.done(i, time.perf_counter() - t0, "stopped")
            raise
        finish(i, time.perf_counter() - t0, None)
    return failed


def _refuse(reason: str) -> None:
    raise RuntimeError(reason)


def publish_reports(groups: Sequence[str], cfg: DictConfig) -> int:
    """Write the report groups ``groups`` and their sites into a scratch folder and swap them in only when every one
    succeeded (experiments.report_staging); 0, or 2 when one failed or was refused: the previous reports are then
    left exactly as they were."""
    code, written = 0, []
    if not groups:
        return 0
    with staged_reports(groups, cfg) as stage:
        for report in groups:
            try:
                with stage.step(report):
                    write_report(report, stage.cfg)
                written.append(report)
            except ReportRefused as refused:
                why = stage.in_place(refused)
                # the seed report comes with every reference tier unasked; its runs are other tiers' (TIER=label_free)
                if report == SEEDS_GROUP and not cfg.get("reports"):
                    print(
                        f"the seed studies' report was not written: {why} (its runs come with the core, seeds and "
                        "seed003 tiers)",
                        file=sys.stderr,
                    )
                    continue
                print(f"report refused: {why}", file=sys.stderr)
                code = 2
            except Exception as exc:  # noqa: BLE001 - a broken report must not hide the verification below
                traceback.print_exception(exc)
                print(
                    f"!! the {report!r} report failed: {type(exc).__name__}: {exc}; the verification follows",
                    file=sys.stderr,
                    flush=True,
                )
                code = 2
        for report in [r for r in written if site_wanted(r, cfg)]:  # after the seed report, whose tables it shows
            try:
                with stage.step(report):
                    write_site(report, stage.cfg, published=stage.finals[report])
            except Exception as exc:  # noqa: BLE001 - say what failed; nothing is published
                traceback.print_exception(exc)
                print(f"!! the {report!r} report's site failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                code = 2
        if code == 0:
            stage.swap()
            for report, names in stage.entries.items():
                if names:
                    print(f"published ({report}): {', '.join(sorted(names))} -> {stage.finals[report]}", flush=True)
        else:
            print("nothing of this report was published: the previous one is left as it was", file=sys.stderr)
    if code == 0:
        for report in written:
            write_readme(report, cfg)
    return code


def verify_from_store(tier: Tier, cfg: DictConfig, committed: bool = False) -> bool:
    """Verify every declared run and study of a stored ``tier`` from the reference store alone (printed); with
    ``committed``, the table is also written as the tier's committed verification table (as action=store does)."""
    everything = [r.key for r in tier.runs] + [st.key for st in tier.studies]
    ok, text = verify_tier(tier, [], cfg, write=False, kept=everything)
    print(text, flush=True)
    folder = (cfg.get("committed_dir") or {}).get(tier.report)
    if committed and folder is not None:
        atomic_write_text(Paths.default().resolve(str(folder)) / "verification" / f"{tier.name}.md", text)
    return ok


def retier_tiers(cfg: DictConfig) -> int:
    """action=retier (experiments/retier.py): move the records of runs and studies declared in another tier now,
    check that each moved run's stored config gives its new declaration's hash under the current identity rules
    (a hash recorded under older rules is then re-filed by action=rekey), verify the tiers involved from the store."""
    paths = Paths.of(cfg)
    tiers = [load_tier(n, cfg.reference_dir) for n in tier_names(str(cfg.tier))]
    moves = retier(tiers, cfg)
    print_retiered(moves)
    code, store = 0, paths.reference_store
    extra = base_overrides(cfg)
    names = [t.name for t in tiers]
    for name in [*names, *(s for s in sources(moves) if s not in names)]:
        if not (paths.resolve(cfg.reference_dir) / f"{name}.yaml").is_file():  # a tier no longer declared
            for folder in (cfg.get("committed_dir") or {}).values():
                (paths.resolve(str(folder)) / "verification" / f"{name}.md").unlink(missing_ok=True)
            continue
        tier = load_tier(name, cfg.reference_dir)
        for d in tier.runs:
            folder = RS.run_folder(store, name, d.key)
            if d.key in moves.get(name, {}) and (folder / "manifest.json").is_file():
                got, _, _ = recomputed(folder)  # the stored record under the current identity rules
                r = resolve(d, extra, store, str(cfg.budget))
                if got != r.config_hash:
                    print(
                        f"retier: {name}/{d.key}: its stored config gives {got}, but its new declaration resolves "
                        f"to {r.config_hash}: the move changed what it declares (git restore the moved files, fix "
                        "the declaration)",
                        file=sys.stderr,
                    )
                    code = 1
        if name in RS.read_index(store):
            code = code or (0 if verify_from_store(tier, cfg, committed=True) else 1)
    return code


def reproduce(cfg: DictConfig) -> int:
    """Carry out ``cfg.action`` for ``cfg.tier``; the process exit code."""
    paths = Paths.of(cfg)
    if cfg.action not in ACTIONS:
        raise SystemExit(f"action={cfg.action!r} is not one of {list(ACTIONS)}")
    verify_metrics(cfg)  # a mistyped name fails now, not after the tier has run
    t_start = time.perf_counter()
    if cfg.action == "seal":  # the store as it is: no config is composed, no run read
        store = paths.reference_store
        for name in tier_names(str(cfg.tier)):
            print(f"sealed: tier {name} -> {write_seal(store, name)}")
        return 0
    if cfg.action == "retier":  # before any config is composed: a moved replay run finds its reach only after the move
        return retier_tiers(cfg)
    if from_store(cfg) and cfg.action not in STORE_READERS:
        raise SystemExit(
            f"source=store is read by action={' and action='.join(STORE_READERS)} only; action={cfg.action} works "
            "on results folders (leave source at its default, runs)"
        )
    if cfg.action in STORE_READERS and from_store(cfg):  # the store's index locates the runs: no config is composed
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
    if cfg.action == "rekey":  # then each stored tier verified from the store alone: nothing but the identity moved
        index = RS.read_index(paths.reference_store)
        for tier, runs in tiers:
            out = rekey_tier(tier, runs, cfg)
            print_rekeyed(tier.name, out)
            code = code or (1 if out["refused"] else 0)
            if tier.name in index:
                code = code or (0 if verify_from_store(tier, cfg) else 1)
        return code
    if cfg.action in ("all", "run"):
        failed = [k for tier, runs in tiers for k in run_tier(tier, runs, cfg)]
        if failed:
            print(f"{len(failed)} step(s) or run(s) failed: {failed}", file=sys.stderr)
            code = 1
        tiers = resolve_tiers(cfg)  # done flags after running
    if cfg.action == "report" or (cfg.action == "all" and not cfg.select):
        code = publish_reports(report_groups([t for t, _ in tiers], cfg), cfg) or code
    elif cfg.action == "all":
        print("report skipped: `select` runs part of a tier (python -m experiments.reproduce action=report writes it)")
    if cfg.action == "verify" and from_store(cfg):
        for tier, _ in tiers:
            code = code or (0 if verify_from_store(tier, cfg) else 1)
    elif cfg.action in ("all", "verify"):
        for tier, runs in tiers:
            ok, text = verify_tier(tier, runs, cfg)
            print(text, flush=True)
            code = code or (0 if ok else 1)
    print(
        f"reproduce tier={cfg.tier} action={cfg.action}: {'OK' if code == 0 else 'FAILED'} in "
        f"{time.perf_counter() - t_start:.0f} s",
        flush=True,
    )
    return code


def own_keys() -> frozenset[str]:
    """reproduce's own top-level keys: those ``conf/reproduce.yaml`` sets and the groups it composes besides the run
    config (``analysis``); every other key of the composed config is the run config's, passed on to the runs."""
    doc = yaml.safe_load((CONF_DIR / "reproduce.yaml").read_text())
    groups = [
        next(iter(d)) for d in doc["defaults"] if isinstance(d, dict) and not next(iter(d)).startswith("override ")
    ]
    return frozenset(k for k in [*doc, *groups] if k not in ("defaults", "hydra"))


OWN_KEYS = own_keys()


def forwarded(task_overrides: Sequence[str]) -> list[str]:
    """The command-line overrides meant for the runs: every one whose key is not reproduce's own."""
    return [
        o
        for o, key in zip(task_overrides, override_keys(task_overrides), strict=True)
        if key.split(".", 1)[0] not in OWN_KEYS
    ]


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
            print(
                f"reproduce tier={cfg.tier} action={cfg.action}: stopped by {name}; finished runs, models and "
                "studies are kept, the one in flight left nothing: the same command resumes",
                file=sys.stderr,
                flush=True,
            )
    if code:
        sys.exit(code)


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
