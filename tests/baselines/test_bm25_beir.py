"""method=bm25_beir on dataset=beir is BM25 as Anserini's BEIR regressions run it. On a BEIR folder written here from
real TechQA technotes (titles, whole texts of up to 2,400 characters, two exact copies that tie, a query that is also
a corpus document as in ArguAna), the harness's runs rank every query's docs exactly as Pyserini's own indexer
(``python -m pyserini.index.lucene``: JsonCollection with contents = title + " " + text, and BeirFlatCollection over
corpus.jsonl itself) and Pyserini's LuceneSearcher with ``set_bm25(0.9, 0.4)`` and ``--remove-query``'s filter do:
the same doc ids in the same order, with the same float32 scores. Tied docs are compared in trec_eval's order (score,
then doc id descending), which the runner writes and which trec_eval imposes on Pyserini's run file when it scores
it; Lucene's own hits break ties by index order. method=bm25 (k1=1.2, b=0.75, no query removal) on the same dataset
does not rank as Pyserini's BEIR settings do, so the comparison can fail."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from baselines.pyserini_jvm import ensure_jvm
from experiments.datasets import prepare_dataset
from experiments.runner import run_experiment
from lethe.core.paths import PROJECT_ROOT
from lethe.retrieval.ranking import canonical_order
from lethebench.runs import RunFolder
from lethebench.schema import read_dataset
from tests.conftest import DATA_ROOT

TECHQA = DATA_ROOT / "techqa" / "techqa_rag_eval_sample_480.jsonl"
N_DOCS = 40  # technotes in the corpus
N_QUESTIONS = 9  # answerable TechQA questions, each relevant to its own technote
SELF_QUERY = 20  # the doc whose id is also a query's id (its title as the text), as in ArguAna
NO_TITLE = 5  # a doc written with an empty title
COPIES = 2  # the first technotes again at the end, as <id>-copy: exact ties, which Lucene breaks by index order
_NOTE = re.compile(r"Title: (.*?)\n\nText:\n(.*)", re.S)

# Pyserini's own indexer, in a fresh process: the Anserini jar's IndexCollection behind `python -m
# pyserini.index.lucene`, with the flat regressions' index options; the shim only starts the JVM without the
# option Java 21's runtime lacks (baselines/pyserini_jvm.py)
INDEX = """
import runpy, sys
from baselines.pyserini_jvm import ensure_jvm
ensure_jvm()
sys.argv = ["pyserini.index.lucene", *sys.argv[1:]]
runpy.run_module("pyserini.index.lucene", run_name="__main__", alter_sys=True)
"""


def _techqa_beir(folder: Path) -> Path:
    """A BEIR folder of real TechQA technotes and questions (read from data.root, written under ``folder``)."""
    rows = [json.loads(line) for line in TECHQA.read_text().splitlines()]
    notes: dict[str, tuple[str, str]] = {}
    for r in rows:
        for c in r["contexts"]:
            m = _NOTE.match(c["text"])
            notes.setdefault(c["filename"].removesuffix(".txt"), (m.group(1).strip(), m.group(2).strip()))
    questions = [r for r in rows if not r["is_impossible"] and len(r["contexts"]) == 1][:N_QUESTIONS]
    gold = {r["id"]: r["contexts"][0]["filename"].removesuffix(".txt") for r in questions}
    ids = list(dict.fromkeys([*gold.values(), *notes]))[:N_DOCS]
    corpus = [{"_id": d, "title": "" if i == NO_TITLE else notes[d][0], "text": notes[d][1]} for i, d in enumerate(ids)]
    corpus += [{**r, "_id": r["_id"] + "-copy"} for r in corpus[:COPIES]]
    self_id = ids[SELF_QUERY]
    queries = [
        *({"_id": r["id"], "text": r["question"]} for r in questions),
        {"_id": self_id, "text": notes[self_id][0]},
        {"_id": "unjudged", "text": "how do I restart the server"},  # in no qrels file: not loaded
    ]
    qrels = [*gold.items(), (self_id, ids[SELF_QUERY + 1])]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels)
    )
    return folder


def _pyserini_index(collection: str, input_dir: Path, index: Path) -> Path:
    """Index ``input_dir`` with Pyserini's command-line indexer (the flat regressions' options)."""
    args = ["-collection", collection, "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1"]
    args += ["-input", str(input_dir), "-index", str(index), "-storePositions", "-storeDocvectors", "-storeRaw"]
    done = subprocess.run(
        [sys.executable, "-c", INDEX, *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and (index / "segments_1").is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    return index


def _pyserini_rankings(
    index: Path, queries: dict[str, str], bm25: tuple[float, float] = (0.9, 0.4), rm3: bool = False
) -> dict[str, list[tuple[str, float]]]:
    """Every query's hits from Pyserini's LuceneSearcher with Anserini's BEIR settings (``bm25``: k1, b), the query's
    own doc removed as ``python -m pyserini.search.lucene --remove-query`` removes it; ``rm3``: with
    ``set_rm3()``'s defaults (10 terms, 10 docs, original query weight 0.5), no query removal."""
    ensure_jvm()
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(index))
    searcher.set_bm25(*bm25)
    if rm3:
        searcher.set_rm3()
    try:
        return {
            qid: [(h.docid, float(h.score)) for h in searcher.search(text, k=1000) if rm3 or h.docid != qid]
            for qid, text in queries.items()
        }
    finally:
        searcher.close()


