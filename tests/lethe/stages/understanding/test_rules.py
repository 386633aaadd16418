"""Rule-based query understanding (rewriting, decomposition) on hand-written cases with exact outputs."""

from __future__ import annotations

import json

import pytest

from lethe.stages.understanding.base import QueryUnderstandingBackend, Understanding, understand
from lethe.stages.understanding.rules import RuleBasedBackend
from lethe.stages.understanding.stage import make_backend

RELEASE = ["What's the release number of webhook-api in production?", "It's 0.19.17 for webhook-api."]
OWNER = ["Who owns catalogd?", "catalogd: Pika."]


@pytest.fixture
def rule() -> RuleBasedBackend:
    return RuleBasedBackend()


def test_what_about_replaces_the_implicit_name(rule):
    assert rule.rewrite("What about auth-core?", OWNER) == ("Who owns auth-core?", ("ellipsis:what_about",))


def test_same_question_replaces_the_same_kind_of_term(rule):
    assert rule.rewrite("Same question for review-api.", RELEASE) == (
        "What's the release number of review-api in production?",
        ("ellipsis:same_for",),
    )


@pytest.mark.parametrize(
    "query, history, expected, rule_name",
    [
        ("And for ledger-api?", RELEASE, "What's the release number of ledger-api in production?", "ellipsis:and_for"),
        ("And authd?", OWNER, "Who owns authd?", "ellipsis:and"),
        ("how about mailer-svc", OWNER, "Who owns mailer-svc?", "ellipsis:how_about"),
        (
            "What of Bob?",
            ["When did Alice deploy chat-core?", "Yesterday."],
            "When did Bob deploy chat-core?",
            "ellipsis:what_of",
        ),
        (
            "What about the Payments team?",
            ["Who is on call for the Falcon team?"],
            "Who is on call for the Payments team?",
            "ellipsis:what_about",
        ),
        ("What about auth-core?", ["Who owns catalogd?"], "Who owns catalogd? auth-core", "ellipsis:what_about"),
    ],
)
def test_ellipsis_forms(rule, query, history, expected, rule_name):
    assert rule.rewrite(query, history) == (expected, (rule_name,))


def test_ellipsis_uses_the_most_recent_question(rule):
    history = ["Who owns chat-core?", "Team Otter.", "Which database does fraud-api use?", "fraud-api: postgres."]
    assert rule.rewrite("What about ledger-api?", history) == (
        "Which database does ledger-api use?",
        ("ellipsis:what_about",),
    )


def test_attribute_ellipsis_appends_the_previous_entities(rule):
    assert rule.rewrite("What about its memory limit?", OWNER) == (
        "What about its memory limit? catalogd",
        ("ellipsis:attribute",),
    )
    assert rule.rewrite("How about the region?", RELEASE) == (
        "How about the region? webhook-api",
        ("ellipsis:attribute",),
    )


def test_anaphora_appends_the_previous_entities(rule):
    assert rule.rewrite("When was it last restarted?", OWNER) == (
        "When was it last restarted? catalogd",
        ("anaphora:append_entities",),
    )
    assert rule.rewrite("Who maintains that?", ["Does Spark Streaming read from chat-core?", "Yes."]) == (
        "Who maintains that? Spark Streaming chat-core",
        ("anaphora:append_entities",),
    )


def test_no_history_is_a_no_op(rule):
    assert rule.rewrite("What about auth-core?", []) == ("What about auth-core?", ())
    assert rule.rewrite("When was it last restarted?", ["", "  "]) == ("When was it last restarted?", ())


def test_query_with_its_own_entity_is_not_rewritten(rule):
    assert rule.rewrite("When was auth-core last restarted, and is it healthy?", OWNER) == (
        "When was auth-core last restarted, and is it healthy?",
        (),
    )


