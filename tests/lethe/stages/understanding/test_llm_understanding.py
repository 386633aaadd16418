"""LLM prompts, strict parsers, LLM query understanding with fallbacks, and the expansion methods.

The LLM is a scripted fake (``FakeLLM``): it recognises the prompt by its system message and
answers with the text given for that prompt name (or raises). The expansion methods run on a tiny
doc set with the project's real embedder.
"""

from __future__ import annotations

import hashlib
import json
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from baselines.vector import VectorSearch
from experiments.config import load_config, to_dict
from experiments.run_identity import method_params
from lethe.core.protocol import Doc, Query
from lethe.llm.base import Decoding, LLMError, LLMResponse, LLMTimeout, Message
from lethe.llm.parsing import (
    ExactTerms,
    Keywords,
    ParseError,
    extract_json,
    keywords_schema,
    parse_exact_terms,
    parse_keywords,
    parse_passage,
    parse_rewrite,
    parse_subqueries,
)
from lethe.llm.prompts import PROMPT_DIR, _split, available_prompts, load_prompt
from lethe.methods.expansion import HyDESearch, KeywordBoostSearch, KeywordSearch
from lethe.retrieval.fusion import rrf
from lethe.retrieval.ranking import top_k
from lethe.stages.understanding.base import QueryUnderstandingBackend, understand
from lethe.stages.understanding.llm import LLMQueryUnderstanding
from lethe.stages.understanding.rules import RuleBasedBackend
from lethe.stages.understanding.stage import BACKENDS

PROMPTS = [
    "answer",
    "contradiction_pairwise",
    "decompose",
    "exact_terms",
    "hyde",
    "judge_pairwise",
    "judge_support",
    "keywords",
    "rerank_pointwise",
    "rewrite",
    "synthetic_query",
]
# Shipped prompt files are immutable once used: a change is a new version file, not an edit.
PINNED_SHA256 = {
    "contradiction_pairwise": "86ffc3d0d30e",
    "decompose": "2eb60e5120f1",
    "exact_terms": "559b73a692cd",
    "hyde": "0990c6552911",
    "keywords": "7ba8db3732ad",
    "rerank_pointwise": "840f847fd5da",
    "rewrite": "be6e0d12160f",
    "answer": "a7db297e6400",
    "judge_support": "c10f2a55a601",
    "judge_pairwise": "c39c011282ab",
    "synthetic_query": "192b697a08f2",
}
PINNED_V2 = {
    "answer": "28257552b060",
    "exact_terms": "76e4378880dc",
    "judge_pairwise": "084c8c4dffb8",
    "keywords": "a2deec2d3047",
}
SYSTEMS = {load_prompt(n, v).system: n for n in PROMPTS for v in ("v1", "v2") if (n, v) in available_prompts()}
OWNER = ["Who owns catalogd?", "catalogd: Pika."]


class FakeLLM:
    """Scripted ``LLMBackend``: ``responses`` maps a prompt name to a text, a callable(messages) -> text,
    or an exception (class or instance) to raise; every call is recorded in ``calls``."""

    name = "fake"

    def __init__(self, responses: Mapping[str, Any] | None = None, cached: bool = False):
        self.responses = dict(responses or {})
        self.cached = cached
        self.calls: list[tuple[str, list[Message], Decoding, float | None]] = []
        self.closed = False

    def chat(
        self, messages: Sequence[Message], decoding: Decoding = Decoding(), timeout_s: float | None = None
    ) -> LLMResponse:
        name = SYSTEMS[messages[0].content]
        self.calls.append((name, list(messages), decoding, timeout_s))
        r = self.responses[name]
        if isinstance(r, BaseException) or (isinstance(r, type) and issubclass(r, BaseException)):
            raise r
        text = r(messages) if callable(r) else r
        return LLMResponse(text=text, timings_ms={"total": 1.0}, cached=self.cached)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def describe(self) -> dict[str, Any]:
        return {"name": "fake", "model": "scripted"}

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_backends(monkeypatch):
    """Stands in for ``lethe.llm.backends``: ``make_llm(cfg, cache_dir)`` returns a FakeLLM from
    ``cfg["responses"]`` and records its arguments (``built``)."""
    built: list[tuple[dict, Any, FakeLLM]] = []

    def make_llm(cfg: Mapping[str, Any], cache_dir: Any = None) -> FakeLLM:
        llm = FakeLLM(cfg.get("responses", {}))
        built.append((dict(cfg), cache_dir, llm))
        return llm

    mod = types.ModuleType("lethe.llm.backends")
    mod.make_llm = make_llm  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lethe.llm.backends", mod)
    return built


# --------------------------------------------------------------------------------------------
# prompts
# --------------------------------------------------------------------------------------------


def test_every_prompt_loads_with_a_stable_pinned_sha256():
    assert sorted(n for n, v in available_prompts() if v == "v1") == PROMPTS
    for name in PROMPTS:
        p = load_prompt(name, "v1")
        raw = (PROMPT_DIR / f"{name}.v1.txt").read_bytes()
        assert p.sha256 == hashlib.sha256(raw).hexdigest()
        assert p.sha256.startswith(PINNED_SHA256[name]), f"{name}.v1.txt changed: add {name}.v2.txt instead"
        assert load_prompt(name) == p and p.describe() == {"name": name, "version": "v1", "sha256": p.sha256}
        assert p.text == raw.decode() and not p.system.startswith("#") and "<<<" not in p.system + p.user


