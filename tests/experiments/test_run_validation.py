"""A run config that cannot give a meaningful result is refused before any compute, naming the key
(issue 15, cases 3, 6 and 7): each case below used to finish with DONE, write outside its root, fail
late or fail without naming the key."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from experiments import run_identity as RI
from experiments.config import load_config
from experiments.run_identity import run_identity
from experiments.runner import run_experiment
from lethe.core.typed_config import ConfigError
from lethebench.runs import RunFolder
from tests.conftest import overrides_for

SCOPE = "dataset.scopes=[conv-26]"


def _cfg(tmp_path, *extra):
    work = {"processed": tmp_path / "processed", "cache": tmp_path / "cache", "results": tmp_path / "results"}
    return load_config(overrides_for(work, SCOPE, *extra))


@pytest.mark.parametrize(
    "extra, key",
    [
        (["run.k=0"], "run.k=0"),
        (["run.k=-5", "method=window"], "run.k=-5"),
        (["dataset.sample=0"], "dataset.sample=0"),
        (["dataset.sample=-3"], "dataset.sample=-3"),
        (["run.max_error_share=1.5"], "run.max_error_share=1.5"),
        (["method.k1=abc"], "method.k1='abc': must be float"),
        (["+method.k3=1"], "method.k3: unknown parameter of baselines.bm25.PyseriniBM25"),
        (["dataset.name=../../x"], "dataset.name='../../x': must be a plain name"),
        (["dataset.name=/tmp/abs"], "dataset.name='/tmp/abs'"),
        (["method.name=../../../x"], "method.name='../../../x'"),
        (["+method.variant=a/b"], "method.variant='a/b'"),
        (
            ["run.metrics=[ndcg@10,ERR@10]"],
            "run.metrics: unknown retrieval metric 'ERR@10'; accepted: ranx names ndcg[@k]",
        ),
        (["run.metrics=[nDCG@10,ndcg@10]"], "run.metrics: ['ndcg@10'] named more than once"),
        (["run.metrics=[]"], "run.metrics=[]: must be a non-empty list"),
    ],
)
def test_bad_values_are_refused_before_any_compute(tmp_path, extra, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        run_experiment(_cfg(tmp_path, *extra))
    # nothing was built, cached or written: the check ran first
    assert not (tmp_path / "processed").exists() and not (tmp_path / "cache").exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not (tmp_path.parent / "x").exists()


def test_an_unwritable_results_folder_fails_before_the_compute(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the results folder should be")
    with pytest.raises(ConfigError, match="results_dir=.* is not writable"):
        run_experiment(_cfg(tmp_path, f"results_dir={blocker / 'runs'}"))
    assert not (tmp_path / "processed").exists()


def test_a_valid_config_still_runs(tmp_path):
    folder = run_experiment(_cfg(tmp_path, "method=window", "run.k=5"))
    assert (folder / "DONE").is_file() and folder.is_relative_to(tmp_path / "results")


IR_MEASURES = "run.metrics=[nDCG@10,R@10,R@50,RR@10,P@10]"  # the default metrics in ir_measures' spelling


def test_ir_measures_metric_names_are_the_same_run(tmp_path):
    """run.metrics in ir_measures' spelling is canonicalised: the same config hash (metrics are not hashed: how a run
    is scored is not what it computes), the same ranx-named columns and values as the default (ranx) spelling, on a
    small real run."""
    ranx = _cfg(tmp_path, "method=bm25_memory")
    irm = _cfg(tmp_path, "method=bm25_memory", IR_MEASURES, f"results_dir={tmp_path / 'results_irm'}")
    assert run_identity(irm, "any build").config_hash == run_identity(ranx, "any build").config_hash
    a, b = RunFolder(run_experiment(ranx)), RunFolder(run_experiment(irm))  # both computed (two results_dirs)
    assert a.path.name == b.path.name and a.path != b.path
    names = ["ndcg@10", "recall@10", "recall@50", "mrr@10", "precision@10"]
    assert "metrics" not in b.manifest["hashed_config"]["run"]
    assert sorted(b.metrics["means"]) == sorted(names) and b.metrics["means"] == a.metrics["means"]
    pd.testing.assert_frame_equal(
        b.per_query[["query_id", *names]], a.per_query[["query_id", *names]], check_exact=True
    )
    assert a.metrics["means"]["ndcg@10"] > 0.1  # real scores, not a comparison of zeros


def test_llama_cpp_threads_are_placement_not_identity(tmp_path):
    """llama.cpp's thread count says how a run computes, not what (like device): a run on two threads is the run on
    one, filed in the same folder. A model choice or a decoding setting still moves the hash."""
    base = ["method=lethe_iter4"]
    one = run_identity(_cfg(tmp_path, *base, "method.stages.llm_rerank.llm.n_threads=1"), "k")
    two = run_identity(
        _cfg(tmp_path, *base, "method.stages.llm_rerank.llm.n_threads=2", "method.stages.generation.llm.n_threads=2"),
        "k",
    )
    default = run_identity(_cfg(tmp_path, *base), "k")
    assert one.config_hash == two.config_hash == default.config_hash
    assert (
        "n_threads" not in default.hashed["method"]["stages"]["llm_rerank"]["llm"]
        and default.hashed["identity_schema"] == RI.IDENTITY_SCHEMA
    )
    other = run_identity(_cfg(tmp_path, *base, "llm@method.stages.llm_rerank.llm=smollm2"), "k")
    assert other.config_hash != default.config_hash


@pytest.mark.parametrize("k, warned", [(20, True), (100, False)])
def test_a_metric_cutting_deeper_than_run_k_is_named_before_any_compute(tmp_path, caplog, k, warned):
    """recall@50 of a run that writes 20 documents per query is its recall@20: the run says so, naming both keys."""
    from omegaconf import OmegaConf

    from experiments.runner import validate_run_config

    resolved = OmegaConf.to_container(_cfg(tmp_path, f"run.k={k}", "run.metrics=[nDCG@10,R@50]"), resolve=True)
    with caplog.at_level("WARNING", logger="experiments.runner"):
        validate_run_config(resolved)
    named = [r.getMessage() for r in caplog.records if "cut deeper than run.k" in r.getMessage()]
    if warned:
        assert named and "'recall@50'" in named[0] and "run.k=20" in named[0] and "ndcg@10" not in named[0]
    else:
        assert not named


def test_the_command_line_refuses_an_unknown_metric_in_one_line(tmp_path):
    """python -m experiments.run with a mistyped metric: one line naming the key and the accepted families, no
    traceback, a non-zero exit, before any dataset is built."""
    from tests.support.processes import run_module

    r = run_module(
        "experiments.run",
        "run.metrics=[nDCG@10,ERR@10]",
        f"data.processed={tmp_path / 'processed'}",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    )
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert lines[-1].startswith("Error: run.metrics: unknown retrieval metric 'ERR@10'; accepted: ranx names")
    assert not (tmp_path / "processed").exists()
