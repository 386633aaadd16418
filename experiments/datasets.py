"""Wire dataset configs to lethebench: build (or reuse) and load processed datasets."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig

from experiments.config import to_dict
from lethe.core.paths import project_path
from lethe.retrieval.embedder import Embedder
from lethe.core.models import resolve_model
from lethebench.build import build_dataset, build_key
from lethe.core.hashing import sha256_file
from lethebench.chunking import ChunkParams


def chunk_params(cfg: DictConfig) -> ChunkParams:
    return ChunkParams(size=int(cfg.chunking.size_tokens), overlap=int(cfg.chunking.overlap_tokens))


def _custom_folder(cfg: DictConfig) -> Path:
    folder = project_path(cfg.dataset.folder)
    if not (folder / "card.json").is_file():
        raise FileNotFoundError(f"dataset.folder={folder} is not a processed dataset folder (no card.json)")
    return folder


def prepare_dataset(cfg: DictConfig, force: bool = False, embedder: Embedder | None = None) -> Path:
    """Processed folder of ``cfg.dataset`` (built on first use); the tokenizer is the embedder's.

    A dataset config with ``folder`` names an existing processed folder, used as is.
    """
    if cfg.dataset.get("folder"):
        return _custom_folder(cfg)
    emb = embedder or Embedder(to_dict(cfg.embedder), cache_dir=None, show_progress=False)
    return build_dataset(
        to_dict(cfg.dataset), project_path(cfg.data.root), project_path(cfg.data.processed),
        emb, chunk_params(cfg), force=force,
    )


def dataset_build_key(cfg: DictConfig) -> str:
    """The build key of ``cfg.dataset`` without building it (the key its processed folder has or will have)."""
    if cfg.dataset.get("folder"):
        folder = _custom_folder(cfg)
        card = json.loads((folder / "card.json").read_text())
        return card.get("build", {}).get("key") or sha256_file(folder / "card.json")
    tokenizer_sha = resolve_model(to_dict(cfg.embedder)).sha256
    return build_key(to_dict(cfg.dataset), project_path(cfg.data.root), chunk_params(cfg), tokenizer_sha)
