"""The shared answer stage (lethe/stages/answering.py): its seeded sample, what it records on a query, how
it counts LLM failures, and its config errors, on fake LLM backends."""

from __future__ import annotations

from typing import Any

import pytest

from lethe.core.protocol import SearchResult
from lethe.llm.base import LLMTimeout
from lethe.stages.answering import AnswerStage, answer_stage_from_config, sample_queries
from lethe.stages.generation import AnswerGenerator, HallucinationJudge
from tests.support.fake_llm import ScriptedLLM as Scripted

TEXTS = {"d1": "Lena moved to Porto last spring.", "d2": "She works as a nurse.", "d3": "Unrelated."}


def test_sample_is_seeded_order_free_and_all_when_large():
    ids = [f"q{i}" for i in range(20)]
    a = sample_queries(ids, 5, seed=3)
    assert len(a) == 5 and a <= set(ids)
    assert sample_queries(list(reversed(ids)) + ids[:4], 5, seed=3) == a  # order and duplicates do not matter
    assert sample_queries(ids, 5, seed=4) != a
    assert sample_queries(ids, None, seed=0) == set(ids) == sample_queries(ids, 99, seed=0)
    with pytest.raises(ValueError, match="sample"):
        sample_queries(ids, 0, seed=0)


def test_annotate_answers_from_the_top_context_docs_and_records_the_judgment():
    gen_llm, judge_llm = Scripted([("Answer: Porto", None)]), Scripted([("yes", [-0.1])])
    stage = AnswerStage(AnswerGenerator(gen_llm), HallucinationJudge(judge_llm), context_docs=2, sample=None, seed=0)
    res = SearchResult([("d1", 3.0), ("d2", 2.0), ("d3", 1.0)])
    stage.annotate("Where did Lena move?", res, TEXTS.__getitem__)
    g = res.flags["generation"]
    assert g["answer"] == "Porto" and g["status"] == "ok" and g["context_docs"] == 2
    assert (
        g["supported"] is True and g["judge_status"] == "ok" and g["p_supported"] == pytest.approx(0.904837, abs=1e-6)
    )
    prompt = gen_llm.calls[0]["messages"][-1].content
    assert "[1] Lena moved to Porto last spring." in prompt and "[2] She works as a nurse." in prompt
    assert "Unrelated" not in prompt  # only the top context_docs
    assert set(res.timings_ms) == {"generation", "judge"}
    assert res.flags["llm_failures"] == {"infra": 0, "parse": 0}


def test_failures_are_counted_never_guessed():
    stage = AnswerStage(
        AnswerGenerator(Scripted([LLMTimeout("slow"), ("Porto", None)])),
        HallucinationJudge(Scripted([("maybe", None)])),
        context_docs=1,
        sample=None,
        seed=0,
    )
    timed_out = SearchResult([("d1", 1.0)])
    stage.annotate("q", timed_out, TEXTS.__getitem__)
    assert timed_out.flags["generation"]["answer"] is None and timed_out.flags["generation"]["status"] == "timeout"
    assert "supported" not in timed_out.flags["generation"]  # no answer, no judgment
    assert timed_out.flags["llm_failures"] == {"infra": 1, "parse": 0}
    unparsed = SearchResult([("d1", 1.0)])
    stage.annotate("q", unparsed, TEXTS.__getitem__)
    assert (
        unparsed.flags["generation"]["supported"] is None
        and unparsed.flags["generation"]["judge_status"] == "parse_failure"
    )
    assert unparsed.flags["llm_failures"] == {"infra": 0, "parse": 1}


def test_wants_only_the_sample_after_set_queries():
    stage = AnswerStage(AnswerGenerator(Scripted([])), None, context_docs=1, sample=2, seed=0)
    assert stage.wants("anything")  # before set_queries: every query
    stage.set_queries(["a", "b", "c", "d"])
    assert sum(stage.wants(q) for q in "abcd") == 2 and not stage.wants("e")


def test_from_config_shares_nothing_it_was_not_given_and_names_bad_keys():
    made: list[tuple[Any, str]] = []

    def llm_for(cfg, part):
        made.append((cfg, part))
        return Scripted([])

    cfg = {
        "sample": 3,
        "seed": 1,
        "context_docs": 4,
        "options": {"max_tokens": 8},
        "llm": {"name": "g"},
        "judge": {"enabled": True, "llm": {"name": "j"}, "options": {"threshold": 0.7}},
    }
    stage = answer_stage_from_config(cfg, llm_for, "answers")
    assert made == [({"name": "g"}, ""), ({"name": "j"}, "judge")]
    assert stage.context_docs == 4 and stage.sample == 3 and stage.judge.threshold == 0.7
    assert stage.generator.decoding.max_tokens == 8
    assert answer_stage_from_config({**cfg, "judge": {"enabled": False}}, llm_for, "answers").judge is None
    with pytest.raises(ValueError, match=r"answers\.judge"):
        answer_stage_from_config({**cfg, "judge": {"enabeld": True}}, llm_for, "answers")


def test_dedup_skips_near_duplicates_and_fills_from_the_ranking():
    from lethe.stages.answering import dedup_contexts

    texts = [
        "Lena moved to Porto last spring.",
        "Lena moved to Porto last spring!",
        "She works as a nurse.",
        "Unrelated.",
        "More.",
    ]
    assert dedup_contexts(texts, 2, None) == (texts[:2], 0)
    # difflib ratio of the first two: 2 * 31 / 64 = 0.96875 >= 0.95
    assert dedup_contexts(texts, 2, 0.95) == ([texts[0], texts[2]], 1)
    assert dedup_contexts(texts, 2, 0.99) == (texts[:2], 0)
    gen_llm = Scripted([("Porto", None)])
    stage = AnswerStage(AnswerGenerator(gen_llm), None, context_docs=2, sample=None, seed=0, dedup_threshold=0.95)
    res = SearchResult([("a", 3.0), ("b", 2.0), ("c", 1.0)])
    stage.annotate("q", res, {"a": texts[0], "b": texts[1], "c": texts[2]}.__getitem__)
    assert res.flags["generation"]["duplicates_skipped"] == 1 and res.flags["generation"]["context_docs"] == 2
    assert "[2] She works as a nurse." in gen_llm.calls[0]["messages"][-1].content
    with pytest.raises(ValueError, match="dedup_threshold"):
        AnswerStage(AnswerGenerator(gen_llm), None, context_docs=2, sample=None, seed=0, dedup_threshold=1.5)
