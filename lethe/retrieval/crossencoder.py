"""Cross-encoder building blocks: load, score, fine-tune and describe a (query, doc) reranker.

A cross-encoder reads a query and a doc together and returns one relevance logit. This module
knows nothing about datasets: training takes :class:`Pair` items (query, doc text, label) and a
callable that scores a model on held-out data; the caller decides what data that is.

Training API: sentence-transformers 6.2.0 offers ``CrossEncoderTrainer`` and ``CrossEncoder.fit``
(a thin wrapper around that trainer); both need ``accelerate``, which is not among this project's
pinned dependencies. ``CrossEncoder.old_fit``, the library's own plain PyTorch training loop (AdamW,
WarmupLinear schedule, gradient clipping, optional evaluator), needs nothing more, so it is used
here. A recording loss module keeps the per-step loss; the evaluator hook scores checkpoints and
keeps the best weights in memory.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.atomic import atomic_write_text
from lethe.core.checksums import folder_damage, sealed, unsealed, write_checksums
from lethe.core.devices import resolve_device
from lethe.core.hashing import content_hash
from lethe.core.heldout import may_score
from lethe.core.library_logs import quiet_model_loading
from lethe.core.models import ModelNotFoundError, ResolvedModel, resolve_model, weights_sha256
from lethe.core.paths import Paths
from lethe.retrieval.fusion import minmax as fusion_minmax
from lethe.retrieval.onnx_backend import OnnxCrossEncoder, OnnxOptions, check_backend
from lethe.retrieval.ranking import canonical_order

MODEL_CARD_JSON = "model_card.json"
MODEL_CARD_MD = "model_card.md"


@dataclass(frozen=True)
class Pair:
    """One training example: ``label`` 1.0 = relevant, 0.0 = not relevant."""

    query: str
    text: str
    label: float


@dataclass(frozen=True)
class TrainParams:
    """Hyperparameters of one fine-tuning run."""

    epochs: int = 2
    batch_size: int = 32
    lr: float = 3e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 256
    eval_every: int = 50  # steps between checkpoints scored by the evaluator; 0 = only at epoch ends
    seed: int = 0
    max_grad_norm: float = 1.0


@dataclass
class TrainResult:
    """What happened during training: per-step loss, scored checkpoints, the one kept."""

    steps: int
    steps_per_epoch: int
    warmup_steps: int
    loss_curve: list[float]
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    chosen: dict[str, Any] | None = None
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    torch_threads: int = 0


def resolve_cross_encoder(model: Mapping[str, Any]) -> ResolvedModel:
    """Find the cross-encoder's files; a missing model says how to train it (``make models``)."""
    spec = dict(model)
    try:
        return resolve_model(spec)
    except ModelNotFoundError as exc:
        raise ModelNotFoundError(
            f"cross-encoder '{spec.get('name')}' not found at {spec.get('path')}. Run `make models` "
            "(python -m experiments.train_cross_encoder) to train the offline default, set "
            "method.model.path to a cross-encoder folder, or allow the hub (LETHE_ALLOW_HUB=true). "
            f"Details: {exc}"
        ) from exc


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU) for repeatable training."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def load_cross_encoder(
    path: str | Path,
    max_length: int | None = None,
    num_labels: int | None = None,
    offline: bool = True,
    backend: str = "torch",
    onnx: Mapping[str, Any] | OnnxOptions | None = None,
    cache_dir: str | Path | None = None,
    source_sha256: str | None = None,
    device: str = "cpu",
) -> Any:
    """A sentence-transformers ``CrossEncoder`` from a local folder, on ``device`` (a name of
    lethe.core.devices; ``auto`` resolved here).

    ``num_labels=1`` turns a bi-encoder folder (e.g. all-MiniLM-L6-v2) into a cross-encoder with a
    freshly initialised one-logit head (seed torch first for a repeatable head).
    ``backend="onnx"`` returns an :class:`~lethe.retrieval.onnx_backend.OnnxCrossEncoder` instead (for
    inference only: :func:`score_pairs`), exported with the ``onnx`` options into
    ``<cache_dir>/models/onnx/`` (a temporary folder without ``cache_dir``), keyed by
    ``source_sha256`` (default: the folder's weights sha256).
    """
    if check_backend(backend) == "onnx" and onnx is None:
        raise ValueError("backend=onnx needs the onnx options (conf/model/cross_encoder.yaml `onnx:`)")
    if offline:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import CrossEncoder

    device = resolve_device(device, "method.model.device")
    quiet_model_loading()
    model = CrossEncoder(
        str(path), num_labels=num_labels, max_length=max_length, device=device, local_files_only=offline
    )
    if backend == "torch":
        return model
    if num_labels is not None:
        raise ValueError("backend=onnx scores with a trained cross-encoder; num_labels (a fresh head) is for training")
    sha = source_sha256 or weights_sha256(Path(path).resolve())
    return OnnxCrossEncoder(model, sha, onnx, cache_dir, device=device, source_dir=Path(path).resolve())  # type: ignore[arg-type]


