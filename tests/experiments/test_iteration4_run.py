"""Lethe iteration 4 end to end through the runner with the real SmolLM2-135M: budgeted reranking,
rules contradiction handling, answer generation and hallucination judging on a small real LetheBench
build; the answers are scored against the gold answers with LoCoMo's protocol."""

from __future__ import annotations

import json

import pandas as pd

from analysis.answers import score_answer
from experiments.runner import run_experiment
from lethebench.runs import RunFolder
from lethebench.schema import read_table

SMALL_LB = [
    "dataset=lethebench",
    "dataset.params.splits={test: 3, train: 6, dev: 3}",
    "dataset.params.session_turns=[20,30]",
]
SMOL = [
    "llm@method.stages.llm_rerank.llm=smollm2",
    "llm@method.stages.generation.llm=smollm2",
    "llm@method.stages.generation.judge.llm=smollm2",
]
# a wall-clock budget generous enough that SmolLM2 judges some candidates even on a loaded machine (two test workers
# on two cores): the tests need a recorded reach above 0, not a tight budget
BUDGET = "method.stages.llm_rerank.budget_ms=10000"


def test_iteration4_runs_end_to_end_with_smollm2(cfg_for):
    cfg = cfg_for(
        "method=lethe_iter4",
        *SMALL_LB,
        *SMOL,
        "method.stages.learned_fusion.enabled=false",
        "dataset.sample=4",
        "method.stages.generation.sample=2",
        BUDGET,
        "method.stages.llm_rerank.top_n=3",
        "method.stages.generation.options.max_tokens=16",
    )
    run = RunFolder(run_experiment(cfg))
    pq = run.per_query
    assert len(pq) == 4 and set(pq["status"]) == {"ok"}
    rerank, timings = run.flag("rerank"), run.timings()
    assert (rerank["considered"] == 3).all()
    assert (rerank["judged"] + rerank["parse_failures"] + rerank["timeouts"] + rerank["errors"] <= 3).all()
    assert timings["llm_rerank"].notna().all() and timings["contradiction"].notna().all()
    assert (run.flag("contradiction")["scope"] == "eligible").all()
    assert rerank["judged"].sum() > 0  # the real model did judge candidates
    gen = pq[pq["answer_status"].notna()]
    assert len(gen) == 2  # the seeded generation sample
    queries = read_table(run.dataset_folder, "queries").set_index("query_id")
    metrics = run.metrics
    a = metrics["answers"]
    assert a["generated"] == 2 and sum(a["judge_status"].values()) == 2
    assert a["judged"] == a["judge_status"].get("ok", 0)
    for row in gen.itertuples():
        if row.answer_status == "ok":
            assert isinstance(row.answer, str)
            assert 0.0 <= row.answer_f1 <= 1.0 and 0.0 <= row.answer_rouge_l <= 1.0
            gold = queries.loc[row.query_id, "answer"]
            assert row.answer_f1 == score_answer(row.answer, gold, None)["f1"]  # not LoCoMo: plain token F1
    if a["judged"]:
        assert 0.0 <= a["hallucination_rate"] <= 1.0
    man = run.manifest["method"]["stages"]
    assert {"llm_rerank", "contradiction", "generation"} <= set(man)  # iteration 4's three stages beside 3's
    assert man["llm_rerank"]["reranker"]["prompt"]["name"] == "rerank_pointwise"
    judge = man["generation"]["judge_model"]
    assert judge["prompt"]["sha256"] and "temperature" in json.dumps(judge)
    assert "generation" in metrics["stage_latency_ms"] and "llm_rerank" in metrics["stage_latency_ms"]


