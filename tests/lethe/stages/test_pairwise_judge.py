"""The pairwise judge (lethe/stages/pairwise_judge.py): order swapping, the tie rule, failures left unjudged and
position bias on scripted fake replies; one real judgment in both orders with SmolLM2-135M."""

from __future__ import annotations

import json

import pytest

from lethe.core.paths import PROJECT_ROOT
from lethe.llm.base import LLMTimeout
from lethe.llm.parsing import ParseError
from lethe.stages.pairwise_judge import CRITERIA, PairwiseJudge, parse_verdicts, position_bias, verdicts_schema
from tests.support.fake_llm import ScriptedLLM as Scripted

Q = "How do farmers protect soil fertility?"
A = "Crop rotation."
B = "Crop rotation, cover crops, composting and reduced tillage, each explained."


def reply(c: str, d: str, e: str, o: str) -> tuple[str, None]:
    return json.dumps(
        {
            "Comprehensiveness": f"Answer {c}",
            "Diversity": f"Answer {d}",
            "Empowerment": f"Answer {e}",
            "Overall Winner": f"Answer {o}",
        }
    ), None


def test_both_orders_are_asked_with_the_answers_swapped():
    llm = Scripted([reply("2", "2", "2", "2"), reply("1", "1", "1", "1")])
    j = PairwiseJudge(llm).judge(Q, A, B)
    first, second = (c["messages"][-1].content for c in llm.calls)
    assert first.index(A) < first.index(B) and second.index(B) < second.index(A)
    assert [o.first for o in j.orders] == ["A", "B"]
    assert j.winners == {c: "B" for c in CRITERIA}  # B won in both positions


def test_a_winner_counts_only_when_both_orders_agree_else_tie():
    # order AB: 1 2 1 2 -> A B A B; order BA: 1 1 2 2 -> B B A A
    j = PairwiseJudge(Scripted([reply("1", "2", "1", "2"), reply("1", "1", "2", "2")])).judge(Q, A, B)
    assert j.winners == {"Comprehensiveness": "tie", "Diversity": "B", "Empowerment": "A", "Overall Winner": "tie"}


def test_failures_are_unjudged_never_ties():
    j = PairwiseJudge(Scripted([LLMTimeout("slow"), reply("1", "1", "1", "1")])).judge(Q, A, B)
    assert j.orders[0].status == "timeout" and set(j.winners.values()) == {None}
    partial = '{"Comprehensiveness": "Answer 1", "Diversity": "both", "Empowerment": "Answer 2"}'
    j2 = PairwiseJudge(Scripted([(partial, None), reply("2", "2", "1", "1")])).judge(Q, A, B)
    assert j2.winners == {"Comprehensiveness": "A", "Diversity": None, "Empowerment": "B", "Overall Winner": None}
    j3 = PairwiseJudge(Scripted([("I prefer the second one.", None), reply("2", "2", "1", "1")])).judge(Q, A, B)
    assert j3.orders[0].status == "parse_failure" and j3.orders[0].raw_text == "I prefer the second one."


def test_parse_verdicts_accepts_lightrag_objects_and_rejects_no_json():
    obj = {
        "comprehensiveness": {"Winner": "Answer 2", "Explanation": "more detail"},
        "Diversity": "1",
        "Empowerment": "Answer 1 and Answer 2",
        "Overall": {"Winner": "Answer 2"},
    }
    assert parse_verdicts("Sure! " + json.dumps(obj)) == {
        "Comprehensiveness": 2,
        "Diversity": 1,
        "Empowerment": None,
        "Overall Winner": 2,
    }
    with pytest.raises(ParseError):
        parse_verdicts("Answer 1 is better")


def test_position_bias_counts_first_position_verdicts_of_both_orders():
    always_first = Scripted([reply("1", "1", "1", "1"), reply("1", "1", "1", "1")])
    j = PairwiseJudge(always_first).judge(Q, A, B)
    assert set(j.winners.values()) == {"tie"}  # a judge that always picks position 1 yields only ties
    consistent = PairwiseJudge(Scripted([reply("2", "2", "2", "2"), reply("1", "1", "1", "1")])).judge(Q, A, B)
    assert position_bias([j]) == {"verdicts": 8, "first_position": 8, "share_first": 1.0}
    assert position_bias([j, consistent]) == {"verdicts": 16, "first_position": 12, "share_first": 0.75}
    assert position_bias([])["share_first"] is None


def test_prompt_is_versioned_and_described():
    d = PairwiseJudge(Scripted([])).describe()
    assert (
        d["prompt"]["name"] == "judge_pairwise" and d["prompt"]["version"] == "v2" and len(d["prompt"]["sha256"]) == 64
    )
    assert d["decoding"]["temperature"] == 0.0 and d["criteria"] == list(CRITERIA)


def test_constrained_decoding_carries_the_verdicts_schema_and_free_decoding_none():
    llm = Scripted([reply("2", "2", "2", "2"), reply("1", "1", "1", "1")])
    judge = PairwiseJudge(llm, constrained=True)
    judge.judge(Q, A, B)
    assert {c["decoding"].json_schema for c in llm.calls} == {verdicts_schema()} and judge.describe()["constrained"]
    free = PairwiseJudge(Scripted([]))
    assert free.decoding.json_schema is None and "json_schema" not in free.describe()["decoding"]
    schema = json.loads(verdicts_schema())
    assert schema["required"] == list(CRITERIA) and schema["additionalProperties"] is False
    assert {c: p["enum"] for c, p in schema["properties"].items()} == dict.fromkeys(CRITERIA, ["Answer 1", "Answer 2"])


@pytest.mark.slow
def test_one_real_judgment_in_both_orders_with_smollm2(tmp_path):
    from omegaconf import OmegaConf

    from lethe.llm.backends import make_llm

    cfg = OmegaConf.load(PROJECT_ROOT / "conf" / "llm" / "smollm2.yaml")
    cfg.n_threads = 1
    llm = make_llm(cfg, cache_dir=tmp_path)
    try:
        j = PairwiseJudge(llm, max_tokens=64, constrained=True).judge(Q, A, B)
    finally:
        llm.close()
    assert [o.first for o in j.orders] == ["A", "B"]
    for o in j.orders:  # decoded under the verdicts' schema: every criterion names exactly one answer
        assert o.status == "ok" and o.raw_text and o.llm_ms > 0 and not o.cached
        assert set(o.verdicts) == set(CRITERIA) and set(o.verdicts.values()) <= {1, 2}
    for c, w in j.winners.items():
        x, y = j.orders[0].verdicts.get(c), j.orders[1].verdicts.get(c)
        expected = None if x is None or y is None else ({(1, 2): "A", (2, 1): "B"}.get((x, y), "tie"))
        assert w == expected  # the tie rule applied to what the real model said
