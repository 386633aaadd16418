"""The tuned hybrids (baselines/hybrid_tuned.py, experiments/tune_hybrid.py): chosen on iteration 3's very folds,
applied only to queries their fold never saw, and equal to the untuned hybrid wherever they chose its value. The smoke
tier (tests/experiments/conftest.py) makes both tunings and iteration 3's models on the same data."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from hydra.errors import InstantiationException

from experiments import tune_hybrid
from experiments.config import load_config
from lethe.core.heldout import LeakageError
from lethe.core.protocol import Query
from lethebench.runs import RunFolder

DATASETS = ("locomo", "lethebench")


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, (folder, pattern, found)
    return found[0]


def test_the_best_mean_wins_and_ties_go_to_the_value_nearest_the_untuned_one():
    ndcg = np.array([[0.2, 0.5, 0.5, 0.1], [0.4, 0.5, 0.5, 1.0]])
    assert tune_hybrid.choose(ndcg, [0.0, 0.3, 0.5, 1.0], default=0.5) == (1.0, [0.3, 0.5, 0.5, 0.55])
    value, _ = tune_hybrid.choose(ndcg[:1], [0.0, 0.3, 0.5, 1.0], default=0.5)
    assert value == 0.5  # 0.3 and 0.5 tie at 0.5: the untuned value
    assert tune_hybrid.choose(ndcg[:1], [0.0, 0.3, 0.5, 1.0], default=0.0)[0] == 0.3
    with pytest.raises(ValueError, match="no labelled query"):
        tune_hybrid.choose(np.zeros((0, 4)), [0.0, 0.3, 0.5, 1.0], default=0.5)


def test_the_tuning_folder_is_the_runs_and_the_parameter_must_fit_the_fusion(tmp_path):
    over = ["dataset=locomo", f"cache_dir={tmp_path}"]
    top = load_config([*over, "method=hybrid_rrf_tuned", "force=true"], config_name="tune_hybrid")
    run = load_config([*over, "method=hybrid_rrf_tuned"])
    assert tune_hybrid.tuning_folder(top) == tune_hybrid.tuning_folder(run)
    assert tune_hybrid.tuning_folder(run) != tune_hybrid.tuning_folder(load_config([*over, "method=hybrid_tuned"]))
    with pytest.raises(InstantiationException, match="does not fit fusion='convex'"):
        tune_hybrid.tuned_method(load_config([*over, "method=hybrid_tuned", "method.tuning.parameter=rrf_k"]))


@pytest.mark.parametrize("dataset", DATASETS)
def test_tunings_use_iteration_3s_folds_and_never_rank_a_query_they_saw(smoke, dataset):
    cache = smoke["base"] / "cache"
    with open(_one(cache / "fusion" / dataset, "*/*/model.pkl"), "rb") as fh:
        fusion_folds = pickle.load(fh)  # our own artifact, written by the smoke tier's train_fusion
    expected = [
        (sorted(f.train_ids), sorted(f.dev_ids), None if f.heldout_ids is None else sorted(f.heldout_ids))
        for f in fusion_folds
    ]
    assert len(expected) == (1 if dataset == "lethebench" else 5)
    for parameter in ("alpha", "rrf_k"):
        cards = [json.loads(p.read_text()) for p in sorted((cache / "hybrid_tuning" / dataset).glob("*/*/tuning.json"))]
        card = next(c for c in cards if c["tuning"]["parameter"] == parameter)
        assert [(f["train_ids"], f["dev_ids"], f["heldout_ids"]) for f in card["folds"]] == expected
        for f in card["folds"]:  # the value is the best mean over train+dev, recorded beside every other value
            means = f["mean_ndcg@10_by_value"]
            assert means[str(float(f["value"]))] == max(means.values())
    # the runs: each query ranked with its own fold's value; on LetheBench no train or dev query was run
    for method in ("hybrid_tuned", "hybrid_rrf_tuned"):
        run = RunFolder(_one(smoke["base"] / "results" / dataset / method, "*/manifest.json").parent)
        flags = run.flags()
        assert set(flags["tuning_fold"]) <= set(range(len(expected)))
        for qid, fold in flags["tuning_fold"].items():
            train, dev, held = expected[int(fold)]
            assert qid not in train and qid not in dev and (held is None or qid in held)


def test_a_tuned_hybrid_equals_the_hybrid_where_it_chose_the_hybrids_alpha_and_refuses_a_query_it_saw(smoke):
    results = smoke["base"] / "results" / "lethebench"
    tuned = RunFolder(_one(results / "hybrid_tuned", "*/manifest.json").parent)
    plain = RunFolder(_one(results / "hybrid", "*/manifest.json").parent)
    same = [q for q, v in tuned.flags()["tuned_value"].items() if v == 0.5]
    differ = [q for q, v in tuned.flags()["tuned_value"].items() if v != 0.5]
    tr, pr = tuned.run, plain.run
    for q in same:
        assert tr[q] == pr[q], q
    if differ:
        assert any(tr[q] != pr[q] for q in differ)
    # the leakage guard: a query the tuning was chosen on is never ranked
    cfg = load_config(
        [
            "dataset=lethebench",
            *smoke["paths"][:3],
            "method=hybrid_tuned",
            "dataset.params.splits={test:10,train:10,dev:5}",
            "dataset.params.session_turns=[20,30]",
        ]
    )
    method = tune_hybrid.tuned_method(cfg, progress=False)
    card = json.loads((tune_hybrid.tuning_folder(cfg) / "tuning.json").read_text())  # the one the run loaded
    method.bind_dataset({"name": "lethebench", "build_key": card["dataset"]["build_key"]})
    seen = card["folds"][0]["train_ids"][0]
    with pytest.raises(LeakageError, match=seen):
        method.value_for(Query("anything", (), seen, None))
    assert method.value_for(Query("anything", (), "never-seen", None)) == (card["folds"][0]["value"], 0)
