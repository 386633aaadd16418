"""UltraDomain loader: the real cs/mix copies from ../shared/data, the chunk-qrel rule on hand-made text, errors."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import socket
import time
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from lethe.core.paths import CONF_DIR
from lethebench.build import build_dataset
from lethebench.chunking import ChunkParams, chunk_corpus
from lethebench.loaders.ultradomain import content_tokens, grade_chunks, load_ultradomain, read_rows
from lethebench.schema import CORPUS_COLUMNS, QUERY_COLUMNS, DatasetError, read_dataset
from tests.conftest import DATA_ROOT

CS = DATA_ROOT / "ultradomain" / "cs.jsonl.xz"
MIX = DATA_ROOT / "ultradomain" / "mix.jsonl"
MIX_CATEGORIES = {"musique": 35, "2wikimqa": 26, "multifieldqa_en": 23, "qasper": 21, "hotpotqa": 16, "narrativeqa": 9}
_WS = re.compile(r"\s")


@pytest.fixture(scope="module")
def cs():
    assert CS.is_file(), f"UltraDomain cs not found at {CS}; tests need ../shared/data (or LETHE_DATA_ROOT)"
    return load_ultradomain(CS)


@pytest.fixture(scope="module")
def mix():
    assert MIX.is_file(), f"UltraDomain mix not found at {MIX}; tests need ../shared/data (or LETHE_DATA_ROOT)"
    return load_ultradomain(MIX)


def _meta(df) -> list[dict]:
    return [json.loads(m) for m in df["meta"]]


def _row(i: int, context: str, answer: str, **extra) -> dict:
    return {
        "input": f"question {i}?",
        "context": context,
        "answers": [answer],
        "_id": f"id{i}",
        "label": "tiny",
        "length": len(context.split()),
        **extra,
    }


def _write(path: Path, rows: list, raw: str | None = None) -> Path:
    text = raw if raw is not None else "".join(json.dumps(r) + "\n" for r in rows)
    opener = {".xz": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
    with opener(path, "wt", encoding="utf-8") as fh:
        fh.write(text)
    return path


def _no_network(*args, **kwargs):
    raise AssertionError(f"network access attempted: {args}")


def _ws_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\S+", text)]


# --- the real files ------------------------------------------------------------------------------------------


def test_cs_counts_ids_and_books(cs):
    assert len(cs.queries) == 100 and len(cs.sources) == 10
    assert set(cs.sources["scope_id"]) == set(cs.queries["scope_id"]) == {"cs"}
    assert set(cs.sources["kind"]) == {"book"} and set(cs.queries["domain"]) == {"cs"}
    assert cs.queries["category"].isna().all() and cs.queries["split"].isna().all()
    assert cs.queries["query_id"].is_unique and not cs.queries["query_id"].str.contains(_WS).any()
    assert all(re.fullmatch(r"cs:[0-9a-f]{16}", d) for d in cs.sources["doc_id"])
    assert (cs.sources["doc_id"] == cs.sources["source_id"]).all()
    smeta = _meta(cs.sources)
    assert all(m["context_id"] and m["title"] and m["n_chars"] > 100_000 for m in smeta)
    assert "Linux Kernel Networking" in {m["title"] for m in smeta}
    assert sum(m["n_questions"] for m in smeta) == 100
    for c in (CORPUS_COLUMNS, QUERY_COLUMNS):
        assert set(c) <= set(cs.sources.columns) | set(cs.queries.columns)


def test_mix_counts_categories_and_meta(mix):
    assert len(mix.queries) == 130 and len(mix.sources) == 61
    assert set(mix.sources["kind"]) == {"context"}
    assert mix.queries["query_id"].is_unique
    assert Counter(mix.queries["category"]) == MIX_CATEGORIES
    qmeta = _meta(mix.queries)
    assert all(
        m["dataset"] == c and m["label"] == "longbench" for m, c in zip(qmeta, mix.queries["category"], strict=True)
    )
    src_dataset = {d: json.loads(m)["dataset"] for d, m in zip(mix.sources["doc_id"], mix.sources["meta"], strict=True)}
    assert all(src_dataset[m["source_id"]] == m["dataset"] for m in qmeta)  # every context belongs to one sub-dataset
    assert mix.card["stats"]["mix"]["duplicate_ids_renamed"] == []


def test_queries_follow_all_contexts_and_keep_every_answer(cs, mix):
    for ds in (cs, mix):
        assert sorted(ds.sources["position"]) == list(range(len(ds.sources)))
        assert (ds.queries["position"] > ds.sources["position"].max()).all()
        meta = _meta(ds.queries)
        for a, m, q in zip(ds.queries["answer"], meta, ds.queries["query_id"], strict=True):
            assert a == m["answers"][0] and m["_id"] == q
        known = set(ds.sources["source_id"])
        assert all(m["source_id"] in known and m["source_id"].endswith(m["context_sha256"][:16]) for m in meta)


def test_card_fields_in_order(cs):
    # the loader states the format; where the data came from is the dataset config's (tests/lethebench/test_build.py)
    assert list(cs.card)[:6] == ["format", "inputs", "loader", "input_notes", "scope", "relevance"]
    assert not {"name", "description", "upstream", "license", "citation", "provenance"} & set(cs.card)
    assert len(cs.card["input_notes"]) == 1 and "rebuilt" in cs.card["input_notes"][0]  # the local copy, by sha256
    assert cs.card["inputs"] == {"cs.jsonl.xz": "6ad94fb7232e33cc8e00c5688eff5a8e4d4c497de89c9b94cb81a830b60ac6c4"}
    assert cs.card["loader"]["params"]["min_overlap"] == 0.5
    assert cs.card["relevance"]["gold_context_grade"] == 0


# --- the relevance rule on hand-made text ------------------------------------------------------------------------

ANSWER = "Normalization reduces redundancy and improves data integrity in relational databases."
C_GOOD = "Normalization removes redundancy; it improves the integrity of data."  # 5 of 8 answer tokens
C_SOME = "Relational databases store rows in tables."  # 2 of 8
C_NONE = "Cooking pasta needs boiling water."  # 0 of 8
C_TIE = "Databases are relational."  # 2 of 8


def test_content_tokens():
    assert content_tokens(ANSWER) == {
        "normalization",
        "reduce",
        "redundancy",
        "improve",
        "data",
        "integrity",
        "relational",
        "database",
    }
    assert content_tokens("The queries, a B-tree's 2 indexes!") == {"query", "tree", "indexe"}


def test_grade_chunks_threshold_fallback_and_gold_context():
    chunks = [("c0", C_GOOD), ("c1", C_SOME), ("c2", C_NONE)]
    assert grade_chunks(ANSWER, chunks) == ({"c0": 2}, "threshold", 0.625)
    assert grade_chunks(ANSWER, chunks, gold_context_grade=1) == ({"c0": 2, "c1": 1, "c2": 1}, "threshold", 0.625)
    assert grade_chunks(ANSWER, chunks, min_overlap=0.7) == ({"c0": 2}, "fallback", 0.625)
    weak = [("c1", C_SOME), ("c2", C_NONE), ("c3", C_TIE)]
    assert grade_chunks(ANSWER, weak) == ({"c1": 2, "c3": 2}, "fallback", 0.25)  # all ties of the best overlap
    assert grade_chunks(ANSWER, weak, fallback_min_overlap=0.3) == ({}, "none", 0.25)
    assert grade_chunks(ANSWER, weak, fallback_min_overlap=None, gold_context_grade=1) == (
        {"c1": 1, "c2": 1, "c3": 1},
        "none",
        0.25,
    )


def test_chunk_qrels_only_point_into_the_gold_context(tmp_path):
    s8 = [
        "alpha bravo charlie delta echo foxtrot golf hotel.",
        "Normalization removes redundancy and improves integrity of data.",
        "kilo lima mike november oscar papa quebec romeo.",
    ]
    book = " ".join(s8)  # 8 whitespace tokens per sentence -> 3 chunks of size 8
    other = "Normalization reduces redundancy and improves data integrity in relational databases. sierra tango uniform"
    rows = [
        _row(1, book, ANSWER),
        _row(2, other, "Uniform tango sierra words."),
        _row(3, book, "Mike November Oscar papa quebec romeo words"),
    ]
    src = load_ultradomain(_write(tmp_path / "tiny.jsonl", rows))
    corpus, s2d, _ = chunk_corpus(src.sources, _ws_spans, ChunkParams(size=8, overlap=0))
    qrels = src.chunk_qrels(corpus, s2d)
    book_id = src.sources["doc_id"][0]
    assert s2d[book_id] == [f"{book_id}#0", f"{book_id}#1", f"{book_id}#2"]
    # the other context holds the whole answer, but only chunks of the gold book may be relevant
    assert qrels["id1"] == {f"{book_id}#1": 2}
    assert qrels["id3"] == {f"{book_id}#2": 2}  # 6 of 7 answer tokens ('word' is not in the chunk)
    assert list(qrels["id2"]) == [src.sources["doc_id"][1] + "#1"]
    rules = {
        q: json.loads(m)["relevance_rule"] for q, m in zip(src.queries["query_id"], src.queries["meta"], strict=True)
    }
    assert rules == {"id1": "threshold", "id2": "threshold", "id3": "threshold"}
    measured = src.card["relevance_measured"]["tiny"]
    assert measured["rule_threshold"] == 3 and measured["answer_chunks_total"] == 3
    assert measured["queries_with_answer_run_in_a_chunk"] == 1 and measured["of_which_run_chunk_graded_2"] == 1


# --- reading: formats, offline, duplicates ------------------------------------------------------------------


def test_plain_and_compressed_files_read_the_same_rows_offline(tmp_path, monkeypatch):
    rows = [_row(1, "Some context text here.", "An answer."), _row(2, "Another context.", "Second answer.")]

    import datasets

    def listing(folder: Path) -> list[str]:
        return sorted(str(p) for p in folder.rglob("*")) if folder.exists() else []

    home_cache = Path(datasets.config.HF_DATASETS_CACHE)
    before = (listing(home_cache), datasets.config.HF_HUB_OFFLINE, datasets.is_progress_bar_enabled())
    monkeypatch.setattr(socket.socket, "connect", _no_network)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # datasets' cache goes to a temp dir, removed afterwards
    exts = [".jsonl", ".jsonl.bz2", ".jsonl.gz", ".jsonl.xz"]
    got = [read_rows(_write(tmp_path / f"d{ext}", rows)) for ext in exts]
    assert all(g == got[0] for g in got) and [r["_id"] for r in got[0]] == ["id1", "id2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"d{ext}" for ext in exts]
    assert (listing(home_cache), datasets.config.HF_HUB_OFFLINE, datasets.is_progress_bar_enabled()) == before
    ds = load_ultradomain(tmp_path / "d.jsonl.xz")
    assert set(ds.sources["scope_id"]) == {"d"} and set(ds.sources["kind"]) == {"book"}


def test_duplicate_ids_are_renamed_deterministically(tmp_path):
    rows = [_row(1, "Context one.", "A."), _row(1, "Context one.", "B."), _row(1, "Context two.", "C.")]
    ds = load_ultradomain(_write(tmp_path / "dup.jsonl", rows), domain="dupes")
    assert list(ds.queries["query_id"]) == ["id1", "id1~1", "id1~2"]
    assert set(ds.queries["scope_id"]) == {"dupes"} and len(ds.sources) == 2
    assert [d["query_id"] for d in ds.card["stats"]["dupes"]["duplicate_ids_renamed"]] == ["id1~1", "id1~2"]


# --- errors --------------------------------------------------------------------------------------------------


def _good(n: int = 4) -> list[dict]:
    return [_row(i, f"Context number {i % 2}.", f"Answer {i}.") for i in range(1, n + 1)]


@pytest.mark.parametrize("ext", [".jsonl", ".jsonl.xz"])
def test_truncated_line_names_file_row_and_line(tmp_path, ext):
    lines = [json.dumps(r) for r in _good()]
    raw = "\n".join(lines[:2]) + "\n\n" + lines[2][:40] + "\n" + lines[3] + "\n"  # blank line 3, truncated line 4
    path = _write(tmp_path / f"bad{ext}", [], raw)
    with pytest.raises(DatasetError, match=rf"bad{re.escape(ext)}: row 3 \(line 4\): not valid JSON"):
        load_ultradomain(path)


def test_truncated_xz_stream_is_reported(tmp_path):
    good = _write(tmp_path / "ok.jsonl.xz", _good() * 50)
    cut = tmp_path / "cut.jsonl.xz"
    cut.write_bytes(good.read_bytes()[:-40])
    with pytest.raises(DatasetError, match=r"cut\.jsonl\.xz: cannot read the file .*truncated or corrupt"):
        load_ultradomain(cut)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.pop("input"), r"row 3 \(line 3\): key 'input' is missing"),
        (lambda r: r.pop("context"), r"row 3 \(line 3\): key 'context' is missing"),
        (lambda r: r.update(context=None), r"row 3 \(line 3\): key 'context' is null"),
        (lambda r: r.pop("answers"), r"row 3 \(line 3\): key 'answers' is missing"),
        (
            lambda r: r.update(answers="just a string"),
            r"row 3 \(line 3\): key 'answers' must be a list of strings, got str",
        ),
        (lambda r: r.update(answers=[1, 2]), r"row 3 \(line 3\): key 'answers' must be a non-empty list of strings"),
        (lambda r: r.update(answers=[]), r"row 3 \(line 3\): key 'answers' must be a non-empty list of strings"),
        (lambda r: r.update(input=5), r"row 3 \(line 3\): key 'input' must be a string, got int"),
        (lambda r: r.update(_id="has space"), r"row 3 \(line 3\): key '_id' contains whitespace"),
    ],
)
def test_bad_rows_name_file_row_and_key(tmp_path, mutate, message):
    rows = _good()
    mutate(rows[2])
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DatasetError, match=r"bad\.jsonl: " + message):
        load_ultradomain(path)


def test_wrong_type_far_into_a_big_file_is_not_cast_away(tmp_path):
    rows = [_row(i, f"Context {i} " + "word " * 250_000, f"Answer {i}.") for i in range(12)]  # ~15 MB
    rows[11]["input"] = 3
    with pytest.raises(DatasetError, match=r"big\.jsonl: row 12 \(line 12\): key 'input' must be a string, got int"):
        load_ultradomain(_write(tmp_path / "big.jsonl", rows))


def test_not_an_object_and_empty_file(tmp_path):
    lines = [json.dumps(r) for r in _good()]
    path = _write(tmp_path / "list.jsonl", [], "\n".join(lines[:1] + ["[1, 2]"] + lines[1:]) + "\n")
    with pytest.raises(DatasetError, match=r"list\.jsonl: row 2 \(line 2\): expected a JSON object, got list"):
        load_ultradomain(path)
    with pytest.raises(DatasetError, match=r"empty\.jsonl: no rows"):
        load_ultradomain(_write(tmp_path / "empty.jsonl", [], ""))


def test_missing_file_and_hub_without_permission(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl.*data\.root \(or LETHE_DATA_ROOT\)"):
        load_ultradomain(tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match=r"allow_hub is false"):
        load_ultradomain("TommyChien/UltraDomain", domain="cs")
    with pytest.raises(FileNotFoundError, match=r"allow_hub is false"):
        load_ultradomain(domain="cs")
    with pytest.raises(DatasetError, match=r"<domain>"):
        load_ultradomain(_write(tmp_path / "cs.json", _good()))


def test_hub_offline_fails_fast_and_clearly(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(socket.socket, "connect", _no_network)
    t0 = time.perf_counter()
    with pytest.raises(
        FileNotFoundError, match=r"TommyChien/UltraDomain cs\.jsonl from the hub cache \(HF_HUB_OFFLINE"
    ):
        load_ultradomain(domain="cs", allow_hub=True, hub_cache_dir=str(tmp_path / "hub"))
    assert time.perf_counter() - t0 < 5


# --- full builds -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, n_queries, n_contexts", [("ultradomain_cs", 100, 10), ("ultradomain_mix", 130, 61)])
def test_build_and_read_back(tmp_path, embedder, name, n_queries, n_contexts):
    cfg = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "dataset" / f"{name}.yaml"))
    t0 = time.perf_counter()
    folder = build_dataset(cfg, DATA_ROOT, tmp_path, embedder)
    seconds = time.perf_counter() - t0
    ds = read_dataset(folder)
    print(f"\n{name}: build_dataset {seconds:.1f}s, {len(ds.corpus)} chunks")
    assert len(ds.queries) == n_queries and ds.corpus["source_id"].nunique() == n_contexts
    doc_source = dict(zip(ds.corpus["doc_id"], ds.corpus["source_id"], strict=True))
    qmeta = {q: json.loads(m) for q, m in zip(ds.queries["query_id"], ds.queries["meta"], strict=True)}
    assert set(ds.qrels) == set(qmeta)  # with the fallback every query has relevant chunks
    for qid, docs in ds.qrels.items():
        assert docs and all(doc_source[d] == qmeta[qid]["source_id"] for d in docs), qid
        assert set(docs.values()) == {2} and len(docs) == qmeta[qid]["answer_chunks"]
    measured = ds.card["relevance_measured"][name.split("_")[1]]
    rules = Counter(m["relevance_rule"] for m in qmeta.values())
    assert rules == {"threshold": measured["rule_threshold"], "fallback": measured["rule_fallback"]}
    assert set(measured["fallback_query_ids"]) == {q for q, m in qmeta.items() if m["relevance_rule"] == "fallback"}
    assert ds.card["counts"]["qrels_pairs"] == measured["answer_chunks_total"]


def test_mix_build_is_byte_deterministic(tmp_path, embedder):
    cfg = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "dataset" / "ultradomain_mix.yaml"))
    a = build_dataset(cfg, DATA_ROOT, tmp_path / "a", embedder)
    b = build_dataset(cfg, DATA_ROOT, tmp_path / "b", embedder)
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir()) and "qrels.trec" in files
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_seed_003_domains_load_where_present_and_name_the_missing_file(tmp_path):
    """agriculture and legal are not in ../shared/data: their configs compose, a build without the file names it,
    and with a file of that name the loader takes the domain from it."""
    from experiments.config import load_config
    from experiments.datasets import dataset_build_key

    for d in ("agriculture", "legal"):
        cfg = load_config([f"dataset=ultradomain_{d}", f"data.root={tmp_path}"])
        with pytest.raises(FileNotFoundError, match=f"ultradomain/{d}.jsonl"):
            dataset_build_key(cfg)
        (tmp_path / "ultradomain").mkdir(exist_ok=True)
        _write(
            tmp_path / "ultradomain" / f"{d}.jsonl",
            [_row(i, f"Crop rotation text {i}. " * 5, "rotation") for i in range(2)],
        )
        src = load_ultradomain(tmp_path / "ultradomain" / f"{d}.jsonl")
        assert set(src.sources["scope_id"]) == {d} and len(src.queries) == 2
        assert len(dataset_build_key(cfg)) == 16
