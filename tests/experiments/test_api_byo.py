"""Bring your own system (experiments.byo) through experiments.api.experiment, on the smoke tier's two LoCoMo
conversations: a Python retriever, a callable and an outside ranking (TREC file, DataFrame, ranx Run, dict) beside
the config methods bm25 and hybrid, in one call; the outside ranking is cut to each query's eligible turns and
scored as ir_measures scores the cut run."""

from __future__ import annotations

import re
from pathlib import Path

import ir_measures
import pandas as pd
import pytest

from experiments.api import experiment
from experiments.config import load_config
from experiments.datasets import dataset_build_key
from experiments.reference import processed_folder
from lethebench.runs import RunFolder
from lethebench.schema import read_table
from lethebench.trec import read_qrels

SCOPES = ["dataset.scopes=[conv-26,conv-30]"]
TOKEN = re.compile(r"\w+")


class Overlap:
    """A user's retriever: how many distinct query words a turn holds (ties: doc id descending)."""

    name = "overlap"

    def index(self, docs):
        self.words = {d.doc_id: set(TOKEN.findall(d.text.lower())) for d in docs}

    def search(self, query, k):
        q = set(TOKEN.findall(query.text.lower()))
        scored = {d: float(len(q & w)) for d, w in self.words.items()}
        return sorted(scored.items(), key=lambda x: (x[1], x[0]), reverse=True)[:k]


def _paths(smoke) -> list[str]:
    keys = ("data.root", "data.processed", "cache_dir", "results_dir")
    return [p for p in smoke["paths"] if p.split("=", 1)[0] in keys]


def _data(smoke) -> tuple[pd.DataFrame, pd.DataFrame]:
    cfg = load_config(["dataset=locomo", *SCOPES, *_paths(smoke)])
    folder = processed_folder(cfg, dataset_build_key(cfg))
    corpus, queries = read_table(folder, "corpus"), read_table(folder, "queries")
    scopes = {"conv-26", "conv-30"}
    return corpus[corpus["scope_id"].isin(scopes)], queries[queries["scope_id"].isin(scopes)]


def _tfidf_run(smoke, path: Path) -> Path:
    """A run made outside the harness: TF-IDF cosine over every turn of both conversations (so a question's
    ranking also names the other conversation's turns, which the harness must cut), top 50, as a TREC file."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    corpus, queries = _data(smoke)
    vec = TfidfVectorizer().fit(corpus["text"])
    sims = (vec.transform(queries["text"]) @ vec.transform(corpus["text"]).T).toarray()
    lines = []
    for qid, row in zip(queries["query_id"], sims, strict=True):
        for rank, j in enumerate(row.argsort()[::-1][:50], 1):
            lines.append(f"{qid} Q0 {corpus['doc_id'].iloc[j]} {rank} {row[j]:.6f} tfidf\n")
    path.write_text("".join(lines))
    return path


def _eligible_cut(smoke, run_file: Path, k: int) -> dict[str, dict[str, float]]:
    """The run file cut by hand to each query's eligible turns (its conversation, positions before the query)."""
    corpus, queries = _data(smoke)
    pos = dict(zip(corpus["doc_id"], corpus["position"], strict=True))
    scope = dict(zip(corpus["doc_id"], corpus["scope_id"], strict=True))
    qpos = dict(zip(queries["query_id"], zip(queries["scope_id"], queries["position"], strict=True), strict=True))
    out = {}
    for qid, ranking in pd.read_csv(run_file, sep=" ", header=None, dtype={0: str, 2: str}).groupby(0):
        s, p = qpos[qid]
        ok = [(d, sc) for d, sc in zip(ranking[2], ranking[4], strict=True) if scope[d] == s and pos[d] < p]
        out[qid] = dict(sorted(ok, key=lambda x: (x[1], x[0]), reverse=True)[:k])
    return out


