"""Contradiction detectors behind one interface (lethe/stages/contradiction/detectors.py): blocking on constructed docs,
the conservative threshold rule, stale/current orientation, failure counting, budget stop and max_pairs cap
with a scripted fake backend; make_detector errors; one end-to-end run on the real SmolLM2-135M-Instruct.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import pytest

from lethe.core.paths import PROJECT_ROOT
from lethe.core.protocol import Doc
from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMTimeout, Message
from lethe.llm.prompts import load_prompt
from lethe.stages.contradiction.detectors import (
    DECODING,
    DetectionResult,
    LLMContradictionDetector,
    RulesDetector,
    candidate_pairs,
    make_detector,
    subject_keys,
    value_kinds,
    value_tokens,
)
from lethe.stages.contradiction.rules import detect
from tests.support.fake_llm import FakeLLM as BaseFake

ROOT = PROJECT_ROOT

DOCS = [
    Doc("d0", "The billing-api timeout is 800 ms.", 0, "prose"),
    Doc("d1", "Lunch was great today, thanks for organizing it.", 1, "chat"),
    Doc("d2", "auth-svc runs with 3 replicas.", 2, "prose"),
    Doc("d3", "Lowered the billing-api timeout to 300 ms.", 3, "prose"),
    Doc("d4", "auth-svc now runs 5 replicas.", 4, "prose"),
]


class FakeLLM(BaseFake):
    """``respond(earlier_text, later_text, k)`` -> (text, logprobs) or an exception instance to raise;
    delays and timeouts as tests.support.fake_llm.FakeLLM."""

    def __init__(
        self, respond: Callable[[str, str, int], Any] = lambda e, l, k: ("no", [math.log(0.9)]), delay_s: float = 0.0
    ):
        super().__init__(delay_s)
        self.respond = respond

    @staticmethod
    def _split(messages: Sequence[Message]) -> tuple[str, str]:
        user = messages[1].content
        earlier = user.split("Earlier snippet:\n", 1)[1].split("\n\nLater snippet:\n", 1)[0]
        later = user.split("\n\nLater snippet:\n", 1)[1].split("\n\nDoes the later", 1)[0]
        return earlier, later

    def record(self, messages: Sequence[Message], decoding: Decoding, timeout_s: float | None) -> dict[str, Any]:
        earlier, later = self._split(messages)
        return {**super().record(messages, decoding, timeout_s), "earlier": earlier, "later": later}

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        return self.respond(*self._split(messages), k)


def pairs_of(res: DetectionResult) -> list[tuple[str, str]]:
    return [(c.stale_doc_id, c.current_doc_id) for c in res.conflicts]


def assert_counts_add_up(res: DetectionResult) -> None:
    assert (res.judged + res.parse_failures + res.timeouts + res.errors + res.not_judged) == res.pairs_considered
    assert len(res.log) == res.pairs_considered
    assert res.pairs_considered <= res.candidates
    decisions = [e["decision"] for e in res.log]
    assert decisions.count("conflict") == len(res.conflicts)
    assert decisions.count("parse_failure") == res.parse_failures and decisions.count("timeout") == res.timeouts
    assert decisions.count("error") == res.errors and decisions.count("not_judged") == res.not_judged
    assert sum(d in ("conflict", "yes_below_threshold", "no") for d in decisions) == res.judged


# --------------------------------------------------------------------------------------------
# blocking
# --------------------------------------------------------------------------------------------


def test_blocking_keeps_updates_and_drops_unrelated_pairs():
    pairs = [(p.earlier.doc_id, p.later.doc_id) for p in candidate_pairs(DOCS)]
    assert sorted(pairs) == [("d0", "d3"), ("d2", "d4")]
    by = {(p.earlier.doc_id, p.later.doc_id): p for p in candidate_pairs(DOCS)}
    assert by[("d0", "d3")].entity == "billing-api" and by[("d0", "d3")].attribute == "duration"
    assert by[("d2", "d4")].entity == "auth-svc" and by[("d2", "d4")].attribute == "count"
    assert value_kinds(DOCS[1].text) == frozenset()
    assert value_tokens("timeout 800 ms, team Otter, eu-west-1, v 1.2.3") >= {"800ms", "teamotter", "euwest1", "1.2.3"}


def test_blocking_uses_scope_vocabulary_and_shared_values():
    docs = [
        Doc("a", "# CODEOWNERS\n/services/ledgerd/  @org/team-jackal", 0, "code"),
        Doc("b", "ledgerd moved from team Jackal to team Marlin.", 5, "prose"),
        Doc("c", "Team Otter owns mailerd.", 6, "prose"),
    ]
    keys = subject_keys(docs)
    assert "ledgerd" in keys["b"]  # a plain word in b, keyed because a names it in a path
    pairs = [(p.earlier.doc_id, p.later.doc_id) for p in candidate_pairs(docs)]
    assert ("a", "b") in pairs and ("a", "c") not in pairs  # c shares only the owner kind, no key or value
    first = candidate_pairs(docs)[0]
    assert "teamjackal" in first.shared_values


def test_blocking_all_orders_and_skips_same_position():
    docs = [Doc("x", "one", 2, "chat"), Doc("y", "two", 0, "chat"), Doc("z", "three", 2, "chat")]
    pairs = [(p.earlier.doc_id, p.later.doc_id) for p in candidate_pairs(docs, "all")]
    assert pairs == [("y", "x"), ("y", "z")]  # x and z share position 2: never paired
    with pytest.raises(ValueError, match="unknown blocking"):
        candidate_pairs(docs, "fancy")
    with pytest.raises(ValueError, match="unique"):
        candidate_pairs(docs + [Doc("x", "dup", 3, "chat")])


def test_blocking_order_is_deterministic_under_input_order():
    shuffled = DOCS[:]
    random.Random(3).shuffle(shuffled)
    assert [(p.earlier.doc_id, p.later.doc_id) for p in candidate_pairs(shuffled)] == [
        (p.earlier.doc_id, p.later.doc_id) for p in candidate_pairs(DOCS)
    ]


# --------------------------------------------------------------------------------------------
# judgments with a fake backend
# --------------------------------------------------------------------------------------------


def test_prompt_rendering_and_decoding():
    p = load_prompt("contradiction_pairwise", "v1")
    assert p.placeholders == frozenset({"earlier", "later"})
    llm = FakeLLM()
    det = LLMContradictionDetector(llm, max_doc_chars=12)
    det.detect(DOCS)
    assert len(llm.calls) == 2
    assert all(c["decoding"] == DECODING == Decoding(max_tokens=1, temperature=0.0) for c in llm.calls)
    assert all(c["timeout_s"] is None for c in llm.calls)  # no budget, no per-call timeout
    assert {(c["earlier"], c["later"]) for c in llm.calls} == {
        (DOCS[0].text[:12], DOCS[3].text[:12]),
        (DOCS[2].text[:12], DOCS[4].text[:12]),
    }
    d = det.describe()
    assert d["prompt"] == p.describe() and d["decoding"]["max_tokens"] == 1 and d["threshold"] == 0.8
    assert d["llm"] == "fake" and d["llm_describe"] == {"name": "fake"}


def test_threshold_rule_is_conservative():
    scripted = {
        "The billing-api timeout is 800 ms.": ("yes", [math.log(0.9)]),  # yes, confident -> conflict
        "auth-svc runs with 3 replicas.": ("yes", [math.log(0.7)]),
    }  # yes, not confident -> none
    llm = FakeLLM(lambda e, l, k: scripted[e])
    res = LLMContradictionDetector(llm, threshold=0.8).detect(DOCS)
    assert pairs_of(res) == [("d0", "d3")]
    c = res.conflicts[0]
    assert (c.entity, c.attribute, c.stale_value, c.current_value) == ("billing-api", "duration", "", "")
    log = {(e["stale"], e["current"]): e for e in res.log}
    assert log[("d0", "d3")]["decision"] == "conflict" and math.isclose(log[("d0", "d3")]["p_yes"], 0.9)
    assert log[("d2", "d4")]["decision"] == "yes_below_threshold" and math.isclose(log[("d2", "d4")]["p_yes"], 0.7)
    assert res.judged == 2 and res.parse_failures == res.timeouts == res.errors == res.not_judged == 0
    assert_counts_add_up(res)
    # the same judgments with a lower threshold declare both; p(yes) exactly at the threshold counts
    res2 = LLMContradictionDetector(FakeLLM(lambda e, l, k: scripted[e]), threshold=math.exp(math.log(0.7))).detect(
        DOCS
    )
    assert sorted(pairs_of(res2)) == [("d0", "d3"), ("d2", "d4")]
    # "no" never declares a conflict, however low p(no) is (p_yes = 1 - p(no) may exceed the threshold)
    res3 = LLMContradictionDetector(FakeLLM(lambda e, l, k: ("No.", [math.log(0.1)])), threshold=0.5).detect(DOCS)
    assert res3.conflicts == [] and {e["decision"] for e in res3.log} == {"no"}
    assert all(math.isclose(e["p_yes"], 0.9) for e in res3.log)
    # without logprobs a "yes" is p = 1.0
    res4 = LLMContradictionDetector(FakeLLM(lambda e, l, k: ("Yes", None))).detect(DOCS)
    assert len(res4.conflicts) == 2 and all(e["p_yes"] == 1.0 for e in res4.log)


def test_stale_is_the_lower_position_whatever_the_input_order():
    docs = [
        Doc("late", "Lowered the billing-api timeout to 300 ms.", 9, "prose"),
        Doc("early", "The billing-api timeout is 800 ms.", 1, "prose"),
    ]
    llm = FakeLLM(lambda e, l, k: ("yes", [0.0]))
    res = LLMContradictionDetector(llm).detect(docs)
    assert pairs_of(res) == [("early", "late")]
    assert llm.calls[0]["earlier"] == docs[1].text and llm.calls[0]["later"] == docs[0].text
    # same position: never judged (their order is unknown)
    same = [Doc("p", docs[0].text, 4, "prose"), Doc("q", docs[1].text, 4, "prose")]
    res_same = LLMContradictionDetector(FakeLLM(lambda e, l, k: ("yes", [0.0]))).detect(same)
    assert res_same.pairs_considered == 0 and res_same.conflicts == []


def test_parse_failures_timeouts_and_errors_are_counted_not_guessed():
    script = [("maybe", [math.log(0.99)]), LLMTimeout("slow"), LLMError("boom"), ("yes", [0.0]), ("", None)]
    llm = FakeLLM(lambda e, l, k: script[k])
    docs = [Doc(f"d{i}", f"note {i}", i, "chat") for i in range(4)]  # blocking "all": 6 pairs
    res = LLMContradictionDetector(llm, blocking="all", max_pairs=5).detect(docs)
    assert len(llm.calls) == 5  # no budget: a timeout does not stop the loop
    assert (res.parse_failures, res.timeouts, res.errors, res.judged, res.not_judged) == (2, 1, 1, 1, 0)
    assert len(res.conflicts) == 1 and not res.budget_exhausted
    assert [e["decision"] for e in res.log] == ["parse_failure", "timeout", "error", "conflict", "parse_failure"]
    assert [e["p_yes"] for e in res.log][:3] == [None, None, None]
    assert_counts_add_up(res)


def test_max_pairs_caps_the_calls():
    docs = [Doc(f"d{i}", f"note {i}", i, "chat") for i in range(6)]  # 15 pairs
    llm = FakeLLM()
    res = LLMContradictionDetector(llm, blocking="all", max_pairs=4).detect(docs)
    assert len(llm.calls) == 4 and res.candidates == 15 and res.pairs_considered == 4 and res.judged == 4
    assert [(e["stale"], e["current"]) for e in res.log] == [("d0", "d1"), ("d1", "d2"), ("d2", "d3"), ("d3", "d4")]
    assert_counts_add_up(res)
    llm0 = FakeLLM()
    res0 = LLMContradictionDetector(llm0, blocking="all", max_pairs=0).detect(docs)
    assert llm0.calls == [] and res0.pairs_considered == 0 and res0.llm_ms == 0.0


def test_budget_stops_judging_and_counts_the_rest():
    docs = [Doc(f"d{i}", f"note {i}", i, "chat") for i in range(6)]  # 15 pairs
    llm = FakeLLM(lambda e, l, k: ("yes", [0.0]), delay_s=0.05)
    t0 = time.perf_counter()
    res = LLMContradictionDetector(llm, blocking="all", max_pairs=15, budget_ms=180).detect(docs)
    wall = time.perf_counter() - t0
    assert res.budget_exhausted and res.not_judged > 0 and 1 <= res.judged <= 4
    assert res.timeouts <= 1 and res.judged + res.timeouts + res.not_judged == 15
    assert wall < 0.18 + 0.3 and res.llm_ms <= 180 + 150  # slack for a loaded machine
    timeouts = [c["timeout_s"] for c in llm.calls]
    assert all(t is not None and 0 < t <= 0.18 for t in timeouts)
    assert all(a > b for a, b in pairwise(timeouts))  # each call gets the remaining budget
    assert {e["decision"] for e in res.log[len(llm.calls) :]} == {"not_judged"}
    assert_counts_add_up(res)
    # a generous budget judges everything
    res_all = LLMContradictionDetector(
        FakeLLM(lambda e, l, k: ("no", [0.0])), blocking="all", max_pairs=15, budget_ms=60_000
    ).detect(docs)
    assert res_all.judged == 15 and not res_all.budget_exhausted and res_all.not_judged == 0


def test_call_timeout_with_budget_ends_the_loop():
    docs = [Doc(f"d{i}", f"note {i}", i, "chat") for i in range(4)]
    llm = FakeLLM(lambda e, l, k: ("no", [0.0]), delay_s=0.2)
    res = LLMContradictionDetector(llm, blocking="all", budget_ms=5_000, call_timeout_s=0.05).detect(docs)
    assert len(llm.calls) == 1 and res.timeouts == 1 and res.budget_exhausted and res.not_judged == 5
    assert llm.calls[0]["timeout_s"] == 0.05
    assert_counts_add_up(res)


# --------------------------------------------------------------------------------------------
# rules behind the interface, make_detector
# --------------------------------------------------------------------------------------------


def test_rules_detector_wraps_detect():
    docs = [
        Doc("a", "The timeout for billing-api is 800 ms.", 0, "prose"),
        Doc("b", "New timeout for billing-api: 300 ms", 3, "prose"),
    ]
    res = RulesDetector().detect(docs)
    assert res.conflicts == detect(docs) and pairs_of(res) == [("a", "b")]
    assert (res.backend, res.pairs_considered, res.judged, res.llm_ms, res.log) == ("rules", 0, 0, 0.0, [])
    assert RulesDetector().describe()["backend"] == "rules"


def test_make_detector_builds_and_refuses():
    assert isinstance(make_detector("rules"), RulesDetector)
    det = make_detector("llm", FakeLLM(), threshold=0.9, max_pairs=7, blocking="all")
    assert isinstance(det, LLMContradictionDetector) and (det.threshold, det.max_pairs, det.blocking) == (0.9, 7, "all")
    with pytest.raises(ValueError, match="unknown contradiction backend 'nli'"):
        make_detector("nli")
    with pytest.raises(ValueError, match="needs a model"):
        make_detector("llm")
    with pytest.raises(ValueError, match="takes no llm"):
        make_detector("rules", llm=FakeLLM())
    with pytest.raises(ValueError, match="takes no options"):
        make_detector("rules", threshold=0.5)
    for bad in (
        {"threshold": 1.5},
        {"max_pairs": -1},
        {"max_doc_chars": 0},
        {"budget_ms": 0},
        {"blocking": "fancy"},
        {"max_df_share": 0.0},
    ):
        with pytest.raises(ValueError):
            make_detector("llm", FakeLLM(), **bad)
    with pytest.raises(TypeError):
        make_detector("llm", FakeLLM(), penalty=0.5)
    with pytest.raises(FileNotFoundError):
        make_detector("llm", FakeLLM(), prompt_version="v99")


# --------------------------------------------------------------------------------------------
# real model end to end (structure, not quality)
# --------------------------------------------------------------------------------------------


def test_smollm2_end_to_end(tmp_path):
    from omegaconf import OmegaConf

    from lethe.llm.backends import make_llm

    cfg = OmegaConf.load(ROOT / "conf" / "llm" / "smollm2.yaml")
    cfg.n_threads = 1
    llm = make_llm(cfg, cache_dir=tmp_path)
    try:
        assert isinstance(llm, LLMBackend)
        docs = DOCS[:1] + DOCS[2:]  # 4 docs, blocking "all": 6 pairs
        det = make_detector("llm", llm, blocking="all", budget_ms=None)
        res = det.detect(docs)
        assert res.candidates == res.pairs_considered == 6 and res.timeouts == res.errors == res.not_judged == 0
        assert_counts_add_up(res)
        assert {(e["stale"], e["current"]) for e in res.log} == {
            (a.doc_id, b.doc_id) for i, a in enumerate(docs) for b in docs[i + 1 :]
        }
        assert all(
            0.0 <= e["p_yes"] <= 1.0 for e in res.log if e["decision"] in ("conflict", "no", "yes_below_threshold")
        )
        assert all(c.stale_doc_id < c.current_doc_id for c in res.conflicts)  # ids sort like positions here
        assert res.llm_ms > 0 and det.describe()["llm_describe"]["model_sha256"].startswith("b179c9523d0e6a0f")
        print(
            f"\nSmolLM2 contradiction: {res.llm_ms / 6:.0f} ms per pair, decisions "
            f"{[e['decision'] for e in res.log]}, p_yes {[e['p_yes'] and round(e['p_yes'], 3) for e in res.log]}"
        )
    finally:
        llm.close()
