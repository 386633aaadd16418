"""Cross-encoder reranking: Pyserini BM25 top ``candidates``, reordered by a cross-encoder's score.

The model is a *model set* trained by this project (``conf/model/cross_encoder.yaml``, ``make
models``): one or more folds of a training regime, found when the runner binds the dataset
(:func:`lethe.retrieval.crossencoder.set_folder`). Each query is scored by a fold that never saw it
(trained or selected on it, or on its scope): the leakage guard of :mod:`lethe.core.heldout`; a run
whose queries no fold may score fails before any search (``LeakageError``). When the set is missing
and ``allow_hub`` is true, the hub model ``hub_id`` scores every query. Scores are raw logits
(``interpolation="none"``) or, with ``interpolation="dev"``, each fold's dev-chosen mix of its min-max
normalised logits and BM25 scores (:func:`lethe.retrieval.crossencoder.interpolate`).

With a ``cache_dir``, each query's logits are cached under ``<cache_dir>/scores/`` by the fold's weights, the
inference settings (backend, device, threads, length, batch size), the query text and the candidate texts in
order: the interpolated and the alone run of one model set score the same pairs in the same batches, so the
second reads what the first computed (identical floats), and a crashed run resumes its scoring.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.first_stage import build_first_stage, is_bm25, plain, pool_key, timing_name
from lethe.core.checksums import quarantine
from lethe.core.devices import check_device
from lethe.core.embedding_cache import EmbeddingCache, text_key
from lethe.core.heldout import LeakageError, pick_fold
from lethe.core.models import ModelNotFoundError, ModelSpec, resolve_model
from lethe.core.protocol import Doc, Query, SearchResult
from lethe.retrieval.crossencoder import (
    FOLDS_JSON,
    fold_allows,
    interpolate,
    load_cross_encoder,
    model_set_damage,
    pool_weights_file,
    read_model_card,
    read_pool_weights,
    score_pairs,
    set_folder,
)
from lethe.retrieval.onnx_backend import inference_info
from lethe.retrieval.ranking import canonical_order

INTERPOLATION = ("none", "dev")


def trained_length(cards: Sequence[Mapping[str, Any] | None], folder: Path) -> int:
    """The one training length (tokens per pair) recorded in a model set's fold cards."""
    lengths = {int(c["max_length"]) for c in cards if c and c.get("max_length")}
    if len(lengths) != 1:
        raise ValueError(
            f"method.model.max_length=null takes the training length from the model cards in {folder}, "
            f"which record {sorted(lengths) or 'none'}: set method.model.max_length explicitly"
        )
    return lengths.pop()


