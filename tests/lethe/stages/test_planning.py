"""Adaptive planning (Eq. 2), the entity extractor and the metadata boost on constructed cases."""

from __future__ import annotations

import numpy as np
import pytest

from lethe.stages.boost import query_signals
from lethe.stages.planning import PlanInputs, plan_inputs
from lethe.text.analyzer import analyze
from lethe.text.entities import entities, exact_terms
from tests.support.method_yaml import build_stage

CFG = build_stage("planning")  # the values of conf/method/lethe_iter1.yaml (the paper's appendix A.2)


@pytest.mark.parametrize(
    "overlap,terms,novelty,plan",
    [
        (0.5, 9, 0.0, "verify"),  # overlap > 0.4 and short
        (0.41, 3, 1.0, "verify"),  # VERIFY is tested first, novelty does not matter
        (0.4, 3, 0.0, "exploit"),  # overlap must exceed theta_v strictly
        (1.0, 10, 0.0, "exploit"),  # length must be below theta_s strictly
        (0.0, 12, 0.5, "explore"),  # no overlap, novel (novelty >= 0.5)
        (0.09, 4, 0.9, "explore"),
        (0.1, 4, 0.9, "exploit"),  # overlap must be below theta_e strictly
        (0.0, 4, 0.49, "exploit"),  # not novel enough
        (0.3, 4, 1.0, "exploit"),  # between the thresholds
    ],
)
def test_eq2_decision_table(overlap, terms, novelty, plan):
    assert CFG.plan(PlanInputs(overlap, terms, novelty)) == plan


def test_plan_alpha_is_per_plan_and_static_when_off():
    assert [CFG.alpha_for(p) for p in ("verify", "explore", "exploit")] == [0.7, 0.3, 0.5]
    assert build_stage("planning", enabled=False, static_alpha=0.2).alpha_for("verify") == 0.2
    with pytest.raises(Exception, match="planning.alpha needs exactly"):  # Hydra wraps the ValueError
        build_stage("planning", alpha={"verify": 0.7, "explore": 0.3})
    with pytest.raises(Exception, match="static_alpha=1.5 is outside"):
        build_stage("planning", static_alpha=1.5)


def test_plan_inputs_from_text():
    history_docs = ["Caroline: I went to the LGBTQ support group yesterday.", "Melanie: That's great!"]
    h_ents = frozenset().union(*(entities(t) for t in history_docs))
    h_vocab = {t for d in history_docs for t in analyze(d)}
    q = "When did Caroline go to the LGBTQ support group?"
    x = plan_inputs(q, entities(q), h_ents, analyze(q), h_vocab)
    assert x.overlap == 1.0 and x.query_terms == 9
    # analyzed terms: when, did, carolin, go, lgbtq, support, group -> 'when', 'did', 'go' are new
    assert x.novelty == pytest.approx(3 / 7)
    assert CFG.plan(x) == "verify"
    q2 = "Which paintings of sunsets by Monet does anybody like?"
    x2 = plan_inputs(q2, entities(q2), h_ents, analyze(q2), h_vocab)
    assert x2.overlap == 0.0 and x2.novelty == 1.0 and CFG.plan(x2) == "explore"
    x3 = plan_inputs("what is it?", entities("what is it?"), h_ents, analyze("what is it?"), h_vocab)
    assert x3 == PlanInputs(0.0, 3, 1.0) or x3.novelty in (0.0, 1.0)


def test_exact_terms_cover_the_keyword_boost_patterns():
    text = (
        "Call parseJWT and getUserById; set user_id and API_KEY; got ECONNREFUSED and HTTP 404, error-1234. "
        "Edit .env and config.yaml for v2.1.0 node@18 at /api/users or https://x.org/a and ping chat-core"
    )
    kinds = {}
    for k, t in exact_terms(text):
        kinds.setdefault(k, []).append(t)
    assert kinds == {
        "camel_case": ["parseJWT", "getUserById"],
        "snake_case": ["user_id"],
        "screaming_case": ["API_KEY", "ECONNREFUSED"],
        "code_number": ["HTTP 404", "error-1234"],
        "file": [".env", "config.yaml"],
        "version": ["v2.1.0", "node@18"],
        "url_path": ["/api/users", "https://x.org/a"],
        "kebab_case": ["chat-core"],
    }


def test_entities_are_names_and_identifiers_not_sentence_starts():
    assert entities("Melanie: Hey Caroline! I went to the Museum of Modern Art. Thanks!") == {
        "melanie",
        "caroline",
        "museum of modern art",
    }
    assert entities("What is the memory limit of chat-core?") == {"chat-core"}
    assert entities("Who owns authd after the change?") == frozenset()  # a lowercase name is invisible to rules


def test_boost_adds_exact_share_and_kind_match():
    sig = query_signals("Why does parseJWT throw ECONNREFUSED?")
    assert set(sig.terms) == {"parsejwt", "econnrefused"} and sig.kinds == {"camel_case", "screaming_case"}
    texts = ["def parsejwt(token): ...", "error ECONNREFUSED from parseJWT", "unrelated prose"]
    out = build_stage("boost", exact=0.1, kind=0.05).scores(sig, [t.lower() for t in texts], ["code", "tool", "prose"])
    assert np.allclose(out, [0.05 + 0.05, 0.1 + 0.05, 0.0])
    none = query_signals("how are you today?")
    assert not build_stage("boost").scores(none, ["x"], ["code"]).any()
    assert not build_stage("boost", enabled=False).scores(sig, ["parsejwt"], ["code"]).any()
