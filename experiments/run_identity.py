"""Run identity: which results folder a run config is filed under (DESIGN.md "Runs and results").

A run is identified by the sha256 of the result-relevant part of its Hydra config (paths and display
options excluded) and filed under ``<results_dir>/<dataset>/<method label>/<config_hash>/``. The
folder itself (its files, atomic writing, typed reading) is :class:`lethebench.runs.RunFolder`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from analysis.metric_names import canonical_metrics
from experiments.config import to_dict
from lethe.core.hashing import content_hash, sha256_file
from lethe.core.paths import project_path
from lethe.core.typed_config import ConfigError
from lethe.retrieval.crossencoder import regime_train
from lethebench.runs import run_path
from lethebench.supervision import KEY as SUPERVISION_KEY


def config_hash(hashed: Mapping[str, Any]) -> str:
    """12-hex sha256 of the canonical JSON of the result-relevant config."""
    return content_hash(hashed, 12)


def method_label(method_cfg: Any) -> str:
    """The name results are filed and reported under: ``name``, or ``name+variant`` for a variant
    (an ablation or sweep point of the same method, e.g. ``lethe_iter1+no_boost``)."""
    variant = method_cfg.get("variant")
    return f"{method_cfg['name']}+{variant}" if variant else str(method_cfg["name"])


# Keys that say where a model runs, not what it computes: recorded in the manifest, left out of the hash, so
# a run made on a GPU reuses (skips) the same run made on the CPU. Results agree across devices within the
# tolerance classes of conf/reference/tolerances.yaml (float rounding can swap near-tied documents).
PLACEMENT_KEYS = frozenset({"device", "n_gpu_layers"})
# Placement keys that were hashed before they were known as such: in the hash they keep the value every hash was
# made with, whatever the run used, so that no hash moved. llama.cpp's thread count is one: greedy texts agree
# across thread counts (make bench, section llm), and where a thread count changes a token, the llm tolerance class
# covers it; the count a run used is in its manifest.
PLACEMENT_IN_HASH = {"n_threads": None}


def without_placement(cfg: Any) -> Any:
    """``cfg`` (nested dicts and lists) without the :data:`PLACEMENT_KEYS` at any depth, and with the keys of
    :data:`PLACEMENT_IN_HASH` at their hashed value."""
    if isinstance(cfg, Mapping):
        return {
            k: PLACEMENT_IN_HASH[k] if k in PLACEMENT_IN_HASH else without_placement(v)
            for k, v in cfg.items()
            if k not in PLACEMENT_KEYS
        }
    if isinstance(cfg, list):
        return [without_placement(v) for v in cfg]
    return cfg


# cache_dir is where content-addressed work is kept, not what a run computes; a path under it (the trained
# cross-encoder's ``method.model.path: ${cache_dir}/models/...``) enters the hash spelled under this
# directory, the default cache_dir of conf/config.yaml, so every hash made with the default is unchanged and a
# run made with LETHE_CACHE=/scratch/cache is the same run, filed in the same folder.
CACHE_DIR_IN_HASH = ".cache/lethe"


def relocated(cfg: Any, cache_dir: str | None) -> Any:
    """``cfg`` (nested dicts and lists) with every string under ``cache_dir`` spelled under
    :data:`CACHE_DIR_IN_HASH` instead."""
    if not cache_dir:
        return cfg
    root = str(cache_dir).rstrip("/")
    if isinstance(cfg, Mapping):
        return {k: relocated(v, root) for k, v in cfg.items()}
    if isinstance(cfg, list):
        return [relocated(v, root) for v in cfg]
    if isinstance(cfg, str) and (cfg == root or cfg.startswith(root + "/")):
        return (CACHE_DIR_IN_HASH + "/" + cfg[len(root) :].lstrip("/")).rstrip("/")
    return cfg


def chunking_identity(chunking: Mapping[str, Any]) -> dict[str, Any]:
    """The ``chunking`` section as hashed: token windows (the default strategy) by their size and overlap alone, as
    before the other strategies existed (so no run's hash moved); another strategy with every key, the semantic
    breakpoint's two keys only when they say percentile (they came later)."""
    if chunking.get("strategy", "tokens") == "tokens":
        return {k: chunking[k] for k in ("size_tokens", "overlap_tokens")}
    if chunking.get("semantic_breakpoint", "threshold") == "threshold":  # as before percentile breakpoints existed
        return {k: v for k, v in chunking.items() if k not in ("semantic_breakpoint", "semantic_percentile")}
    return dict(chunking)


# How a run is scored is not what it computes: ``run.metrics`` is left out of the identity (a metric a finished run
# did not store is computed from its run.trec and qrels.trec when asked for, analysis.metrics.run_scores), and this
# list, the default of conf/config.yaml when the key entered the hash, stands in its place so that no hash moved.
METRICS_IN_HASH = ("ndcg@10", "recall@10", "recall@50", "mrr@10", "precision@10")


def with_replay_content(method: Mapping[str, Any]) -> Any:
    """``method`` with the sha256 of its LLM reranker's replay file beside the file's name (a run replaying
    another reach is another run); unchanged without a replay file (so no existing hash moved)."""
    replay = (method.get("llm_rerank") or {}).get("replay") if isinstance(method, Mapping) else None
    if not replay:
        return method
    path = project_path(str(replay))
    if not path.is_file():
        raise ConfigError(f"method.llm_rerank.replay={replay}: {path} does not exist")
    return {**method, "llm_rerank": {**method["llm_rerank"], "replay_sha256": sha256_file(path)}}


def without_other_regimes(cfg: Any) -> Any:
    """``cfg`` (nested dicts and lists) with every cross-encoder training section (a ``train`` mapping with a
    ``regime``) as :func:`lethe.retrieval.crossencoder.regime_train` keys it: the keys only another regime reads were
    added after runs of the other regimes existed, and those runs' hashes did not move."""
    if isinstance(cfg, Mapping):
        out = {k: without_other_regimes(v) for k, v in cfg.items()}
        train = out.get("train")
        if isinstance(train, Mapping) and "regime" in train:
            out["train"] = regime_train(train)
        return out
    if isinstance(cfg, list):
        return [without_other_regimes(v) for v in cfg]
    return cfg


# Method keys that name or describe a method rather than parameterise it: never passed to its constructor
# (:func:`method_params`). ``supervision`` (lethebench/supervision.py) is also left out of the hash: it was declared
# after the runs existed, and says what a method learns from, not what it computes.
METHOD_DESCRIPTION_KEYS = ("name", "variant", SUPERVISION_KEY)


def method_params(method: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved method config without :data:`METHOD_DESCRIPTION_KEYS`: what its ``_target_`` is built from."""
    return {k: v for k, v in method.items() if k not in METHOD_DESCRIPTION_KEYS}


def hashed_config(resolved: Mapping[str, Any], build_key: str) -> dict[str, Any]:
    """The part of a resolved config (``to_dict(cfg)``) that determines results (paths, display options and
    ``run.metrics`` excluded, paths under ``cache_dir`` :func:`relocated`); ``run.metrics`` is checked for
    unknown names here, so a mistyped one fails before any compute. The ``answers`` section, and the embedder
    that scores answer similarity, enter only when answers are on, so runs without answers keep the hash they
    had before the section existed."""
    canonical_metrics(resolved["run"]["metrics"], "run.metrics")
    run = {**resolved["run"], "metrics": list(METRICS_IN_HASH)}
    answers = resolved.get("answers") or {}
    extra = (
        {"answers": without_placement(answers), "answer_embedder": without_placement(resolved.get("embedder"))}
        if answers.get("enabled")
        else {}
    )
    return relocated(
        {
            "dataset": resolved["dataset"],
            "dataset_build_key": build_key,
            "method": with_replay_content(
                without_other_regimes(
                    without_placement({k: v for k, v in resolved["method"].items() if k != SUPERVISION_KEY})
                )
            ),
            "chunking": chunking_identity(resolved["chunking"]),
            "run": {k: run[k] for k in ("k", "metrics", "seed", "warmup", "max_error_share")},
            **extra,
        },
        resolved.get("cache_dir"),
    )


@dataclass(frozen=True)
class RunIdentity:
    """Where a run's results live and what identifies them."""

    label: str  # method label (name or name+variant)
    hashed: dict[str, Any]  # the hashed part of the config
    config_hash: str
    folder: Path  # <results_dir>/<dataset>/<label>/<config_hash>


def run_identity(cfg: DictConfig | Mapping[str, Any], build_key: str) -> RunIdentity:
    """The identity of the run ``cfg`` (a config, or its resolved dict) describes on the dataset build ``build_key``."""
    resolved = to_dict(cfg) if isinstance(cfg, DictConfig) else cfg
    hashed = hashed_config(resolved, build_key)
    chash = config_hash(hashed)
    label = method_label(resolved["method"])
    folder = run_path(project_path(resolved["results_dir"]), resolved["dataset"]["name"], label, chash)
    return RunIdentity(label, hashed, chash, folder)
