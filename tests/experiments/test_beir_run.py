"""A BEIR folder written by hand runs through the real runner (dataset=beir) with BM25 (Pyserini) and vector (the
real MiniLM): each query's relevant document, which shares its words and topic, is ranked first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.runner import run_experiment
from lethebench.runs import RunFolder
from lethebench.trec import read_qrels

CORPUS = [
    {
        "_id": "photo",
        "title": "Photosynthesis",
        "text": "Plants convert sunlight, water and carbon dioxide into glucose and oxygen inside their chloroplasts.",
    },
    {"_id": "volcano", "title": "Volcanoes", "text": "Magma rises through the crust and erupts as lava, ash and gas."},
    {
        "_id": "espresso",
        "title": "Espresso",
        "text": "Hot water is forced through finely ground coffee beans under high pressure to brew espresso.",
    },
    {
        "_id": "tides",
        "title": "Tides",
        "text": "The gravitational pull of the moon makes ocean tides rise and fall twice a day.",
    },
    {"_id": "bike", "title": "", "text": "A bicycle has two wheels, pedals, a chain and handlebars for steering."},
    {
        "_id": "compiler",
        "title": "Compilers",
        "text": "A compiler translates source code into machine instructions before the program runs.",
    },
]
QUERIES = [
    {"_id": "q-photo", "text": "how do plants turn sunlight into glucose"},
    {"_id": "q-tides", "text": "what makes ocean tides rise and fall"},
    {"_id": "q-espresso", "text": "how is espresso coffee brewed under pressure"},
    {"_id": "q-volcano", "text": "what erupts from a volcano"},
    {"_id": "q-unjudged", "text": "bicycle pedals"},  # in no qrels file: not loaded, as in BEIR
]
RELEVANT = {"q-photo": "photo", "q-tides": "tides", "q-espresso": "espresso", "q-volcano": "volcano"}


@pytest.fixture(scope="module")
def tiny_beir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("beir") / "tiny"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in QUERIES))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq-photo\tphoto\t2\nq-photo\ttides\t0\nq-tides\ttides\t1\nq-espresso\tespresso\t1\n"
    )
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq-volcano\tvolcano\t1\n")
    return folder


def _overrides(folder: Path, *extra: str) -> list[str]:
    files = [
        folder / "corpus.jsonl",
        folder / "queries.jsonl",
        folder / "qrels" / "dev.tsv",
        folder / "qrels" / "test.tsv",
    ]
    return [
        "dataset=beir",
        "dataset.name=tiny_beir",
        f"dataset.beir_dir={folder}",
        f"dataset.files=[{','.join(map(str, files))}]",
        *extra,
    ]


@pytest.mark.parametrize("method", ["bm25", "vector"])
def test_hand_written_beir_folder_runs_and_ranks_the_relevant_doc_first(cfg_for, tiny_beir, method):
    folder = run_experiment(cfg_for(f"method={method}", *_overrides(tiny_beir)))
    rf = RunFolder(folder)
    m = rf.metrics
    assert m["queries"]["evaluated"] == 4  # test and dev; the unjudged query was never loaded
    assert set(rf.per_query["status"]) == {"ok"} and set(rf.per_query["n_eligible"]) == {len(CORPUS)}
    assert {q: ranking[0][0] for q, ranking in rf.run.items()} == RELEVANT
    assert m["means"]["mrr@10"] == 1.0 and m["means"]["ndcg@10"] == pytest.approx(1.0)
    # graded relevance reaches the run's qrels; the score-0 row does not
    assert read_qrels(folder / "qrels.trec")["q-photo"] == {"photo": 2}
    assert rf.manifest["dataset"]["name"] == "tiny_beir"


def test_one_split_is_selected_at_run_time(cfg_for, tiny_beir):
    folder = run_experiment(cfg_for("method=bm25", *_overrides(tiny_beir, "dataset.split=dev")))
    rf = RunFolder(folder)
    assert rf.metrics["queries"]["evaluated"] == 1 and list(rf.run) == ["q-volcano"]
