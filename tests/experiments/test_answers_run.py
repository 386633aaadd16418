"""Answers for any method (the run's ``answers`` section) end to end through the runner with the real
SmolLM2-135M: BM25 on real LoCoMo, answers for a seeded sample, scored with LoCoMo's protocol and the
MiniLM similarity; and the section's effect on run identity and its config errors."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.answers import answer_rules, score_answer
from experiments.config import to_dict
from experiments.run_identity import config_hash, hashed_config
from experiments.runner import run_experiment, validate_run_config
from lethe.core.typed_config import ConfigError
from lethebench.runs import RunFolder
from lethebench.schema import read_table
from tests.conftest import TWO_CONVS

ANSWERS = ["answers.enabled=true", "llm@answers.llm=smollm2", "answers.sample=3", "answers.options.max_tokens=12"]


def test_bm25_answers_a_seeded_sample_scored_against_locomo_gold(cfg_for, embedder):
    run = RunFolder(run_experiment(cfg_for("method=bm25", f"dataset.scopes={TWO_CONVS}", "dataset.sample=5", *ANSWERS)))
    pq = run.per_query
    assert len(pq) == 5 and set(pq["status"]) == {"ok"}
    gen = pq[pq["answer_status"].notna()]
    assert len(gen) == 3  # the seeded answer sample
    queries = read_table(run.dataset_folder, "queries").set_index("query_id")
    timings = run.timings().loc[gen["query_id"]]
    assert timings["generation"].notna().all()  # judge off by default
    assert "judge" not in timings or timings["judge"].isna().all()
    for row in gen.itertuples():
        gold = queries.loc[row.query_id, "answer"]
        if row.answer_status != "ok" or not isinstance(gold, str) or not gold.strip():
            continue
        s = score_answer(row.answer, gold, row.category)  # LoCoMo's per-category rules
        assert (row.answer_f1, row.answer_rouge_l, row.answer_em) == (s["f1"], s["rouge_l"], s["em"])
        a, b = embedder.encode([row.answer, gold], role="query")
        assert row.answer_similarity == pytest.approx(float(np.dot(a, b)), abs=1e-5)
    metrics = run.metrics
    assert metrics["answers"]["generated"] == 3
    assert metrics["answers"]["similarity"] == pytest.approx(gen["answer_similarity"].dropna().mean())
    man = run.manifest
    assert man["answers"]["sample"] == 3 and man["answers"]["generator"]["prompt"]["name"] == "answer"
    assert man["hashed_config"]["answers"]["enabled"] is True and "answer_embedder" in man["hashed_config"]


def test_answers_enter_the_hash_only_when_on(cfg_for):
    off = to_dict(cfg_for("method=bm25"))
    on = to_dict(cfg_for("method=bm25", *ANSWERS))
    without_section = {k: v for k, v in off.items() if k != "answers"}
    assert config_hash(hashed_config(off, "b")) == config_hash(hashed_config(without_section, "b"))
    assert config_hash(hashed_config(on, "b")) != config_hash(hashed_config(off, "b"))


def test_answers_config_errors_name_the_key(cfg_for):
    with pytest.raises(ConfigError, match="method.stages.generation.enabled"):
        validate_run_config(to_dict(cfg_for("method=lethe_iter4", "answers.enabled=true")))
    with pytest.raises(ConfigError, match="answers.sample"):
        validate_run_config(to_dict(cfg_for("method=bm25", "answers.enabled=true", "answers.sample=0")))
    with pytest.raises(ConfigError, match="answers.context_docs"):
        validate_run_config(to_dict(cfg_for("method=bm25", "answers.enabled=true", "answers.context_docs=0")))


def test_answer_record_scores_locomo_adversarial_questions_by_abstention():
    from experiments.runner import answer_record

    gen = {"answer": "Not mentioned in the conversation.", "status": "ok"}
    locomo, plain = answer_rules("locomo"), answer_rules(None)
    assert answer_record(gen, None, "adversarial", locomo)["answer_f1"] == 1.0  # no gold: the abstention rule decides
    assert answer_record({**gen, "answer": "Paris"}, None, "adversarial", locomo)["answer_f1"] == 0.0
    assert answer_record({**gen, "answer": "Paris"}, None, None, locomo)["answer_f1"] is None  # no gold, no score
    assert answer_record({**gen, "answer": "Paris"}, "Paris", "single-hop", locomo)["answer_f1"] == 1.0
    # another dataset's rules ignore the category: a gold answer is scored by plain token F1, none is not scored
    assert answer_record({**gen, "answer": "Paris"}, None, "adversarial", plain)["answer_f1"] is None
    assert (
        answer_record({**gen, "answer": "Paris, London"}, "Paris", "multi-hop", plain)["answer_f1"]
        == (score_answer("Paris, London", "Paris", None)["f1"])
    )
    with pytest.raises(ValueError, match="dataset.answer_rules must be one of null, 'locomo', got 'squad'"):
        answer_rules("squad")