def test_a_python_retriever_and_a_run_file_beside_bm25_and_hybrid_in_one_call(smoke, tmp_path, capsys):
    run_file = _tfidf_run(smoke, tmp_path / "tfidf.trec")
    df = experiment(
        {"bm25": [], "hybrid": [], "overlap": Overlap(), "tfidf": run_file},
        {"locomo": SCOPES},
        metrics=["nDCG@10", "R@50"],
        baseline="bm25",
        overrides=_paths(smoke),
        analysis={"bootstrap_resamples": 2000, "permutation_resamples": 2000},
    )
    printed = capsys.readouterr().out
    assert list(df.index) == [("locomo", m) for m in ("bm25", "hybrid", "overlap", "tfidf")]
    assert list(df.columns[:6]) == [
        "nDCG@10",
        "nDCG@10 Δ",
        "nDCG@10 CI low",
        "nDCG@10 CI high",
        "nDCG@10 p",
        "nDCG@10 sig",
    ]
    assert df.loc[("locomo", "bm25"), "nDCG@10 sig"] == "base" and pd.isna(df.loc[("locomo", "bm25"), "nDCG@10 Δ"])
    assert set(df["nDCG@10 sig"]) <= {"base", "+", "-", ""} and set(df["R@50 sig"]) <= {"base", "+", "-", ""}
    assert (df["n"] == 302).all()  # the smoke tier's evaluated LoCoMo questions, for every system
    # quiet: no run summary table printed; the outside ranking's cut is said, with its counts
    assert "results:" not in printed and "locomo/tfidf: " in printed and "were cut" in printed

    # the config runs are the smoke tier's own folders (reused, not remade), their means the long form's
    long = experiment(
        {"bm25": [], "hybrid": [], "tfidf": run_file},
        {"locomo": SCOPES},
        metrics=["nDCG@10"],
        baseline="bm25",
        overrides=_paths(smoke),
        format="long",
        analysis={"bootstrap_resamples": 2000, "permutation_resamples": 2000},
    )
    assert df.loc[("locomo", "bm25"), "nDCG@10"] == long["baseline_mean"].iloc[0]
    assert long.attrs["runs"][("locomo", "bm25")]["folder"] == df.loc[("locomo", "bm25"), "folder"]

    # the outside run, cut to each query's eligible turns by hand, scored by ir_measures: the same per query
    tfidf = RunFolder(df.loc[("locomo", "tfidf"), "folder"])
    qrels = read_qrels(tfidf.path / "qrels.trec")
    cut = _eligible_cut(smoke, run_file, int(tfidf.manifest["config"]["run"]["k"]))
    theirs = {
        (m.query_id, str(m.measure)): m.value
        for m in ir_measures.iter_calc([ir_measures.nDCG @ 10, ir_measures.R @ 50], qrels, cut)
    }
    mine = tfidf.per_query.set_index("query_id")
    assert len(theirs) == 2 * len(qrels)
    for (qid, measure), value in theirs.items():
        assert mine.loc[qid, {"nDCG@10": "ndcg@10", "R@50": "recall@50"}[measure]] == pytest.approx(value, abs=1e-12)
    assert tfidf.manifest["method"]["kind"] == "ranking" and tfidf.manifest["method"]["source"] == str(run_file)
    assert (tfidf.flags()["byo_dropped"] > 0).any()  # the run named the other conversation's turns: cut, counted
    # the Python retriever saw only eligible turns (the runner stops a run that returns another)
    assert RunFolder(df.loc[("locomo", "overlap"), "folder"]).flags().get("byo_dropped") is None

    # the table's outputs
    assert "| ('locomo', 'tfidf')" in df.round(4).to_markdown() and "tfidf" in df.to_latex()
    per_query = experiment(
        {"bm25": [], "tfidf": run_file}, {"locomo": SCOPES}, overrides=_paths(smoke), perquery=True, baseline="bm25"
    )
    assert list(per_query.columns) == ["dataset", "system", "query_id", "nDCG@10", "R@50"]
    assert len(per_query) == 2 * 302
    row = per_query[(per_query["system"] == "tfidf")].set_index("query_id")
    assert row["nDCG@10"].to_dict() == mine["ndcg@10"].to_dict()


