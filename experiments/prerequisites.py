"""A tier's prerequisites: processed datasets, cross-encoder model sets, learned-fusion models and the tuned hybrids'
tunings, as steps of the reproduction, the model ones built in spawned worker processes that die with the reproducing process."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.config import to_dict
from experiments.datasets import dataset_build_key
from experiments.reference import ResolvedRun
from experiments.stopping import die_with_parent
from lethe.core.faults import disarm, kill_point
from lethe.core.paths import Paths
from lethe.retrieval.crossencoder import model_set_damage, set_folder
from lethe.stages.learned_fusion import FusionModel

PREPARE_FILE = ".reproduce/prepare_seconds.json"  # under the results dir: measured prerequisite times


@dataclass
class Step:
    """A job of a tier: its name (a run key, study key or prerequisite), whether it is done, and how to do it.
    ``model`` marks a model prerequisite (``(kind, run config)``, see :func:`build_model`): those may be
    built in worker processes."""

    name: str
    done: bool
    make: Callable[[], Any]
    model: tuple[str, DictConfig] | None = None


MODEL_KINDS = ("cross_encoder", "fusion", "hybrid_tuning", "ce_pool")


def build_model(kind: str, cfg: DictConfig, threads: int | None) -> None:
    """Build one model prerequisite of ``kind`` (a cross-encoder model set or a learned-fusion model) from
    the run config ``cfg`` with ``threads`` torch threads and llama.cpp threads where an LLM config leaves them null
    (None: leave both settings); picklable, so a worker process can call it."""
    import torch

    from experiments import ce_pool, train_cross_encoder, train_fusion, tune_hybrid
    from lethe.llm.backends import set_default_threads

    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model prerequisite {kind!r}; one of {list(MODEL_KINDS)}")
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
        llm_before = set_default_threads(threads)  # the label-free questions' LLM keeps to the same budget
    try:
        if kind == "cross_encoder":
            train_cross_encoder.train_model_set(cfg)
        elif kind == "fusion":
            train_fusion.ensure_model(cfg)
        elif kind == "hybrid_tuning":
            tune_hybrid.ensure_tuning(cfg)
        else:  # trains the model set first when no other step made it (a worker waits for one that is training it)
            ce_pool.ensure_pool(cfg)
    finally:
        torch.set_num_threads(before)
        if threads is not None:
            set_default_threads(llm_before)


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


def _named(kind: str, cfg: DictConfig, folder: Path, detail: str = "") -> str:
    """A model prerequisite's step name (a key of the expected files' ``prepare_seconds``): ``kind``, the dataset,
    ``detail``, its configuration key (``folder``'s name) and the query pool it learns from (the part of the parent
    folder's name after the build key; none: every query)."""
    pool = folder.parent.name.partition("-")[2]
    return f"{kind} {cfg.dataset.name} {detail + ' ' if detail else ''}{folder.name}" + (
        f" pool {pool}" if pool else ""
    )


def prepare_steps(runs: Sequence[ResolvedRun], threads: int | None = None) -> list[Step]:
    """Prerequisites of ``runs`` in order: datasets, cross-encoder model sets, learned-fusion models, hybrid tunings,
    the interpolation weights of cross-encoder sets over pools other than BM25's (each made from the run's own config,
    with ``threads`` torch threads)."""
    from baselines.first_stage import is_bm25
    from experiments import ce_pool, train_fusion, tune_hybrid

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
                steps.append(model_step(name, not model_set_damage(folder), "cross_encoder", r.cfg, threads))
    for r in runs:
        if OmegaConf.select(r.cfg, "method.stages.learned_fusion.enabled"):
            folder = train_fusion.model_folder(r.cfg)
            name = _named("fusion", r.cfg, folder)
            if name not in seen:
                seen.add(name)
                steps.append(model_step(name, FusionModel.is_whole(folder), "fusion", r.cfg, threads))
    for r in runs:
        if OmegaConf.select(r.cfg, "method.tuning") is not None:
            folder = tune_hybrid.tuning_folder(r.cfg)
            name = _named("tuning", r.cfg, folder, str(r.cfg.method.tuning.parameter))
            if name not in seen:
                seen.add(name)
                steps.append(model_step(name, (folder / "tuning.json").is_file(), "hybrid_tuning", r.cfg, threads))
    for r in runs:
        m = r.cfg.method
        trained = OmegaConf.select(r.cfg, "method.model.train") is not None and m.get("interpolation") == "dev"
        if trained and not is_bm25(to_dict(m).get("first_stage")):
            path = ce_pool.pool_file(r.cfg)
            name = f"pool weights {path.parents[2].name}/{path.parents[1].name}/{path.stem}"  # <scope>/<set>/<pool>
            if name not in seen:
                seen.add(name)
                steps.append(model_step(name, ce_pool.pool_is_whole(path), "ce_pool", r.cfg, threads))
    return steps


def prepare_file(runs: Sequence[ResolvedRun]) -> Path | None:
    return Paths.of(runs[0].cfg).results / PREPARE_FILE if runs else None


def read_json(path: Path | None) -> dict[str, Any]:
    return json.loads(path.read_text()) if path is not None and path.is_file() else {}


def longest_first(indices: Sequence[int], seconds: Sequence[float | None]) -> list[int]:
    """``indices`` by recorded duration, longest first (unknown ones before all, then declared order): the
    order in which worker processes take prerequisites, so that they finish close together."""
    rank = {k: (-(s if s is not None else math.inf), n) for n, (k, s) in enumerate(zip(indices, seconds, strict=True))}
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

    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )


def _start_worker(parent_pid: int) -> None:
    """A prerequisite worker's initializer: it dies with ``parent_pid`` and never acts on the parent's kill point."""
    die_with_parent(parent_pid)
    disarm()


def build_in_workers(
    models: Sequence[tuple[int, tuple[str, DictConfig]]],
    workers: int,
    threads: int | None,
    finish: Callable[[int, float, BaseException | None], None],
) -> None:
    """Build the model prerequisites ``models`` ((job index, (kind, run config))) in ``workers`` spawned
    processes (each with ``threads`` torch threads); ``finish(index, seconds, error)`` as each one ends.
    Runs are never built this way: their latencies are only comparable when they run alone."""
    from concurrent.futures import as_completed

    print(
        f"building {len(models)} model prerequisite(s) in {min(workers, len(models))} worker process(es), "
        f"{threads if threads is not None else 'default'} torch thread(s) each",
        flush=True,
    )
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
            for proc in list((pool._processes or {}).values()):  # noqa: SLF001 - Python 3.11 has no terminate_workers()
                proc.terminate()
            raise