def test_second_versions_are_pinned_and_keep_their_first_versions_contract():
    assert sorted(n for n, v in available_prompts() if v == "v2") == sorted(PINNED_V2)
    for name, pin in PINNED_V2.items():
        v1, v2 = load_prompt(name, "v1"), load_prompt(name, "v2")
        assert v2.sha256.startswith(pin), f"{name}.v2.txt changed: add {name}.v3.txt instead"
        assert v2.placeholders == v1.placeholders and v2.system != v1.system


def test_prompt_placeholders():
    got = {n: sorted(load_prompt(n).placeholders) for n in PROMPTS}
    assert got == {
        "answer": ["context", "query"],
        "contradiction_pairwise": ["earlier", "later"],
        "decompose": ["max_subqueries", "query"],
        "exact_terms": ["query"],
        "hyde": ["query"],
        "judge_pairwise": ["answer1", "answer2", "query"],
        "judge_support": ["answer", "context", "query"],
        "keywords": ["query"],
        "rerank_pointwise": ["passage", "query"],
        "rewrite": ["history", "query"],
        "synthetic_query": ["document"],
    }


def test_render_fills_placeholders_once_and_keeps_json_examples():
    p = load_prompt("rewrite")
    msgs = p.render(history="[1] Who owns {query}?", query="What about authd?")
    assert [m.role for m in msgs] == ["system", "user"]
    assert msgs[0].content == p.system and '{"query": "<standalone query>"}' in msgs[0].content
    assert msgs[1].content == "Conversation:\n[1] Who owns {query}?\nQuestion: What about authd?\nOutput:"
    d = load_prompt("decompose").render(query="Q?", max_subqueries=3)
    assert d[1].content.startswith("Question (3 sub-queries at most): Q?")


def test_render_rejects_missing_and_unknown_values():
    with pytest.raises(KeyError, match="missing values \\['history'\\]"):
        load_prompt("rewrite").render(query="x")
    with pytest.raises(KeyError, match="unknown values \\['extra'\\]"):
        load_prompt("hyde").render(query="x", extra=1)


def test_unknown_or_malformed_prompts_are_refused():
    with pytest.raises(FileNotFoundError, match="known: .*decompose.v1"):
        load_prompt("rewrite", "v99")
    with pytest.raises(ValueError):
        load_prompt("../etc/passwd")
    with pytest.raises(ValueError, match="exactly one"):
        _split("# c\n<<<user>>>\nu\n<<<system>>>\ns\n", "t")
    with pytest.raises(ValueError, match="comment"):
        _split("text\n<<<system>>>\ns\n<<<user>>>\nu\n", "t")
    assert _split("# c\n\n<<<system>>>\n\nsys\n<<<user>>>\nuser {q}\n", "t") == ("sys", "user {q}")


# --------------------------------------------------------------------------------------------
# parsers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"query": "a"}', {"query": "a"}),
        ('```json\n{"query": "a"}\n```', {"query": "a"}),
        ('Sure! Here it is: {"query": "a {b}"} Hope this helps.', {"query": "a {b}"}),
        ('[note] then {"query": "a"}', {"query": "a"}),
        ('["x", "y"]', ["x", "y"]),
    ],
)
def test_extract_json_tolerates_prose_and_fences(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("no json here", "no_json"),
        ('{"query": "a",}', "malformed_json"),  # trailing comma: not repaired
        ("{'query': 'a'}", "malformed_json"),  # single quotes: not repaired
        ('{"query": "a"', "malformed_json"),  # truncated
        ('["a", "b"}', "malformed_json"),  # mismatched brackets
    ],
)
def test_extract_json_rejects_malformed(text, reason):
    with pytest.raises(ParseError) as e:
        extract_json(text)
    assert e.value.reason == reason


def test_extract_json_wrong_type_is_not_searched_further():
    with pytest.raises(ParseError) as e:
        extract_json('{"parts": ["a", "b"]}', list)
    assert e.value.reason == "wrong_type"


HIST = ["Who owns catalogd?", "catalogd: Pika."]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"query": "Who owns auth-core?"}', "Who owns auth-core?"),
        ('```json\n{"query": "Who owns\\n auth-core?"}\n```', "Who owns auth-core?"),
        ('The standalone query is {"query": "Who owns auth-core?"}.', "Who owns auth-core?"),
        ('{"query": "What about auth-core?"}', "What about auth-core?"),  # unchanged is allowed
    ],
)
def test_parse_rewrite_valid(text, expected):
    assert parse_rewrite(text, "What about auth-core?", HIST) == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"query": "   "}', "empty"),
        ('{"rewrite": "x"}', "missing_key"),
        ('{"query": 3}', "wrong_type"),
        ('{"query": "' + "x" * 400 + '"}', "too_long"),
        ('{"query": "who owns  catalogd"}', "copies_history"),
        ("Who owns auth-core?", "no_json"),
        ("", "empty"),
    ],
)
def test_parse_rewrite_rejects(text, reason):
    with pytest.raises(ParseError) as e:
        parse_rewrite(text, "What about auth-core?", HIST)
    assert e.value.reason == reason


