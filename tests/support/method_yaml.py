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


def build_stage(section: str, method: str = "lethe_iter1", **values: Any) -> Any:
    """The stage ``section`` of ``method``'s YAML, built by Hydra, with ``values`` replacing its keys."""
    base = method_params(method)[section] or method_params("lethe_iter4")[section]
    return instantiate({**base, **values}, _convert_="all")


def built_sections(method: str = "lethe_iter1", **sections: Mapping[str, Any] | None) -> dict[str, Any]:
    """``LethePipeline``'s keyword arguments from ``method``'s YAML (stages built, embedder left out); each
    keyword replaces keys of that section (a section the method does not have, e.g. an iteration-4 one
    on iteration 1, starts from lethe_iter4's YAML); ``None`` switches it off."""
    params = method_params(method)
    for key in ("name", "variant", "supervision", "_target_", "embedder"):
        params.pop(key, None)
    built: dict[str, Any] = {}
    for key, value in params.items():
        if key in sections:
            value = None if sections[key] is None else {**(value or method_params("lethe_iter4")[key]), **sections[key]}
        if key == "extra_stages":
            built[key] = {n: instantiate(v, _convert_="all") for n, v in (value or {}).items()}
        elif isinstance(value, dict) and "_target_" in value:
            built[key] = instantiate(value, _convert_="all")
        else:
            built[key] = value
    return built


def build_pipeline(
    embedder: Any, method: str = "lethe_iter1", cache_dir: Any = None, **sections: Mapping[str, Any] | None
) -> Any:
    """A ``LethePipeline`` from ``method``'s YAML with ``embedder`` and sections replaced (``built_sections``)."""
    from lethe.methods.pipeline import LethePipeline

    return LethePipeline(embedder, cache_dir=cache_dir, progress=False, **built_sections(method, **sections))