def score_pairs(model: Any, query: str, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
    """Raw relevance logits (float32, shape (n,)) of ``query`` against each text.

    Logits, not sigmoid probabilities: the sigmoid saturates in float32 and would turn distinct
    scores into ties; the order is the same. ``model`` is a sentence-transformers ``CrossEncoder``
    (torch) or an :class:`~lethe.retrieval.onnx_backend.OnnxCrossEncoder` (from :func:`load_cross_encoder`).
    """
    if not texts:
        return np.zeros(0, np.float32)
    if isinstance(model, OnnxCrossEncoder):
        return model.score(query, texts, batch_size)
    import torch

    scores = model.predict(
        [(query, t) for t in texts],
        batch_size=batch_size,
        show_progress_bar=False,
        activation_fn=torch.nn.Identity(),
        convert_to_numpy=True,
    )
    return np.asarray(scores, dtype=np.float32).reshape(-1)


def rerank(
    model: Any, query: str, candidates: Sequence[tuple[str, str]], batch_size: int = 32
) -> list[tuple[str, float]]:
    """``candidates`` (doc_id, text) ordered by score descending, ties by doc id descending."""
    scores = score_pairs(model, query, [t for _, t in candidates], batch_size)
    return canonical_order((d, float(s)) for (d, _), s in zip(candidates, scores, strict=True))


def minmax(scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """One query's candidate scores rescaled to [0, 1] (float64, shape (n,)); all equal -> all 0, so a
    signal that does not separate the candidates adds nothing to :func:`interpolate`."""
    return fusion_minmax(np.asarray(scores), constant=0.0)


def interpolate(ce: Sequence[float] | np.ndarray, first: Sequence[float] | np.ndarray, weight: float) -> np.ndarray:
    """``weight * minmax(ce) + (1 - weight) * minmax(first)`` over one query's candidates, shape (n,).

    ``ce``: cross-encoder logits; ``first``: the first stage's scores of the same candidates. Weight 1
    orders by the cross-encoder alone, 0 keeps the first stage's order."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"interpolation weight {weight} is outside [0, 1]")
    if len(ce) != len(first):
        raise ValueError(f"{len(ce)} cross-encoder scores for {len(first)} first-stage scores")
    return weight * minmax(ce) + (1.0 - weight) * minmax(first)


def choose_weight(grid: Sequence[float], score: Callable[[float], float]) -> dict[str, Any]:
    """The weight of ``grid`` whose dev ``score(weight)`` is highest (ties: the larger weight, i.e. the
    one nearer the cross-encoder alone); every weight's score is recorded."""
    if not grid:
        raise ValueError("method.model.train.interpolation_grid is empty")
    scores = {float(w): float(score(float(w))) for w in grid}
    best = max(scores.items(), key=lambda kv: (kv[1], kv[0]))
    return {
        "grid": sorted(scores),
        "scores": {f"{w:g}": s for w, s in sorted(scores.items())},
        "weight": best[0],
        "score": best[1],
    }


class LengthGroupedBatches:
    """Seeded batch sampler: shuffle, sort each window of ``window`` batches by length, shuffle the batches.

    Batches hold pairs of similar length, so padding (and CPU time) shrinks; every epoch draws a new
    order from the same seeded generator, so a run is repeatable.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int, window: int = 16):
        self.lengths, self.batch_size, self.window = list(lengths), int(batch_size), int(window)
        self.rng = random.Random(seed)

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        idx = list(range(len(self.lengths)))
        self.rng.shuffle(idx)
        span = self.batch_size * self.window
        batches: list[list[int]] = []
        for start in range(0, len(idx), span):
            chunk = sorted(idx[start : start + span], key=lambda i: self.lengths[i])
            batches += [chunk[j : j + self.batch_size] for j in range(0, len(chunk), self.batch_size)]
        self.rng.shuffle(batches)
        return iter(batches)


class _RecordingBCE:
    """``BCEWithLogitsLoss`` that keeps every step's loss value (old_fit calls it as loss_fct(logits, labels))."""

    def __init__(self) -> None:
        import torch

        self.fn = torch.nn.BCEWithLogitsLoss()
        self.values: list[float] = []

    def __call__(self, logits: Any, labels: Any) -> Any:
        loss = self.fn(logits, labels.float())
        self.values.append(float(loss.detach()))
        return loss


def train_cross_encoder(
    base_path: str | Path,
    pairs: Sequence[Pair],
    params: TrainParams,
    evaluate: Callable[[Any], float] | None = None,
    progress: bool = True,
    on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Any, TrainResult]:
    """Fine-tune a cross-encoder from ``base_path`` on ``pairs`` with binary cross-entropy.

    ``evaluate(model) -> float`` (higher is better) scores the model every ``eval_every`` steps and
    at each epoch end; the best checkpoint (ties: the earliest) is loaded back into the returned
    model. Without ``evaluate`` the final weights are kept. ``on_checkpoint`` sees each scored
    checkpoint (for progress logs).
    """
    import torch
    from sentence_transformers.sentence_transformer.readers import InputExample
    from torch.utils.data import DataLoader

    if not pairs:
        raise ValueError("no training pairs")
    set_seed(params.seed)
    model = load_cross_encoder(base_path, max_length=params.max_length, num_labels=1)
    examples = [InputExample(texts=[p.query, p.text], label=float(p.label)) for p in pairs]
    tok = model.tokenizer
    lengths = [len(tok(p.query, p.text, truncation=True, max_length=params.max_length)["input_ids"]) for p in pairs]
    sampler = LengthGroupedBatches(lengths, params.batch_size, params.seed)
    loader = DataLoader(examples, batch_sampler=sampler)  # type: ignore[arg-type]
    steps_per_epoch = len(loader)
    total = steps_per_epoch * params.epochs
    warmup = int(math.ceil(params.warmup_ratio * total))
    loss = _RecordingBCE()
    result = TrainResult(
        steps=0,
        steps_per_epoch=steps_per_epoch,
        warmup_steps=warmup,
        loss_curve=loss.values,
        torch_threads=torch.get_num_threads(),
    )
    best: dict[str, Any] = {"score": -math.inf, "state": None}

    def checkpoint(m: Any, epoch: int) -> float:
        step = len(loss.values)
        if result.checkpoints and result.checkpoints[-1]["step"] == step:  # epoch end == an eval_every step
            return float(result.checkpoints[-1]["score"])
        t0 = time.perf_counter()
        score = float(evaluate(m)) if evaluate else float("nan")
        result.eval_seconds += time.perf_counter() - t0
        since = result.checkpoints[-1]["step"] if result.checkpoints else 0
        recent = loss.values[since:]
        result.checkpoints.append(
            {
                "step": step,
                "epoch": round(step / steps_per_epoch, 3),
                "score": score,
                "train_loss_since_last": float(np.mean(recent)) if recent else None,
            }
        )
        if score > best["score"]:
            best.update(score=score, step=step, state=copy.deepcopy(m.state_dict()))
        if on_checkpoint:
            on_checkpoint(result.checkpoints[-1])
        return score

    def evaluator(m: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1) -> float:
        return checkpoint(m, epoch)

    t0 = time.perf_counter()
    model.old_fit(
        train_dataloader=loader,
        evaluator=evaluator if evaluate else None,
        epochs=params.epochs,
        loss_fct=loss,
        warmup_steps=warmup,
        optimizer_params={"lr": params.lr},
        weight_decay=params.weight_decay,
        evaluation_steps=params.eval_every if evaluate else 0,
        output_path=None,
        save_best_model=False,
        max_grad_norm=params.max_grad_norm,
        show_progress_bar=progress,
    )
    result.train_seconds = time.perf_counter() - t0 - result.eval_seconds
    result.steps = len(loss.values)
    if best["state"] is not None:
        model.load_state_dict(best["state"])
        result.chosen = {"step": best["step"], "score": best["score"]}
    else:
        result.chosen = {"step": result.steps, "score": None}
    model.eval()
    return model, result


def save_cross_encoder(model: Any, folder: str | Path) -> None:
    """Write the model's files (weights, config, tokenizer) into ``folder``."""
    model.save(str(folder), create_model_card=False)


def write_model_card(folder: str | Path, card: Mapping[str, Any]) -> None:
    """Write ``model_card.json`` and a readable ``model_card.md`` into ``folder``."""
    folder = Path(folder)
    atomic_write_text(folder / MODEL_CARD_JSON, json.dumps(card, indent=2, sort_keys=True, default=str) + "\n")
    atomic_write_text(folder / MODEL_CARD_MD, render_model_card_md(card))


def read_model_card(folder: str | Path) -> dict[str, Any] | None:
    """The training card of a model folder, or None when it has none."""
    p = Path(folder) / MODEL_CARD_JSON
    return json.loads(p.read_text()) if p.is_file() else None


def _fmt(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, float) else str(x)


def render_model_card_md(card: Mapping[str, Any]) -> str:
    """Markdown view of a training card (the JSON is the source of truth)."""
    lines = [f"# {card.get('name', 'cross-encoder')}", "", str(card.get("description", "")), ""]
    base = card.get("base_model") or {}
    if base:
        lines += [
            "## Base model",
            "",
            f"- {base.get('name')} ({base.get('source')}: `{base.get('path')}`)",
            f"- sha256 `{base.get('sha256')}`",
            "",
        ]
    data = card.get("data") or {}
    if data:
        lines += ["## Data", ""]
        for k, v in data.items():
            lines.append(f"- **{k}**: {json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}")
        lines.append("")
    tr = card.get("training") or {}
    if tr:
        lines += ["## Training", ""]
        for k, v in tr.items():
            if k not in ("loss_curve", "checkpoints"):
                lines.append(f"- **{k}**: {json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}")
        curve = tr.get("loss_curve") or []
        if curve:
            n = max(1, len(curve) // 10)
            pts = [(i + 1, float(np.mean(curve[i : i + n]))) for i in range(0, len(curve), n)]
            lines += ["", f"Loss (mean over {n} steps, from step): " + ", ".join(f"{s}: {v:.3f}" for s, v in pts)]
        lines.append("")
    sel = card.get("selection") or {}
    if sel:
        lines += [
            "## Selection on dev",
            "",
            f"Metric: {sel.get('metric')}. {sel.get('note', '')}",
            "",
            "| step | epoch | reranked | BM25 order | train loss since last checkpoint |",
            "|---:|---:|---:|---:|---:|",
        ]
        for c in sel.get("checkpoints", []):
            mark = " (chosen)" if c.get("step") == sel.get("chosen_step") else ""
            lines.append(
                f"| {c['step']}{mark} | {c['epoch']} | {_fmt(c['score'])} | {_fmt(sel.get('bm25_order'))} | "
                f"{_fmt(c.get('train_loss_since_last'))} |"
            )
        lines += [
            "",
            f"Chosen checkpoint: step {sel.get('chosen_step')} (dev {_fmt(sel.get('chosen_score'))} vs "
            f"BM25 order {_fmt(sel.get('bm25_order'))}).",
            "",
        ]
        if sel.get("chosen_metrics"):
            lines += [
                "Dev metrics of the chosen checkpoint vs BM25 order:",
                "",
                "| metric | reranked | BM25 |",
                "|---|---:|---:|",
            ]
            for m, v in sel["chosen_metrics"].items():
                lines.append(f"| {m} | {_fmt(v)} | {_fmt(sel.get('bm25_metrics', {}).get(m))} |")
            lines.append("")
    timing = card.get("wall_seconds")
    if timing:
        lines += ["## Wall time (s)", "", ", ".join(f"{k} {v}" for k, v in timing.items()), ""]
    env = card.get("environment")
    if env:
        lines += ["## Environment", "", "```json", json.dumps(env, indent=1, sort_keys=True), "```", ""]
    return "\n".join(lines)


def params_dict(params: TrainParams) -> dict[str, Any]:
    """TrainParams as a plain dict (for cards)."""
    return asdict(params)


# ---------------------------------------------------------------------------------------------
# Model sets: the folds a training regime produced (written by experiments/train_cross_encoder.py,
# regimes in experiments/ce_regimes.py) and the leakage guard that picks a fold per query.

REGIMES = ("lethebench", "transfer", "in_domain", "label_free")
PER_DATASET = ("transfer", "in_domain", "label_free")  # regimes with one model set per evaluated dataset
# train keys read by one regime only: left out of the other regimes' set keys, so adding them moved no other set
REGIME_ONLY_KEYS = {"fold_groups": "in_domain", "label_free": "label_free"}
FOLDS_JSON = "folds.json"


POOLS = "pools"
SET_UNSEALED = (POOLS, "quarantine")  # written after the set's checksums: each pool file carries its own (sealed JSON)


def seal_model_set(set_dir: Path) -> None:
    """Write the set's ``checksums.json`` (every file but its pool weights, which are sealed one by one)."""
    write_checksums(set_dir, SET_UNSEALED)


def model_set_damage(set_dir: Path) -> list[str]:
    """What makes the model set ``set_dir`` unusable: no ``folds.json`` (not finished), or files that differ from its
    ``checksums.json`` (edited, missing, added, or a set written before checksums); empty when whole."""
    if not (Path(set_dir) / FOLDS_JSON).is_file():
        return [f"no {FOLDS_JSON}"]
    return folder_damage(set_dir, SET_UNSEALED)


def write_pool_weights(path: Path, doc: Mapping[str, Any]) -> None:
    """Save a pool's weights (:func:`pool_weights_file`) as a sealed JSON (its checksum inside)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(sealed(doc), indent=1, sort_keys=True, default=str) + "\n")


def read_pool_weights(path: Path) -> dict[str, Any]:
    """A pool's weights, their checksum checked (ValueError naming the file when it differs or is missing)."""
    return unsealed(json.loads(path.read_text()), path)


def pool_weights_file(set_dir: Path, pool: str) -> Path:
    """Where a model set keeps the interpolation weights its folds chose over candidate pool ``pool`` (a first stage
    other than BM25 and a depth: :func:`baselines.first_stage.pool_key`)."""
    return Path(set_dir) / POOLS / f"{pool}.json"


def regime_of(model_cfg: Mapping[str, Any]) -> str:
    regime = str(model_cfg["train"]["regime"])
    if regime not in REGIMES:
        raise ValueError(f"method.model.train.regime={regime!r}: expected one of {list(REGIMES)}")
    return regime


def regime_train(train: Mapping[str, Any]) -> dict[str, Any]:
    """The training settings ``train`` (with its ``regime``) without the keys only another regime reads
    (``REGIME_ONLY_KEYS``): what keys a model set and a run."""
    return {k: v for k, v in train.items() if REGIME_ONLY_KEYS.get(k, train["regime"]) == train["regime"]}


def set_key(model_cfg: Mapping[str, Any], dataset: str, build_key: str) -> str:
    """16-hex key of a model set: the training settings (:func:`regime_train`) and, for per-dataset regimes, the
    evaluated dataset's name and build (the ids in the fold records refer to that build)."""
    blob = {"train": regime_train(model_cfg["train"]), "base": model_cfg.get("name")}
    if regime_of(model_cfg) in PER_DATASET:
        blob["dataset"] = {"name": dataset, "build_key": build_key}
    return content_hash(blob, 16)


def set_folder(model_cfg: Mapping[str, Any], dataset: str, build_key: str) -> Path:
    """``<path>/<dataset>/<key>`` (per-dataset regimes) or ``<path>/any/<key>``: a model set's folder."""
    scope = dataset if regime_of(model_cfg) in PER_DATASET else "any"
    return Paths.default().resolve(str(model_cfg["path"])) / scope / set_key(model_cfg, dataset, build_key)


def fold_allows(record: Mapping[str, Any], dataset: str, query_id: str, scope_id: str | None) -> bool:
    """Whether the fold of ``record`` (a ``folds.json`` entry: ids per dataset) may score a query of
    ``dataset`` (:func:`lethe.core.heldout.may_score`)."""
    heldout = record.get("heldout")
    return may_score(
        query_id,
        scope_id,
        set(record["train"].get(dataset, ())),
        set(record["dev"].get(dataset, ())),
        set(heldout) if heldout is not None else None,
        set(record.get("scopes", {}).get(dataset, ())),
    )
