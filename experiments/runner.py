"""The runner: one (dataset, method) run from a resolved config to a results folder.

It alone decides what a method may see: for each query, the docs of the query's scope with
``position < query.position`` (all of the scope when the query comes after the last doc). Queries
that share the same eligible set share one ``index`` call. Every returned doc id is checked
against the eligible set; a violation stops the run.

Final order of a ranking: score descending, ties broken by doc id descending (trec_eval's rule),
so that anyone re-evaluating ``run.trec`` with another tool gets the same order.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig
from tqdm.auto import tqdm

from analysis.answers import AnswerRules, answer_rules, embedding_similarity
from analysis.metric_names import UnknownMetric, canonical_metrics, deeper_than
from analysis.metrics import evaluate_run, run_scores
from experiments.config import to_dict
from experiments.datasets import dataset_key, prepare_dataset, recorded_dataset
from experiments.launchers import launch_info
from experiments.run_identity import RunIdentity, config_hash, method_params, run_identity
from lethe.core.faults import kill_point
from lethe.core.hashing import sha256_file
from lethe.core.measurements import summarize
from lethe.core.paths import Paths, machine_roots, plain_name, portable
from lethe.core.protocol import (
    LLM_FAILURES,
    Annotates,
    BindsDataset,
    Doc,
    Query,
    SearchResult,
    UsesCollection,
    UsesQuerySet,
)
from lethe.core.secrets import refuse_secrets
from lethe.core.targets import build, check_targets
from lethe.core.threads import set_threads, thread_settings
from lethe.core.typed_config import ConfigError, check_section
from lethe.llm.pool import LLMPool
from lethe.retrieval.ranking import top_k
from lethe.stages.answering import AnswerStage, answer_stage_from_config
from lethebench.provenance import (
    cpu_snapshot,
    end_memory_window,
    git_info,
    hardware,
    load_average,
    other_cpu_cores,
    package_versions,
    peak_rss_mb,
    start_memory_window,
    timing_valid,
)
from lethebench.runs import RunFolder, encode_cells, timings_frame
from lethebench.schema import Dataset, read_dataset
from lethebench.supervision import method_supervision

log = logging.getLogger(__name__)


class EligibilityViolation(RuntimeError):
    """A method returned a doc the query was not allowed to see."""


class RunFailed(RuntimeError):
    """Too many queries failed; the run is not marked done."""


@dataclass(frozen=True)
class QuerySelection:
    """Which queries a run evaluates (``dataset.scopes/split/categories/sample``; ``seed`` draws the sample)."""

    scopes: tuple[str, ...] | None
    split: str | None
    categories: tuple[str, ...] | None
    sample: int | None
    seed: int

    @classmethod
    def from_config(cls, dataset: Mapping[str, Any], seed: int) -> QuerySelection:
        """From a resolved ``dataset`` section."""

        def names(key: str) -> tuple[str, ...] | None:
            return tuple(dataset[key]) if dataset.get(key) else None

        return cls(
            names("scopes"),
            dataset.get("split") or None,
            names("categories"),
            int(dataset["sample"]) if dataset.get("sample") else None,
            int(seed),
        )

    def pool_key(self) -> str:
        """Which queries a model trained from this selection may learn from, the split aside (models pick
        their own train/dev splits): "" for every query, else a short hash of scopes, categories, sample
        and seed. Keys the learned-fusion model folder, so a subset run never loads a model trained on
        another subset, or the reverse."""
        if not (self.scopes or self.categories or self.sample):
            return ""
        doc = {
            "scopes": self.scopes,
            "categories": self.categories,
            "sample": self.sample,
            "seed": self.seed if self.sample else None,
        }
        return config_hash(doc)


def select_queries(ds: Dataset, sel: QuerySelection) -> tuple[pd.DataFrame, dict[str, int]]:
    """Queries to run: those with qrels, in the selected scopes/split/categories (a seeded sample if
    asked); counts what each filter excluded."""
    q = ds.queries
    counts = {"queries_total": int(len(q))}
    if sel.scopes:
        keep = set(sel.scopes)
        unknown = keep - set(q["scope_id"])
        if unknown:
            raise ValueError(f"dataset.scopes names unknown scope(s) {sorted(unknown)}; known: {ds.scope_ids()}")
        q = q[q["scope_id"].isin(keep)]
    counts["excluded_by_scope_filter"] = counts["queries_total"] - int(len(q))
    if sel.split:
        splits = q["split"]
        known = sorted(set(splits.dropna()))
        if sel.split not in known:
            raise ValueError(f"dataset.split={sel.split!r} not in this dataset; known: {known}")
        before = len(q)
        q = q[splits == sel.split]
        counts["excluded_by_split"] = before - int(len(q))
    if sel.categories:
        cats = set(sel.categories)
        unknown = cats - set(ds.queries["category"].dropna())
        if unknown:
            raise ValueError(
                f"dataset.categories names unknown categor(ies) {sorted(unknown)}; "
                f"known: {sorted(set(ds.queries['category'].dropna()))}"
            )
        before = len(q)
        q = q[q["category"].isin(cats)]
        counts["excluded_by_category_filter"] = before - int(len(q))
    else:
        counts["excluded_by_category_filter"] = 0
    before = len(q)
    q = q[q["query_id"].isin(ds.qrels.keys()) & q["query_id"].map(lambda x: bool(ds.qrels.get(x)))]
    counts["excluded_no_qrels"] = before - int(len(q))
    if sel.sample:  # a seeded random subset (for slow methods); the same seed gives the same queries
        before = len(q)
        q = q.sample(n=min(sel.sample, before), random_state=sel.seed) if before else q
        counts["excluded_by_sample"] = before - int(len(q))
    counts["evaluated"] = int(len(q))
    return q.sort_values(["scope_id", "position", "query_id"], kind="stable"), counts


def group_docs(ds: Dataset) -> dict[str, list[Doc]]:
    out: dict[str, list[Doc]] = {}
    corpus = ds.corpus.sort_values(["scope_id", "position", "doc_id"], kind="stable")
    for r in corpus.itertuples(index=False):
        out.setdefault(r.scope_id, []).append(Doc(r.doc_id, r.text, int(r.position), r.kind, r.speaker, r.timestamp))
    return out


def walk_eligible(
    queries: pd.DataFrame, docs_by_scope: Mapping[str, list[Doc]]
) -> Iterator[tuple[str, Any, int, list[Doc] | None]]:
    """(scope_id, query row, n eligible docs, docs to index or None if unchanged) per query.

    Queries go scope by scope in position order; the eligible docs of a query are its scope's docs
    with ``position < query.position``; a new doc list is yielded only when that set changes.
    """
    for scope_id, sq in queries.groupby("scope_id", sort=True):
        docs = docs_by_scope.get(scope_id, [])
        positions = np.array([d.position for d in docs])
        n_elig = np.searchsorted(positions, sq["position"].to_numpy(), side="left")
        current = -1
        for row, ne in zip(sq.itertuples(index=False), n_elig, strict=True):
            changed = ne != current and ne > 0
            if changed:
                current = int(ne)
            yield scope_id, row, int(ne), (docs[:ne] if changed else None)


def answer_record(gen: Mapping[str, Any] | None, gold: Any, category: Any, rules: AnswerRules) -> dict[str, Any]:
    """Per-query answer columns from a method's ``generation`` flag, scored against the query's gold answer and
    category by the dataset's answer rules (analysis.answers.ANSWER_RULES); {} when no answer was generated."""
    if not gen:
        return {}
    rec: dict[str, Any] = {
        "answer": gen.get("answer"),
        "answer_status": gen.get("status"),
        "answer_supported": gen.get("supported"),
        "answer_judge_status": gen.get("judge_status"),
        "answer_f1": None,
        "answer_rouge_l": None,
        "answer_em": None,
    }
    s = rules(gen["answer"], gold, category) if gen.get("answer") is not None else None
    if s is not None:
        rec.update(answer_f1=s["f1"], answer_rouge_l=s["rouge_l"], answer_em=s["em"])
    return rec


