"""Rule-based contradiction detector: extraction, conflicts, recency, demotion, and detection scores."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from experiments.studies.contradiction_detection import detection_scores, evaluate_rules_on_dataset
from lethe.core.protocol import Doc
from lethe.stages.contradiction.rules import (
    Conflict,
    Fact,
    demote,
    detect,
    extract_facts,
    normalize_attribute,
    normalize_value,
)
from lethebench.schema import write_dataset
from tests.support.toy import toy_dataset


def _doc(i: int, text: str, kind: str = "prose", pos: int | None = None) -> Doc:
    return Doc(f"d{i}", text, i if pos is None else pos, kind)


def _triples(text: str, kind: str = "prose") -> set[tuple[str, str, str]]:
    return {(f.entity, f.attribute, f.value) for f in extract_facts(_doc(0, text, kind))}


# ---------------------------------------------------------------- extraction
@pytest.mark.parametrize(
    "text,kind,expected",
    [
        ("payments-api belongs to team Otter.", "prose", ("payments-api", "owner", "otter")),
        ("Team Falcon owns payments-api.", "prose", ("payments-api", "owner", "falcon")),
        ('{"service": "checkout", "replicas": 3}', "tool", ("checkout", "replicas", "3")),
        ("cart-svc runs with 7 replicas.", "prose", ("cart-svc", "replicas", "7")),
        ("requirements.txt:\nrequests==2.31.0", "code", ("requests", "version", "2.31.0")),
        ("We deployed checkout v1.4.2 today.", "prose", ("checkout", "version", "1.4.2")),
        ("The memory limit of cart-svc is 2Gi.", "prose", ("cart-svc", "memory", "2048")),
        ("Bumped the timeout of cart-svc to 3 s.", "prose", ("cart-svc", "timeout", "3000")),
        ("CART_SVC_TIMEOUT_MS = 750", "code", ("cart-svc", "timeout", "750")),
        ("$ cat services/cart-svc/OWNERS\nteam-heron", "tool", ("cart-svc", "owner", "heron")),
        (
            "INFO [cart-svc] connected to postgres at db-3.internal",
            "tool",
            ("cart-svc", "database", "postgres@db-3.internal"),
        ),
        (
            "Region migration done: cart-svc now in eu-west-1 (was us-east-1).",
            "prose",
            ("cart-svc", "region", "eu-west-1"),
        ),
        ("owners:\n  cart-svc: team-lynx", "code", ("cart-svc", "owner", "lynx")),
    ],
)
def test_extracts_one_fact(text, kind, expected):
    assert _triples(text, kind) == {expected}


def test_change_sentence_keeps_only_the_new_value():
    assert _triples("We raised the cart-svc timeout from 500 ms to 2000 ms.") == {("cart-svc", "timeout", "2000")}


@pytest.mark.parametrize(
    "text",
    [
        "We had 3 incidents and 5 retries on cart-svc last week.",  # unrelated numbers
        "The ownership of cart-svc is unclear since the reorg.",  # no value
        "Who owns cart-svc these days?",
        "It is 2000 ms slower than yesterday.",  # pronoun, no attribute
        "The p99 latency of cart-svc is 800 ms.",  # latency is not an attribute
        "Timeout is 500 ms.",  # no entity
    ],
)
def test_no_fact(text):
    assert _triples(text) == set()


def test_synonyms_normalize():
    assert normalize_attribute("owned by") == normalize_attribute("Team") == "owner"
    assert (
        normalize_attribute("instances")
        == normalize_attribute("copies")
        == normalize_attribute("replica_count")
        == "replicas"
    )
    assert normalize_attribute("release") == normalize_attribute("build") == "version"
    assert normalize_attribute("latency") is None
    assert normalize_value("owner", "@org/team-badger") == normalize_value("owner", "team Badger") == "badger"
    assert normalize_value("owner", "unclear") is None
    assert normalize_value("memory", "1Gi") == normalize_value("memory", "1024Mi") == "1024"
    assert normalize_value("timeout", "2 s") == normalize_value("timeout", "2000 ms") == "2000"
    assert normalize_value("version", "v1.2.3") == "1.2.3"
    assert normalize_value("version", "latest") is None
    assert normalize_value("database", "postgres://db-1.internal/x") == normalize_value(
        "database", "postgres at db-1.internal"
    )


# ---------------------------------------------------------------- detection
def test_owner_change_detected():
    docs = [
        _doc(1, "payments-api belongs to team Otter."),
        _doc(2, "filler"),
        _doc(5, "Ownership change: team Falcon takes over payments-api from team Otter."),
    ]
    assert detect(docs) == [Conflict("d1", "d5", "payments-api", "owner", "otter", "falcon")]


def test_replica_change_in_json_tool_output():
    docs = [
        _doc(3, '{"service": "checkout", "replicas": 3, "healthy": true}', "tool"),
        _doc(9, '{"service": "checkout", "replicas": 5, "healthy": true}', "tool"),
    ]
    assert detect(docs) == [Conflict("d3", "d9", "checkout", "replicas", "3", "5")]


def test_version_bump():
    docs = [_doc(1, "We pinned httpx to 0.24.1 in cart-svc."), _doc(4, "requirements.txt\nhttpx==0.27.0", "code")]
    assert detect(docs) == [Conflict("d1", "d4", "httpx", "version", "0.24.1", "0.27.0")]


def test_paraphrased_attribute_via_synonyms():
    docs = [
        _doc(1, "search-api is maintained by team Heron."),
        _doc(2, '{"service": "search-api", "team": "team-falcon"}', "tool"),
        _doc(3, "billing-api instances: 4"),
        _doc(4, "billing-api replica count is now 6."),
    ]
    assert [(c.stale_doc_id, c.current_doc_id, c.attribute) for c in detect(docs)] == [
        ("d1", "d2", "owner"),
        ("d3", "d4", "replicas"),
    ]


def test_non_conflicts():
    docs = [
        _doc(1, "cart-api runs with 3 replicas."),
        _doc(2, "shop-api runs with 5 replicas."),  # other entity
        _doc(3, "cart-api belongs to team Otter."),
        _doc(4, "Team Otter owns cart-api."),  # same value again
        _doc(5, "The memory limit of cart-api is 1Gi."),
        _doc(6, "cart-api memory limit: 1024Mi"),  # same, other unit
        _doc(7, "We had 12 incidents on cart-api."),  # unrelated number
        _doc(8, "cart-api in production runs with 8 replicas."),
        _doc(9, "cart-api in staging runs with 2 replicas."),
    ]
    assert detect(docs) == []


def test_recency_decides_not_list_order():
    new, old = _doc(7, "cart-api belongs to team Falcon."), _doc(2, "cart-api belongs to team Otter.")
    (c,) = detect([new, old])
    assert (c.stale_doc_id, c.current_doc_id, c.stale_value, c.current_value) == ("d2", "d7", "otter", "falcon")
    same_pos = [Doc("a", "cart-api belongs to team Otter.", 3), Doc("b", "cart-api belongs to team Falcon.", 3)]
    assert detect(same_pos) == []


def test_chain_of_updates_and_order():
    docs = [
        _doc(1, "cart-api runs with 2 replicas."),
        _doc(5, "cart-api runs with 4 replicas."),
        _doc(9, "cart-api runs with 8 replicas."),
    ]
    assert [(c.stale_doc_id, c.current_doc_id) for c in detect(docs)] == [("d1", "d5"), ("d1", "d9"), ("d5", "d9")]


def test_extract_facts_fields():
    (f,) = extract_facts(Doc("x", "checkout v2.0.1 is live", 12, "prose"))
    assert f == Fact("checkout", "version", "2.0.1", "x", 12, "production")


# ---------------------------------------------------------------- demotion
def test_demote_reorders_as_documented():
    ranking = [("a", 10.0), ("b", 8.0), ("c", 6.0), ("d", 2.0)]
    conflicts = [Conflict("a", "c", "x", "owner", "p", "q")]
    out = demote(ranking, conflicts, penalty=0.5)
    # normalized: a=1, b=.75, c=.5, d=0; a -> .5, ties keep previous order (a before c)
    assert out == [("b", 0.75), ("a", 0.5), ("c", 0.5), ("d", 0.0)]
    assert all(out[i][1] >= out[i + 1][1] for i in range(len(out) - 1))
    assert demote(ranking, conflicts, penalty=0.0) == [("a", 1.0), ("b", 0.75), ("c", 0.5), ("d", 0.0)]
    assert [d for d, _ in demote(ranking, conflicts, penalty=1.0)] == ["b", "c", "a", "d"]
    assert demote(ranking, [], penalty=0.5) == [("a", 1.0), ("b", 0.75), ("c", 0.5), ("d", 0.0)]
    assert demote([("z", 3.0), ("a", 3.0)], conflicts, 0.5) == [("z", 1.0), ("a", 0.5)]
    assert demote([], conflicts, 0.5) == []
    with pytest.raises(ValueError):
        demote(ranking, conflicts, penalty=1.5)


def test_demote_on_ranks_ignores_the_score_scale():
    conflicts = [Conflict("b", "z", "x", "owner", "p", "q")]
    inv = [(d, 1.0 / (i + 1)) for i, d in enumerate("abcdefghij")]  # 1/rank scores, as after diversification
    # on scores: b's normalized (0.5 - 0.1) / 0.9 = 0.444 halves to 0.222, below c (0.259) only: rank 2 -> 3
    assert [d for d, _ in demote(inv, conflicts, 0.5)].index("b") == 2
    # on ranks (10..1 normalized: b = 8/9) halved to 4/9: below c, d, e (7/9..5/9), tied with f and
    # kept before it: rank 2 -> 5
    out = demote(inv, conflicts, 0.5, on="rank")
    assert [d for d, _ in out].index("b") == 4 and out[4][1] == pytest.approx(4 / 9)
    assert demote(inv, conflicts, 0.5, on="rank") == demote(
        [(d, 100.0 - i) for i, (d, _) in enumerate(inv)], conflicts, 0.5
    )
    with pytest.raises(ValueError):
        demote(inv, conflicts, 0.5, on="position")


# ---------------------------------------------------------------- scores
def test_detection_scores_exact_numbers():
    pred = [("a", "b"), ("c", "d"), ("e", "f"), ("a", "b")]
    gold = [("a", "b"), ("c", "d"), ("g", "h"), ("i", "j"), ("c", "d")]
    s = detection_scores(pred, gold)
    assert (s["tp"], s["fp"], s["fn"]) == (2, 1, 2)
    assert math.isclose(s["precision"], 2 / 3) and math.isclose(s["recall"], 0.5)
    assert math.isclose(s["f1"], 4 / 7)
    assert detection_scores([], [("a", "b")]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "tp": 0, "fp": 0, "fn": 1}
    # direction matters: (current, stale) is not the labelled pair
    assert detection_scores([("b", "a")], [("a", "b")])["tp"] == 0


def test_evaluate_rules_on_toy_dataset(tmp_path):
    ds = toy_dataset()
    text = dict(zip(ds.corpus["doc_id"], ds.corpus["text"], strict=True))
    text.update(
        {
            "chat:3": "The port of daemon-svc is 8080.",
            "chat:4": "daemon-svc port is now 9090 (was 8080).",
            "notes:0": "cache-api replicas: 2",
            "notes:1": "cache-api replicas: 4",
        }
    )
    ds.corpus["text"] = [text[d] for d in ds.corpus["doc_id"]]
    ds.contradictions = pd.DataFrame(
        [
            {"query_id": "q_late", "stale_doc_id": "chat:3", "current_doc_id": "chat:4"},
            {"query_id": "q_early", "stale_doc_id": "chat:3", "current_doc_id": "chat:4"},  # duplicate pair
            {"query_id": "q_late", "stale_doc_id": "chat:0", "current_doc_id": "chat:1"},  # not detectable
        ]
    )
    out = evaluate_rules_on_dataset(write_dataset(ds, tmp_path / "toy"))
    assert (out["tp"], out["fp"], out["fn"], out["n_gold"], out["n_predicted"]) == (1, 1, 1, 2, 2)
    assert out["precision"] == 0.5 and out["recall"] == 0.5
    assert out["n_scopes"] == 2 and out["n_docs"] == 8