def test_parse_rewrite_allows_a_query_that_repeats_its_own_history():
    assert parse_rewrite('{"query": "Who owns catalogd?"}', "Who owns catalogd?", HIST) == "Who owns catalogd?"


def test_parse_subqueries():
    assert parse_subqueries('["A?", "B?", "a? "]', 4) == ["A?", "B?"]
    assert parse_subqueries('Output:\n```\n["Only one?"]\n```', 4) == ["Only one?"]
    for text, reason in [
        ('["a", "b", "c"]', "too_many"),
        ("[]", "empty"),
        ('["a", 1]', "wrong_type"),
        ('[" ", ""]', "empty"),
        ('{"subqueries": ["a"]}', "wrong_type"),
        ('["a",', "malformed_json"),
        ('["' + "x" * 600 + '"]', "too_long"),
    ]:
        with pytest.raises(ParseError) as e:
            parse_subqueries(text, 2)
        assert e.value.reason == reason, text


def test_parse_keywords():
    kw = parse_keywords(
        'Keywords: {"high_level_keywords": ["Crash", "crash "], "low_level_keywords": ["ECONNREFUSED", ""]}'
    )
    assert kw == Keywords(("Crash",), ("ECONNREFUSED",))
    assert kw.as_record() == {"high": ["Crash"], "low": ["ECONNREFUSED"]}
    for text, reason in [
        ('{"high_level_keywords": ["a"]}', "missing_key"),
        ('{"high_level_keywords": [], "low_level_keywords": []}', "empty"),
        ('{"high_level_keywords": "a", "low_level_keywords": []}', "wrong_type"),
        ('{"high_level_keywords": ["a","b","c"], "low_level_keywords": []}', "too_many"),
        ("high: a, low: b", "no_json"),
    ]:
        with pytest.raises(ParseError) as e:
            parse_keywords(text, max_per_list=2)
        assert e.value.reason == reason, text


def test_parse_exact_terms_drops_hallucinated_terms():
    q = "Why does parseJWT throw econnrefused on WPS 6.1.0.6?"
    got = parse_exact_terms(
        '```json\n{"exact_match_terms": ["parseJWT", "ECONNREFUSED", "OAuth2", "wps 6.1.0.6"],'
        ' "use_keyword_boost": true}\n```',
        q,
    )
    assert got == ExactTerms(("parseJWT", "ECONNREFUSED", "wps 6.1.0.6"), ("OAuth2",), True, True)
    only_fake = parse_exact_terms('{"exact_match_terms": ["OAuth2"], "use_keyword_boost": true}', q)
    assert only_fake == ExactTerms((), ("OAuth2",), True, False)
    no_flag = parse_exact_terms('{"exact_match_terms": ["parseJWT"], "use_keyword_boost": false}', q)
    assert no_flag.terms == ("parseJWT",) and not no_flag.use_boost
    for text, reason in [
        ('{"exact_match_terms": []}', "missing_key"),
        ('{"exact_match_terms": [], "use_keyword_boost": "yes"}', "wrong_type"),
        ('{"exact_match_terms": "parseJWT", "use_keyword_boost": true}', "wrong_type"),
        ("parseJWT", "no_json"),
    ]:
        with pytest.raises(ParseError) as e:
            parse_exact_terms(text, q)
        assert e.value.reason == reason, text


def test_parse_passage():
    assert parse_passage("  The worker\n fails.  ") == "The worker fails."
    assert parse_passage("```\nThe worker fails.\n```") == "The worker fails."
    assert parse_passage("x" * 50, max_chars=10) == "x" * 10
    assert parse_passage("[1] is a citation, not JSON") == "[1] is a citation, not JSON"
    for text, reason in [
        ("", "empty"),
        ("  \n ", "empty"),
        ("```\n```", "empty"),
        ('{"answer": "x"}', "json_not_text"),
    ]:
        with pytest.raises(ParseError) as e:
            parse_passage(text)
        assert e.value.reason == reason, text


# --------------------------------------------------------------------------------------------
# LLM query understanding
# --------------------------------------------------------------------------------------------


def qu(responses: Mapping[str, Any], **kw: Any) -> tuple[LLMQueryUnderstanding, FakeLLM]:
    llm = FakeLLM(responses)
    return LLMQueryUnderstanding(llm, timeout_s=5.0, **kw), llm


def test_llm_backend_implements_the_protocol():
    b, _ = qu({})
    assert isinstance(b, QueryUnderstandingBackend) and b.name == "llm" and b.max_subqueries == 4


def test_llm_rewrite_success():
    b, llm = qu({"rewrite": '{"query": "Who owns auth-core?"}'})
    assert b.rewrite("What about auth-core?", ["", *OWNER]) == ("Who owns auth-core?", ("llm:rewrite",))
    ((name, msgs, decoding, timeout),) = llm.calls
    assert name == "rewrite" and timeout == 5.0 and decoding == Decoding()
    assert msgs[1].content == (
        "Conversation:\n[1] Who owns catalogd?\n[2] catalogd: Pika.\nQuestion: What about auth-core?\nOutput:"
    )
    c = b.describe()["counters"]["rewrite"]
    assert (c["calls"], c["fallbacks"], c["timeouts"], c["parse_failures"], len(c["latency_ms"])) == (1, 0, 0, 0, 1)