def build_answer_stage(plan: RunPlan) -> tuple[AnswerStage | None, LLMPool | None]:
    """The run's ``answers`` stage (None when off) and the pool of LLM backends it built (one per distinct config)."""
    cfg = plan.config.get("answers") or {}
    if not cfg.get("enabled"):
        return None, None
    pool = LLMPool(plan.cache_dir)
    stage = answer_stage_from_config(
        cfg, lambda llm_cfg, part: pool.get(llm_cfg, f"answers.{part + '.' if part else ''}llm"), "answers"
    )
    return stage, pool


def add_answer_similarity(per_query: pd.DataFrame, ds: Dataset, plan: RunPlan) -> pd.DataFrame:
    """``answer_similarity``: cosine of the generated and the gold answer's embeddings under the run's embedder
    (analysis.answers.embedding_similarity) for every answered query with a gold answer; None elsewhere."""
    if "answer" not in per_query or per_query["answer"].isna().all():
        return per_query
    gold = dict(zip(ds.queries["query_id"], ds.queries["answer"], strict=True))
    rows = [
        i
        for i, (q, a) in enumerate(zip(per_query["query_id"], per_query["answer"], strict=True))
        if isinstance(a, str) and isinstance(gold.get(q), str) and gold[q].strip()
    ]
    sims: list[float | None] = [None] * len(per_query)
    if rows:
        from lethe.retrieval.dense import make_embedder

        emb = make_embedder(plan.config["embedder"], plan.cache_dir, progress=False)
        values = embedding_similarity(
            [per_query["answer"].iat[i] for i in rows],
            [gold[per_query["query_id"].iat[i]] for i in rows],
            lambda texts: emb.encode(texts, role="query"),
        )
        for i, v in zip(rows, values, strict=True):
            sims[i] = v
    return per_query.assign(answer_similarity=sims)


