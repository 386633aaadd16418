"""The one embedder: a sentence-transformers model behind the content-addressed cache."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tqdm.auto import tqdm

from lethe.core.devices import check_device, resolve_device
from lethe.core.embedding_cache import EmbeddingCache, text_key
from lethe.core.faults import kill_point
from lethe.core.library_logs import quiet_model_loading
from lethe.core.models import ResolvedModel, resolve_model
from lethe.retrieval.onnx_backend import OnnxBiEncoder, OnnxOptions, check_backend

Role = Literal["query", "doc"]


class Embedder:
    """Encode texts to L2-normalized float32 vectors of shape (n, dim), cached per role.

    ``prompts`` optionally maps role -> prefix (e.g. E5's "query: "); MiniLM uses none.
    ``cache_roles`` lists the roles whose vectors are cached; by default only documents, so that
    query latency always includes encoding the query.
    ``backend`` runs the model with ``torch`` (sentence-transformers' ``encode``) or ``onnx`` (ONNX
    Runtime, :mod:`lethe.retrieval.onnx_backend`, with ``onnx`` options; the export is cached under
    ``cache_dir``); both serve every role, so query and doc vectors come from one computation.
    ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``auto``; lethe.core.devices) is where the model runs;
    ``auto`` is resolved on first use and :meth:`stats` reports the choice.
    """

    def __init__(
        self,
        model: Mapping[str, Any] | ResolvedModel,
        cache_dir: str | Path | None = None,
        batch_size: int = 64,
        prompts: Mapping[str, str] | None = None,
        show_progress: bool = True,
        cache_roles: Sequence[str] = ("doc",),
        persist_every: int = 2048,
        backend: str = "torch",
        onnx: Mapping[str, Any] | OnnxOptions | None = None,
        device: str = "cpu",
    ):
        self.model = model if isinstance(model, ResolvedModel) else resolve_model(model)
        self.device_config = check_device(device, "embedder.device")
        self._device: str | None = None
        self.batch_size = int(batch_size)
        self.prompts = dict(prompts or {})
        self.show_progress = show_progress
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.cache_roles = tuple(cache_roles)
        self.persist_every = int(persist_every)
        if self.persist_every < 1:
            raise ValueError(f"persist_every must be >= 1 text, got {persist_every}")
        self.backend = check_backend(str(backend))
        self.onnx_options = OnnxOptions.from_config(onnx) if onnx is not None else None
        if self.backend == "onnx" and self.onnx_options is None:
            raise ValueError("backend=onnx needs the onnx options (conf/model/*.yaml `onnx:`)")
        self._st = None
        self._onnx: OnnxBiEncoder | None = None
        self._caches: dict[str, EmbeddingCache] = {}
        self.encode_seconds = 0.0
        self.encoded_texts = 0
        self.last_cache_hits = 0  # texts of the last encode() served from the cache

    @property
    def st(self):
        """The loaded SentenceTransformer (loaded on first use, offline unless the hub was asked for)."""
        if self._st is None:
            if self.model.source != "hub":
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            quiet_model_loading()
            self._st = SentenceTransformer(str(self.model.path), device=self.device)
        return self._st

    @property
    def device(self) -> str:
        """The resolved device (``auto`` becomes cuda, mps or cpu, whichever this machine has)."""
        if self._device is None:
            self._device = resolve_device(self.device_config, "embedder.device")
        return self._device

    @property
    def onnx_model(self) -> OnnxBiEncoder:
        """The ONNX Runtime model (backend onnx): from the cached export and the model's ``tokenizer.json`` when the
        export exists (no sentence-transformers model loaded), else exported from :attr:`st` and cached."""
        if self._onnx is None:
            assert self.onnx_options is not None
            if self.cache_dir is not None:
                self._onnx = OnnxBiEncoder.from_cache(
                    self.model.path, self.model.sha256, self.onnx_options, self.cache_dir, device=self.device
                )
            if self._onnx is None:
                self._onnx = OnnxBiEncoder(
                    self.st,
                    self.model.sha256,
                    self.onnx_options,
                    self.cache_dir,
                    device=self.device,
                    source_dir=self.model.path,
                )
        return self._onnx

    @property
    def tokenizer(self):
        return self.st.tokenizer

    @property
    def max_seq_length(self) -> int:
        """Tokens the model reads of a text (the rest is truncated)."""
        return self.onnx_model.max_seq_length if self.backend == "onnx" else int(self.st.max_seq_length)

    def _cache(self, role: Role) -> EmbeddingCache | None:
        if self.cache_dir is None or role not in self.cache_roles:
            return None
        if role not in self._caches:
            ns = {
                "model_sha256": self.model.sha256,
                "role": role,
                "prompt": self.prompts.get(role, ""),
                "normalize": True,
                "max_seq_length": self.max_seq_length,
            }
            if self.backend != "torch":  # torch keeps the namespace (and cached vectors) it had before backends
                assert self.onnx_options is not None
                ns.update(backend=self.backend, onnx=self.onnx_options.numerics())
            self._caches[role] = EmbeddingCache(self.cache_dir, ns, dim=self.dim)
        return self._caches[role]

    def _encode_raw(self, texts: list[str], role: Role, progress: bool = True) -> np.ndarray:
        """Encode ``texts`` with the configured backend, no cache: L2-normalized float32 (n, dim)."""
        t0 = time.perf_counter()
        prefix = self.prompts.get(role, "")
        inputs = [prefix + t for t in texts] if prefix else texts
        if self.backend == "onnx":
            vecs = self.onnx_model.encode(inputs, self.batch_size)
        else:
            vecs = self.st.encode(
                inputs,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=progress and self.show_progress and len(texts) >= 2 * self.batch_size,
            ).astype(np.float32, copy=False)
        self.encode_seconds += time.perf_counter() - t0
        self.encoded_texts += len(texts)
        return vecs

    def encode(self, texts: Sequence[str], role: Role) -> np.ndarray:
        """Vectors for ``texts`` (n, dim); only texts missing from the cache are encoded.

        Cached roles are encoded in chunks of ``persist_every`` texts, each written to the cache as
        soon as it is encoded, so a crash loses at most one chunk. The chunks are cut from the sorted
        keys of *all* of ``texts`` (not of the missing ones), so a run resumed after a crash encodes
        each remaining chunk in the same batches as an uninterrupted run, bit for bit.
        """
        texts = list(texts)
        cache = self._cache(role)
        self.last_cache_hits = 0
        if cache is None:
            return self._encode_raw(texts, role)
        keys = [text_key(t) for t in texts]
        found = cache.get(keys)
        self.last_cache_hits = sum(v is not None for v in found)
        missing = {k: t for k, t, v in zip(keys, texts, found, strict=True) if v is None}
        if missing:
            ordered = sorted(set(keys))
            chunks = [
                [k for k in ordered[i : i + self.persist_every] if k in missing]
                for i in range(0, len(ordered), self.persist_every)
            ]
            chunks = [c for c in chunks if c]
            fresh: dict[str, np.ndarray] = {}
            bar = tqdm(
                total=len(missing),
                unit="text",
                desc=f"embedding {role}s",
                leave=False,
                disable=not self.show_progress or len(missing) < 2 * self.batch_size,
            )
            for chunk in chunks:
                new = self._encode_raw([missing[k] for k in chunk], role, progress=False)
                cache.put(chunk, new)
                if len(chunk) >= 32:  # a real batch (docs): persist now; single queries accumulate
                    cache.flush()
                    kill_point("embedding")
                fresh.update(zip(chunk, new, strict=True))
                bar.update(len(chunk))
            bar.close()
            found = [v if v is not None else fresh[k] for k, v in zip(keys, found, strict=True)]
        return np.vstack(found) if found else np.zeros((0, self.dim), np.float32)

    @property
    def dim(self) -> int:
        return self.onnx_model.dim if self.backend == "onnx" else int(self.st.get_embedding_dimension())

    def flush(self) -> None:
        """Write pending cache entries (call when a run ends)."""
        for c in self._caches.values():
            c.flush()

    def stats(self) -> dict[str, Any]:
        """Cache hits/misses, unreadable shards set aside (``quarantined``, see
        :mod:`lethe.core.embedding_cache`) and encode time, for the run manifest."""
        return {
            "model": self.model.describe(),
            "batch_size": self.batch_size,
            "backend": self.backend,
            "device": self.device,
            "device_config": self.device_config,
            "onnx": (
                self._onnx.describe()
                if self._onnx is not None
                else {"options": dataclasses.asdict(self.onnx_options)}
                if self.onnx_options
                else None
            ),
            "persist_every": self.persist_every,
            "cache_roles": list(self.cache_roles),
            "encoded_texts": self.encoded_texts,
            "encode_seconds": round(self.encode_seconds, 3),
            "cache": {
                r: {"hits": c.hits, "misses": c.misses, "quarantined": c.quarantined, "dir": str(c.dir)}
                for r, c in self._caches.items()
            },
        }