@pytest.mark.parametrize(
    "query",
    [
        "And then?",
        "And what is the memory limit of auth-core?",
        "Tell me a joke",
        "What is the memory limit of auth-core?",
    ],
)
def test_non_elliptical_queries_are_unchanged(rule, query):
    assert rule.rewrite(query, OWNER) == (query, ())


def test_long_pronoun_query_is_not_rewritten(rule):
    q = "Can you remind me again what exactly we decided to do with it during the long meeting?"
    assert rule.rewrite(q, OWNER) == (q, ())
    assert RuleBasedBackend(max_anaphora_words=20).rewrite(q, OWNER) == (f"{q} catalogd", ("anaphora:append_entities",))


def test_implicit_names_can_be_switched_off():
    assert RuleBasedBackend(implicit_names=False).rewrite("What about auth-core?", OWNER) == (
        "Who owns catalogd? auth-core",
        ("ellipsis:what_about",),
    )


def test_question_mark_split(rule):
    assert rule.decompose("Who owns authd? What is its memory limit?") == (
        ["Who owns authd?", "What is its memory limit?"],
        ("split:question_marks",),
    )


def test_question_mark_split_keeps_context_and_merges_short_questions(rule):
    q = "I use WAS 8.5 on AIX. Why does the server fail to start? How do I fix the SSL handshake error?"
    assert rule.decompose(q) == (
        ["I use WAS 8.5 on AIX. Why does the server fail to start?", "How do I fix the SSL handshake error?"],
        ("split:question_marks",),
    )
    assert rule.decompose("Is this a bug? Why?") == (["Is this a bug? Why?"], ())


def test_techqa_statement_sentences_are_not_split(rule):
    q = (
        "After upgrading DB2 to 11.1 the nightly backup job fails and the log shows SQL2062N. "
        "We run it with TSM and the same script worked before. How can I resolve this?"
    )
    assert rule.decompose(q) == ([q], ())


def test_clause_coordination_split(rule):
    assert rule.decompose("Who owns authd and what is its memory limit?") == (
        ["Who owns authd", "what is its memory limit"],
        ("split:clause_coordination",),
    )
    assert rule.decompose("What is the memory limit of chat-core and the replica count of auth-core?") == (
        ["What is the memory limit of chat-core", "What is the replica count of auth-core"],
        ("split:clause_coordination",),
    )


def test_entity_coordination_split(rule):
    assert rule.decompose("What is the memory limit of chat-core and auth-core?") == (
        ["What is the memory limit of chat-core?", "What is the memory limit of auth-core?"],
        ("split:entity_coordination",),
    )
    assert rule.decompose("Which region runs chat-core, auth-core as well as ledger-api in staging?") == (
        [
            "Which region runs chat-core in staging?",
            "Which region runs auth-core in staging?",
            "Which region runs ledger-api in staging?",
        ],
        ("split:entity_coordination",),
    )


@pytest.mark.parametrize(
    "query",
    [
        "Where do I post to get help from the team behind ingest-worker?",
        "What is the ratio of salt and pepper in the recipe?",
        "How much salt and pepper should I add?",
        "What is the difference between chat-core and auth-core?",
        "Which database do chat-core and auth-core both use?",
        "Is chat-core and auth-core in staging?",
    ],
)
def test_conservative_non_splits(rule, query):
    assert rule.decompose(query) == ([query], ())


def test_max_subqueries_cap():
    q = "What is the memory limit of chat-core, auth-core, ledger-api, mailer-svc and fraud-api?"
    u = understand(q, [], RuleBasedBackend(max_subqueries=3))
    assert u.subqueries == (q, "What is the memory limit of chat-core?", "What is the memory limit of auth-core?")
    assert len(understand(q, [], RuleBasedBackend()).subqueries) == 4
    assert understand(q, [], RuleBasedBackend(max_subqueries=1)).subqueries == (q,)
    assert understand(q, [], RuleBasedBackend(max_subqueries=1)).rules == ("split:entity_coordination",)


