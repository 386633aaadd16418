"""BEIR in and out: processed datasets (a small real LetheBench build, two real LoCoMo conversations) exported to
BEIR and loaded back are the same datasets, file for file; hand-written BEIR folders load as one scope with BEIR's
conventions, and malformed ones stop with the file and line named."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from experiments.config import load_config
from experiments.datasets import dataset_build_key, prepare_dataset
from lethe.core.paths import CONF_DIR
from lethebench.build import build_dataset, load_sources
from lethebench.chunking import ChunkParams
from lethebench.export_beir import beir_files, export_beir
from lethebench.loaders.beir import SIDECAR, load_beir
from lethebench.schema import CORPUS_COLUMNS, QUERY_COLUMNS, Dataset, DatasetError, read_dataset
from tests.conftest import DATA_ROOT


def _config(name: str, **over) -> dict:
    return {**OmegaConf.to_container(OmegaConf.load(CONF_DIR / "dataset" / f"{name}.yaml")), **over}


def _reload(out: Path, root: Path, embedder, chunking: ChunkParams | None = None) -> Path:
    """Build the exported folder ``out`` with the beir loader (every file of the export listed)."""
    cfg = {"name": "back", "loader": "beir", "files": beir_files(out), "params": {}}
    return build_dataset(cfg, Path("/"), root, embedder, chunking or ChunkParams())


def _assert_same(a: Dataset, b: Dataset) -> None:
    pd.testing.assert_frame_equal(a.corpus, b.corpus)
    pd.testing.assert_frame_equal(a.queries, b.queries)
    assert a.qrels == b.qrels
    if a.contradictions is None:
        assert b.contradictions is None
    else:
        pd.testing.assert_frame_equal(a.contradictions, b.contradictions)


@pytest.fixture(scope="module")
def lethebench_folder(embedder, tmp_path_factory) -> Path:
    """A small real LetheBench build: three splits, every category column, history, graded qrels, contradictions."""
    cfg = _config("lethebench")
    cfg["params"].update(splits={"test": 4, "train": 1, "dev": 1}, session_turns=[20, 30])
    return build_dataset(cfg, DATA_ROOT, tmp_path_factory.mktemp("lb"), embedder)


@pytest.fixture(scope="module")
def locomo_folder(embedder, locomo_path, tmp_path_factory) -> Path:
    """Two real LoCoMo conversations (speakers, timestamps, no splits, questions without evidence)."""
    root = tmp_path_factory.mktemp("loco")
    (root / "two.json").write_text(json.dumps(json.loads(locomo_path.read_text())[:2]))
    return build_dataset(_config("locomo", files=["two.json"]), root, root / "out", embedder)


# ------------------------------------------------------------------------------------------ round trip


@pytest.mark.parametrize("which", ["lethebench_folder", "locomo_folder"])
def test_export_then_load_gives_the_same_dataset_file_for_file(which, request, embedder, tmp_path):
    folder = request.getfixturevalue(which)
    original = read_dataset(folder)
    out = export_beir(folder, tmp_path / "beir")
    back = read_dataset(_reload(out, tmp_path / "processed", embedder))
    _assert_same(original, back)
    # the data files are byte-identical, so the dataset's content hash (part of every run's identity) is too
    assert original.card["outputs_sha256"] == back.card["outputs_sha256"]
    assert back.content_sha256 == original.content_sha256
    assert back.card["sidecar"]["dataset"] == original.card["name"] != folder.name  # the config's name, not the key
    assert back.card["sidecar"]["build_key"] == folder.name
    # and exporting the loaded dataset again writes the same BEIR files
    again = export_beir(back, tmp_path / "again")
    for name in ("corpus.jsonl", "queries.jsonl", *(p.relative_to(out).as_posix() for p in (out / "qrels").iterdir())):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_the_round_trip_covers_every_column(lethebench_folder, locomo_folder):
    lb, loco = read_dataset(lethebench_folder), read_dataset(locomo_folder)
    assert set(lb.queries["split"]) == {"test", "train", "dev"} and loco.queries["split"].isna().all()
    assert len(lb.contradictions) > 0 and lb.queries["history"].map(len).sum() > 0
    assert {g for d in lb.qrels.values() for g in d.values()} == {1, 2}
    assert loco.corpus["timestamp"].notna().all() and loco.corpus["speaker"].notna().all()
    assert len(loco.queries) > len(loco.qrels)  # questions without evidence: in queries.jsonl, in no qrels file
    assert lb.corpus["scope_id"].nunique() > 1 and loco.corpus["scope_id"].nunique() == 2


def test_export_is_plain_beir(lethebench_folder, tmp_path):
    ds = read_dataset(lethebench_folder)
    out = export_beir(lethebench_folder, tmp_path / "beir")
    assert sorted(p.name for p in out.iterdir()) == ["corpus.jsonl", SIDECAR, "qrels", "queries.jsonl"]
    corpus = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    assert [set(r) for r in corpus[:1]] == [{"_id", "title", "text"}] and len(corpus) == len(ds.corpus)
    assert [r["_id"] for r in corpus] == list(ds.corpus["doc_id"]) and corpus[0]["text"] == ds.corpus["text"].iloc[0]
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    assert [set(r) for r in queries[:1]] == [{"_id", "text"}] and len(queries) == len(ds.queries)
    assert sorted(p.name for p in (out / "qrels").iterdir()) == ["dev.tsv", "test.tsv", "train.tsv"]
    test = (out / "qrels" / "test.tsv").read_text().splitlines()
    assert test[0] == "query-id\tcorpus-id\tscore"
    split = dict(zip(ds.queries["query_id"], ds.queries["split"], strict=True))
    rows = [line.split("\t") for line in test[1:]]
    assert {split[q] for q, _, _ in rows} == {"test"}
    assert len(rows) == sum(len(ds.qrels[q]) for q in ds.qrels if split[q] == "test")
    assert all(ds.qrels[q][d] == int(s) for q, d, s in rows)


@pytest.fixture(scope="module")
def small_chunks_folder(embedder, locomo_folder, tmp_path_factory) -> Path:
    """The two conversations in 16-token windows: most turns are split into chunks <turn>#<i>."""
    root = locomo_folder.parents[2]
    return build_dataset(
        _config("locomo", files=["two.json"]),
        root,
        tmp_path_factory.mktemp("small"),
        embedder,
        ChunkParams(size=16, overlap=4),
    )


