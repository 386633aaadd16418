"""lethebench/loaders/longmemeval.py on a small file in LongMemEval's official format, written here: session and turn
units as the official retrieval code forms them, evidence across sessions, abstention left out and counted."""

from __future__ import annotations

import json

import pytest

from lethebench.loaders.longmemeval import load_longmemeval
from lethebench.schema import DatasetError


def _turn(role, content, has_answer=None):
    t = {"role": role, "content": content}
    if has_answer is not None:
        t["has_answer"] = has_answer
    return t


QUESTIONS = [
    {  # single-session evidence: the answer turn is the second user turn (turn index 3 with the assistant's)
        "question_id": "e47becba",
        "question_type": "single-session-user",
        "question": "What degree did I graduate with?",
        "answer": "Business Administration",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["sharegpt_1", "answer_280352e9"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 10:00"],
        "haystack_sessions": [
            [_turn("user", "Tips for a trip to Rome?"), _turn("assistant", "Visit early.")],
            [
                _turn("user", "I need a resume template.", False),
                _turn("assistant", "Here is one."),
                _turn("user", "I graduated with a degree in Business Administration.", True),
                _turn("assistant", "Congratulations."),
            ],
        ],
        "answer_session_ids": ["answer_280352e9"],
    },
    {  # multi-session evidence: two sessions each hold one answer turn
        "question_id": "ms_1",
        "question_type": "multi-session",
        "question": "How many bikes do I own?",
        "answer": 2,
        "question_date": "2023/06/01 (Thu) 09:00",
        "haystack_session_ids": ["answer_a", "other_b", "answer_c"],
        "haystack_dates": ["2023/05/01", "2023/05/02", "2023/05/03"],
        "haystack_sessions": [
            [_turn("user", "I bought a road bike.", True), _turn("assistant", "Nice.")],
            [_turn("user", "What is a good pasta recipe?")],
            [_turn("assistant", "Hello!"), _turn("user", "I also got a mountain bike.", True)],
        ],
        "answer_session_ids": ["answer_a", "answer_c"],
    },
    {  # abstention: no evidence exists; the official evaluation leaves it out of the retrieval averages
        "question_id": "ms_1_abs",
        "question_type": "multi-session",
        "question": "How many boats do I own?",
        "answer": "You did not mention any boat.",
        "question_date": "2023/06/01 (Thu) 09:00",
        "haystack_session_ids": ["other_d"],
        "haystack_dates": ["2023/05/04"],
        "haystack_sessions": [[_turn("user", "I like sailing videos.")]],
        "answer_session_ids": [],
    },
]


@pytest.fixture
def lme_file(tmp_path):
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps(QUESTIONS))
    return path


def test_session_units_hold_the_user_turns_and_relevance_follows_has_answer(lme_file):
    ds = load_longmemeval(lme_file, unit="session")
    docs = ds.sources.set_index("doc_id")
    assert list(docs.index) == [
        "e47becba:sharegpt_1",
        "e47becba:answer_280352e9",
        "ms_1:answer_a",
        "ms_1:other_b",
        "ms_1:answer_c",
        "ms_1_abs:other_d",
    ]
    assert docs.loc["e47becba:answer_280352e9", "text"] == (
        "I need a resume template. I graduated with a degree in Business Administration."
    )  # user turns only, joined by spaces
    assert ds.qrels == {"e47becba": {"e47becba:answer_280352e9": 1}, "ms_1": {"ms_1:answer_a": 1, "ms_1:answer_c": 1}}
    q = ds.queries.set_index("query_id")
    assert (
        q.loc["ms_1", "position"] == 3
        and q.loc["ms_1", "answer"] == "2"
        and q.loc["ms_1", "category"] == "multi-session"
    )
    assert json.loads(q.loc["ms_1_abs", "meta"])["abstention"] is True
    assert ds.card["exclusions"]["abstention_question_ids"] == ["ms_1_abs"] and ds.keep_whole
    assert list(ds.dropped.values()) == [["ms_1_abs"]]


def test_turn_units_are_user_turns_numbered_as_the_official_ids(lme_file):
    ds = load_longmemeval(lme_file, unit="turn")
    ids = list(ds.sources["doc_id"])
    # the assistant's turns count in the index and are not units
    assert ids[:4] == [
        "e47becba:sharegpt_1_1",
        "e47becba:answer_280352e9_1",
        "e47becba:answer_280352e9_3",
        "ms_1:answer_a_1",
    ]
    assert "ms_1:answer_c_2" in ids and "ms_1:answer_c_1" not in ids
    assert ds.qrels["e47becba"] == {"e47becba:answer_280352e9_3": 1}  # not the session's other user turn
    assert ds.qrels["ms_1"] == {"ms_1:answer_a_1": 1, "ms_1:answer_c_2": 1} and "ms_1_abs" not in ds.qrels
    assert set(ds.sources["speaker"]) == {"user"} and set(ds.sources["kind"]) == {"turn"}


def test_a_malformed_file_is_refused_naming_the_question_and_key(lme_file, tmp_path):
    bad = [dict(QUESTIONS[0], haystack_dates=["2023/05/20"])]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(
        DatasetError,
        match="e47becba: haystack_session_ids \\(2\\), haystack_sessions \\(2\\) and haystack_dates \\(1\\)",
    ):
        load_longmemeval(path)
    with pytest.raises(DatasetError, match="unit='paragraph'"):
        load_longmemeval(lme_file, unit="paragraph")
    with pytest.raises(FileNotFoundError, match="longmemeval_s.json"):
        load_longmemeval(tmp_path / "none.json")


def test_a_longmemeval_file_builds_into_a_valid_dataset(lme_file, embedder, tmp_path):
    """Through the build (the dataset config of conf/dataset/longmemeval.yaml, files under data.root): whole units,
    the schema checked, the abstention question kept as a query without qrels."""
    from experiments.config import load_config, to_dict
    from lethebench.build import build_dataset
    from lethebench.schema import read_dataset

    cfg = to_dict(load_config(["dataset=longmemeval", "dataset.files=[longmemeval_s.json]"]).dataset)
    folder = build_dataset(cfg, tmp_path, tmp_path / "processed", embedder)
    ds = read_dataset(folder)
    assert len(ds.corpus) == 6 and len(ds.queries) == 3 and set(ds.qrels) == {"e47becba", "ms_1"}
    assert ds.card["loader"]["unit"] == "session" and ds.card["exclusions"]["abstention_questions"] == 1