def test_llm_rewrite_shows_only_recent_turns_cut_to_length():
    b, llm = qu({"rewrite": '{"query": "q"}'}, max_history_turns=2, max_turn_chars=8)
    b.rewrite("q", ["first turn", "second   turn here", "third"])
    assert "Conversation:\n[1] second …\n[2] third\n" in llm.calls[0][1][1].content


def test_no_history_means_no_llm_call():
    b, llm = qu({"rewrite": LLMTimeout("must not be called")})
    assert b.rewrite("What about auth-core?", []) == ("What about auth-core?", ())
    assert b.rewrite("What about auth-core?", ["  ", ""]) == ("What about auth-core?", ())
    assert llm.calls == [] and b.describe()["skipped_no_history"] == 2


@pytest.mark.parametrize(
    "response, cause, counter",
    [
        (LLMTimeout("30 s"), "timeout", "timeouts"),
        (LLMError("server said 500"), "error", "errors"),
        ("I cannot help with that.", "parse", "parse_failures"),
        ('{"query": "Who owns catalogd?"}', "parse", "parse_failures"),  # echoes a history turn
    ],
)
def test_llm_rewrite_falls_back_to_rules(response, cause, counter):
    b, llm = qu({"rewrite": response})
    got = b.rewrite("What about auth-core?", OWNER)
    assert got == ("Who owns auth-core?", (f"llm_fallback:rewrite:{cause}", "ellipsis:what_about"))
    assert RuleBasedBackend().rewrite("What about auth-core?", OWNER)[0] == got[0]
    c = b.describe()["counters"]["rewrite"]
    assert c[counter] == 1 and c["fallbacks"] == 1 and c["calls"] == 1 and len(c["latency_ms"]) == 1


def test_parse_failure_reasons_are_counted():
    b, _ = qu({"rewrite": "no json", "decompose": '["a", "b", "c", "d", "e"]'})
    b.rewrite("And authd?", OWNER)
    b.rewrite("And authd?", OWNER)
    assert b.decompose("Who owns authd and what is its memory limit?")[1][0] == "llm_fallback:decompose:parse"
    c = b.describe()["counters"]
    assert c["rewrite"]["parse_reasons"] == {"no_json": 2} and c["decompose"]["parse_reasons"] == {"too_many": 1}


def test_fallback_without_a_matching_rule_keeps_the_query():
    b, _ = qu({"rewrite": LLMTimeout()})
    assert b.rewrite("Tell me more about the weather", OWNER) == (
        "Tell me more about the weather",
        ("llm_fallback:rewrite:timeout",),
    )


def test_llm_decompose_success_and_fallbacks():
    q = "Who owns authd and what is its memory limit?"
    b, llm = qu({"decompose": '["Who owns authd?", "What is the memory limit of authd?"]'})
    assert b.decompose(q) == (["Who owns authd?", "What is the memory limit of authd?"], ("llm:decompose",))
    assert "(4 sub-queries at most)" in llm.calls[0][1][1].content
    rule_parts, rule_rules = RuleBasedBackend().decompose(q)
    for response, cause in [(LLMTimeout(), "timeout"), (LLMError("boom"), "error"), ("[]", "parse")]:
        b, _ = qu({"decompose": response})
        assert b.decompose(q) == (rule_parts, (f"llm_fallback:decompose:{cause}", *rule_rules))
    b, _ = qu({"decompose": LLMTimeout()})
    assert b.decompose("Where is the cafe?") == (["Where is the cafe?"], ("llm_fallback:decompose:timeout",))


def test_understand_with_the_llm_backend():
    b, llm = qu(
        {
            "rewrite": '{"query": "Who owns auth-core and what is its memory limit?"}',
            "decompose": '["Who owns auth-core?", "What is the memory limit of auth-core?"]',
        }
    )
    u = understand("And its memory limit?", OWNER, b)
    assert u.backend == "llm" and u.rules == ("llm:rewrite", "llm:decompose")
    assert u.subqueries == (
        "Who owns auth-core and what is its memory limit?",
        "Who owns auth-core?",
        "What is the memory limit of auth-core?",
    )
    assert llm.names() == ["rewrite", "decompose"]
    lat = b.describe()["counters"]
    assert b.take_llm_ms() == pytest.approx(
        lat["rewrite"]["latency_ms"][0] + lat["decompose"]["latency_ms"][0], abs=0.01
    )
    assert b.take_llm_ms() == 0.0


@pytest.mark.parametrize(
    "components, calls",
    [
        ({"rewrite": "rule", "decompose": "llm"}, ["decompose"]),
        ({"rewrite": "llm", "decompose": "rule"}, ["rewrite"]),
        ({"rewrite": "rule", "decompose": "rule"}, []),
    ],
)
def test_component_switch(components, calls):
    q, hist = "What about auth-core?", OWNER
    b, llm = qu(
        {"rewrite": '{"query": "LLM rewrite of auth-core"}', "decompose": '["LLM part one", "LLM part two"]'},
        components=components,
    )
    rule = RuleBasedBackend()
    rw = b.rewrite(q, hist)
    dc = b.decompose("Who owns authd and what is its memory limit?")
    assert (rw == rule.rewrite(q, hist)) == (components["rewrite"] == "rule")
    assert (dc == rule.decompose("Who owns authd and what is its memory limit?")) == (components["decompose"] == "rule")
    assert llm.names() == calls
    assert sorted(b.describe()["prompts"]) == sorted(c for c, v in components.items() if v == "llm")


