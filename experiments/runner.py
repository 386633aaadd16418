"""The runner: one (dataset, method) run from a resolved config to a results folder.

It alone decides what a method may see: for each query, the docs of the query's scope with
``position < query.position`` (all of the scope when the query comes after the last doc). Queries
that share the same eligible set share one ``index`` call. Every returned doc id is checked
against the eligible set; a violation stops the run.

Final order of a ranking: score descending, ties broken by doc id descending (trec_eval's rule),
so that anyone re-evaluating ``run.trec`` with another tool gets the same order.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd
from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm.auto import tqdm

from analysis.answers import score_answer
from analysis.metrics import evaluate_run
from experiments.config import to_dict
from lethe.core.paths import project_path
from experiments.datasets import prepare_dataset
from experiments.provenance import git_info, hardware, load_average, package_versions, peak_rss_mb
from experiments.results import run_identity
from lethe.core.protocol import Annotates, BindsDataset, Doc, Query, SearchResult, UsesCollection, UsesQuerySet
from lethe.core.measurements import summarize
from lethe.retrieval.ranking import top_k
from lethe.core.hashing import sha256_file
from lethebench.runs import RunFolder, encode_cells, timings_frame
from lethebench.schema import Dataset, read_dataset

log = logging.getLogger(__name__)


class EligibilityViolation(RuntimeError):
    """A method returned a doc the query was not allowed to see."""


class RunFailed(RuntimeError):
    """Too many queries failed; the run is not marked done."""


def select_queries(ds: Dataset, cfg: DictConfig) -> tuple[pd.DataFrame, dict[str, int]]:
    """Queries to run: those with qrels, in the configured scopes/categories; counts the rest."""
    q = ds.queries
    counts = {"queries_total": int(len(q))}
    if cfg.dataset.get("scopes"):
        keep = set(cfg.dataset.scopes)
        unknown = keep - set(q["scope_id"])
        if unknown:
            raise ValueError(f"dataset.scopes names unknown scope(s) {sorted(unknown)}; known: {ds.scope_ids()}")
        q = q[q["scope_id"].isin(keep)]
    counts["excluded_by_scope_filter"] = counts["queries_total"] - int(len(q))
    split = cfg.dataset.get("split")
    if split:
        splits = q["split"]
        known = sorted(set(splits.dropna()))
        if split not in known:
            raise ValueError(f"dataset.split={split!r} not in this dataset; known: {known}")
        before = len(q)
        q = q[splits == split]
        counts["excluded_by_split"] = before - int(len(q))
    if cfg.dataset.get("categories"):
        cats = set(cfg.dataset.categories)
        unknown = cats - set(ds.queries["category"].dropna())
        if unknown:
            raise ValueError(f"dataset.categories names unknown categor(ies) {sorted(unknown)}; "
                             f"known: {sorted(set(ds.queries['category'].dropna()))}")
        before = len(q)
        q = q[q["category"].isin(cats)]
        counts["excluded_by_category_filter"] = before - int(len(q))
    else:
        counts["excluded_by_category_filter"] = 0
    before = len(q)
    q = q[q["query_id"].isin(ds.qrels.keys()) & q["query_id"].map(lambda x: bool(ds.qrels.get(x)))]
    counts["excluded_no_qrels"] = before - int(len(q))
    sample = cfg.dataset.get("sample")
    if sample:  # a seeded random subset (for slow methods); the same seed gives the same queries
        before = len(q)
        q = q.sample(n=min(int(sample), before), random_state=int(cfg.run.seed)) if before else q
        counts["excluded_by_sample"] = before - int(len(q))
    counts["evaluated"] = int(len(q))
    return q.sort_values(["scope_id", "position", "query_id"], kind="stable"), counts


def group_docs(ds: Dataset) -> dict[str, list[Doc]]:
    out: dict[str, list[Doc]] = {}
    corpus = ds.corpus.sort_values(["scope_id", "position", "doc_id"], kind="stable")
    for r in corpus.itertuples(index=False):
        out.setdefault(r.scope_id, []).append(
            Doc(r.doc_id, r.text, int(r.position), r.kind, r.speaker, r.timestamp))
    return out


def walk_eligible(queries: pd.DataFrame, docs_by_scope: Mapping[str, list[Doc]]
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
        for row, ne in zip(sq.itertuples(index=False), n_elig):
            changed = ne != current and ne > 0
            if changed:
                current = int(ne)
            yield scope_id, row, int(ne), (docs[:ne] if changed else None)


def answer_record(gen: Mapping[str, Any] | None, gold: Any, category: Any) -> dict[str, Any]:
    """Per-query answer columns from a method's ``generation`` flag, scored against the gold answer
    with LoCoMo's protocol (analysis.answers.score_answer; ``category`` is a LoCoMo category name for
    LoCoMo, else None: plain token F1); {} when no answer was generated."""
    if not gen:
        return {}
    rec: dict[str, Any] = {"answer": gen.get("answer"), "answer_status": gen.get("status"),
                           "answer_supported": gen.get("supported"), "answer_judge_status": gen.get("judge_status"),
                           "answer_f1": None, "answer_rouge_l": None, "answer_em": None}
    if gen.get("answer") is not None and isinstance(gold, str) and gold.strip():
        s = score_answer(gen["answer"], gold, category if isinstance(category, str) else None)
        rec.update(answer_f1=s["f1"], answer_rouge_l=s["rouge_l"], answer_em=s["em"])
    return rec


def answer_summary(per_query: pd.DataFrame) -> dict[str, Any]:
    """Means of the answer metrics and the hallucination rate (unsupported / judged: answers the judge
    model judged; abstentions and judge failures are counted in ``judge_status``, not in the rate)."""
    if "answer_status" not in per_query:
        return {}
    gen = per_query[per_query["answer_status"].notna()]
    sup = gen["answer_supported"].dropna().astype(bool) if "answer_supported" in gen else pd.Series(dtype=bool)
    scored = gen["answer_f1"].dropna()
    return {"answers": {
        "generated": int(len(gen)), "status": {k: int(v) for k, v in gen["answer_status"].value_counts().items()},
        "scored": int(len(scored)), "f1": float(scored.mean()) if len(scored) else None,
        "rouge_l": float(gen["answer_rouge_l"].dropna().mean()) if len(scored) else None,
        "exact_match": float(gen["answer_em"].dropna().mean()) if len(scored) else None,
        "judged": int(len(sup)),
        "judge_status": {k: int(v) for k, v in gen["answer_judge_status"].value_counts().items()}
        if "answer_judge_status" in gen else {},
        "hallucination_rate": float((~sup).mean()) if len(sup) else None}}


@dataclass(frozen=True)
class RunOutcome:
    """What one job did: its results folder, and whether it was skipped because it was already done."""

    folder: Path
    skipped: bool


def run_experiment(cfg: DictConfig) -> Path:
    """Run one (dataset, method) job; return its results folder (skipped if already DONE)."""
    return run_job(cfg).folder


def run_job(cfg: DictConfig) -> RunOutcome:
    """Run one (dataset, method) job unless its results folder is done (``run.overwrite`` forces it)."""
    progress = bool(cfg.run.progress)
    ds_folder = prepare_dataset(cfg)
    ds = read_dataset(ds_folder, cfg.dataset.name)
    build_key = ds.card.get("build", {}).get("key") or sha256_file(ds_folder / "card.json")
    ident = run_identity(cfg, build_key)
    hashed, chash, method_name, folder = ident.hashed, ident.config_hash, ident.label, ident.folder
    if RunFolder(folder).is_done and not cfg.run.overwrite:
        log.info("skip: %s is done", folder)
        print(f"[skip] {cfg.dataset.name}/{method_name}/{chash}: already done")
        return RunOutcome(folder, True)

    started = dt.datetime.now(dt.timezone.utc)
    rss_start = peak_rss_mb()
    load_start = load_average()
    queries, counts = select_queries(ds, cfg)
    params = to_dict(cfg.method)
    params.pop("name")
    params.pop("variant", None)
    t0 = time.perf_counter()
    method = instantiate(params, cache_dir=project_path(cfg.cache_dir), progress=progress, _convert_="all")
    init_s = time.perf_counter() - t0

    docs_by_scope = group_docs(ds)
    if isinstance(method, BindsDataset):
        method.bind_dataset({"name": cfg.dataset.name, "build_key": build_key})
    if isinstance(method, UsesCollection):
        method.set_collection([d for docs in docs_by_scope.values() for d in docs])
    if isinstance(method, UsesQuerySet):
        method.set_queries(list(queries["query_id"]))
    answers = dict(zip(ds.queries["query_id"], ds.queries["answer"]))
    answer_rules = cfg.dataset.get("answer_rules")
    if answer_rules not in (None, "locomo"):
        raise ValueError(f"dataset.answer_rules must be null or 'locomo', got {answer_rules!r}")
    k = int(cfg.run.k)
    run: dict[str, list[tuple[str, float]]] = {}
    records: list[dict[str, Any]] = []
    index_seconds, index_calls, warmed = 0.0, 0, not cfg.run.warmup
    bar = tqdm(total=len(queries), desc=f"{cfg.dataset.name}/{method_name}", disable=not progress, unit="q")
    try:
        for scope_id, row, ne, new_docs in walk_eligible(queries, docs_by_scope):
            rec: dict[str, Any] = {"query_id": row.query_id, "scope_id": scope_id, "category": row.category,
                                   "n_eligible": int(ne), "n_results": 0, "status": "ok", "error": None,
                                   "latency_ms": None, **encode_cells({}, {})}
            if ne == 0:
                rec["status"] = "no_eligible_docs"
                run[row.query_id] = []
                records.append(rec)
                bar.update()
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
                try:
                    method.search(query, k)  # discarded: first call pays lazy loading/JIT costs
                except Exception:  # noqa: BLE001 - the timed search below repeats it and records the error
                    pass
            ts = time.perf_counter()
            try:
                res: SearchResult = method.search(query, k)
            except Exception as exc:  # noqa: BLE001 - recorded per query; max_error_share decides
                rec.update(status="error", error=f"{type(exc).__name__}: {exc}")
                run[row.query_id] = []
                records.append(rec)
                bar.update()
                continue
            rec["latency_ms"] = (time.perf_counter() - ts) * 1e3
            ids = [d for d, _ in res.ranking]
            bad = [d for d in ids if d not in allowed]
            if bad:
                raise EligibilityViolation(
                    f"method '{method_name}' returned {len(bad)} ineligible doc(s) for query {row.query_id}, e.g. {bad[:3]}")
            if len(set(ids)) != len(ids):
                raise ValueError(f"method '{method_name}' returned duplicate doc ids for query {row.query_id}")
            if isinstance(method, Annotates):  # answer generation and judging: not part of the query's latency
                try:
                    method.annotate(query, res)
                except Exception as exc:  # noqa: BLE001 - recorded per query and counted in the status table
                    rec.update(status="annotate_error", error=f"{type(exc).__name__}: {exc}")
            ranking = top_k(res.ranking, k)
            run[row.query_id] = ranking
            rec["n_results"] = len(ranking)
            if not ranking:
                rec["status"] = "no_results"
            rec.update(answer_record(res.flags.get("generation"), answers.get(row.query_id),
                                     row.category if answer_rules == "locomo" else None))
            rec.update(encode_cells(res.timings_ms, res.flags))
            records.append(rec)
            bar.update()
    finally:
        bar.close()
        method.close()

    per_query = pd.DataFrame(records)
    n_err = int((per_query["status"] == "error").sum()) if len(per_query) else 0
    max_share = float(cfg.run.max_error_share)
    if len(per_query) and n_err / len(per_query) > max_share:
        first = per_query.loc[per_query["status"] == "error", "error"].iloc[0]
        raise RunFailed(f"{n_err}/{len(per_query)} queries failed (max_error_share={max_share}); first error: {first}")

    qrels = {q: ds.qrels[q] for q in queries["query_id"]}
    metric_names = list(cfg.run.metrics)
    scores = evaluate_run(qrels, run, metric_names)
    per_query = per_query.merge(scores, left_on="query_id", right_index=True, how="left")
    lat = [x for x in per_query["latency_ms"].tolist() if x is not None and not pd.isna(x)]
    timings = timings_frame(per_query)  # ms; NaN where a stage did not run
    stages = {s: summarize(timings[s].dropna().tolist()) for s in sorted(timings.columns)}
    status_counts = per_query["status"].value_counts().to_dict() if len(per_query) else {}
    metrics = {
        "dataset": cfg.dataset.name,
        "method": method_name,
        "config_hash": chash,
        "filters": {k: to_dict(cfg.dataset).get(k) for k in ("split", "scopes", "categories", "sample")},
        "queries": {**counts, "status": {k: int(v) for k, v in sorted(status_counts.items())}},
        "means": {m: float(scores[m].mean()) if len(scores) else 0.0 for m in metric_names},
        "latency_ms": summarize(lat),
        "stage_latency_ms": stages,
        "qps": (len(lat) / (sum(lat) / 1e3)) if lat and sum(lat) > 0 else None,
    }
    metrics.update(answer_summary(per_query))

    ended = dt.datetime.now(dt.timezone.utc)
    manifest = {
        "config": to_dict(cfg),
        "hashed_config": hashed,
        "config_hash": chash,
        "dataset": {"name": cfg.dataset.name, "folder": str(ds_folder), "build_key": build_key,
                    "card_sha256": sha256_file(ds_folder / "card.json"), "card_counts": ds.card.get("counts")},
        "method": method.describe(),
        "git": git_info(),
        "packages": package_versions(),
        "hardware": hardware(),
        "seed": int(cfg.run.seed),
        "started": started.isoformat(),
        "ended": ended.isoformat(),
        "wall_seconds": round((ended - started).total_seconds(), 3),
        "method_init_seconds": round(init_s, 3),
        "index_build_seconds": round(index_seconds, 3),
        "index_calls": index_calls,
        "peak_rss_mb": {"at_start": rss_start, "at_end": peak_rss_mb(), "note": "process-wide ru_maxrss"},
        "load_average": {"at_start": load_start, "at_end": load_average(), "cores": os.cpu_count(),
                         "note": "latencies measured while load exceeds the cores are inflated by contention"},
        "tie_rule": "score descending, then doc id descending (trec_eval)",
        "latency": "warm: one discarded warm-up search per run" if cfg.run.warmup else "includes the first (cold) search",
    }
    RunFolder(folder).write(run, qrels, per_query, metrics, manifest, tag=f"{method_name}-{chash}")
    if cfg.run.print_summary:
        from experiments.summary import format_table

        print(format_table([metrics]))
        print(f"results: {folder}")
    return RunOutcome(folder, False)