@pytest.mark.parametrize("size,overlap", [(16, 4), (320, 64), (8, 2)])
def test_docs_come_back_as_exported_whatever_the_chunking(small_chunks_folder, embedder, tmp_path, size, overlap):
    # the docs of an export are chunks already (here of 16 tokens, source_id the turn): they come back as they
    # were, whether the build's windows are the same (a window that began inside a word can re-tokenize longer),
    # longer (nothing to split, but source_id must be restored) or shorter (most would be split again)
    original = read_dataset(small_chunks_folder)
    assert (original.corpus["doc_id"] != original.corpus["source_id"]).mean() > 0.5
    out = export_beir(small_chunks_folder, tmp_path / "beir")
    back = read_dataset(_reload(out, tmp_path / "processed", embedder, ChunkParams(size=size, overlap=overlap)))
    _assert_same(original, back)
    assert original.card["outputs_sha256"] == back.card["outputs_sha256"]
    assert back.card["chunking"]["prechunked"] is True


def test_the_sidecar_must_be_listed_and_match_the_files(locomo_folder, tmp_path):
    out = export_beir(locomo_folder, tmp_path / "beir")
    plain = [out / "corpus.jsonl", out / "queries.jsonl", out / "qrels" / "test.tsv"]
    with pytest.raises(DatasetError, match=r"lethe_sidecar\.jsonl exists .* not among the input files"):
        load_beir(*plain)
    assert set(load_beir(*plain, sidecar="ignore").sources["scope_id"]) == {"beir"}  # the folder's name
    lines = (out / "queries.jsonl").read_text().splitlines()
    (out / "queries.jsonl").write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")
    with pytest.raises(DatasetError, match=r"queries\.jsonl: changed after the export wrote it"):
        load_beir(*plain, out / SIDECAR)
    other = export_beir(locomo_folder, tmp_path / "other")
    (other / "qrels" / "test.tsv").rename(other / "qrels" / "mine.tsv")
    with pytest.raises(DatasetError, match=r"wrote .*qrels/test\.tsv, which is not among the input files"):
        load_beir(other)