def test_every_form_of_a_ranking_is_one_run_and_a_python_object_is_made_again(smoke, tmp_path):
    from ranx import Run

    run_file = _tfidf_run(smoke, tmp_path / "tfidf.trec")
    frame = pd.read_csv(run_file, sep=" ", header=None, names=["query_id", "q0", "doc_id", "rank", "score", "tag"])
    frame = frame.astype({"query_id": str, "doc_id": str})
    as_dict = {q: dict(zip(g["doc_id"], g["score"].astype(float), strict=True)) for q, g in frame.groupby("query_id")}
    kw = dict(metrics=["nDCG@10"], baseline="bm25", overrides=_paths(smoke))
    folders = {
        form: experiment({"bm25": [], "tfidf": system}, {"locomo": SCOPES}, **kw).loc[("locomo", "tfidf"), "folder"]
        for form, system in {
            "file": run_file,
            "frame": frame[["query_id", "doc_id", "score"]],
            "ranx": Run(as_dict),
            "dict": as_dict,
        }.items()
    }
    assert len(set(folders.values())) == 1  # one content, one config hash
    done = (Path(folders["file"]) / "DONE").stat().st_mtime_ns
    experiment({"bm25": [], "tfidf": run_file}, {"locomo": SCOPES}, **kw)
    assert (Path(folders["file"]) / "DONE").stat().st_mtime_ns == done  # reused

    first = experiment({"bm25": [], "overlap": Overlap()}, {"locomo": SCOPES}, **kw).loc[("locomo", "overlap")]
    started = RunFolder(first["folder"]).manifest["started"]
    again = experiment({"bm25": [], "overlap": Overlap()}, {"locomo": SCOPES}, **kw).loc[("locomo", "overlap")]
    assert again["folder"] == first["folder"] and RunFolder(again["folder"]).manifest["started"] != started
    assert again["nDCG@10"] == first["nDCG@10"]


def test_a_callable_is_cut_to_eligible_turns_and_bad_systems_are_named(smoke, tmp_path):
    corpus, _ = _data(smoke)
    words = {d: set(TOKEN.findall(t.lower())) for d, t in zip(corpus["doc_id"], corpus["text"], strict=True)}

    def everywhere(text: str) -> list[tuple[str, float]]:  # over every turn of both conversations
        q = set(TOKEN.findall(text.lower()))
        return [(d, float(len(q & w))) for d, w in words.items()]

    df = experiment([everywhere, "bm25"], {"locomo": SCOPES}, baseline="bm25", overrides=_paths(smoke))
    flags = RunFolder(df.loc[("locomo", "everywhere"), "folder"]).flags()
    assert (flags["byo_dropped"] > 0).all()  # every query: the other conversation at least
    # the same scores through the protocol object give the same per-query values (ties broken the same way)
    obj = experiment({"bm25": [], "overlap": Overlap()}, {"locomo": SCOPES}, baseline="bm25", overrides=_paths(smoke))
    assert df.loc[("locomo", "everywhere"), "nDCG@10"] == obj.loc[("locomo", "overlap"), "nDCG@10"]

    with pytest.raises(TypeError, match="system 'nope'.*got int"):
        experiment({"bm25": [], "nope": 3}, {"locomo": SCOPES}, overrides=_paths(smoke))
    with pytest.raises(ValueError, match="both named"):
        experiment([Overlap(), Overlap()], {"locomo": SCOPES}, overrides=_paths(smoke))
    with pytest.raises(ValueError, match="format="):
        experiment(["bm25"], {"locomo": SCOPES}, overrides=_paths(smoke), format="tall")