def answer_summary(per_query: pd.DataFrame) -> dict[str, Any]:
    """Means of the answer metrics and the hallucination rate (unsupported / judged: answers the judge
    model judged; abstentions and judge failures are counted in ``judge_status``, not in the rate)."""
    if "answer_status" not in per_query:
        return {}
    gen = per_query[per_query["answer_status"].notna()]
    sup = gen["answer_supported"].dropna().astype(bool) if "answer_supported" in gen else pd.Series(dtype=bool)
    scored = gen["answer_f1"].dropna()
    return {
        "answers": {
            "generated": int(len(gen)),
            "status": {k: int(v) for k, v in gen["answer_status"].value_counts().items()},
            "scored": int(len(scored)),
            "f1": float(scored.mean()) if len(scored) else None,
            "rouge_l": float(gen["answer_rouge_l"].dropna().mean()) if len(scored) else None,
            "exact_match": float(gen["answer_em"].dropna().mean()) if len(scored) else None,
            "similarity": float(gen["answer_similarity"].dropna().mean())
            if "answer_similarity" in gen and gen["answer_similarity"].notna().any()
            else None,
            "judged": int(len(sup)),
            "judge_status": {k: int(v) for k, v in gen["answer_judge_status"].value_counts().items()}
            if "answer_judge_status" in gen
            else {},
            "hallucination_rate": float((~sup).mean()) if len(sup) else None,
        }
    }


@dataclass(frozen=True)
class RunOutcome:
    """What one job did: its results folder, and whether it was skipped because it was already done."""

    folder: Path
    skipped: bool


@dataclass(frozen=True)
class RunSettings:
    """The ``run`` section, typed: cutoff ``k``, metric names (canonical ranx names whichever spelling
    the config used, analysis.metric_names), seed, warm-up, the error share past which the run fails, and
    display/overwrite switches."""

    k: int
    metrics: tuple[str, ...]
    seed: int
    warmup: bool
    max_error_share: float
    max_parse_fallback_share: float
    progress: bool
    print_summary: bool
    overwrite: bool
    threads: int | str | None = "auto"  # torch/BLAS/OpenMP threads: an int, "auto" or None (run_threads)

    @classmethod
    def from_config(cls, run: Mapping[str, Any]) -> RunSettings:
        return cls(
            int(run["k"]),
            canonical_metrics(run["metrics"], "run.metrics"),
            int(run["seed"]),
            bool(run["warmup"]),
            float(run["max_error_share"]),
            float(run["max_parse_fallback_share"]),
            bool(run["progress"]),
            bool(run["print_summary"]),
            bool(run["overwrite"]),
            run.get("threads", "auto"),
        )


@dataclass(frozen=True)
class RunPlan:
    """One job's config, resolved once: everything the steps below need, and the whole resolved config
    for the manifest."""

    config: dict[str, Any]  # to_dict(cfg): every parameter, recorded in the manifest
    identity: RunIdentity
    dataset_folder: Path
    build_key: str
    selection: QuerySelection
    answer_rules: str | None  # dataset.answer_rules: a key of analysis.answers.ANSWER_RULES
    method_params: dict[str, Any]  # the method section without its description keys (name, variant, supervision)
    paths: Paths  # the run's folders, resolved once
    settings: RunSettings

    @property
    def dataset(self) -> str:
        return str(self.config["dataset"]["name"])

    @property
    def cache_dir(self) -> Path:
        return self.paths.cache


