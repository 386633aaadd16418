"""The candidate stage of a reranker (the cross-encoder, its random control): Pyserini BM25 when the ``first_stage``
section holds only BM25 parameters (``{k1, b}``, the default), else the retrieval method its ``_target_`` names (e.g.
the hybrid, ``baselines.hybrid.HybridSearch``), built with the reranker's cache dir so it shares the run's caches.

A reranker config with a ``_target_`` first stage sets ``_recursive_: false``, so Hydra hands the section over as
parameters instead of building it without the cache dir.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baselines.bm25 import PyseriniBM25
from lethe.core.hashing import content_hash
from lethe.core.typed_config import plain_values

BM25_DEFAULT = {"k1": 1.2, "b": 0.75}


def plain(section: Any) -> dict[str, Any]:
    """A config section (a mapping, an OmegaConf node when Hydra did not recurse, or None) as a plain dict."""
    return dict(plain_values(section or {}))


def is_bm25(spec: Mapping[str, Any] | None) -> bool:
    """Whether a ``first_stage`` section is the default Pyserini BM25 (BM25 parameters only)."""
    return "_target_" not in plain(spec)


def build_first_stage(spec: Mapping[str, Any] | None, cache_dir: str | Path | None, progress: bool) -> Any:
    """The retriever a ``first_stage`` section describes (see the module docstring)."""
    spec = plain(spec)
    if is_bm25(spec):
        return PyseriniBM25(**{**BM25_DEFAULT, **spec}, cache_dir=cache_dir, progress=progress)
    from lethe.core.targets import build

    return build(spec, cache_dir=cache_dir, progress=progress, _convert_="all")


def pool_key(spec: Mapping[str, Any] | None, candidates: int) -> str:
    """A short key of a candidate pool: the first stage's section and the depth reranked."""
    return content_hash({"first_stage": plain(spec), "candidates": int(candidates)}, 16)


def timing_name(spec: Mapping[str, Any] | None) -> str:
    """The per-query timing key of the candidate stage ("bm25" for the default, as every earlier run recorded)."""
    return "bm25" if is_bm25(spec) else "first_stage"
