"""Lethe pipelines and stages built from the method YAML (the only place their values live), with
sections or values replaced for a test."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra.utils import instantiate

from experiments.config import load_config, to_dict

_SECTIONS: dict[str, dict[str, Any]] = {}


def method_params(method: str = "lethe_iter1") -> dict[str, Any]:
    """The resolved ``method`` section of ``conf/method/<method>.yaml`` (copied per call)."""
    if method not in _SECTIONS:
        _SECTIONS[method] = to_dict(load_config([f"method={method}", "llm=smollm2"]).method)
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in _SECTIONS[method].items()}


def _stage_section(name: str, method: str) -> dict[str, Any] | None:
    """Stage ``name``'s section in ``method``'s YAML, else in lethe_iter4's (the iteration-4 stages)."""
    return method_params(method)["stages"].get(name) or method_params("lethe_iter4")["stages"].get(name)


def build_stage(section: str, method: str = "lethe_iter1", **values: Any) -> Any:
    """The stage ``section`` of ``method``'s YAML (``method.stages``), built by Hydra, with ``values`` replacing its
    keys."""
    return instantiate({**(_stage_section(section, method) or {}), **values}, _convert_="all")


def built_sections(method: str = "lethe_iter1", **sections: Mapping[str, Any] | None) -> dict[str, Any]:
    """``LethePipeline``'s ``stages`` and ``order`` from ``method``'s YAML, stages built; each keyword replaces keys
    of that stage (a stage the method does not have, e.g. an iteration-4 one on iteration 1, starts from lethe_iter4's
    YAML; a name neither has is a new stage, appended); ``None`` switches it off."""
    stages = dict(method_params(method)["stages"])
    for key, value in sections.items():
        stages[key] = None if value is None else {**(_stage_section(key, method) or {}), **value}
    return {
        "stages": {k: None if v is None else instantiate(v, _convert_="all") for k, v in stages.items()},
        "order": list(stages),
    }


def build_pipeline(
    embedder: Any, method: str = "lethe_iter1", cache_dir: Any = None, **sections: Mapping[str, Any] | None
) -> Any:
    """A ``LethePipeline`` from ``method``'s YAML with ``embedder`` and sections replaced (``built_sections``)."""
    from lethe.methods.pipeline import LethePipeline

    return LethePipeline(embedder, cache_dir=cache_dir, progress=False, **built_sections(method, **sections))