def _int_at_least(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def validate_run_config(resolved: Mapping[str, Any]) -> None:
    """Refuse a run config that cannot give a meaningful result, before any compute: ``run.k`` >= 1,
    ``run.metrics`` a non-empty list of known metric names in ranx's or ir_measures' spelling
    (analysis.metric_names), ``dataset.sample`` null or >= 1, ``run.max_error_share`` in [0, 1], dataset/method/variant names that
    are plain names (never paths), every ``_target_`` in the project's packages (lethe.core.targets), method parameters
    that fit their ``_target_``
    (lethe.core.typed_config), no credential anywhere (lethe.core.secrets), and a writable results folder. Errors name
    the key and the value (a credential's key only)."""
    refuse_secrets(resolved, "the run config")
    check_targets(resolved, "the run config")  # before anything imports a target (check_section reads signatures)
    run, dataset, method = resolved["run"], resolved["dataset"], resolved["method"]
    if not _int_at_least(run.get("k"), 1):
        raise ConfigError(f"run.k={run.get('k')!r}: must be an integer >= 1 (the depth of each ranked list)")
    if not isinstance(run.get("metrics"), (list, tuple)) or not run["metrics"]:
        raise ConfigError(f"run.metrics={run.get('metrics')!r}: must be a non-empty list of metric names")
    try:
        metrics = canonical_metrics(run["metrics"], "run.metrics")
    except UnknownMetric as exc:
        raise ConfigError(str(exc)) from None  # the message says it all: one level, not two
    deep = deeper_than(metrics, run["k"])
    if deep:
        log.warning(
            "run.metrics %s cut deeper than run.k=%d, the most documents a ranked list holds: they see only its top "
            "run.k (recall@N equals recall@run.k); raise run.k or lower the cutoff",
            deep,
            run["k"],
        )
    threads = run.get("threads", "auto")
    if threads not in (None, "auto") and not _int_at_least(threads, 1):
        raise ConfigError(
            f"run.threads={threads!r}: must be auto (1 thread when jobs run concurrently on this machine, "
            "else the process's own), null (the process's own) or an integer >= 1"
        )
    if dataset.get("sample") is not None and not _int_at_least(dataset["sample"], 1):
        raise ConfigError(f"dataset.sample={dataset['sample']!r}: must be null (every query) or an integer >= 1")
    for key in ("max_error_share", "max_parse_fallback_share"):
        share = run.get(key)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise ConfigError(f"run.{key}={share!r}: must be a number in [0, 1]")
    for key, value in (
        ("dataset.name", dataset.get("name")),
        ("method.name", method.get("name")),
        ("method.variant", method.get("variant", "x") or "x"),
    ):
        plain_name(value, key)
    if method.get("supervision") is not None:
        method_supervision(method)  # an unknown `supervision` fails here, named, before any compute
    check_section(method_params(method), "method", given=("cache_dir", "progress"))
    answers = resolved.get("answers") or {}
    if answers.get("enabled"):
        if ((method.get("stages") or {}).get("generation") or {}).get("enabled"):
            raise ConfigError(
                "answers.enabled=true and method.stages.generation.enabled=true: the method already generates "
                "answers (Lethe iteration 4); switch one of them off"
            )
        if answers.get("sample") is not None and not _int_at_least(answers["sample"], 1):
            raise ConfigError(f"answers.sample={answers['sample']!r}: must be null (every query) or an integer >= 1")
        if not _int_at_least(answers.get("context_docs"), 1):
            raise ConfigError(f"answers.context_docs={answers.get('context_docs')!r}: must be an integer >= 1")
    results = Paths.of(resolved).results
    try:
        results.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=results, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"results_dir={resolved['results_dir']!r} ({results}) is not writable: {exc}") from exc


def plan_run(cfg: DictConfig, resolved: Mapping[str, Any], ds_folder: Path, ds: Dataset) -> RunPlan:
    """The typed plan of ``cfg``, whose resolved and validated dict is ``resolved`` (errors name the key)."""
    build_key = dataset_key(cfg, ds_folder, ds)  # a custom folder's key includes its checked content
    rules = resolved["dataset"].get("answer_rules")
    answer_rules(rules)  # a ValueError naming the key for an unknown name
    params = method_params(resolved["method"])
    settings = RunSettings.from_config(resolved["run"])
    paths = Paths.of(resolved)
    identity = run_identity(resolved, build_key, paths)
    root = paths.results.resolve()
    if not identity.folder.resolve().is_relative_to(root):
        raise ConfigError(f"the results folder {identity.folder} lies outside results_dir={root}")
    return RunPlan(
        dict(resolved),
        identity,
        ds_folder,
        build_key,
        QuerySelection.from_config(resolved["dataset"], settings.seed),
        rules,
        params,
        paths,
        settings,
    )


