"""Settings of a reproduction (conf/reproduce.yaml) that every part of it reads: the actions, where the report reads
runs from, the overrides passed on to every declared run, and the verified metric names."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from analysis.metric_names import UnknownMetric, canonical_metrics
from experiments.reference import load_tier
from lethe.core.paths import Paths

ACTIONS = ("all", "run", "report", "verify", "write_expected", "store", "seal", "record_reach", "rekey", "retier")
SOURCES = ("runs", "store")  # where action=report and verify read the declared runs: results folders, or the store
STORE_READERS = ("report", "verify")  # the actions source=store applies to


def base_overrides(cfg: DictConfig) -> list[str]:
    return ["run.print_summary=false", *[str(o) for o in cfg.overrides]]


def tier_overrides(tier: str, cfg: DictConfig) -> list[str]:
    return list(load_tier(tier, cfg.reference_dir).overrides)


def from_store(cfg: DictConfig) -> bool:
    """Whether the report or the verification reads the reference store (``source=store``) rather than results
    folders."""
    source = str(cfg.get("source") or "runs")
    if source not in SOURCES:
        raise SystemExit(f"source={source!r} is not one of {list(SOURCES)}")
    return source == "store"


def store_if_read(cfg: DictConfig) -> Path | None:
    return Paths.of(cfg).reference_store if from_store(cfg) else None


def verify_metrics(cfg: DictConfig) -> list[str]:
    """``cfg.verify_metrics`` in canonical (ranx) names, the keys of metrics.json and the expected-scores
    files, whichever spelling was given (``nDCG@10`` or ``ndcg@10``); SystemExit naming the key otherwise."""
    try:
        return list(canonical_metrics(cfg.verify_metrics, "verify_metrics"))
    except UnknownMetric as exc:
        raise SystemExit(str(exc)) from exc