def test_export_never_replaces_a_folder_that_is_not_an_export(locomo_folder, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not an earlier BEIR export"):
        export_beir(locomo_folder, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    out = export_beir(locomo_folder, tmp_path / "beir")
    (out / "stale.txt").write_text("x")
    export_beir(locomo_folder, out)  # an earlier export is replaced whole
    assert not (out / "stale.txt").exists()


def test_export_entry_point_builds_then_exports(locomo_folder, tmp_path, capsys):
    from experiments.export_beir import export

    cfg = load_config(
        ["dataset=custom", "dataset.name=two_convs", f"dataset.folder={locomo_folder}", f"out_dir={tmp_path / 'out'}"],
        config_name="export_beir",
    )
    out = export(cfg)
    assert out == tmp_path / "out" and (out / SIDECAR).is_file()
    printed = capsys.readouterr().out
    assert f"dataset=beir dataset.name=two_convs_beir dataset.beir_dir={out}" in printed
    assert f"{out / 'qrels' / 'test.tsv'},{out / SIDECAR}]" in printed


# ------------------------------------------------------------------------------------------ hand-written BEIR


def _write(folder: Path, corpus: list | str, queries: list | str, qrels: dict[str, str]) -> Path:
    """A BEIR folder; rows given as dicts are written as JSON lines, strings as they are."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        (folder / name).write_text(rows if isinstance(rows, str) else "".join(json.dumps(r) + "\n" for r in rows))
    (folder / "qrels").mkdir(exist_ok=True)
    for split, text in qrels.items():
        (folder / "qrels" / f"{split}.tsv").write_text(text)
    return folder


CORPUS = [
    {"_id": "d1", "title": "Photosynthesis", "text": "Plants turn light into sugar."},
    {"_id": "d2", "title": "", "text": "Volcanoes erupt lava.", "metadata": {"url": "x"}},
    {"_id": "d3", "text": "Tides follow the moon."},
    {"_id": "d4", "title": " ", "text": "  "},  # nothing to retrieve: dropped
    {"_id": 5, "title": "Espresso", "text": "Coffee under pressure."},
]
QUERIES = [
    {"_id": "q1", "text": "how do plants make sugar"},
    {"_id": "q2", "text": "what erupts"},
    {"_id": "q3", "text": "why tides"},
    {"_id": "q4", "text": "unjudged"},
    {"_id": "q5", "text": "coffee"},
]
HEADER = "query-id\tcorpus-id\tscore\n"


@pytest.fixture
def scifact(tmp_path) -> Path:
    return _write(
        tmp_path / "scifact",
        CORPUS,
        QUERIES,
        {
            "test": HEADER + "q1\td1\t2\nq1\td3\t0\nq2\td2\t1\nq3\td3\t0\nq3\td4\t1\n",
            "dev": "q5\t5\t1\n",  # no header: read as data
        },
    )


def test_a_hand_written_folder_is_one_scope_with_beir_conventions(scifact):
    src = load_beir(scifact)
    s, q = src.sources, src.queries
    assert list(s.columns) == list(CORPUS_COLUMNS) and list(q.columns) == list(QUERY_COLUMNS)
    assert list(s["doc_id"]) == ["d1", "d2", "d3", "5"] and list(s["position"]) == [0, 1, 2, 3]
    assert set(s["scope_id"]) == set(q["scope_id"]) == {"scifact"}
    assert list(s["text"]) == [
        "Photosynthesis Plants turn light into sugar.",
        "Volcanoes erupt lava.",
        "Tides follow the moon.",
        "Espresso Coffee under pressure.",
    ]
    assert json.loads(s["meta"].iloc[0]) == {"title": "Photosynthesis"} and json.loads(s["meta"].iloc[1]) == {
        "metadata": {"url": "x"}
    }
    # queries named by a loaded qrels file, at position n (every doc eligible); q4 is in no qrels file
    assert list(q["query_id"]) == ["q1", "q2", "q3", "q5"] and set(q["position"]) == {4}
    assert dict(zip(q["query_id"], q["split"], strict=True)) == {"q1": "test", "q2": "test", "q3": "test", "q5": "dev"}
    # graded relevance kept; score 0 is not relevant; d4 was dropped with its qrel, so q3 has no relevant doc
    assert src.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1}, "q5": {"5": 1}}
    ex = src.card["exclusions"]
    assert ex["queries_not_in_loaded_qrels"] == 1 and ex["queries_without_relevant_doc_ids"] == ["q3"]
    assert ex["qrels_rows_score_le_0"] == 2 and src.dropped["documents with empty title and text (dropped)"] == ["d4"]
    assert src.dropped["qrels rows naming a dropped empty document (dropped)"] == ["q3 -> d4"]
    assert set(src.card["inputs"]) == {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/dev.tsv"}


def test_only_the_listed_qrels_files_are_read_and_the_scope_can_be_named(scifact):
    src = load_sources(
        "beir", [scifact / "corpus.jsonl", scifact / "queries.jsonl", scifact / "qrels" / "dev.tsv"], {"scope": "sci"}
    )
    assert list(src.queries["query_id"]) == ["q5"] and set(src.sources["scope_id"]) == {"sci"}
    assert src.card["loader"]["params"] == {"scope": "sci", "sidecar": "auto", "unknown_ids": "error", "chunk": False}


@pytest.mark.parametrize(
    "corpus,queries,qrels,message",
    [
        (
            '{"_id": "d1", "text": "a"}\n{"title": "t", "text": "b"}\n',
            QUERIES,
            {},
            r"corpus\.jsonl: line 2: missing key '_id'",
        ),
        (
            '{"_id": "d1", "text": "a"}\n\n{"_id": "d1", "text": "b"}\n',
            QUERIES,
            {},
            r"corpus\.jsonl: line 3: duplicate _id 'd1' \(first at line 1\)",
        ),
        (
            '{"_id": "d1", "text": "a"}\n{"_id": "d 2", "text": "b"}\n',
            QUERIES,
            {},
            r"corpus\.jsonl: line 2: '_id' 'd 2' contains whitespace",
        ),
        (
            '{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": "b"\n',
            QUERIES,
            {},
            r"corpus\.jsonl: line 2: not valid JSON",
        ),
        ('{"_id": "d1", "title": "a"}\n', QUERIES, {}, r"corpus\.jsonl: line 1: missing key 'text'"),
        ('{"_id": "d1", "text": 3}\n', QUERIES, {}, r"corpus\.jsonl: line 1: 'text' must be a string, got int"),
        (
            CORPUS,
            '{"_id": "q1", "text": "x"}\n{"_id": "q1", "text": "y"}\n',
            {},
            r"queries\.jsonl: line 2: duplicate _id 'q1'",
        ),
        (CORPUS, '{"_id": "q1", "text": " "}\n', {}, r"queries\.jsonl: line 1: empty query text for _id 'q1'"),
        (
            CORPUS,
            QUERIES,
            {"test": HEADER + "q1\td9\t1\n"},
            r"qrels/test\.tsv: line 2: corpus-id 'd9' is not in corpus\.jsonl",
        ),
        (
            CORPUS,
            QUERIES,
            {"test": HEADER + "q1\td1\t1\nq9\td1\t1\n"},
            r"qrels/test\.tsv: line 3: query-id 'q9' is not in queries\.jsonl",
        ),
        (
            CORPUS,
            QUERIES,
            {"test": HEADER + "q1\td1\thigh\n"},
            r"qrels/test\.tsv: line 2: score 'high' is not an integer",
        ),
        (
            CORPUS,
            QUERIES,
            {"test": HEADER + "q1\td1\t1.5\n"},
            r"qrels/test\.tsv: line 2: score '1\.5' is not an integer",
        ),
        (CORPUS, QUERIES, {"test": HEADER + "q1 d1 1\n"}, r"qrels/test\.tsv: line 2: expected 3 tab-separated fields"),
        (
            CORPUS,
            QUERIES,
            {"test": HEADER + "q1\td1\t1\nq1\td1\t2\n"},
            r"qrels/test\.tsv: line 3: query 'q1' doc 'd1' has score 2 here and 1 at",
        ),
        (
            CORPUS,
            QUERIES,
            {"test": HEADER + "q1\td1\t1\n", "train": HEADER + "q1\td2\t1\n"},
            r"qrels/train\.tsv: line 2: query 'q1' is already in split 'test'",
        ),
    ],
)
def test_malformed_folders_name_the_file_and_line(tmp_path, corpus, queries, qrels, message):
    folder = _write(tmp_path / "bad", corpus, queries, qrels or {"test": HEADER + "q1\td1\t1\n"})
    with pytest.raises(DatasetError, match=message):
        load_beir(folder)


def test_unknown_ids_can_be_dropped_and_listed(tmp_path):
    folder = _write(tmp_path / "b", CORPUS, QUERIES, {"test": HEADER + "q1\td1\t1\nq1\td9\t1\nq9\td2\t1\n"})
    src = load_beir(folder, unknown_ids="drop")
    assert src.qrels == {"q1": {"d1": 1}}
    assert src.dropped["qrels rows naming an unknown query or document (dropped, unknown_ids=drop)"] == [
        "test: q1 -> d9",
        "test: q9 -> d2",
    ]


def test_the_dataset_config_builds_a_folder_and_hashes_its_files(scifact, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("LETHE_ROOT", str(tmp_path))  # the work root: where a relative beir_dir is read from
    over = [
        f"data.root={tmp_path / 'elsewhere'}",  # not where a BEIR folder is looked for
        f"data.processed={tmp_path / 'processed'}",
        "dataset=beir",
        "dataset.beir_dir=scifact",
        "dataset.name=scifact",
        "dataset.provenance.license=CC-BY-4.0",
    ]
    cfg = load_config(over)
    folder = prepare_dataset(cfg, embedder=embedder)
    ds = read_dataset(folder)
    assert folder.name == dataset_build_key(cfg) and ds.card["provenance"]["license"] == "CC-BY-4.0"
    assert len(ds.corpus) == 4 and ds.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1}}  # only qrels/test.tsv is listed
    assert set(ds.card["inputs"]) == {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv"}
    (scifact / "qrels" / "test.tsv").write_text(HEADER + "q1\td1\t1\n")
    assert dataset_build_key(cfg) != folder.name  # an edited input file builds a new folder
    with pytest.raises(Exception, match="beir_dir"):
        prepare_dataset(load_config(["dataset=beir"]), embedder=embedder)  # the folder must be given


def test_beir_dir_is_absolute_or_relative_to_the_work_root_and_a_missing_one_is_named(
    scifact, embedder, tmp_path, monkeypatch
):
    monkeypatch.setenv("LETHE_ROOT", str(tmp_path / "work"))
    (tmp_path / "work").mkdir()
    base = [f"data.processed={tmp_path / 'processed'}", "dataset=beir", "dataset.name=scifact"]
    absolute = prepare_dataset(load_config([*base, f"dataset.beir_dir={scifact}"]), embedder=embedder)
    assert len(read_dataset(absolute).corpus) == 4
    # a folder under data.root, the rule before issue 38, is one interpolation away
    under_root = load_config([*base, f"data.root={scifact.parent}", "dataset.beir_dir=${data.root}/scifact"])
    assert read_dataset(prepare_dataset(under_root, embedder=embedder)).corpus.equals(read_dataset(absolute).corpus)
    # a relative path is not read from data.root: the error names the key, the folder tried and the rule
    relative = load_config([*base, f"data.root={scifact.parent}", "dataset.beir_dir=scifact"])
    tried = re.escape(str(tmp_path / "work" / "scifact"))
    with pytest.raises(FileNotFoundError, match=rf"dataset\.beir_dir='scifact': no such folder {tried} \(.*work root"):
        dataset_build_key(relative)
    # an existing folder without a listed file: the file tried is named
    (scifact / "qrels" / "test.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"input file not found: .*scifact/qrels/test\.tsv"):
        dataset_build_key(load_config([*base, f"dataset.beir_dir={scifact}"]))


def test_the_same_folder_from_two_places_and_through_a_symlink_is_one_dataset_and_one_run(
    scifact, embedder, tmp_path, monkeypatch
):
    """Where a BEIR folder sits is not what it is (issue 60): a copy elsewhere, a symlink to it (of the same name: the
    folder's name is its scope) and a relative beir_dir give one build key, one processed folder and one run hash."""
    import shutil

    from experiments.config import to_dict
    from experiments.run_identity import config_hash, hashed_config

    monkeypatch.setenv("LETHE_ROOT", str(tmp_path))
    shutil.copytree(scifact, tmp_path / "copy" / "scifact")
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "scifact").symlink_to(scifact, target_is_directory=True)
    base = [f"data.processed={tmp_path / 'processed'}", "dataset=beir", "dataset.name=scifact", "method=bm25"]
    places = [str(scifact), str(tmp_path / "copy" / "scifact"), str(tmp_path / "link" / "scifact"), "link/scifact"]
    cfgs = [load_config([*base, f"dataset.beir_dir={p}"]) for p in places]
    keys = {dataset_build_key(c) for c in cfgs}
    assert len(keys) == 1
    hashes = {config_hash(hashed_config(to_dict(c), dataset_build_key(c))) for c in cfgs}
    assert len(hashes) == 1
    first = prepare_dataset(cfgs[0], embedder=embedder)
    card = first / "card.json"
    stamp = card.stat().st_mtime_ns
    assert all(prepare_dataset(c, embedder=embedder) == first for c in cfgs[1:])  # reused, never built again
    assert card.stat().st_mtime_ns == stamp and str(tmp_path) not in card.read_text()
    # another folder name is another scope (the loader names the scope after the folder): another dataset
    (tmp_path / "renamed").symlink_to(scifact, target_is_directory=True)
    assert dataset_build_key(load_config([*base, f"dataset.beir_dir={tmp_path / 'renamed'}"])) not in keys


LONG = [
    {"_id": "long", "title": "Tides", "text": " ".join(["The moon pulls the oceans and the tides rise and fall."] * 4)},
    {"_id": "short", "title": "", "text": "Volcanoes erupt lava."},
]


@pytest.mark.parametrize("chunk", [False, True])
def test_documents_stay_whole_unless_chunking_is_asked_for(tmp_path, embedder, chunk, caplog):
    folder = _write(tmp_path / "long", LONG, QUERIES[:2], {"test": HEADER + "q1\tlong\t2\nq2\tshort\t1\n"})
    cfg = load_config(
        [
            f"data.processed={tmp_path / 'processed'}",
            "dataset=beir",
            "dataset.name=long",
            f"dataset.beir_dir={folder}",
            f"dataset.params.chunk={str(chunk).lower()}",
            "chunking.size_tokens=16",
            "chunking.overlap_tokens=4",
        ]
    )
    caplog.set_level(logging.INFO, logger="lethebench.build")
    ds = read_dataset(prepare_dataset(cfg, embedder=embedder))
    if not chunk:  # one retrieval unit per line of corpus.jsonl, doc id = _id, whatever chunking.size_tokens says
        assert list(ds.corpus["doc_id"]) == ["long", "short"] and ds.qrels == {"q1": {"long": 2}, "q2": {"short": 1}}
        assert ds.card["chunking"]["whole_documents"] is True and ds.card["chunking"]["tokens_max"] > 16
        assert ds.card["retrieval_unit"].startswith("whole documents") and "chunked" not in caplog.text
        with pytest.raises(ValueError, match=r"chunk='yes'; expected true or false \(dataset\.params\.chunk\)"):
            load_beir(folder, chunk="yes")
        return
    n = len(ds.corpus) - 1
    assert n > 1 and list(ds.corpus["doc_id"]) == [*(f"long#{i}" for i in range(n)), "short"]
    assert ds.qrels == {"q1": {f"long#{i}": 2 for i in range(n)}, "q2": {"short": 1}}  # every chunk at its grade
    assert ds.card["chunking"]["sources"] == 2 and ds.card["chunking"]["chunks"] == n + 1
    assert ds.card["retrieval_unit"].startswith("chunks") and "not comparable" in ds.card["retrieval_unit"]
    assert f"dataset long: chunked 2 sources into {n + 1} docs (1 split into windows" in caplog.text
