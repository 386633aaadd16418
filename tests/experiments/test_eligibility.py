"""The runner, not the method, decides what a query may see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.runner import EligibilityViolation, run_experiment
from lethe.retrieval.ranking import top_k
from lethebench.runs import RunFolder
from lethebench.schema import write_dataset
from tests.support.toy import toy_dataset


@pytest.fixture
def toy_cfg(tmp_path, cfg_for):
    folder = write_dataset(toy_dataset(), tmp_path / "toy")

    def make(target: str, *extra: str):
        log = tmp_path / "calls.jsonl"
        return cfg_for(
            "dataset=custom",
            "dataset.name=toy",
            f"dataset.folder={folder}",
            f"results_dir={tmp_path / 'results'}",
            "~method",
            f"+method.name={target.split('.')[-1]}",
            f"+method._target_={target}",
            f"+method.log_file={log}",
            *extra,
        ), log

    return make


def test_only_earlier_turns_of_the_same_scope_are_visible(toy_cfg):
    cfg, log = toy_cfg("tests.support.spy.SpyMethod", "run.warmup=false")
    folder = run_experiment(cfg)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    seen = {c["query"]: c["visible"] for c in calls if c["event"] == "search"}
    assert seen["what error did the cli show?"] == ["chat:0", "chat:1"]
    assert seen["which port does the daemon use?"] == [f"chat:{i}" for i in range(5)]
    assert seen["what captures paraphrase?"] == ["notes:0", "notes:1"]
    assert "anything before the chat?" not in seen  # position 0: nothing eligible, method not called
    pq = RunFolder(folder).per_query.set_index("query_id")
    assert pq.loc["q_first", "status"] == "no_eligible_docs" and pq.loc["q_first", "ndcg@10"] == 0.0
    metrics = RunFolder(folder).metrics
    assert metrics["queries"]["evaluated"] == 4 and metrics["queries"]["status"] == {"no_eligible_docs": 1, "ok": 3}
    # q_first scores 0 and is averaged in, never dropped
    assert metrics["means"]["recall@10"] == pytest.approx(pq["recall@10"].mean())
    assert pq.loc["q_early", "recall@10"] == 1.0


def test_a_method_returning_an_ineligible_doc_stops_the_run(toy_cfg):
    cfg, _ = toy_cfg("tests.support.spy.PeekingMethod")
    with pytest.raises(EligibilityViolation, match="ineligible"):
        run_experiment(cfg)
    assert not list(Path(cfg.results_dir).glob("*/*/*/DONE"))


def test_canonical_order_breaks_ties_like_trec_eval():
    assert top_k([("a", 1.0), ("c", 2.0), ("b", 1.0), ("d", 1.0)], 3) == [("c", 2.0), ("d", 1.0), ("b", 1.0)]