def test_all_rule_components_need_no_llm():
    b = LLMQueryUnderstanding(None, components={"rewrite": "rule", "decompose": "rule"})  # type: ignore[arg-type]
    assert b.llm is None and b.rewrite("And authd?", OWNER) == ("Who owns authd?", ("ellipsis:and",))
    with pytest.raises(ValueError):
        LLMQueryUnderstanding(FakeLLM(), components={"rewrite": "gpt"})
    with pytest.raises(TypeError):
        LLMQueryUnderstanding(None)  # type: ignore[arg-type]


def test_describe_reports_prompts_llm_counters_and_options():
    b, _ = qu({"rewrite": LLMTimeout(), "decompose": '["x"]'}, decoding={"max_tokens": 64, "stop": ["\n\n"]})
    b.rewrite("And authd?", OWNER)
    b.decompose("x")
    d = b.describe()
    assert d["prompts"]["rewrite"] == load_prompt("rewrite").describe()
    assert d["llm"] == {"name": "fake", "model": "scripted"} and d["fallback"]["name"] == "rule"
    assert d["decoding"]["max_tokens"] == 64 and d["decoding"]["stop"] == ["\n\n"] and d["timeout_s"] == 5.0
    assert d["counters"]["rewrite"]["timeouts"] == 1 and d["counters"]["decompose"]["calls"] == 1
    assert d["counters"]["decompose"]["latency_ms_summary"]["n"] == 1


def test_llm_config_is_built_with_make_llm_and_closed(fake_backends):
    b = LLMQueryUnderstanding(
        {"backend": "fake", "responses": {"decompose": '["a?"]'}},
        cache_dir="/tmp/c",
        fallback={"name": "rule", "min_part_terms": 3},
    )
    ((cfg, cache_dir, llm),) = fake_backends
    assert cfg["backend"] == "fake" and cache_dir == "/tmp/c" and b.llm is llm
    assert b.fallback.describe()["min_part_terms"] == 3 and b.fallback.describe()["max_subqueries"] == 4
    assert b.decompose("a?") == (["a?"], ("llm:decompose",))
    b.close()
    assert llm.closed
    passed = FakeLLM()
    LLMQueryUnderstanding(passed).close()
    assert not passed.closed  # a backend passed in belongs to the caller


def test_pipeline_uses_the_llm_backend(monkeypatch, embedder):
    from tests.support.method_yaml import build_pipeline

    monkeypatch.setitem(BACKENDS, "llm", LLMQueryUnderstanding)
    llm = FakeLLM({"rewrite": LLMTimeout(), "decompose": '["Who owns auth-core?"]'})
    p = build_pipeline(
        embedder,
        query_understanding={
            "rewrite": True,
            "decompose": True,
            "backend": "llm",
            "options": {"llm": llm, "timeout_s": 1.0},
        },
    )
    p.index([Doc("a", "auth-core is owned by Pika.", 0), Doc("b", "The weather was sunny.", 1)])
    res = p.search(Query("What about auth-core?", tuple(OWNER)), 2)
    assert res.flags["qu_rules"] == ["llm_fallback:rewrite:timeout", "ellipsis:what_about", "llm:decompose"]
    assert res.flags["rewritten"] == "Who owns auth-core?" and res.ranking[0][0] == "a"
    assert p.describe()["stages"]["query_understanding"]["built"]["counters"]["rewrite"]["timeouts"] == 1


# --------------------------------------------------------------------------------------------
# expansion methods (real embedder)
# --------------------------------------------------------------------------------------------

DOCS = [
    Doc("billing", "The billing-api service is deployed every Tuesday by the payments team.", 0),
    Doc("tart", "Marco baked a lemon tart for the picnic in May.", 1),
    Doc("pool", "Set MAX_CONN_POOL in config.yaml to raise the database connection limit.", 2),
    Doc("broker", "The worker fails with ECONNREFUSED when the message broker on port 5672 is down.", 3),
    Doc("alps", "Priya went hiking in the Alps with her sister last summer.", 4),
    Doc("jwt", "Call parseJWT to validate the token before the user endpoint is reached.", 5),
    Doc("jwt_prose", "Token validation: the helper checks signatures and expiry of web tokens.", 6),
]
STAGES = {"llm", "encode_query", "retrieval", "fusion"}


@pytest.fixture(scope="module")
def vector(embedder) -> VectorSearch:
    v = VectorSearch(embedder)
    v.index(DOCS)
    return v


def make(cls: Callable[..., Any], embedder: Any, responses: Mapping[str, Any] | None = None, **kw: Any):
    llm = FakeLLM(responses)
    m = cls(embedder, llm=llm, **kw)
    m.index(DOCS)
    return m, llm


