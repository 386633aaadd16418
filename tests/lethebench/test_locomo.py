"""LoCoMo loader: every quirk listed in ../shared/data/README.md, on the real file."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from lethebench.loaders.locomo import CATEGORY_MAP, clean_evidence, load_locomo
from lethebench.schema import DatasetError


@pytest.fixture(scope="module")
def loco(locomo_path):
    return load_locomo(locomo_path)


def test_clean_evidence_variants():
    assert clean_evidence(["D8:6; D9:17"]) == (["D8:6", "D9:17"], [])
    assert clean_evidence(["D:11:26"]) == (["D11:26"], [])
    assert clean_evidence(["D30:05"]) == (["D30:5"], [])
    assert clean_evidence(["D9:1 D4:4 D4:6", "D9:1"]) == (["D9:1", "D4:4", "D4:6"], [])
    assert clean_evidence(["D"]) == ([], ["D"])


def test_counts_match_the_data_readme(loco):
    assert len(loco.sources) == 5882
    assert len(loco.queries) == 1986
    assert len(loco.qrels) == 1982  # questions with at least one valid evidence turn
    assert sum(len(v) for v in loco.qrels.values()) == 2820
    assert loco.sources["scope_id"].nunique() == 10


def test_questions_without_evidence_are_counted_not_dropped(loco):
    ex = loco.card["exclusions"]
    assert ex["questions_without_valid_evidence"] == 4
    assert set(ex["questions_without_valid_evidence_ids"]) <= set(loco.queries["query_id"])
    no_ev = loco.queries[loco.queries["query_id"].isin(ex["questions_without_valid_evidence_ids"])]
    assert set(no_ev["category"]) == {"open-domain"}


def test_dangling_and_malformed_references_are_reported(loco):
    ex = loco.card["exclusions"]
    assert ex["invalid_evidence_refs"] == 3
    assert {d["query_id"] for d in ex["dangling_evidence"]} == {"conv-42:q58", "conv-47:q38"}
    assert ex["malformed_evidence_tokens"] == [{"query_id": "conv-42:q88", "tokens": ["D"]}]
    for qid in ("conv-42:q58", "conv-47:q38"):
        assert all(d in set(loco.sources["doc_id"]) for d in loco.qrels[qid])


def test_stray_session_keys_do_not_make_sessions(loco):
    stray = loco.card["exclusions"]["stray_session_date_keys"]
    assert list(stray) == ["conv-26"] and stray["conv-26"][0] == "session_20_date_time"
    sessions = {json.loads(m)["session"] for m in loco.sources.loc[loco.sources.scope_id == "conv-26", "meta"]}
    assert max(sessions) == 19


def test_category_map_is_pinned(loco):
    assert CATEGORY_MAP == {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
    assert Counter(loco.queries["category"]) == {
        "single-hop": 841,
        "adversarial": 446,
        "temporal": 321,
        "multi-hop": 282,
        "open-domain": 96,
    }
    adv = loco.queries[loco.queries.category == "adversarial"].iloc[0]
    assert pd.isna(adv["answer"]) and "adversarial_answer" in json.loads(adv["meta"])
    assert loco.queries["split"].isna().all()  # no splits


def test_all_turns_eligible_and_text_format(loco):
    last = loco.sources.groupby("scope_id")["position"].max()
    qpos = loco.queries.groupby("scope_id")["position"].min()
    assert (qpos > last).all()
    first = loco.sources.iloc[0]
    assert first["text"].startswith(first["speaker"] + ": ")
    assert first["doc_id"] == "conv-26:D1:1" and first["timestamp"] == "1:56 pm on 8 May, 2023"
    cap = loco.sources[loco.sources["doc_id"] == "conv-26:D1:5"].iloc[0]
    assert "[shares a photo: a photo of a dog walking past a wall" in cap["text"]


def test_missing_file_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.root"):
        load_locomo(tmp_path / "nope.json")


def test_malformed_inputs_name_file_row_and_key(tmp_path, locomo_path):
    bad = tmp_path / "trunc.json"
    bad.write_text(locomo_path.read_text()[:5000])
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_locomo(bad)
    conv = json.loads(locomo_path.read_text())[:1]
    del conv[0]["qa"][3]["question"]
    bad.write_text(json.dumps(conv))
    with pytest.raises(DatasetError, match=r"conv-26 qa #3: missing key 'question'"):
        load_locomo(bad)
    conv = json.loads(locomo_path.read_text())[:1]
    del conv[0]["conversation"]["session_2"][1]["speaker"]
    bad.write_text(json.dumps(conv))
    with pytest.raises(DatasetError, match=r"conv-26/session_2 turn #1: missing key 'speaker'"):
        load_locomo(bad)


def test_non_utf8_file_names_file_line_and_byte(tmp_path, locomo_path):
    # used to be a bare UnicodeDecodeError naming no file
    text = locomo_path.read_bytes()[:4000]
    bad = tmp_path / "locomo10.json"
    bad.write_bytes(text[:2000] + b"\n\xff" + text[2000:])
    line = text[:2000].count(b"\n") + 2
    with pytest.raises(DatasetError, match=rf"locomo10\.json: not UTF-8 text: byte 0xff at line {line}, column 1 "):
        load_locomo(bad)


def test_empty_or_turnless_file_is_a_clear_error(tmp_path):
    # an empty list used to load, then fail in the build with KeyError: 'scope_id'
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(DatasetError, match=r"empty\.json: the JSON list holds no conversations"):
        load_locomo(empty)
    turnless = tmp_path / "turnless.json"
    turnless.write_text(
        json.dumps([{"sample_id": "c1", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}])
    )
    with pytest.raises(DatasetError, match=r"turnless\.json: no dialog turns in any of its 1 conversation"):
        load_locomo(turnless)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([["not", "an", "object"]]))
    with pytest.raises(DatasetError, match=r"wrong\.json: conversation #0: expected a JSON object, got list"):
        load_locomo(wrong)


def test_dropped_references_are_named_for_the_build_log(loco):
    # the build logs these (count and first examples); the card keeps the full lists under exclusions
    assert loco.dropped["evidence references to turns that do not exist (dropped)"] == [
        "conv-42:q58 -> D10:19",
        "conv-47:q38 -> D4:36",
    ]
    assert loco.dropped["malformed evidence tokens (dropped)"] == ["conv-42:q88 -> 'D'"]
    assert len(loco.dropped["questions without valid evidence (no qrels: excluded from retrieval metrics)"]) == 4
    assert loco.dropped["session_<N>_date_time keys without a session (ignored)"][0] == "conv-26: session_20_date_time"


def test_the_loader_states_the_format_not_the_provenance(loco):
    # name, description, upstream, licence and citation come from the dataset config (tests/lethebench/test_build.py)
    assert not {"name", "description", "upstream", "license", "citation", "provenance"} & set(loco.card)
    assert loco.card["format"].startswith("LoCoMo JSON")
