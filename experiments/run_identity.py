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
from lethe.core.hashing import content_hash
from lethe.core.paths import Paths
from lethe.core.targets import allowed, target_class
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


# The version of the rules below. The hash covers it, so a change of the rules moves every hash at once, and
# ``python -m experiments.reproduce tier=all action=rekey`` files the expected scores, the reference store and the
# finished results folders under the new hashes (experiments/rekey.py; no number moves, verification proves it).
# 1: the rules up to 2026-12 (legacy spellings kept so that no hash moved); 2: the rules below, a replayed reach
# file hashed by its path and content; 3: by its content only (where a file sits is not what a run computes).
IDENTITY_SCHEMA = 3

# Keys that say where a model runs, not what it computes: recorded in the manifest, left out of the hash, so a run made
# on a GPU, or with another llama.cpp thread count, reuses (skips) the same run made on the CPU. Results agree across
# devices and thread counts within the tolerance classes of conf/reference/tolerances.yaml (float rounding can swap
# near-tied documents; a thread count can change a generated token: the llm class covers it).
PLACEMENT_KEYS = frozenset({"device", "n_gpu_layers", "n_threads"})


def without_placement(cfg: Any) -> Any:
    """``cfg`` (nested dicts and lists) without the :data:`PLACEMENT_KEYS` at any depth."""
    if isinstance(cfg, Mapping):
        return {k: without_placement(v) for k, v in cfg.items() if k not in PLACEMENT_KEYS}
    if isinstance(cfg, list):
        return [without_placement(v) for v in cfg]
    return cfg


# cache_dir is where content-addressed work is kept, not what a run computes; a path under it (the trained
# cross-encoder's ``method.model.path: ${cache_dir}/models/...``) enters the hash spelled under this token, so a run
# made with LETHE_CACHE=/scratch/cache is the same run, filed in the same folder.
CACHE_DIR_IN_HASH = "${cache_dir}"


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


# Where a dataset's files sit, not what they hold: their content is in the build key (the inputs' sha256, or a custom
# folder's content hash), so the same data read from another folder, or through a symlink, is the same run.
DATASET_LOCATION_KEYS = frozenset({"folder", "files", "files_root", "beir_dir"})


def with_identity_extras(cfg: Any) -> Any:
    """``cfg`` (nested dicts and lists) with every section whose ``_target_`` declares ``hashed_section(section)``
    (:class:`lethe.core.protocol.ExtendsIdentity`: results that depend on more than the section says, e.g. the
    content of a file it names) replaced by what that returns. The experiments layer knows no method."""
    if isinstance(cfg, list):
        return [with_identity_extras(v) for v in cfg]
    if not isinstance(cfg, Mapping):
        return cfg
    out = {k: with_identity_extras(v) for k, v in cfg.items()}
    target = out.get("_target_")
    # a target outside the allowlist is never imported here: lethe.core.targets refuses it, naming its key, at build
    hook = (
        getattr(target_class(target), "hashed_section", None) if isinstance(target, str) and allowed(target) else None
    )
    return dict(hook(out)) if callable(hook) else out


def migrated(cfg: Any) -> Any:
    """``cfg`` (nested dicts and lists) with every section whose ``_target_`` declares ``migrated_section(section)``
    (:class:`lethe.core.protocol.MigratesSection`: a section recorded in an older shape, given in today's) replaced by
    what that returns, outermost first. Today's shapes come back unchanged, so this is the identity on a current
    config; ``python -m experiments.reproduce action=rekey`` files older records under their current hash with it."""
    if isinstance(cfg, list):
        return [migrated(v) for v in cfg]
    if not isinstance(cfg, Mapping):
        return cfg
    target = cfg.get("_target_")
    hook = (
        getattr(target_class(target), "migrated_section", None) if isinstance(target, str) and allowed(target) else None
    )
    out = dict(hook(cfg)) if callable(hook) else cfg
    return {k: migrated(v) for k, v in out.items()}


# Method keys that name or describe a method rather than parameterise it: never passed to its constructor
# (:func:`method_params`). ``supervision`` (lethebench/supervision.py) is also left out of the hash: it was declared
# after the runs existed, and says what a method learns from, not what it computes.
METHOD_DESCRIPTION_KEYS = ("name", "variant", SUPERVISION_KEY)


def method_params(method: Mapping[str, Any]) -> dict[str, Any]:
    """A resolved method config without :data:`METHOD_DESCRIPTION_KEYS`: what its ``_target_`` is built from."""
    return {k: v for k, v in method.items() if k not in METHOD_DESCRIPTION_KEYS}


def hashed_config(resolved: Mapping[str, Any], build_key: str) -> dict[str, Any]:
    """The part of a resolved config (``to_dict(cfg)``) that determines results, under :data:`IDENTITY_SCHEMA`:
    the dataset (without its :data:`DATASET_LOCATION_KEYS`) and its build key, the method (without placement keys and its description keys but name and variant,
    with each section's identity extras), chunking, and the run settings that change what is computed (``k``,
    ``seed``, ``warmup``, ``max_error_share``); paths under ``cache_dir`` :func:`relocated`. How a run is scored is
    not what it computes: ``run.metrics`` is left out (a metric a finished run did not store is computed from its
    run.trec and qrels.trec when asked for, analysis.metrics.run_scores) but checked for unknown names here, so a
    mistyped one fails before any compute. The ``answers`` section, and the embedder that scores answer
    similarity, enter only when answers are on (off, they compute nothing)."""
    canonical_metrics(resolved["run"]["metrics"], "run.metrics")
    run = resolved["run"]
    answers = resolved.get("answers") or {}
    extra = (
        {"answers": without_placement(answers), "answer_embedder": without_placement(resolved.get("embedder"))}
        if answers.get("enabled")
        else {}
    )
    method = {k: v for k, v in migrated(resolved["method"]).items() if k != SUPERVISION_KEY}
    return relocated(
        {
            "identity_schema": IDENTITY_SCHEMA,
            "dataset": {k: v for k, v in resolved["dataset"].items() if k not in DATASET_LOCATION_KEYS},
            "dataset_build_key": build_key,
            "method": with_identity_extras(without_placement(method)),
            "chunking": dict(resolved["chunking"]),
            "run": {k: run[k] for k in ("k", "seed", "warmup", "max_error_share")},
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


def run_identity(cfg: DictConfig | Mapping[str, Any], build_key: str, paths: Paths | None = None) -> RunIdentity:
    """The identity of the run ``cfg`` (a config, or its resolved dict) describes on the dataset build ``build_key``,
    filed under ``paths.results`` (None: the folders ``cfg`` names)."""
    resolved = to_dict(cfg) if isinstance(cfg, DictConfig) else cfg
    hashed = hashed_config(resolved, build_key)
    chash = config_hash(hashed)
    label = method_label(resolved["method"])
    folder = run_path((paths or Paths.of(resolved)).results, resolved["dataset"]["name"], label, chash)
    return RunIdentity(label, hashed, chash, folder)
