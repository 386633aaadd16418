"""The cross-encoder over the hybrid's pool (conf/method/cross_encoder_hybrid*.yaml, baselines/first_stage.py,
experiments/ce_pool.py): it reorders exactly the hybrid's top candidates, mixes its logits with the hybrid's scores
by weights its folds chose on their own dev queries over that pool, and its random control draws from the same pool.
The smoke tier (tests/experiments/conftest.py) makes them all on real data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baselines.bm25 import PyseriniBM25
from baselines.first_stage import build_first_stage, is_bm25, pool_key
from experiments import ce_pool
from experiments.config import load_config, to_dict
from lethe.retrieval.crossencoder import read_pool_weights
from lethebench.runs import RunFolder
from tests.support.located import on_this_machine

DATASETS = ("locomo", "lethebench")
DEPTH = 10  # the smoke tier's method.candidates


def _run(smoke: dict, dataset: str, method: str) -> RunFolder:
    found = sorted((smoke["base"] / "results" / dataset / method).glob("*/manifest.json"))
    assert len(found) == 1, found
    return RunFolder(found[0].parent)


def test_a_bm25_section_builds_pyserini_and_the_pool_key_names_stage_and_depth(tmp_path):
    assert is_bm25({"k1": 0.9, "b": 0.4}) and is_bm25(None)
    bm25 = build_first_stage({"k1": 0.9}, tmp_path, False)
    assert isinstance(bm25, PyseriniBM25) and (bm25.k1, bm25.b) == (0.9, 0.75)
    spec = to_dict(load_config(["method=cross_encoder_hybrid"]).method)["first_stage"]
    assert not is_bm25(spec) and pool_key(spec, 50) != pool_key(spec, 20)
    with pytest.raises(ValueError, match="other than BM25"):
        ce_pool.pool_of(load_config(["method=cross_encoder"]))


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_cross_encoder_reorders_exactly_the_hybrids_top_candidates(smoke, dataset):
    hybrid = _run(smoke, dataset, "hybrid").run
    for method in ("cross_encoder_hybrid", "cross_encoder_hybrid_alone", "random_rerank_hybrid"):
        run = _run(smoke, dataset, method)
        assert run.manifest["method"]["first_stage"]["name"] == "hybrid"
        for q, ranking in run.run.items():
            assert {d for d, _ in ranking[:DEPTH]} == {d for d, _ in hybrid[q][:DEPTH]}, (method, q)
            assert [d for d, _ in ranking[DEPTH:]] == [d for d, _ in hybrid[q][DEPTH:]], (method, q)  # the rest kept
    # the order changed somewhere: the reranker is not the first stage again
    alone = _run(smoke, dataset, "cross_encoder_hybrid_alone").run
    assert any([d for d, _ in alone[q][:DEPTH]] != [d for d, _ in hybrid[q][:DEPTH]] for q in alone)


@pytest.mark.parametrize("dataset", DATASETS)
def test_interpolation_weights_are_chosen_again_over_the_hybrid_pool(smoke, dataset):
    run = _run(smoke, dataset, "cross_encoder_hybrid")
    method = on_this_machine(run.manifest["method"], smoke)  # the manifest spells the cache as <cache_dir>
    pool = method["pool_selection"]
    set_dir = Path(method["model"]["set"])
    path = set_dir / "pools" / f"{method['pool']}.json"
    recorded = read_pool_weights(path)  # sealed: its checksum inside, checked on every read (issue 58)
    assert (
        pool == recorded
        and ce_pool.pool_is_whole(path)
        and [f["dir"] for f in pool["folds"]] == [f["dir"] for f in method["model"]["folds"]]
    )
    assert method["interpolation"]["weights"] == [f["weight"] for f in pool["folds"]]
    grid = {float(w) for w in run.manifest["config"]["method"]["model"]["train"]["interpolation_grid"]}
    for f in pool["folds"]:
        assert f["weight"] in grid and f["n_dev"] > 0
        # every weight of the grid was scored on the fold's dev queries over this pool, and the best one won
        scores = {float(w): m["ndcg@10"] for w, m in f["selection"]["metrics"].items()}
        assert set(scores) == grid and scores[f["weight"]] == max(scores.values())
    # the alone run scored the same pairs: it read every logit the interpolated run cached
    alone = _run(smoke, dataset, "cross_encoder_hybrid_alone").manifest["method"]["score_cache"]
    assert sum(c["hits"] for c in alone) > 0 and sum(c["misses"] for c in alone) == 0, alone


def test_an_edited_pool_weight_is_not_read(smoke, tmp_path):
    """A weight changed by hand in the saved pool file: the file is no longer whole (its prerequisite chooses the
    weights again) and a run that reads it stops naming it."""
    run = _run(smoke, "locomo", "cross_encoder_hybrid")
    method = on_this_machine(run.manifest["method"], smoke)
    src = Path(method["model"]["set"]) / "pools" / f"{method['pool']}.json"
    path = tmp_path / src.name
    doc = json.loads(src.read_text())
    doc["folds"][0]["weight"] = 0.9 if doc["folds"][0]["weight"] < 0.5 else 0.1  # (1 - w would keep a 0.5)
    path.write_text(json.dumps(doc))
    assert not ce_pool.pool_is_whole(path)
    with pytest.raises(ValueError, match="its content is not what was written with it"):
        read_pool_weights(path)