def test_hyde_average_uses_the_normalized_mean_vector(embedder):
    answer = "Marco baked a lemon tart for the picnic."
    m, llm = make(HyDESearch, embedder, {"hyde": f"```\n{answer}\n```"})
    res = m.search(Query("What dessert did he bring to the outdoor lunch?"), 3)
    q = embedder.encode(["What dessert did he bring to the outdoor lunch?"], role="query")[0]
    a = embedder.encode([answer], role="doc")[0]
    v = (q + a) / np.linalg.norm(q + a)
    expect = sorted(((d.doc_id, float(s)) for d, s in zip(DOCS, m.dense.vecs @ v, strict=True)), key=lambda x: -x[1])[
        :3
    ]
    assert res.ranking[0][0] == "tart"
    assert [d for d, _ in res.ranking] == [d for d, _ in expect]
    assert [s for _, s in res.ranking] == pytest.approx([s for _, s in expect], abs=1e-5)
    assert set(res.timings_ms) == STAGES and res.timings_ms["llm"] > 0
    assert res.flags["hyde_used"] and res.flags["hyde_answer"] == answer and res.flags["llm_fallback"] == []
    assert res.flags["llm_calls"] == 1 and llm.calls[0][2] == Decoding(max_tokens=160) and llm.calls[0][3] == 30.0


def test_hyde_answer_only_ranks_by_the_answer(embedder):
    m, _ = make(HyDESearch, embedder, {"hyde": DOCS[4].text}, mode="answer_only")
    res = m.search(Query("What happened?"), 2)
    assert res.ranking[0][0] == "alps" and res.ranking[0][1] == pytest.approx(1.0, abs=1e-5)
    assert "query_embedding_cached" not in res.flags  # the query is not embedded at all


@pytest.mark.parametrize("mode", ["average", "answer_only"])
@pytest.mark.parametrize(
    "response, cause, detail",
    [
        (LLMTimeout("t"), "timeout", "t"),
        (LLMError("x"), "error", "LLMError: x"),
        ("  ", "parse", "empty"),
        ('{"answer": "json"}', "parse", "json_not_text"),
    ],
)
def test_hyde_failure_falls_back_to_the_plain_query(embedder, vector, mode, response, cause, detail):
    m, _ = make(HyDESearch, embedder, {"hyde": response}, mode=mode)
    q = Query("Who went hiking in the mountains?")
    res = m.search(q, 5)
    assert res.ranking == vector.search(q, 5).ranking
    assert res.flags["llm_fallback"] == [f"hyde:{cause}"] and res.flags["llm_failure_detail"] == {"hyde": detail}
    assert not res.flags["hyde_used"] and res.flags["hyde_answer"] is None
    assert m.describe()["counters"]["hyde"]["fallbacks"] == 1


KW = (
    '{"high_level_keywords": ["Service outage"], "low_level_keywords": ["ECONNREFUSED", "message broker", "port 5672"]}'
)


def test_keyword_search_fuses_query_and_keywords_by_rrf(embedder, vector):
    m, llm = make(KeywordSearch, embedder, {"keywords": KW}, depth=5)
    q = Query("Why does the worker crash at startup?")
    res = m.search(q, 5)
    kw_text = "ECONNREFUSED, message broker, port 5672, Service outage"
    ids = [d.doc_id for d in DOCS]
    kv = embedder.encode([kw_text], role="query")[0]
    kw_list = [ids[i] for i in np.argsort(-(m.dense.vecs @ kv), kind="stable")[:5]]
    expect = top_k(rrf([[d for d, _ in vector.search(q, 5).ranking], kw_list], 60), 5)
    assert res.ranking[0][0] == "broker" and [d for d, _ in res.ranking] == [d for d, _ in expect]
    assert res.flags["fused_lists"] == ["query", "keywords"] and res.flags["llm_fallback"] == []
    assert res.flags["keywords"] == {"high": ["Service outage"], "low": ["ECONNREFUSED", "message broker", "port 5672"]}
    assert set(res.timings_ms) == STAGES and llm.names() == ["keywords"]
    assert m.keyword_text(Keywords(("a", "B"), ("b", "c"))) == "b, c, a"


def test_keyword_search_with_answer_and_partial_failure(embedder):
    m, llm = make(KeywordSearch, embedder, {"keywords": KW, "hyde": DOCS[3].text}, with_answer=True)
    res = m.search(Query("Why does the worker crash at startup?"), 3)
    assert res.flags["fused_lists"] == ["query", "keywords", "answer"] and llm.names() == ["keywords", "hyde"]
    assert res.ranking[0][0] == "broker" and res.flags["llm_calls"] == 2
    m, _ = make(
        KeywordSearch,
        embedder,
        {"keywords": '{"high_level_keywords": []}', "hyde": DOCS[3].text},
        with_answer=True,
        fusion="mean",
    )
    res = m.search(Query("Why does the worker crash at startup?"), 3)
    assert res.flags["fused_lists"] == ["query", "answer"] and res.flags["llm_fallback"] == ["keywords:parse"]
    assert res.flags["llm_failure_detail"] == {"keywords": "missing_key"} and res.ranking[0][0] == "broker"


def test_keyword_search_decodes_only_the_keywords_under_their_schema(embedder):
    m, llm = make(KeywordSearch, embedder, {"keywords": KW, "hyde": DOCS[3].text}, with_answer=True, max_keywords=4)
    m.search(Query("Why does the worker crash at startup?"), 3)
    (_, _, kw_dec, _), (_, _, hyde_dec, _) = llm.calls
    assert kw_dec == Decoding(max_tokens=160, json_schema=keywords_schema(4)) and hyde_dec == Decoding(max_tokens=160)
    assert json.loads(kw_dec.json_schema)["properties"]["low_level_keywords"]["maxItems"] == 4
    assert m.describe()["keyword_decoding"]["json_schema"] == keywords_schema(4)
    free, llm = make(KeywordSearch, embedder, {"keywords": KW}, constrained=False)
    free.search(Query("Why does the worker crash at startup?"), 3)
    assert llm.calls[0][2] == Decoding(max_tokens=160) and "json_schema" not in free.describe()["keyword_decoding"]