class CrossEncoderRerank:
    """BM25 candidates (Pyserini, k1 1.2, b 0.75 by default; or any first stage, :mod:`baselines.first_stage`)
    reranked by a cross-encoder. Over another first stage, ``interpolation="dev"`` mixes the logits with that stage's
    scores by the weights each fold chose on its own dev queries over the same pool (:mod:`experiments.ce_pool`).

    ``search(query, k)`` scores the BM25 top ``candidates`` with the cross-encoder (query text only)
    and returns them best first; if ``k > candidates`` the next BM25 hits follow in BM25 order with
    scores below every reranked one.
    """

    def __init__(
        self,
        model: Mapping[str, Any],
        first_stage: Mapping[str, Any] | None = None,
        candidates: int = 100,
        batch_size: int = 32,
        interpolation: str = "none",
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        if interpolation not in INTERPOLATION:
            raise ValueError(f"method.interpolation={interpolation!r}: expected one of {list(INTERPOLATION)}")
        self.interpolation = interpolation
        self.weights: list[float | None] = []  # per fold: the dev-chosen cross-encoder weight (interpolation=dev)
        self.model_cfg = plain(model)
        # tokens per pair; None: a trained set's own training length (its checkpoint and interpolation weight were
        # chosen on dev at that length), the hub model's own limit
        self.max_length = self.model_cfg.get("max_length")
        self.max_length_used: int | None = None
        # inference backend (conf/model/cross_encoder.yaml backend/onnx); an ONNX export is cached under cache_dir
        self.inference = {
            "backend": str(self.model_cfg.get("backend", "torch")),
            "onnx": self.model_cfg.get("onnx"),
            "cache_dir": cache_dir,
            "device": check_device(str(self.model_cfg.get("device", "cpu")), "method.model.device"),
        }
        self.candidates, self.batch_size = int(candidates), int(batch_size)
        self.first_stage_spec = plain(first_stage)
        self.first = build_first_stage(self.first_stage_spec, cache_dir, progress)
        self.pool = None if is_bm25(self.first_stage_spec) else pool_key(self.first_stage_spec, self.candidates)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.score_caches: list[EmbeddingCache | None] = []  # per fold (None: weights without a recorded hash)
        self.dataset: str | None = None
        self.set_dir: Path | None = None
        self.folds: list[dict[str, Any] | None] = []  # folds.json records; None = the hub model (not trained here)
        self.models: list[Any] = []
        self.cards: list[dict[str, Any] | None] = []
        self.hub: dict[str, Any] | None = None
        self._text: dict[str, str] = {}
        self.pairs_scored = 0
        self.queries_per_fold: dict[int, int] = {}
        self.pool_selection: dict[str, Any] | None = None  # the pool's interpolation weights (another first stage)

    def bind_dataset(self, info: Mapping[str, Any]) -> None:
        """Load the model set trained for this dataset build (or the hub model); raises
        ModelNotFoundError naming the folder and ``make models`` when it is missing."""
        name, build_key = str(info["name"]), str(info["build_key"])
        folder = set_folder(self.model_cfg, name, build_key)
        max_length = self.max_length_used = int(self.max_length) if self.max_length else None
        self.dataset, self.set_dir = name, folder
        doc = json.loads((folder / FOLDS_JSON).read_text()) if (folder / FOLDS_JSON).is_file() else None
        if doc is None:
            if not ModelSpec.from_config(self.model_cfg).allow_hub:
                raise ModelNotFoundError(
                    f"cross-encoder '{self.model_cfg.get('name')}' has no model set for dataset {name} at {folder}. "
                    "Run `make models` (python -m experiments.train_cross_encoder, with this run's dataset and "
                    "method.model overrides) to train it, or allow the hub (LETHE_ALLOW_HUB=true)."
                )
            resolved = resolve_model({**self.model_cfg, "path": None, "pypi_module": None})
            self.hub = resolved.describe()
            if self.interpolation == "dev":
                raise ValueError(
                    "method.interpolation=dev needs a model set trained here (its folds chose the weight "
                    f"on their dev queries); the hub model {self.hub.get('name') or self.model_cfg.get('hub_id')} "
                    "has none: use method.interpolation=none"
                )
            self.folds, self.cards = [None], [None]
            self.models = [
                load_cross_encoder(
                    resolved.path, max_length=max_length, offline=resolved.source != "hub", **self.inference
                )
            ]
            self._open_score_caches()
            return
        damage = model_set_damage(folder)
        if damage:  # edited, truncated or added files (or a set from before checksums): never loaded
            moved = quarantine(folder)
            raise ModelNotFoundError(
                f"cross-encoder model set {folder} is damaged ({'; '.join(damage[:3])}"
                f"{' ...' if len(damage) > 3 else ''}): moved to {moved}, not loaded. Train it again: `make models` "
                "(python -m experiments.train_cross_encoder with this run's dataset and method.model overrides); "
                "make reproduce does so as a prerequisite"
            )
        built = doc["datasets"].get(name, {}).get("build_key")
        if built is not None and built != build_key:
            raise ValueError(
                f"the cross-encoder set {folder} was trained on {name} build {built}, not build {build_key}; "
                "retrain it (force=true)"
            )
        self.folds = list(doc["folds"])
        self.cards = [read_model_card(folder / f["dir"]) for f in self.folds]
        if self.interpolation == "dev":
            missing = [
                f["dir"]
                for f, c in zip(self.folds, self.cards, strict=True)
                if "interpolation" not in ((c or {}).get("selection") or {})
            ]
            if missing:
                raise ValueError(
                    f"method.interpolation=dev: the model cards of {missing} in {folder} record no "
                    "interpolation weight (trained before it existed); retrain the set (force=true)"
                )
            self.weights = [float(c["selection"]["interpolation"]["weight"]) for c in self.cards]  # type: ignore[index]
            if self.pool is not None:  # another candidate pool: the weights its folds chose on their dev queries for it
                self.weights = self._pool_weights(folder)
        if max_length is None:
            max_length = self.max_length_used = trained_length(self.cards, folder)
        self.models = [
            load_cross_encoder(folder / f["dir"], max_length=max_length, **self.inference) for f in self.folds
        ]
        self._open_score_caches()

    def _pool_weights(self, folder: Path) -> list[float]:
        """Per fold, the interpolation weight chosen on the fold's dev queries over this run's candidate pool
        (``python -m experiments.ce_pool``, a prerequisite of the run)."""
        path = pool_weights_file(folder, str(self.pool))
        if not path.is_file():
            raise ModelNotFoundError(
                f"method.interpolation=dev over the first stage {self.first_stage_spec.get('_target_')} (top "
                f"{self.candidates}): no weights chosen for this pool at {path}. Make them first: python -m "
                "experiments.ce_pool with this run's dataset and method (make reproduce makes them as a prerequisite)"
            )
        doc = read_pool_weights(path)
        if [f["dir"] for f in doc["folds"]] != [f["dir"] for f in self.folds if f]:
            raise ValueError(f"{path} was chosen for other folds than those of {folder}; make it again")
        self.pool_selection = doc
        return [float(f["weight"]) for f in doc["folds"]]

    def _open_score_caches(self) -> None:
        """One logit cache per fold, keyed by its weights and inference settings (none without a cache_dir)."""
        self.score_caches = []
        for model, card in zip(self.models, self.cards, strict=True):
            sha = (card or {}).get("weights_sha256") or (self.hub or {}).get("sha256")
            if self.cache_dir is None or not sha:
                self.score_caches.append(None)
                continue
            namespace = {
                "kind": "cross_encoder_logits",
                "weights_sha256": str(sha),
                "batch_size": self.batch_size,
                "inference": inference_info(model),
            }
            self.score_caches.append(
                EmbeddingCache(self.cache_dir, namespace, flush_every=64, kind="scores", ragged=True)
            )

    def _logits(self, fold: int, query: str, texts: list[str]) -> Any:
        """The fold's raw logits of ``query`` against ``texts`` (float32, shape (n,)), from the cache when it
        holds this exact query and candidate list."""
        cache = self.score_caches[fold] if fold < len(self.score_caches) else None
        if cache is None:
            return score_pairs(self.models[fold], query, texts, self.batch_size)
        key = text_key(json.dumps([query, texts]))
        found = cache.get([key])[0]
        if found is not None:
            return found
        logits = score_pairs(self.models[fold], query, texts, self.batch_size)
        cache.put([key], [logits])
        return logits

    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Refuse the run before any search when a query id was used to train or select every fold."""
        if self.folds == [None]:
            return
        assert self.dataset is not None, "bind_dataset first"
        bad = [q for q in query_ids if not any(fold_allows(f, self.dataset, q, None) for f in self.folds if f)]
        if bad:
            raise LeakageError(
                f"{len(bad)} evaluated quer(ies) of {self.dataset} were used to train or select every "
                f"cross-encoder fold in {self.set_dir}, e.g. {bad[:3]}"
            )

    def _fold(self, query: Query) -> int:
        if self.folds == [None]:
            return 0
        if not self.models:
            raise RuntimeError("the cross-encoder has no model: the runner binds the dataset first (bind_dataset)")
        allowed = [
            fold_allows(f, self.dataset or "", query.query_id, query.scope_id) if f and query.query_id else False
            for f in self.folds
        ]
        return pick_fold(allowed, query.query_id, query.scope_id, "cross-encoder")

    def index(self, docs: Sequence[Doc]) -> None:
        self.first.index(docs)
        self._text = {d.doc_id: d.text for d in docs}

    def search(self, query: Query, k: int) -> SearchResult:
        t0 = time.perf_counter()
        hits = canonical_order(self.first.search(query, max(k, self.candidates)).ranking)
        t1 = time.perf_counter()
        head, tail = hits[: self.candidates], hits[self.candidates :]
        fold = self._fold(query)
        self.queries_per_fold[fold] = self.queries_per_fold.get(fold, 0) + 1
        logits = self._logits(fold, query.text, [self._text[d] for d, _ in head])
        if self.interpolation == "dev":
            logits = interpolate(logits, [s for _, s in head], float(self.weights[fold]))  # type: ignore[arg-type]
        ranking = canonical_order((d, float(s)) for (d, _), s in zip(head, logits, strict=True))
        self.pairs_scored += len(head)
        if tail:
            floor = min((s for _, s in ranking), default=0.0)
            ranking += [(d, floor - (i + 1)) for i, (d, _) in enumerate(tail)]
        t2 = time.perf_counter()
        return SearchResult(
            ranking[:k],
            {timing_name(self.first_stage_spec): (t1 - t0) * 1e3, "rerank": (t2 - t1) * 1e3},
            {"candidates": len(head), "fold": fold},
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": "cross_encoder",
            "first_stage": self.first.describe(),
            **({"pool": self.pool, "pool_selection": self.pool_selection} if self.pool is not None else {}),
            "candidates": self.candidates,
            "batch_size": self.batch_size,
            "max_length": self.max_length_used,
            "max_length_config": self.max_length,
            "score": (
                "raw logit (query text only)"
                if self.interpolation == "none"
                else f"w * minmax(logit) + (1 - w) * minmax({'BM25' if self.pool is None else 'first-stage score'}) per "
                "query, w chosen per fold on its dev queries"
            ),
            "interpolation": {"mode": self.interpolation, "weights": self.weights or None},
            "inference": (
                inference_info(self.models[0])
                if self.models
                else {"backend": self.inference["backend"], "onnx": self.inference["onnx"]}
            ),
            "device_config": self.inference["device"],
            "model": {
                "name": self.model_cfg.get("name"),
                "regime": self.model_cfg.get("train", {}).get("regime"),
                "set": str(self.set_dir) if self.set_dir else None,
                "hub": self.hub,
                "folds": [
                    {"dir": f["dir"], "weights_sha256": (c or {}).get("weights_sha256")} if f else None
                    for f, c in zip(self.folds, self.cards, strict=True)
                ],
            },
            "pairs_scored": self.pairs_scored,
            "score_cache": [
                {"hits": c.hits, "misses": c.misses, "quarantined": c.quarantined, "dir": str(c.dir)} if c else None
                for c in self.score_caches
            ],
            "queries_per_fold": {str(k): v for k, v in sorted(self.queries_per_fold.items())},
            "training_cards": self.cards,
        }

    def close(self) -> None:
        for cache in self.score_caches:
            if cache is not None:
                cache.flush()
        self.first.close()
