"""Wire dataset configs to lethebench: build (or reuse) and load processed datasets."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig

from experiments.config import to_dict
from lethe.core.hashing import sha256_file
from lethe.core.models import resolve_model
from lethe.core.paths import Paths, plain_name
from lethe.retrieval.embedder import Embedder
from lethebench.build import build_dataset, build_key, input_names, input_paths
from lethebench.chunking import ChunkParams
from lethebench.schema import Dataset, dataset_content_sha256


def chunk_params(cfg: DictConfig) -> ChunkParams:
    """The ``chunking`` section, typed (lethebench.chunking.ChunkParams)."""
    c = cfg.chunking
    return ChunkParams(
        size=int(c.size_tokens),
        overlap=int(c.overlap_tokens),
        strategy=str(c.get("strategy", "tokens")),
        overlap_sentences=int(c.get("overlap_sentences", 1)),
        semantic_threshold=float(c.get("semantic_threshold", 0.5)),
        semantic_breakpoint=str(c.get("semantic_breakpoint", "threshold")),
        semantic_percentile=float(c.get("semantic_percentile", 95.0)),
    )


def _custom_folder(cfg: DictConfig) -> Path:
    folder = Paths.of(cfg).resolve(cfg.dataset.folder)
    if not (folder / "card.json").is_file():
        raise FileNotFoundError(f"dataset.folder={folder} is not a processed dataset folder (no card.json)")
    return folder


def prepare_dataset(cfg: DictConfig, force: bool = False, embedder: Embedder | None = None) -> Path:
    """Processed folder of ``cfg.dataset`` (built on first use); the tokenizer is the embedder's.

    A dataset config with ``folder`` names an existing processed folder, used as is.
    """
    paths = Paths.of(cfg)
    plain_name(cfg.dataset.get("name"), "dataset.name")  # the processed folder is <data.processed>/<name>/<key>
    if cfg.dataset.get("folder"):
        return _custom_folder(cfg)
    emb = embedder or Embedder(to_dict(cfg.embedder), cache_dir=None, show_progress=False)
    return build_dataset(
        to_dict(cfg.dataset),
        paths.data,
        paths.processed,
        emb,
        chunk_params(cfg),
        force=force,
    )


def _folder_key(folder: Path, card: dict, content_sha256: str) -> str:
    """Key of a dataset given as a folder (``dataset.folder``): its card's build key (else the card's
    sha256) plus the content hash of its checked data files, so a folder edited in place (and its card
    updated, lethebench.schema.update_card_hashes) gets a new key and its runs a new config hash."""
    base = card.get("build", {}).get("key") or sha256_file(folder / "card.json")[:16]
    return f"{base}+{content_sha256[:16]}"


def dataset_build_key(cfg: DictConfig) -> str:
    """The build key of ``cfg.dataset`` without building it (the key its processed folder has or will have).

    For ``dataset.folder`` the key includes the content hash of the folder's data files, checked
    against its card (a file changed after the card was written raises DatasetError naming it).
    """
    if cfg.dataset.get("folder"):
        folder = _custom_folder(cfg)
        card = json.loads((folder / "card.json").read_text())
        return _folder_key(folder, card, dataset_content_sha256(folder))
    tokenizer_sha = resolve_model(to_dict(cfg.embedder)).sha256
    return build_key(to_dict(cfg.dataset), Paths.of(cfg).data, chunk_params(cfg), tokenizer_sha)


def dataset_key(cfg: DictConfig, ds_folder: Path, ds: Dataset) -> str:
    """The dataset's part of a run's identity, from the folder ``prepare_dataset(cfg)`` returned and the
    Dataset ``read_dataset`` read from it (no file is hashed again): equal to ``dataset_build_key(cfg)``.
    Built datasets: their build key (the folder's name; read_dataset checked the files against the card).
    ``dataset.folder``: the card's key plus the content hash of the checked files (``ds.content_sha256``)."""
    if cfg.dataset.get("folder"):
        if ds.content_sha256 is None:
            raise ValueError(
                f"dataset {cfg.dataset.name}: the Dataset has no content_sha256; read it with read_dataset"
            )
        return _folder_key(ds_folder, ds.card, ds.content_sha256)
    return ds.card.get("build", {}).get("key") or sha256_file(ds_folder / "card.json")


def recorded_dataset(resolved: dict) -> dict:
    """The ``dataset`` section of a resolved config as a manifest records it: where its files sat replaced by what
    the build key calls them (``files`` by :func:`lethebench.build.input_names`, ``beir_dir`` and ``folder`` by the
    folder's own name), so the same data read from elsewhere is recorded alike (its content is in the build key)."""
    ds = dict(resolved["dataset"])
    if ds.get("files") and not ds.get("folder"):
        ds["files"] = input_names(ds, input_paths(ds, Paths.of(resolved).data))
    for key in ("beir_dir", "folder"):
        if ds.get(key):
            ds[key] = Path(str(ds[key])).name
    return ds