def test_understand_rewrites_then_decomposes(rule):
    u = understand("What about auth-core and chat-core?", OWNER, rule)
    assert u == Understanding(
        original="What about auth-core and chat-core?",
        rewritten="Who owns auth-core and chat-core?",
        subqueries=("Who owns auth-core and chat-core?", "Who owns auth-core?", "Who owns chat-core?"),
        rules=("ellipsis:what_about", "split:entity_coordination"),
        backend="rule",
    )


def test_understand_without_a_rule_keeps_the_query(rule):
    u = understand("Which database does fraud-api use?", OWNER, rule)
    assert (u.rewritten, u.subqueries, u.rules) == (
        "Which database does fraud-api use?",
        ("Which database does fraud-api use?",),
        (),
    )


def test_understand_switches(rule):
    q = "Who owns authd and what is its memory limit?"
    assert understand(q, [], rule, decompose=False).subqueries == (q,)
    assert understand(q, [], rule, rewrite=False).subqueries == (q, "Who owns authd", "what is its memory limit")
    u = understand("What about auth-core and chat-core?", OWNER, rule, rewrite=False)
    assert (u.rewritten, u.subqueries, u.rules) == (
        "What about auth-core and chat-core?",
        ("What about auth-core and chat-core?",),
        (),
    )
    u = understand("What about auth-core and chat-core?", OWNER, rule, decompose=False)
    assert (u.rewritten, u.subqueries, u.rules) == (
        "Who owns auth-core and chat-core?",
        ("Who owns auth-core and chat-core?",),
        ("ellipsis:what_about",),
    )
    u = understand("When was it last restarted?", OWNER, rule, rewrite=False, decompose=False)
    assert u == Understanding(
        "When was it last restarted?", "When was it last restarted?", ("When was it last restarted?",), (), "rule"
    )


def test_understand_drops_parts_equal_to_the_query():
    class Echo:
        name = "echo"
        max_subqueries = 4

        def rewrite(self, query, history):
            return query, ()

        def decompose(self, query):
            return [query.upper() + " ", "part one", "Part one?", "part two"], ("split:echo",)

        def describe(self):
            return {"name": self.name}

    backend = Echo()
    assert isinstance(backend, QueryUnderstandingBackend)
    assert understand("q", [], backend).subqueries == ("q", "part one", "part two")


def test_as_record_is_json_and_round_trips(rule):
    u = understand("What about auth-core and chat-core?", OWNER, rule)
    record = json.loads(json.dumps(u.as_record()))
    assert record == {
        "original": "What about auth-core and chat-core?",
        "rewritten": "Who owns auth-core and chat-core?",
        "subqueries": ["Who owns auth-core and chat-core?", "Who owns auth-core?", "Who owns chat-core?"],
        "rules": ["ellipsis:what_about", "split:entity_coordination"],
        "backend": "rule",
    }
    assert Understanding(**{k: tuple(v) if isinstance(v, list) else v for k, v in record.items()}) == u


def test_make_backend_and_describe():
    b = make_backend("rule", max_subqueries=2, min_part_terms=3)
    assert isinstance(b, RuleBasedBackend) and isinstance(b, QueryUnderstandingBackend)
    assert b.describe() == {
        "name": "rule",
        "max_subqueries": 2,
        "min_part_terms": 3,
        "max_anaphora_words": 12,
        "max_target_words": 6,
        "implicit_names": True,
    }
    json.dumps(b.describe())
    with pytest.raises(ValueError, match=r"unknown query-understanding backend 'gpt'; known: llm, rule"):
        make_backend("gpt")
    with pytest.raises(ValueError):
        make_backend("rule", max_subqueries=0)
    with pytest.raises(TypeError):
        make_backend("rule", max_parts=3)


def test_min_part_terms_option():
    q = "Who owns authd and what is its memory limit?"
    assert RuleBasedBackend(min_part_terms=3).decompose(q) == ([q], ())