@dataclass
class Searched:
    """What searching every selected query produced: the run, per-query records, index statistics."""

    run: dict[str, list[tuple[str, float]]]
    records: list[dict[str, Any]]
    index_seconds: float
    index_calls: int


def run_experiment(cfg: DictConfig) -> Path:
    """Run one (dataset, method) job; return its results folder (skipped if already DONE)."""
    return run_job(cfg).folder


def run_job(cfg: DictConfig) -> RunOutcome:
    """Run one (dataset, method) job unless its results folder is done (``run.overwrite`` forces it)."""
    resolved = to_dict(cfg)
    validate_run_config(resolved)  # before the dataset is built or anything is computed
    ds_folder = prepare_dataset(cfg)
    ds = read_dataset(ds_folder, cfg.dataset.name)
    plan = plan_run(cfg, resolved, ds_folder, ds)
    ident = plan.identity
    # the run's lock: an identical job running at the same time is waited for, then this one skips
    damage = RunFolder(ident.folder).damage
    if damage:
        print(f"[damaged] {plan.dataset}/{ident.label}/{ident.config_hash}: {damage}; running it again", flush=True)
    with RunFolder(ident.folder).claim(plan.settings.overwrite) as fresh:
        if not fresh:
            log.info("skip: %s is done", ident.folder)
            print(
                f"[skip] {plan.dataset}/{ident.label}/{ident.config_hash}: already done" + unstored(ident.folder, plan)
            )
            return RunOutcome(ident.folder, True)
        execute(plan, ds)
    return RunOutcome(ident.folder, False)


def unstored(folder: Path, plan: RunPlan) -> str:
    """For a finished run: the means of the asked metrics it did not store (metrics are not part of a run's identity,
    so they are computed from its run.trec and qrels.trec, :func:`analysis.metrics.run_scores`), or ''."""
    written = dict(zip(plan.settings.metrics, plan.config["run"]["metrics"], strict=True))  # canonical -> as written
    missing = [m for m in plan.settings.metrics if m not in RunFolder(folder).per_query.columns]
    if not missing:
        return ""
    means = run_scores(folder, missing).mean()
    return "; not stored, computed from its run files: " + ", ".join(f"{written[m]} {means[m]:.4f}" for m in missing)


def run_threads(setting: int | str | None, concurrent: bool) -> int | None:
    """The thread count a run sets (None: leave the process's own). ``auto``: 1 when the launcher runs jobs
    concurrently on one machine, else the process's own (torch's default, the core count). Measured on full
    LoCoMo, warm, 2 cores (docs/running.md "Threads and latency"): alone, 2 threads beat 1 (Lethe 1 P95 7.1 vs 8.6 ms);
    two jobs at once, 1 thread each beat 2 (P95 9.9 vs 21.9 ms)."""
    if setting == "auto":
        return 1 if concurrent else None
    return None if setting is None else int(setting)


