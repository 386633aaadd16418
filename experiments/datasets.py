"""Wire dataset configs to lethebench: build (or reuse) and load processed datasets."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from experiments.config import project_path, to_dict
from lethe.embedder import Embedder
from lethebench.build import build_dataset
from lethebench.chunking import ChunkParams


def chunk_params(cfg: DictConfig) -> ChunkParams:
    return ChunkParams(size=int(cfg.chunking.size_tokens), overlap=int(cfg.chunking.overlap_tokens))


def prepare_dataset(cfg: DictConfig, force: bool = False, embedder: Embedder | None = None) -> Path:
    """Processed folder of ``cfg.dataset`` (built on first use); the tokenizer is the embedder's.

    A dataset config with ``folder`` names an existing processed folder, used as is.
    """
    if cfg.dataset.get("folder"):
        folder = project_path(cfg.dataset.folder)
        if not (folder / "card.json").is_file():
            raise FileNotFoundError(f"dataset.folder={folder} is not a processed dataset folder (no card.json)")
        return folder
    emb = embedder or Embedder(to_dict(cfg.embedder), cache_dir=None, show_progress=False)
    return build_dataset(
        to_dict(cfg.dataset), project_path(cfg.data.root), project_path(cfg.data.processed),
        emb, chunk_params(cfg), force=force,
    )