def test_a_recorded_reach_is_replayed_by_another_run(cfg_for, tmp_path):
    """A wall-clock run records each query's reach; replaying its reach file under a 1 ms budget (which alone would
    judge nothing) judges exactly those candidates, and the file's content is part of the run's identity (issue 34)."""
    from experiments.reference_store import recorded_reach
    from lethebench.runs import flag_frame

    base = [
        "method=lethe_iter4",
        *SMALL_LB,
        *SMOL,
        "method.stages.learned_fusion.enabled=false",
        "dataset.sample=3",
        "method.stages.generation.enabled=false",
        "method.stages.llm_rerank.top_n=3",
    ]
    first = RunFolder(run_experiment(cfg_for(*base, BUDGET)))
    reach = recorded_reach(first.per_query)
    assert reach is not None and len(reach) == 3 and all(0 <= r <= 3 for r in reach.values()) and sum(reach.values())
    file = tmp_path / "reach.json"
    file.write_text(json.dumps(reach))
    replay = [*base, "method.stages.llm_rerank.budget_ms=1", f"+method.stages.llm_rerank.replay={file}"]
    replayed = RunFolder(run_experiment(cfg_for(*replay)))
    got = flag_frame(replayed.per_query.set_index("query_id"), "rerank")
    assert got["reach"].to_dict() == reach and got["replayed"].all() and (got["timeouts"] == 0).all()
    assert (got["judged"] + got["parse_failures"] + got["errors"]).to_dict() == reach
    file.write_text(json.dumps({q: 0 for q in reach}))  # another reach: another run, in another folder
    none = RunFolder(run_experiment(cfg_for(*replay)))
    assert none.path != replayed.path and (flag_frame(none.per_query, "rerank")["judged"] == 0).all()


def test_a_replayed_run_gives_identical_answers_on_one_and_two_threads(cfg_for, tmp_path):
    """Replay reproduces on any thread count (issue 34): iteration 4 replaying a recorded reach with the real SmolLM2
    on 1 and on 2 llama.cpp threads, no response cache, gives the same judgments, answers, verdicts and answer
    metrics (the thread count is placement, left out of the run's identity, so the second run overwrites the first)."""
    from experiments.reference_store import recorded_reach

    base = [
        "method=lethe_iter4",
        *SMALL_LB,
        *SMOL,
        "method.stages.learned_fusion.enabled=false",
        "dataset.sample=3",
        "method.stages.llm_rerank.top_n=3",
        "method.stages.generation.sample=2",
        "method.stages.generation.options.max_tokens=16",
    ]
    first = RunFolder(run_experiment(cfg_for(*base, "method.stages.generation.enabled=false", BUDGET)))
    file = tmp_path / "reach.json"
    file.write_text(json.dumps(recorded_reach(first.per_query)))
    models = ("stages.llm_rerank.llm", "stages.generation.llm", "stages.generation.judge.llm")
    replay = [*base, f"+method.stages.llm_rerank.replay={file}", "run.overwrite=true"]
    replay += [f"method.{m}.cache=false" for m in models]  # each thread count computes its own replies
    # two llama.cpp threads in a test worker that shares two cores with another: a call can be slow, and the test is
    # about equal answers, not about the deadline (both runs get the same one)
    replay += ["method.stages.generation.options.timeout_s=600", "method.stages.generation.judge.options.timeout_s=600"]
    runs = []
    for threads in (1, 2):
        run = RunFolder(run_experiment(cfg_for(*replay, *(f"method.{m}.n_threads={threads}" for m in models))))
        assert run.manifest["config"]["method"]["stages"]["generation"]["llm"]["n_threads"] == threads
        runs.append(
            (run.per_query.drop(columns=["latency_ms", "timings_ms"]), run.metrics["answers"], run.flag("rerank"))
        )
    (pq1, answers1, rerank1), (pq2, answers2, rerank2) = runs
    assert pq1["answer"].notna().sum() == 2 and answers1["generated"] == 2
    scored = ["answer", "answer_status", "answer_supported", "answer_f1", "ndcg@10"]
    pd.testing.assert_frame_equal(pq1[scored], pq2[scored])
    assert answers1 == answers2
    cols = ["reach", "judged", "parse_failures", "errors"]
    pd.testing.assert_frame_equal(rerank1[cols], rerank2[cols])
