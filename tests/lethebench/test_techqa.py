"""TechQA loader: the real NVIDIA sample from ../shared/data, the IBM layout on a tiny fixture, errors."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from lethe.core.paths import CONF_DIR
from lethebench.loaders.techqa import detect_kind, load_techqa
from lethebench.schema import CORPUS_COLUMNS, QUERY_COLUMNS, DatasetError, read_dataset
from tests.conftest import DATA_ROOT

TECHQA = DATA_ROOT / "techqa" / "techqa_rag_eval_sample_480.jsonl"
_WS = re.compile(r"\s")


@pytest.fixture(scope="module")
def techqa_path() -> Path:
    assert TECHQA.is_file(), f"TechQA sample not found at {TECHQA}; tests need ../shared/data (or LETHE_DATA_ROOT)"
    return TECHQA


@pytest.fixture(scope="module")
def tq(techqa_path):
    return load_techqa(techqa_path)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --- the real NVIDIA sample -------------------------------------------------------------------------


def test_counts_match_the_data_readme(tq):
    assert len(tq.queries) == 480
    assert len(tq.sources) == 337
    assert len(tq.qrels) == 384
    assert Counter(tq.queries["category"]) == {"answerable": 384, "impossible": 96}
    assert all(docs == {next(iter(docs)): 1} for docs in tq.qrels.values())  # one gold technote, grade 1
    assert set(tq.sources["scope_id"]) == set(tq.queries["scope_id"]) == {"techqa"}
    ex = tq.card["exclusions"]
    assert ex["questions_total"] == 480 and ex["answerable_with_qrels"] == 384 and ex["impossible_excluded"] == 96
    assert ex["technote_text_conflicts"] == 0 and ex["answerable_with_multiple_golds"] == 0
    assert ex["answerable_without_gold"] == 0 and ex["gold_not_in_corpus"] == 0


def test_impossible_questions_stay_in_queries_without_qrels(tq):
    imp = tq.queries[tq.queries["category"] == "impossible"]
    assert len(imp) == 96
    assert not set(imp["query_id"]) & set(tq.qrels)
    assert imp["answer"].isna().all()  # null (NaN in pandas 3 str columns)
    assert {json.loads(m)["answer_raw"] for m in imp["meta"]} == {"-"}
    ans = tq.queries[tq.queries["category"] == "answerable"]
    assert set(ans["query_id"]) == set(tq.qrels)


def test_qrels_point_at_the_row_context(tq, techqa_path):
    docs = set(tq.sources["doc_id"])
    assert all(d in docs for v in tq.qrels.values() for d in v)
    rows = {r["id"]: r for r in _rows(techqa_path)}
    text = dict(zip(tq.sources["doc_id"], tq.sources["text"], strict=True))
    for qid, gold in tq.qrels.items():
        ctx = rows[qid]["contexts"][0]
        assert list(gold) == [ctx["filename"].removesuffix(".txt")]
        assert text[list(gold)[0]] == ctx["text"]
    # every technote of the sample is the gold of some question: no pure distractors in this file
    assert tq.card["answers_vs_context"]["technotes_gold_for_some_question"] == 337


def test_ids_positions_and_columns(tq):
    assert list(tq.sources.columns) == list(CORPUS_COLUMNS)
    assert list(tq.queries.columns) == list(QUERY_COLUMNS)
    assert tq.queries["split"].isna().all()  # no splits
    for col, df in (("doc_id", tq.sources), ("query_id", tq.queries)):
        assert df[col].is_unique
        assert not any(_WS.search(x) for x in df[col])
    assert (tq.sources["doc_id"] == tq.sources["source_id"]).all()
    assert list(tq.sources["doc_id"]) == sorted(tq.sources["doc_id"])
    assert list(tq.sources["position"]) == list(range(337))
    assert set(tq.queries["position"]) == {337}
    first = tq.sources.iloc[0]
    assert first["kind"] == "technote" and first["speaker"] is None and first["timestamp"] is None
    assert json.loads(first["meta"])["filename"] == first["doc_id"] + ".txt"
    assert first["text"].startswith("Title: ")
    assert tq.queries.iloc[0]["query_id"] == "TRAIN_Q000"


def test_card_records_truncated_contexts(tq):
    c = tq.card
    # the loader states the format; where the data came from is the dataset config's (tests/lethebench/test_build.py)
    assert list(c)[:5] == ["format", "inputs", "loader", "scope", "relevance"]
    assert not {"name", "description", "upstream", "license", "citation", "provenance"} & set(c)
    assert c["format"].startswith("NVIDIA TechQA-RAG-Eval layout")
    assert c["inputs"] == {TECHQA.name: "f2f8dab07c79ebeb75b5a51321698e421752bfbf15f2b5758dd8019d946d21b9"}
    assert c["loader"]["params"] == {"layout": "auto"} and c["loader"]["layout_detected"] == "nvidia"
    facts = c["answers_vs_context"]
    assert facts["answers_not_substring_of_context"] == 62
    assert len(facts["answers_not_substring_of_context_ids"]) == 62
    assert facts["answers_not_in_context_whose_context_is_2400_chars"] == 62  # every miss is a cut context
    assert facts["technotes_at_2400_chars"] == 198 and facts["technote_chars_max"] == 2400
    assert "62 of 384 answers" in c["relevance"]


# --- NVIDIA layout: unusual rows on small files ------------------------------------------------------


def _nv(qid, ctx=(), impossible=False, question="How?", answer="do x"):
    return {
        "id": qid,
        "question": question,
        "answer": "-" if impossible else answer,
        "is_impossible": impossible,
        "contexts": [{"filename": f, "text": t} for f, t in ctx],
    }


def test_unusual_rows_are_counted_not_fatal(tmp_path):
    path = _write_jsonl(
        tmp_path / "odd.jsonl",
        [
            _nv("Q 1", [("swg1 2.txt", "short text, do x")]),  # whitespace in both ids
            _nv("Q2", [("swgB.txt", "longer text of B")]),
            _nv("Q3", [("swgB.txt", "B"), ("swgC.txt", "text C, do x")]),  # two contexts; B conflicts
            _nv("Q4", []),  # answerable without context
            _nv("Q5", [("swgD.txt", "text D")], impossible=True),  # impossible with a context
        ],
    )
    ds = load_techqa(path)
    assert list(ds.sources["doc_id"]) == ["swg1_2", "swgB", "swgC", "swgD"]
    assert (
        dict(zip(ds.sources["doc_id"], ds.sources["text"], strict=True))["swgB"] == "longer text of B"
    )  # longest kept
    assert ds.qrels == {"Q_1": {"swg1_2": 1}, "Q2": {"swgB": 1}, "Q3": {"swgB": 1, "swgC": 1}}
    ex = ds.card["exclusions"]
    assert ex["answerable_without_gold_ids"] == ["Q4"]
    assert ex["answerable_with_multiple_golds_ids"] == ["Q3"]
    assert ex["impossible_with_context_ids"] == ["Q5"]
    assert ex["technote_text_conflicts"] == 1
    assert ex["technote_text_conflicts_list"][0]["technote_id"] == "swgB"
    assert ex["technote_text_conflicts_list"][0]["chars"] == [16, 1]
    assert ex["ids_whitespace_replaced"] == 2
    assert ds.card["answers_vs_context"]["answers_not_substring_of_context_ids"] == ["Q2"]
    # the same facts, for the build log (lethebench.build.log_dropped)
    assert ds.dropped == {
        "answerable questions without a gold technote (no qrels: excluded from retrieval metrics)": ["Q4"],
        "impossible questions with a context (context ignored: no qrels)": ["Q5"],
        "ids with whitespace (replaced by '_')": ["'Q 1' -> Q_1", "'swg1 2' -> swg1_2"],
        "technotes with conflicting texts (longest kept)": ["swgB"],
    }


def test_file_without_technotes_is_rejected(tmp_path):
    with pytest.raises(DatasetError, match="no technotes"):
        load_techqa(_write_jsonl(tmp_path / "imp.jsonl", [_nv("Q1", impossible=True)]))


def test_conflict_resolution_does_not_depend_on_row_order(tmp_path):
    rows = [_nv("Q1", [("a.txt", "xyz")]), _nv("Q2", [("a.txt", "abc")])]
    one = load_techqa(_write_jsonl(tmp_path / "one.jsonl", rows))
    two = load_techqa(_write_jsonl(tmp_path / "two.jsonl", rows[::-1]))
    assert list(one.sources["text"]) == list(two.sources["text"]) == ["abc"]


# --- IBM layout on a tiny fixture ---------------------------------------------------------------------


def _ibm_q(qid, title, text, doc, answerable, answer="-", start="-", end="-"):
    return {
        "QUESTION_ID": qid,
        "QUESTION_TITLE": title,
        "QUESTION_TEXT": text,
        "DOCUMENT": doc,
        "ANSWERABLE": answerable,
        "START_OFFSET": start,
        "END_OFFSET": end,
        "ANSWER": answer,
        "DOC_IDS": ["swg21000001", "swg21000002", "swg21000003"],
    }


@pytest.fixture
def ibm_files(tmp_path) -> dict[str, Path]:
    notes = {
        f"swg2100000{i}": {
            "id": f"swg2100000{i}",
            "title": f"Technote {i} title",
            "text": f"Body of technote {i}. Set the flag FOO{i}=on to fix it.",
            "metadata": {},
        }
        for i in range(1, 5)
    }
    train = [
        _ibm_q(
            "TRAIN_Q000",
            "Crash at start",
            "Server crashes on start.",
            "swg21000002",
            "Y",
            "Set the flag FOO2=on",
            28,
            48,
        ),
        _ibm_q("TRAIN_Q001", "Odd log line", "What does this line mean?", "-", "N"),
    ]
    dev = [_ibm_q("DEV_Q000", "Slow query", "Queries are slow.", "swg21000004", "Y", "Set the flag FOO4=on")]
    folder = tmp_path / "training_and_dev"
    folder.mkdir()
    out = {
        "technotes": folder / "training_dev_technotes.json",
        "train": folder / "training_Q_A.json",
        "dev": folder / "dev_Q_A.json",
    }
    out["technotes"].write_text(json.dumps(notes))
    out["train"].write_text(json.dumps(train, indent=2))
    out["dev"].write_text(json.dumps(dev, indent=2))
    return out


def test_ibm_layout(ibm_files):
    ds = load_techqa(ibm_files["technotes"], ibm_files["dev"], ibm_files["train"])  # any order
    assert ds.card["loader"]["layout_detected"] == "ibm"
    assert list(ds.sources["doc_id"]) == [f"swg2100000{i}" for i in range(1, 5)]
    assert ds.sources.iloc[1]["text"] == "Technote 2 title\nBody of technote 2. Set the flag FOO2=on to fix it."
    assert list(ds.sources["position"]) == [0, 1, 2, 3] and set(ds.queries["position"]) == {4}
    # question files are read in file-name order: dev before training
    assert list(ds.queries["query_id"]) == ["DEV_Q000", "TRAIN_Q000", "TRAIN_Q001"]
    q = ds.queries.set_index("query_id")
    assert q.loc["TRAIN_Q000", "text"] == "Crash at start\nServer crashes on start."
    assert q.loc["TRAIN_Q000", "answer"] == "Set the flag FOO2=on" and pd.isna(q.loc["TRAIN_Q001", "answer"])
    assert dict(q["category"]) == {"DEV_Q000": "answerable", "TRAIN_Q000": "answerable", "TRAIN_Q001": "impossible"}
    meta = json.loads(q.loc["TRAIN_Q000", "meta"])
    assert meta["START_OFFSET"] == 28 and meta["file"] == "training_Q_A.json" and len(meta["DOC_IDS"]) == 3
    assert ds.qrels == {"DEV_Q000": {"swg21000004": 1}, "TRAIN_Q000": {"swg21000002": 1}}
    ex = ds.card["exclusions"]
    assert ex["questions_total"] == 3 and ex["impossible_excluded"] == 1 and ex["answerable_with_qrels"] == 2
    assert ds.card["answers_vs_context"]["answers_not_substring_of_context"] == 0
    assert ds.card["format"].startswith("original IBM TechQA layout") and "license" not in ds.card
    same = load_techqa(ibm_files["train"], ibm_files["technotes"], ibm_files["dev"])
    assert same.qrels == ds.qrels and list(same.queries["query_id"]) == list(ds.queries["query_id"])


def test_ibm_layout_by_content_and_missing_gold(ibm_files, tmp_path):
    qs = json.loads(ibm_files["train"].read_text())
    qs[0]["DOCUMENT"] = "swg29999999"  # not in the technotes file
    (tmp_path / "a.json").write_text(json.dumps(qs))
    (tmp_path / "b.json").write_text(ibm_files["technotes"].read_text())
    assert detect_kind(tmp_path / "a.json") == "ibm_questions"
    assert detect_kind(tmp_path / "b.json") == "ibm_technotes"
    ds = load_techqa(tmp_path / "a.json", tmp_path / "b.json", layout="ibm")
    assert ds.qrels == {}
    assert ds.card["exclusions"]["gold_not_in_corpus_refs"] == [
        {"query_id": "TRAIN_Q000", "technote_id": "swg29999999"}
    ]


def test_ibm_layout_needs_both_kinds_of_file(ibm_files):
    with pytest.raises(DatasetError, match="needs question file"):
        load_techqa(ibm_files["train"])
    with pytest.raises(DatasetError, match="mixed layouts"):
        load_techqa(ibm_files["train"], ibm_files["technotes"], TECHQA)
    with pytest.raises(ValueError, match="unknown layout"):
        load_techqa(TECHQA, layout="squad")


# --- errors -----------------------------------------------------------------------------------------


def test_missing_file_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl.*data\.root \(or LETHE_DATA_ROOT\)"):
        load_techqa(tmp_path / "nope.jsonl")


def test_truncated_line_names_file_and_line(tmp_path, techqa_path):
    lines = techqa_path.read_text().splitlines()
    lines[4] = lines[4][:300]
    bad = tmp_path / "trunc.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"trunc\.jsonl: line 5: not valid JSON"):
        load_techqa(bad)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r.pop("question"), r"line 3 \(id TRAIN_Q003\): missing key 'question'"),
        (lambda r: r.pop("id"), r"line 3: missing key 'id'"),
        (
            lambda r: r.update(contexts={"filename": "x.txt"}),
            r"line 3 \(id TRAIN_Q003\): key 'contexts': expected a list",
        ),
        (
            lambda r: r.update(is_impossible="no"),
            r"line 3 \(id TRAIN_Q003\): key 'is_impossible': expected true or false",
        ),
        (lambda r: r["contexts"][0].pop("text"), r"line 3 \(id TRAIN_Q003\): key 'contexts\[0\]': missing key 'text'"),
        (
            lambda r: r["contexts"][0].update(filename=7),
            r"line 3 \(id TRAIN_Q003\): key 'contexts\[0\]\.filename': expected a string",
        ),
        (
            lambda r: r["contexts"][0].update(text="  "),
            r"line 3 \(id TRAIN_Q003\): key 'contexts\[0\]\.text': empty technote text",
        ),
        (
            lambda r: r.update(id="TRAIN_Q000"),
            r"line 3 \(id TRAIN_Q000\): duplicate question id 'TRAIN_Q000' \(first at .*line 1",
        ),
    ],
)
def test_malformed_rows_name_file_line_and_key(tmp_path, techqa_path, edit, message):
    rows = _rows(techqa_path)[:5]
    assert rows[2]["id"] == "TRAIN_Q003" and not rows[2]["is_impossible"]
    edit(rows[2])
    with pytest.raises(DatasetError, match=r"bad\.jsonl: " + message):
        load_techqa(_write_jsonl(tmp_path / "bad.jsonl", rows))


@pytest.mark.parametrize(
    "which, edit, message",
    [
        (
            "train",
            lambda d: d[1].pop("DOCUMENT"),
            r"training_Q_A\.json: item #1 \(QUESTION_ID TRAIN_Q001\): missing key 'DOCUMENT'",
        ),
        (
            "train",
            lambda d: d[0].update(ANSWERABLE=True),
            r"item #0 \(QUESTION_ID TRAIN_Q000\): key 'ANSWERABLE': expected 'Y' or 'N'",
        ),
        (
            "dev",
            lambda d: d[0].update(QUESTION_TEXT=None),
            r"dev_Q_A\.json: item #0 .*key 'QUESTION_TEXT': expected a string",
        ),
        (
            "technotes",
            lambda d: d["swg21000003"].pop("text"),
            r"technotes\.json: technote #2 \('swg21000003'\): missing key 'text'",
        ),
    ],
)
def test_malformed_ibm_files_name_file_item_and_key(ibm_files, which, edit, message):
    data = json.loads(ibm_files[which].read_text())
    edit(data)
    ibm_files[which].write_text(json.dumps(data))
    with pytest.raises(DatasetError, match=message):
        load_techqa(*ibm_files.values())


def _write_technotes(path):
    path.write_text(json.dumps({"swg1": {"id": "swg1", "title": "T", "text": "text"}}))
    return path


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "Q1", "question": "unterminated', "Unterminated string starting at column 26"),
        ('{"id": "Q1", "question": "tab\x01"}', "Invalid control character at column 30"),
    ],
)
def test_json_error_says_at_once(tmp_path, line, message):
    # json's own message ends in 'at' for these two errors: it used to read "starting at at column 26"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line + "\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl: line 1: not valid JSON \(" + message + r"\)$") as err:
        load_techqa(bad)
    assert "at at" not in str(err.value)
    ibm = tmp_path / "x_Q_A.json"
    ibm.write_text("[" + line)
    with pytest.raises(DatasetError, match=r"x_Q_A\.json: not valid JSON \(\w[\w ]+ at line 1, column \d+\)$") as err:
        load_techqa(ibm, _write_technotes(tmp_path / "technotes.json"))
    assert "at at" not in str(err.value)


def test_truncated_ibm_json_names_file_and_line(ibm_files):
    ibm_files["train"].write_text(ibm_files["train"].read_text()[:200])
    with pytest.raises(DatasetError, match=r"training_Q_A\.json: not valid JSON \(.* at line \d+, column \d+\)"):
        load_techqa(*ibm_files.values())


# --- through the registry and the builder -----------------------------------------------------------


def test_registry_loads_techqa(techqa_path):
    from lethebench.build import load_sources

    src = load_sources("techqa", [DATA_ROOT / "techqa/techqa_rag_eval_sample_480.jsonl"], {})
    assert len(src.sources) == 337 and len(src.queries) == 480 and len(src.qrels) == 384


@pytest.mark.slow
def test_build_and_read_chunked_dataset(techqa_path, embedder, tmp_path):
    from lethebench.build import build_dataset

    cfg = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "dataset" / "techqa.yaml"))
    folder = build_dataset(cfg, DATA_ROOT, tmp_path, embedder)
    ds = read_dataset(folder)
    assert ds.corpus["source_id"].nunique() == 337
    assert len(ds.queries) == 480 and len(ds.qrels) == 384
    assert ds.card["counts"]["queries_with_qrels"] == 384
    assert ds.card["queries_by_category"] == {"answerable": 384, "impossible": 96}
    docs = set(ds.corpus["doc_id"])
    src_of = dict(zip(ds.corpus["doc_id"], ds.corpus["source_id"], strict=True))
    for _qid, gold in ds.qrels.items():
        assert gold and all(d in docs for d in gold)
        assert len({src_of[d] for d in gold}) == 1  # all chunks of the one gold technote
    assert (folder / "card.md").read_text().startswith("# Dataset card: techqa")