def execute(plan: RunPlan, ds: Dataset) -> None:
    """Compute the run ``plan`` describes on ``ds`` and write its results folder (the caller holds its lock)."""
    ident, ds_folder = plan.identity, plan.dataset_folder
    started = dt.datetime.now(dt.UTC)
    launch = launch_info()
    threads = run_threads(plan.settings.threads, launch["concurrent"])
    if threads is not None:
        set_threads(threads)
    rss_start, load_start, cpu_start = peak_rss_mb(), load_average(), cpu_snapshot()
    memory = start_memory_window()
    queries, counts = select_queries(ds, plan.selection)
    t0 = time.perf_counter()
    method = build(plan.method_params, cache_dir=plan.cache_dir, progress=plan.settings.progress, _convert_="all")
    init_s = time.perf_counter() - t0
    docs_by_scope = group_docs(ds)
    bind_method(method, plan, docs_by_scope, list(queries["query_id"]))
    answering, answer_pool = build_answer_stage(plan)
    if answering is not None:
        answering.set_queries(list(queries["query_id"]))
    try:
        searched = search_queries(method, plan, ds, queries, docs_by_scope, answering)
    finally:
        method.close()
        if answer_pool is not None:
            answer_pool.close()
    per_query = add_answer_similarity(pd.DataFrame(searched.records), ds, plan)
    check_error_share(per_query, plan.settings.max_error_share)
    per_query, metrics = evaluate(plan, ds, queries, counts, searched.run, per_query)
    check_llm_failures(metrics, plan.settings.max_error_share)  # before anything is written
    ended = dt.datetime.now(dt.UTC)
    load_end, other_cores = load_average(), other_cpu_cores(cpu_start, cpu_snapshot())
    manifest = {
        "config": {**plan.config, "dataset": recorded_dataset(plan.config)},
        "hashed_config": ident.hashed,
        "config_hash": ident.config_hash,
        "dataset": {
            "name": plan.dataset,
            "folder": None,  # below, relative to the run's folder
            "build_key": plan.build_key,
            "content_sha256": ds.content_sha256,
            "card_sha256": sha256_file(ds_folder / "card.json"),
            "card_counts": ds.card.get("counts"),
        },
        "method": method.describe(),
        # what it learns from (lethebench/supervision.py); null for a method that does not declare it (a config of
        # conf/method/ always does: tests/test_configs.py; a bring-your-own system may, as its `supervision` attribute)
        "supervision": (
            list(method_supervision(plan.config["method"])) if plan.config["method"].get("supervision") else None
        ),
        "answers": (
            {**answering.describe(), "llms": [llm.describe() for llm in answer_pool.backends()]}
            if answering is not None and answer_pool is not None
            else None
        ),
        "git": git_info(),
        "packages": package_versions(),
        "hardware": hardware(),
        "seed": plan.settings.seed,
        "started": started.isoformat(),
        "ended": ended.isoformat(),
        "wall_seconds": round((ended - started).total_seconds(), 3),
        "method_init_seconds": round(init_s, 3),
        "index_build_seconds": round(searched.index_seconds, 3),
        "index_calls": searched.index_calls,
        "peak_rss_mb": {"at_start": rss_start, "at_end": peak_rss_mb(), "note": "process-wide ru_maxrss"},
        # this run's own peak (VmHWM reset at its start) and how far it rose above the memory held at the start (MiB)
        "memory_mb": end_memory_window(memory),
        "load_average": {
            "at_start": load_start,
            "at_end": load_end,
            "cores": os.cpu_count(),
            "note": "latencies measured while load exceeds the cores are inflated by contention",
        },
        "other_cpu_cores": other_cores,  # mean cores other processes kept busy during the run
        "launch": launch,
        "threads": thread_settings(),
        # False: concurrent jobs on one machine, or other processes busy on > 1/4 of the cores (the report marks it)
        "timing_valid": timing_valid(other_cores, os.cpu_count(), bool(launch["concurrent"])),
        "tie_rule": "score descending, then doc id descending (trec_eval)",
        "latency": "warm: one discarded warm-up search per run"
        if plan.settings.warmup
        else "includes the first (cold) search",
    }
    # where this machine keeps things is no part of a run (issue 60): its folders as tokens (<cache_dir>,
    # <data_root>, ...), the dataset's files by name, dataset.folder relative to the run's folder
    manifest = portable(manifest, machine_roots(plan.config))
    manifest["dataset"]["folder"] = os.path.relpath(ds_folder, ident.folder)
    qrels = {q: ds.qrels[q] for q in queries["query_id"]}
    RunFolder(ident.folder).write(
        searched.run, qrels, per_query, metrics, manifest, tag=f"{ident.label}-{ident.config_hash}"
    )
    if plan.settings.print_summary:
        from experiments.summary import format_table

        print(format_table([metrics], plan.config["run"]["metrics"]))  # the metrics asked for, as written
        print(f"results: {ident.folder}")


def bind_method(method: Any, plan: RunPlan, docs_by_scope: Mapping[str, list[Doc]], query_ids: list[str]) -> None:
    """The optional runner hooks (``lethe.core.protocol``), each called if the method implements it."""
    if isinstance(method, BindsDataset):
        method.bind_dataset({"name": plan.dataset, "build_key": plan.build_key, "pool": plan.selection.pool_key()})
    if isinstance(method, UsesCollection):
        method.set_collection([d for docs in docs_by_scope.values() for d in docs])
    if isinstance(method, UsesQuerySet):
        method.set_queries(query_ids)