def test_keyword_search_total_failure_is_vector_search(embedder, vector):
    m, _ = make(KeywordSearch, embedder, {"keywords": LLMTimeout(), "hyde": LLMError("down")}, with_answer=True)
    q = Query("Who baked something?")
    res = m.search(q, 4)
    assert res.ranking == vector.search(q, 4).ranking
    assert res.flags["llm_fallback"] == ["keywords:timeout", "hyde:error"] and res.flags["fused_lists"] == ["query"]
    d = m.describe()
    assert d["counters"]["keywords"]["timeouts"] == 1 and d["counters"]["hyde"]["errors"] == 1
    assert set(d["prompts"]) == {"keywords", "hyde"}


def test_keyword_boost_heuristic_without_terms_is_vector_search_and_never_calls_an_llm(embedder, vector, fake_backends):
    m = KeywordBoostSearch(embedder, llm={"backend": "fake", "responses": {}})
    m.index(DOCS)
    q = Query("Where did Priya go with her sister?")
    res = m.search(q, 7)
    assert fake_backends == [] and m.llm is None  # the heuristic detector never builds an LLM
    assert res.ranking == vector.search(q, 7).ranking  # same ids and scores
    assert res.flags["keyword_boost"] is False and res.flags["exact_terms"] == []
    assert "llm" not in res.timings_ms and {"detect", "encode_query", "retrieval", "bm25", "fusion"} == set(
        res.timings_ms
    )
    assert res.timings_ms["bm25"] == 0.0 and "prompts" not in m.describe()


def test_keyword_boost_heuristic_boosts_exact_matches(embedder, vector):
    m = KeywordBoostSearch(embedder)
    m.index(DOCS)
    q = Query("What does parseJWT check?")
    res = m.search(q, 7)
    assert res.flags["keyword_boost"] and res.flags["exact_terms"] == ["parseJWT"] and res.flags["boosted"] == 1
    assert res.ranking[0][0] == "jwt"
    cos = dict(vector.search(q, 7).ranking)
    assert dict(res.ranking)["jwt"] == pytest.approx(0.7 * cos["jwt"] + 0.3, abs=1e-6)
    assert dict(res.ranking)["alps"] == pytest.approx(0.7 * cos["alps"], abs=1e-6)
    m2 = KeywordBoostSearch(embedder, keyword_score="match", add_bm25_hits=False, weight=0.5)
    m2.index(DOCS)
    r2 = m2.search(Query("Where is MAX_CONN_POOL set?"), 3)
    assert r2.ranking[0][0] == "pool" and r2.flags["exact_terms"] == ["MAX_CONN_POOL"]


def test_keyword_boost_llm_detector(embedder, vector):
    q = Query("How do I use parseJWT with OAuth tokens?")
    m, llm = make(
        KeywordBoostSearch,
        embedder,
        {"exact_terms": '{"exact_match_terms": ["parseJWT", "JWKS"], "use_keyword_boost": true}'},
        detector="llm",
    )
    res = m.search(q, 3)
    assert res.flags["exact_terms"] == ["parseJWT"] and res.flags["hallucinated_terms"] == ["JWKS"]
    assert res.ranking[0][0] == "jwt" and llm.names() == ["exact_terms"] and llm.calls[0][2].max_tokens == 160
    assert set(res.timings_ms) == {"llm", "detect", "encode_query", "retrieval", "bm25", "fusion"}
    m, _ = make(
        KeywordBoostSearch,
        embedder,
        {"exact_terms": '{"exact_match_terms": [], "use_keyword_boost": false}'},
        detector="llm",
    )
    res = m.search(q, 7)
    assert res.ranking == vector.search(q, 7).ranking and not res.flags["keyword_boost"]
    assert res.flags["llm_calls"] == 1 and res.flags["llm_fallback"] == []


def test_parse_exact_terms_reads_an_optional_keyword_importance():
    q = "Why does parseJWT fail?"
    v1 = parse_exact_terms('{"exact_match_terms": ["parseJWT"], "use_keyword_boost": true}', q)
    assert v1.importance is None and v1.use_boost
    hi = parse_exact_terms(
        '{"exact_match_terms": ["parseJWT"], "use_keyword_boost": true, "keyword_importance": "High"}', q
    )
    assert hi.importance == "high" and hi.use_boost
    none = parse_exact_terms(
        '{"exact_match_terms": ["parseJWT"], "use_keyword_boost": true, "keyword_importance": "none"}', q
    )
    assert none.importance == "none" and not none.use_boost  # "none" means no boost even with a term
    with pytest.raises(ParseError):
        parse_exact_terms('{"exact_match_terms": [], "use_keyword_boost": false, "keyword_importance": "very"}', q)


