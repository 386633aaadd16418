"""Lethe iterations end to end on real data: iteration 1/2 runs, and learned fusion that provably
never uses the labels of a query it later scores."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import train_fusion
from experiments.config import load_config
from experiments.runner import RunFailed, run_experiment
from lethe.stages.learned_fusion import FEATURES, LeakageError
from lethebench.runs import RunFolder
from lethebench.schema import Dataset

SMALL_LB = [
    "dataset=lethebench",
    "dataset.params.splits={test: 3, train: 6, dev: 3}",
    "dataset.params.session_turns=[20,30]",
]
FAST = [
    "method=lethe_iter3",
    "method.stages.learned_fusion.alpha_grid=[0.0,0.5,1.0]",
    "method.stages.learned_fusion.lambda_grid=[0.0,0.3]",
    "method.stages.learned_fusion.families=[constant,ridge]",
]


def _perturbing(monkeypatch, victims: set[str]) -> None:
    """Make train_fusion read a dataset whose qrels for ``victims`` point at other (wrong) docs."""
    real = train_fusion.read_dataset

    def fake(folder, name=None):
        ds = real(folder, name)
        qrels = dict(ds.qrels)
        docs = ds.corpus.groupby("scope_id")["doc_id"].apply(list).to_dict()
        scope = ds.queries.set_index("query_id")["scope_id"]
        for q in victims & set(qrels):
            wrong = [d for d in docs[scope[q]] if d not in qrels[q]][:3]
            qrels[q] = {d: 1 for d in wrong}
        return Dataset(ds.name, ds.corpus, ds.queries, qrels, ds.card)

    monkeypatch.setattr(train_fusion, "read_dataset", fake)


def _predictions(model, fold: int) -> np.ndarray:
    X = np.random.default_rng(0).normal(size=(50, len(FEATURES)))
    return np.asarray(model.folds[fold].model.predict(X))


def test_iterations_1_and_2_run_and_record_plans(cfg_for):
    r1 = RunFolder(run_experiment(cfg_for("method=lethe_iter1", *SMALL_LB)))
    r2 = RunFolder(run_experiment(cfg_for("method=lethe_iter2", *SMALL_LB)))
    for r in (r1, r2):
        assert set(r.per_query["status"]) == {"ok"}
        flags = r.flags()
        assert set(flags["plan"]) <= {"verify", "explore", "exploit"}
        assert (flags["alpha"] == flags["plan"].map({"verify": 0.7, "explore": 0.3, "exploit": 0.5})).all()
        timings = r.timings().iloc[0].dropna()
        assert {"bm25", "encode_query", "plan", "fusion", "diversify"} <= set(timings.index)
    m1 = r1.metrics["means"]["ndcg@10"]
    assert m1 > 0.3  # a working retriever on LetheBench (the baselines score 0.52-0.60 on test)
    assert r2.flags()["rewritten"].dropna().astype(bool).any()  # elliptical follow-ups were made standalone


def test_learned_fusion_with_splits_never_reads_test_labels(cfg_for, monkeypatch):
    cfg = cfg_for(*SMALL_LB, *FAST)
    a = train_fusion.train(cfg, progress=False)
    assert len(a.folds) == 1 and a.card["folds"][0]["chosen"] in ("constant", "ridge")
    fold = a.folds[0]
    ds = train_fusion.read_dataset(train_fusion.prepare_dataset(cfg), "lethebench")
    split = ds.queries.set_index("query_id")["split"]
    test_ids = set(split.index[split == "test"])
    assert test_ids and not (test_ids & (fold.train_ids | fold.dev_ids))
    assert fold.train_ids == set(split.index[split == "train"]) & set(ds.qrels)
    # the same training with every test label corrupted gives the very same model
    _perturbing(monkeypatch, test_ids)
    b = train_fusion.train(cfg, progress=False)
    assert np.array_equal(_predictions(a, 0), _predictions(b, 0))
    # ...and corrupting dev labels does change what is learned or chosen (the check can fail)
    _perturbing(monkeypatch, set(split.index[split != "test"]))
    c = train_fusion.train(cfg, progress=False)
    assert c.card["folds"] != a.card["folds"] or not np.array_equal(_predictions(a, 0), _predictions(c, 0))


def test_iteration_3_scores_only_unseen_queries(cfg_for):
    # trained as `python -m experiments.train_fusion <overrides>` does: its top config, conf/train_fusion.yaml
    top = load_config(_cli(cfg_for, *SMALL_LB, *FAST), config_name="train_fusion")
    folder, _ = train_fusion.ensure_model(top, force=bool(top.force))
    assert (folder / "card.json").is_file() and folder == train_fusion.model_folder(cfg_for(*SMALL_LB, *FAST))
    run = RunFolder(run_experiment(cfg_for(*SMALL_LB, *FAST)))
    assert set(run.per_query["status"]) == {"ok"} and len(run.per_query) == 12
    assert set(run.flags()["fusion_fold"]) == {0}
    man = run.manifest
    assert man["method"]["stages"]["learned_fusion"]["fusion_model"]["dataset"]["name"] == "lethebench"
    # asked to score its own training queries, the model refuses each one and the run fails loudly
    with pytest.raises(RunFailed, match="LeakageError"):
        run_experiment(cfg_for(*SMALL_LB, *FAST, "dataset.split=train"))


def _cli(cfg_for, *overrides: str) -> list[str]:
    cfg = cfg_for(*overrides)  # resolves the session folders the fixtures use
    return [
        f"data.root={cfg.data.root}",
        f"data.processed={cfg.data.processed}",
        f"cache_dir={cfg.cache_dir}",
        f"results_dir={cfg.results_dir}",
        "run.progress=false",
        *overrides,
    ]


def test_kfold_fusion_fold_ignores_its_heldout_labels(cfg_for, monkeypatch):
    cfg = cfg_for("dataset=locomo", "dataset.scopes=[conv-30]", *FAST, "method.stages.learned_fusion.folds=3")
    a = train_fusion.train(cfg, progress=False)
    assert len(a.folds) == 3 and "over queries" in a.card["scheme"]  # one conversation: folds over queries
    held = [f.heldout_ids for f in a.folds]
    assert set().union(*held) == {q for f in a.folds for q in f.train_ids | f.dev_ids}
    for f in a.folds:
        assert not (f.heldout_ids & (f.train_ids | f.dev_ids))
    _perturbing(monkeypatch, set(a.folds[0].heldout_ids))
    b = train_fusion.train(cfg, progress=False)
    assert np.array_equal(_predictions(a, 0), _predictions(b, 0))
    q0 = sorted(a.folds[0].heldout_ids)[0]
    assert a.fold_for(q0, "conv-30") == 0
    with pytest.raises(LeakageError):
        a.fold_for("a-query-no-fold-held-out", "conv-30")