def search_queries(
    method: Any,
    plan: RunPlan,
    ds: Dataset,
    queries: pd.DataFrame,
    docs_by_scope: Mapping[str, list[Doc]],
    answering: AnswerStage | None = None,
) -> Searched:
    """Index and search every selected query in eligibility order; per-query errors are recorded, an
    ineligible or duplicate doc stops the run. ``answering`` (the run's ``answers`` section) answers the sampled
    queries from their final ranking after the timed search."""
    label, k = plan.identity.label, plan.settings.k
    answers = dict(zip(ds.queries["query_id"], ds.queries["answer"], strict=True))
    rules = answer_rules(plan.answer_rules)
    text_of = (
        dict(zip(ds.corpus["doc_id"], ds.corpus["text"], strict=True)).__getitem__ if answering is not None else None
    )
    run: dict[str, list[tuple[str, float]]] = {}
    records: list[dict[str, Any]] = []
    index_seconds, index_calls, warmed = 0.0, 0, not plan.settings.warmup
    allowed: set[str] = set()
    bar = tqdm(total=len(queries), desc=f"{plan.dataset}/{label}", disable=not plan.settings.progress, unit="q")
    try:
        for scope_id, row, ne, new_docs in walk_eligible(queries, docs_by_scope):
            stop_if_doomed(records, len(queries), plan.settings.max_error_share)
            rec: dict[str, Any] = {
                "query_id": row.query_id,
                "scope_id": scope_id,
                "category": row.category,
                "n_eligible": int(ne),
                "n_results": 0,
                "status": "ok",
                "error": None,
                "latency_ms": None,
                **encode_cells({}, {}),
            }
            records.append(rec)
            bar.update()
            if ne == 0:
                rec["status"] = "no_eligible_docs"
                run[row.query_id] = []
                continue
            if new_docs is not None:
                ti = time.perf_counter()
                method.index(new_docs)
                index_seconds += time.perf_counter() - ti
                index_calls += 1
                allowed = {d.doc_id for d in new_docs}
            query = Query(row.text, tuple(row.history), row.query_id, scope_id)
            if not warmed:
                warmed = True
                # discarded: the first call pays lazy loading/JIT costs; the timed search below repeats it and records
                # any error
                with contextlib.suppress(Exception):
                    method.search(query, k)
            ts = time.perf_counter()
            try:
                res: SearchResult = method.search(query, k)
            except Exception as exc:  # noqa: BLE001 - recorded per query; max_error_share decides
                rec.update(status="error", error=f"{type(exc).__name__}: {exc}")
                run[row.query_id] = []
                continue
            rec["latency_ms"] = (time.perf_counter() - ts) * 1e3
            ids = [d for d, _ in res.ranking]
            bad = [d for d in ids if d not in allowed]
            if bad:
                raise EligibilityViolation(
                    f"method '{label}' returned {len(bad)} ineligible doc(s) for query {row.query_id}, e.g. {bad[:3]}"
                )
            if len(set(ids)) != len(ids):
                raise ValueError(f"method '{label}' returned duplicate doc ids for query {row.query_id}")
            if isinstance(method, Annotates):  # answer generation and judging: not part of the query's latency
                try:
                    method.annotate(query, res)
                except Exception as exc:  # noqa: BLE001 - recorded per query and counted in the status table
                    rec.update(status="annotate_error", error=f"{type(exc).__name__}: {exc}")
            ranking = top_k(res.ranking, k)
            if answering is not None and answering.wants(row.query_id):  # outside the query's latency, like annotate
                try:
                    answering.annotate(query.text, SearchResult(ranking, res.timings_ms, res.flags), text_of)
                except Exception as exc:  # noqa: BLE001 - recorded per query and counted in the status table
                    rec.update(status="annotate_error", error=f"{type(exc).__name__}: {exc}")
            run[row.query_id] = ranking
            rec["n_results"] = len(ranking)
            if not ranking:
                rec["status"] = "no_results"
            rec.update(
                answer_record(
                    res.flags.get("generation"),
                    answers.get(row.query_id),
                    row.category,
                    rules,
                )
            )
            rec.update(encode_cells(res.timings_ms, res.flags))
            llm = res.flags.get(LLM_FAILURES)
            if llm is not None:  # a query that called an LLM: its failed calls (lethe.core.protocol)
                rec.update(llm_infra_failures=int(llm["infra"]), llm_parse_fallbacks=int(llm["parse"]))
            kill_point("searching")
    finally:
        bar.close()
    return Searched(run, records, index_seconds, index_calls)


def stop_if_doomed(records: Sequence[Mapping[str, Any]], n_queries: int, max_share: float) -> None:
    """RunFailed as soon as the queries searched so far (``records``) fail the run whatever the other queries do:
    more errors, or more queries with a failed LLM call, than ``max_share`` of ``n_queries`` allows (the checks at
    the end divide by at most ``n_queries``). A dead LLM server or a broken method then costs one query's time,
    not every query's timeout."""
    if not records or not (records[-1]["status"] == "error" or (records[-1].get("llm_infra_failures") or 0) > 0):
        return  # only the last query can have changed the counts
    allowed = max_share * n_queries
    errors = [r["error"] for r in records if r["status"] == "error"]
    if len(errors) > allowed:
        raise RunFailed(
            f"{len(errors)} of {n_queries} queries failed after {len(records)} searched, more than "
            f"max_error_share={max_share} allows; stopped early. First error: {errors[0]}"
        )
    infra = sum(1 for r in records if (r.get("llm_infra_failures") or 0) > 0)
    if infra > allowed:
        raise RunFailed(
            f"{infra} of {n_queries} queries had an LLM call fail without an answer (connection or HTTP "
            f"error, timeout) after {len(records)} searched, more than max_error_share={max_share} allows; "
            f"stopped early. The per-query flags name the causes (qu_rules / llm_fallback / rerank)"
        )