def test_keyword_boost_adaptive_weight_follows_the_importance(embedder, vector):
    q = Query("What does parseJWT check?")
    cos = dict(vector.search(q, 7).ranking)
    weights = {"low": 0.15, "medium": 0.3, "high": 0.5}
    for level, w in weights.items():
        reply = f'{{"exact_match_terms": ["parseJWT"], "use_keyword_boost": true, "keyword_importance": "{level}"}}'
        m, _ = make(
            KeywordBoostSearch,
            embedder,
            {"exact_terms": reply},
            detector="llm",
            prompts={"exact_terms": "v2"},
            importance_weights=weights,
        )
        res = m.search(q, 7)
        assert (
            res.flags["keyword_importance"] == level
            and res.flags["weight"] == w
            and not res.flags["importance_missing"]
        )
        # the best BM25 match gets keyword score 1: (1 - w) * cosine + w
        assert dict(res.ranking)["jwt"] == pytest.approx((1 - w) * cos["jwt"] + w, abs=1e-6)
    m, _ = make(
        KeywordBoostSearch,
        embedder,
        {"exact_terms": '{"exact_match_terms": ["parseJWT"], "use_keyword_boost": true}'},
        detector="llm",
        prompts={"exact_terms": "v2"},
        importance_weights=weights,
    )
    res = m.search(q, 7)
    assert res.flags["importance_missing"] and res.flags["weight"] == 0.3  # no rating: the fixed weight, flagged
    with pytest.raises(ValueError, match="importance_weights"):
        KeywordBoostSearch(embedder, importance_weights=weights)  # the heuristic detector rates nothing
    with pytest.raises(ValueError, match="importance_weights"):
        make(KeywordBoostSearch, embedder, {}, detector="llm", importance_weights={"low": 0.1})


def test_keyword_boost_llm_failure(embedder, vector):
    q = Query("What does parseJWT check?")
    m, _ = make(KeywordBoostSearch, embedder, {"exact_terms": LLMTimeout()}, detector="llm")
    res = m.search(q, 7)
    assert res.ranking == vector.search(q, 7).ranking and res.flags["llm_fallback"] == ["exact_terms:timeout"]
    m, _ = make(
        KeywordBoostSearch, embedder, {"exact_terms": "parseJWT"}, detector="llm", fallback_detector="heuristic"
    )
    res = m.search(q, 7)
    assert res.flags["llm_fallback"] == ["exact_terms:parse"] and res.flags["exact_terms"] == ["parseJWT"]
    assert res.ranking[0][0] == "jwt" and m.describe()["counters"]["exact_terms"]["parse_reasons"] == {"no_json": 1}


def test_constructor_validation(embedder):
    with pytest.raises(ValueError):
        HyDESearch(embedder, llm=FakeLLM(), mode="both")
    with pytest.raises(ValueError):
        KeywordSearch(embedder, llm=FakeLLM(), levels=["mid"])
    with pytest.raises(ValueError):
        KeywordBoostSearch(embedder, detector="llm")  # no llm
    with pytest.raises(ValueError):
        HyDESearch(embedder, llm=FakeLLM(), prompts={"keywords": "v1"})


# --------------------------------------------------------------------------------------------
# configs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, cls, expect",
    [
        ("hyde", HyDESearch, {"mode": "average", "answer_role": "doc"}),
        ("hyde_answer_only", HyDESearch, {"mode": "answer_only"}),
        ("keywords", KeywordSearch, {"with_answer": False, "fusion": "rrf"}),
        ("keywords_hyde", KeywordSearch, {"with_answer": True}),
        ("keyword_boost", KeywordBoostSearch, {"detector": "heuristic", "weight": 0.3}),
        ("keyword_boost_llm", KeywordBoostSearch, {"detector": "llm", "fallback_detector": "none"}),
    ],
)
def test_method_configs_build(method, cls, expect, embedder, fake_backends, tmp_path):
    from hydra.utils import get_class

    params = method_params(to_dict(load_config([f"method={method}", "++llm.backend=fake"]).method))
    params.pop("embedder")
    assert get_class(params.pop("_target_")) is cls
    m = cls(embedder, **params, cache_dir=tmp_path, progress=False)
    assert {k: getattr(m, k) for k in expect} == expect
    assert [c[1] for c in fake_backends] == ([tmp_path] if cls is not KeywordBoostSearch or m.detector == "llm" else [])


def test_lethe_iter2_llm_config(monkeypatch, embedder, fake_backends):
    from tests.support.method_yaml import build_pipeline

    monkeypatch.setitem(BACKENDS, "llm", LLMQueryUnderstanding)
    params = to_dict(load_config(["method=lethe_iter2_llm", "++llm.backend=fake"]).method)
    qcfg = params["stages"]["query_understanding"]
    assert qcfg["backend"] == "llm" and qcfg["rewrite"] and qcfg["decompose"]
    assert qcfg["options"]["components"] == {"rewrite": "llm", "decompose": "llm"}
    assert qcfg["options"]["llm"]["backend"] == "fake"
    p = build_pipeline(embedder, query_understanding=qcfg)
    qu = p.stage("query_understanding").backend_impl
    assert isinstance(qu, LLMQueryUnderstanding) and qu.timeout_s == 20.0 and len(fake_backends) == 1
    built = p.describe()["stages"]["query_understanding"]["built"]
    assert built["prompts"]["decompose"] == load_prompt("decompose").describe()