def test_your_own_corpus_topics_and_qrels_are_a_dataset_built_once(smoke, capsys):
    """One LoCoMo conversation given as frames (turns, questions, qrels) is an ad-hoc BEIR dataset: every turn a doc,
    every turn eligible (as for LoCoMo's questions, asked after the conversation); BM25 on it scores each question
    exactly as the smoke tier's BM25 run on LoCoMo did."""
    corpus, queries = _data(smoke)
    corpus, queries = corpus[corpus["scope_id"] == "conv-26"], queries[queries["scope_id"] == "conv-26"]
    bm25 = experiment(["bm25", "window"], {"locomo": SCOPES}, baseline="bm25", overrides=_paths(smoke), format="long")
    smoke_bm25 = RunFolder(bm25.attrs["runs"][("locomo", "bm25")]["folder"])
    qrels = {q: g for q, g in read_qrels(smoke_bm25.path / "qrels.trec").items() if q in set(queries["query_id"])}
    mine = {"corpus": corpus[["doc_id", "text"]], "queries": queries[["query_id", "text"]], "qrels": qrels}
    kw = dict(metrics=["nDCG@10"], baseline="bm25", overrides=_paths(smoke), perquery=True)
    first = experiment({"bm25": [], "window": []}, {"conv26": mine}, **kw)
    folder = Path(first.attrs["runs"][("conv26", "bm25")]["folder"])
    run = RunFolder(folder)
    assert run.manifest["dataset"]["card_counts"]["docs"] == len(corpus)
    ours = first[first["system"] == "bm25"].set_index("query_id")["nDCG@10"]
    theirs = smoke_bm25.per_query.set_index("query_id")["ndcg@10"].reindex(ours.index)
    assert len(ours) == len(qrels) and ours.to_dict() == theirs.to_dict()
    again = experiment(
        {"bm25": [], "window": []},
        {
            "conv26": {
                **mine,
                "qrels": pd.DataFrame(
                    [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()],
                    columns=["query_id", "doc_id", "relevance"],
                ),
            }
        },
        **kw,
    )
    assert again.attrs["runs"] == first.attrs["runs"]  # the same content in another form: the same dataset and runs
    with pytest.raises(ValueError, match="missing \\['qrels'\\]"):
        experiment(
            ["bm25"], {"conv26": {"corpus": mine["corpus"], "queries": mine["queries"]}}, overrides=_paths(smoke)
        )


def test_the_docs_own_ranking_example_runs_as_written_on_fresh_folders(tmp_path, monkeypatch):
    """docs/python_api.md, "Your own ranking of a conversation dataset": eligible_docs builds the missing dataset and
    gives each question exactly the earlier turns of its conversation; the ranking made from them scores beside BM25."""
    from lethe.core.paths import PROJECT_ROOT
    from tests.conftest import DATA_ROOT

    text = (PROJECT_ROOT / "docs" / "python_api.md").read_text()
    block = text.split("### Your own ranking of a conversation dataset", 1)[1].split("```python\n", 1)[1]
    block = block.split("```", 1)[0]
    monkeypatch.setenv("LETHE_ROOT", str(tmp_path))  # default folders (data/processed, .cache, results) resolve here
    monkeypatch.setenv("LETHE_DATA_ROOT", str(DATA_ROOT))
    scope: dict = {}
    exec(compile(block, "docs/python_api.md", "exec"), scope)  # noqa: S102 - the documented example, as written
    e, df = scope["e"], scope["df"]
    assert (tmp_path / "data" / "processed" / "locomo").is_dir()  # built by eligible_docs: it was missing
    corpus = e.corpus.set_index("doc_id")
    for q in e.queries.itertuples():
        seen = corpus.loc[e.docs[q.query_id]]
        assert (seen["scope_id"] == q.scope_id).all() and (seen["position"] < q.position).all()
        later = corpus[(corpus["scope_id"] == q.scope_id) & (corpus["position"] < q.position)]
        assert len(seen) == len(later)  # every earlier turn, nothing else
    assert set(e.queries["scope_id"]) == {"conv-26"} and len(e.queries) > 100
    assert df.loc[("locomo", "overlap"), "n"] == df.loc[("locomo", "bm25"), "n"] == len(e.queries)
    assert 0 < df.loc[("locomo", "overlap"), "nDCG@10"] < df.loc[("locomo", "bm25"), "nDCG@10"]