def check_error_share(per_query: pd.DataFrame, max_share: float) -> None:
    """RunFailed when more than ``max_share`` of the queries raised."""
    n_err = int((per_query["status"] == "error").sum()) if len(per_query) else 0
    if len(per_query) and n_err / len(per_query) > max_share:
        first = per_query.loc[per_query["status"] == "error", "error"].iloc[0]
        raise RunFailed(f"{n_err}/{len(per_query)} queries failed (max_error_share={max_share}); first error: {first}")


def llm_failure_summary(per_query: pd.DataFrame, max_parse_share: float) -> dict[str, Any]:
    """Queries that called an LLM, those with a failed call that got no answer (infra) and those where an
    unparseable answer was replaced by a fallback (parse), with shares; ``degraded`` past ``max_parse_share``.
    ``{"llm": {"queries": 0}}`` when no query called an LLM."""
    if "llm_infra_failures" not in per_query:
        return {"llm": {"queries": 0}}
    used = per_query["llm_infra_failures"].notna()
    n = int(used.sum())
    infra = int((per_query.loc[used, "llm_infra_failures"] > 0).sum())
    parse = int((per_query.loc[used, "llm_parse_fallbacks"] > 0).sum())
    return {
        "llm": {
            "queries": n,
            "infra_failure_queries": infra,
            "infra_failure_share": infra / n if n else 0.0,
            "parse_fallback_queries": parse,
            "parse_fallback_share": parse / n if n else 0.0,
            "max_parse_fallback_share": max_parse_share,
            "degraded": bool(n and parse / n > max_parse_share),
        }
    }


def check_llm_failures(summary: Mapping[str, Any], max_share: float) -> None:
    """RunFailed when the share of LLM-using queries whose LLM call got no answer exceeds ``max_share``: the
    run's numbers would be those of its fallbacks, filed under the LLM method's name."""
    llm = summary.get("llm")
    if llm and llm["queries"] and llm["infra_failure_share"] > max_share:
        raise RunFailed(
            f"{llm['infra_failure_queries']}/{llm['queries']} queries had an LLM call fail without an "
            f"answer (connection or HTTP error, timeout; max_error_share={max_share}); the per-query "
            f"flags name the causes (qu_rules / llm_fallback / rerank)"
        )


def evaluate(
    plan: RunPlan,
    ds: Dataset,
    queries: pd.DataFrame,
    counts: Mapping[str, int],
    run: Mapping[str, list[tuple[str, float]]],
    per_query: pd.DataFrame,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per-query metrics joined onto ``per_query``, and the run's ``metrics.json`` (means, latency summaries
    in ms, status counts, answer metrics)."""
    qrels = {q: ds.qrels[q] for q in queries["query_id"]}
    metric_names = list(plan.settings.metrics)
    scores = evaluate_run(qrels, dict(run), metric_names)
    per_query = per_query.merge(scores, left_on="query_id", right_index=True, how="left")
    lat = [x for x in per_query["latency_ms"].tolist() if x is not None and not pd.isna(x)]
    timings = timings_frame(per_query)  # ms; NaN where a stage did not run
    stages = {s: summarize(timings[s].dropna().tolist()) for s in sorted(timings.columns)}
    status_counts = per_query["status"].value_counts().to_dict() if len(per_query) else {}
    metrics = {
        "dataset": plan.dataset,
        "method": plan.identity.label,
        "config_hash": plan.identity.config_hash,
        "filters": {k: plan.config["dataset"].get(k) for k in ("split", "scopes", "categories", "sample")},
        "queries": {**counts, "status": {k: int(v) for k, v in sorted(status_counts.items())}},
        "means": {m: float(scores[m].mean()) if len(scores) else 0.0 for m in metric_names},
        "latency_ms": summarize(lat),
        "stage_latency_ms": stages,
        "qps": (len(lat) / (sum(lat) / 1e3)) if lat and sum(lat) > 0 else None,
    }
    metrics.update(answer_summary(per_query))
    metrics.update(llm_failure_summary(per_query, plan.settings.max_parse_fallback_share))
    return per_query, metrics