def _f32(ranking: list[tuple[str, float]]) -> list[tuple[str, np.float32]]:
    """(doc id, score) with the score as float32, Lucene's precision (run.trec stores 9 significant digits)."""
    return [(d, np.float32(s)) for d, s in ranking]


@pytest.fixture(scope="module")
def beir(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("bm25_beir")
    folder = _techqa_beir(base / "techqa_beir")
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    flat_in = base / "jsonl"  # one field, contents = title + " " + text (the loader's join)
    flat_in.mkdir()
    (flat_in / "docs.jsonl").write_text(
        "".join(json.dumps({"id": r["_id"], "contents": r["title"] + " " + r["text"]}) + "\n" for r in corpus)
    )
    beir_in = base / "beirflat"  # corpus.jsonl as it is, read by Anserini's BEIR collection (title + "\n" + text)
    beir_in.mkdir()
    (beir_in / "corpus.jsonl").write_bytes((folder / "corpus.jsonl").read_bytes())
    return {
        "folder": folder,
        "corpus": corpus,
        "indexes": {
            "JsonCollection": _pyserini_index("JsonCollection", flat_in, base / "idx_json"),
            "BeirFlatCollection": _pyserini_index("BeirFlatCollection", beir_in, base / "idx_beirflat"),
        },
    }


def _queries(folder: Path) -> dict[str, str]:
    """query id -> text of the folder's queries.jsonl."""
    return {r["_id"]: r["text"] for r in map(json.loads, (folder / "queries.jsonl").read_text().splitlines())}


def _overrides(folder: Path, *extra: str) -> list[str]:
    return ["dataset=beir", "dataset.name=techqa_beir", f"dataset.beir_dir={folder}", *extra]


@pytest.fixture(scope="module")
def runs(cfg_for, beir) -> dict[str, RunFolder]:
    return {
        m: RunFolder(run_experiment(cfg_for(f"method={m}", *_overrides(beir["folder"]))))
        for m in ("bm25_beir", "bm25", "bm25_rm3")
    }


def test_the_dataset_keeps_one_doc_per_corpus_line(cfg_for, beir, runs):
    ds = read_dataset(prepare_dataset(cfg_for("method=bm25_beir", *_overrides(beir["folder"]))))
    lines = (beir["folder"] / "corpus.jsonl").read_text().splitlines()
    assert len(ds.corpus) == len(lines) == N_DOCS + COPIES
    assert list(ds.corpus["doc_id"]) == [r["_id"] for r in beir["corpus"]]  # doc id = BEIR's _id, in file order
    # whole although the default chunking (320-token windows) would have split some of them
    assert ds.card["chunking"]["whole_documents"] is True and ds.card["chunking"]["tokens_max"] > 320
    assert ds.card["retrieval_unit"].startswith("whole documents")
    assert runs["bm25_beir"].manifest["method"]["k1"] == 0.9 and runs["bm25_beir"].manifest["method"]["b"] == 0.4


@pytest.mark.parametrize("collection", ["JsonCollection", "BeirFlatCollection"])
def test_bm25_beir_ranks_as_pyserini_does(beir, runs, collection):
    run = runs["bm25_beir"].run
    queries = _queries(beir["folder"])
    assert sorted(run) == sorted(q for q in queries if q != "unjudged")  # 10 judged queries, every one ranked
    ref = _pyserini_rankings(beir["indexes"][collection], {q: queries[q] for q in run})
    for qid in run:
        # every matching doc (run.k=100 > 42 docs). Ties: Pyserini's hits break them by Lucene's index order, the
        # runner by doc id descending (trec_eval's rule, which also reorders Pyserini's run file when it is scored):
        # Pyserini's hits are compared in that order, so every score and every set of tied docs must match
        assert _f32(run[qid]) == _f32(canonical_order(ref[qid])), qid
    assert sum(len(r) for r in run.values()) > 10 * 20  # long rankings, not a few top hits
    tied = [q for q, r in ref.items() if len({s for _, s in _f32(r)}) < len(r)]
    assert len(tied) >= 2, tied  # the copies tie with their originals: the tie rule is exercised
    assert any(ref[q] != canonical_order(ref[q]) for q in tied)  # and Lucene's own tie order differs from it


def test_bm25_defaults_do_not_rank_as_pyserini_beir_does(beir, runs):
    """The comparison can fail: k1=1.2, b=0.75 and no query removal change the doc order, not only the scores."""
    queries = _queries(beir["folder"])
    ref = _pyserini_rankings(beir["indexes"]["JsonCollection"], {q: queries[q] for q in runs["bm25"].run})
    bm25 = runs["bm25"].run
    reordered = [q for q in bm25 if [d for d, _ in bm25[q]] != [d for d, _ in canonical_order(ref[q])]]
    assert len(reordered) >= 2, reordered
    self_id = beir["corpus"][SELF_QUERY]["_id"]
    assert bm25[self_id][0][0] == self_id  # the query's own doc, first without removal
    assert self_id not in {d for d, _ in runs["bm25_beir"].run[self_id]}


def test_bm25_rm3_ranks_as_pyserinis_rm3_searcher_does(beir, runs):
    """method=bm25_rm3 (k1 1.2, b 0.75, RM3 10/10/0.5) equals Pyserini's LuceneSearcher with set_bm25(1.2, 0.75) and
    set_rm3()'s defaults over Pyserini's own index (document vectors stored), every doc and float32 score; and RM3
    changes the order of plain BM25's ranking, so the comparison can fail."""
    queries = _queries(beir["folder"])
    rm3 = runs["bm25_rm3"].run
    ref = _pyserini_rankings(beir["indexes"]["JsonCollection"], {q: queries[q] for q in rm3}, (1.2, 0.75), rm3=True)
    for qid in rm3:
        assert _f32(rm3[qid]) == _f32(canonical_order(ref[qid])), qid
    bm25 = runs["bm25"].run
    assert sum([d for d, _ in rm3[q]] != [d for d, _ in bm25[q]] for q in rm3) >= 2
    assert runs["bm25_rm3"].manifest["method"]["rm3"] == {"fb_terms": 10, "fb_docs": 10, "original_query_weight": 0.5}
