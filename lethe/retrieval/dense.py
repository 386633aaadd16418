"""Dense scoring over one set of docs: embeddings (cached) and cosine similarities.

Shared by the vector, hybrid, MMR and FAISS baselines and by Lethe: one embedder, one place
where documents are embedded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.typed_config import ConfigError
from lethe.retrieval.embedder import Embedder

EMBEDDER_OPTIONS = ("batch_size", "cache_roles", "persist_every", "backend", "onnx", "device", "prompts")
EMBEDDER_KEYS = frozenset({"name", "path", "pypi_module", "hub_id", "allow_hub", *EMBEDDER_OPTIONS})


def make_embedder(
    embedder: Mapping[str, Any] | Embedder, cache_dir: str | Path | None, progress: bool = True
) -> Embedder:
    """An Embedder from its config dict (as in conf/model/*.yaml), or the one given. An optional ``prompts`` maps a
    role (``query``, ``doc``) to the prefix put before every text of that role (E5's "query: " / "passage: ", a BGE
    instruction); it enters the embedding cache's key (lethe.retrieval.embedder)."""
    if isinstance(embedder, Embedder):
        return embedder
    cfg = dict(embedder)
    unknown = sorted(set(cfg) - EMBEDDER_KEYS)
    if unknown:  # a key nothing reads (or a nested `_target_` section smuggled in) is refused, named
        raise ConfigError(f"embedder: unknown key(s) {unknown}; the embedder section takes {sorted(EMBEDDER_KEYS)}")
    options = {k: cfg[k] for k in EMBEDDER_OPTIONS if k in cfg}
    return Embedder(cfg, cache_dir=Path(cache_dir) if cache_dir else None, show_progress=progress, **options)


class DenseIndex:
    """Doc vectors (n, dim), L2-normalized, for exact cosine scoring."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.ids: list[str] = []
        self.vecs = np.zeros((0, 1), np.float32)

    def fit(self, ids: Sequence[str], texts: Sequence[str]) -> DenseIndex:
        self.ids = list(ids)
        self.vecs = self.embedder.encode(texts, role="doc") if texts else np.zeros((0, 1), np.float32)
        return self

    def query(self, text: str) -> tuple[np.ndarray, bool]:
        """Query vector (dim,) and whether it came from the cache."""
        v = self.embedder.encode([text], role="query")[0]
        return v, self.embedder.last_cache_hits > 0

    def scores(self, qvec: np.ndarray) -> np.ndarray:
        """Cosine similarity of every doc to the query, shape (n,)."""
        return self.vecs @ qvec if len(self.ids) else np.zeros(0, np.float32)
