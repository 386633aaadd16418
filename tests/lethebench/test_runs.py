"""Results folders: written atomically with DONE last, read back typed (rankings, qrels, per-query
flags and stage timings), and a folder without DONE is not done."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import lethebench.runs as R
from lethebench.runs import (
    FILES,
    RunFolder,
    decode_cell,
    encode_cells,
    finished_runs,
    flag_frame,
    flags_frame,
    run_path,
    timings_frame,
)

RUN = {"q1": [("d3", 2.5), ("d1", 1.25)], "q2": [("d2", 0.5)], "q3": []}
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 2, "d9": 1}, "q3": {"d4": 1}}
# per query: (timings_ms, flags) as a method returns them; q3 was never ranked (no eligible docs)
CELLS = {
    "q1": ({"bm25": 1.5, "fusion": 0.25}, {"plan": "verify", "rerank": {"judged": 4, "share_judged": 0.5}}),
    "q2": ({"bm25": 2.0, "llm_rerank": 30.0}, {"plan": "explore", "model_path": Path("/m/x.gguf")}),
    "q3": ({}, {}),
}


def per_query() -> pd.DataFrame:
    rows = []
    for qid, (timings, flags) in CELLS.items():
        rows.append(
            {
                "query_id": qid,
                "status": "ok" if RUN[qid] else "no_eligible_docs",
                "latency_ms": 4.0 if RUN[qid] else None,
                **encode_cells(timings, flags),
                "ndcg@10": 1.0 if RUN[qid] else 0.0,
            }
        )
    return pd.DataFrame(rows)


def write(folder: Path, **metrics) -> RunFolder:
    metrics = {
        "dataset": "toy",
        "method": "bm25",
        "config_hash": "0123456789ab",
        "means": {"ndcg@10": 2 / 3},
        **metrics,
    }
    manifest = {"config_hash": "0123456789ab", "dataset": {"folder": "/data/toy/abc"}, "seed": 0}
    return RunFolder(folder).write(RUN, QRELS, per_query(), metrics, manifest, tag="bm25-0123456789ab")


@pytest.fixture
def folder(tmp_path) -> Path:
    return run_path(tmp_path / "results", "toy", "bm25", "0123456789ab")


def test_write_then_read_back(folder):
    rf = write(folder)
    assert folder == rf.path and rf.is_done and rf.results_dir == folder.parents[2]
    assert {p.name for p in folder.iterdir()} == set(FILES)
    again = RunFolder(folder)  # a fresh reader: everything comes from the files
    assert again.metrics["means"] == {"ndcg@10": 2 / 3}
    assert (again.dataset, again.method, again.config_hash) == ("toy", "bm25", "0123456789ab")
    assert again.manifest["seed"] == 0 and again.dataset_folder == Path("/data/toy/abc")
    assert again.run == {"q1": [("d3", 2.5), ("d1", 1.25)], "q2": [("d2", 0.5)]}  # an empty ranking has no line
    assert again.qrels == QRELS
    pq = again.per_query
    assert list(pq["query_id"]) == ["q1", "q2", "q3"] and list(pq["ndcg@10"]) == [1.0, 1.0, 0.0]
    # the on-disk format: JSON strings, keys sorted, what JSON cannot hold written with str
    assert pq.loc[1, "flags"] == '{"model_path": "/m/x.gguf", "plan": "explore"}'
    assert list(pq["timings_ms"]) == ['{"bm25": 1.5, "fusion": 0.25}', '{"bm25": 2.0, "llm_rerank": 30.0}', "{}"]
    table = pd.read_parquet(folder / "run.parquet")
    assert table.values.tolist() == [["q1", 1, "d3", 2.5], ["q1", 2, "d1", 1.25], ["q2", 1, "d2", 0.5]]
    assert (folder / "run.trec").read_text().splitlines()[0] == "q1 Q0 d3 1 2.5 bm25-0123456789ab"


def test_timings_are_floats_per_stage_with_nan_where_a_stage_did_not_run(folder):
    t = write(folder).timings()
    assert t.index.name == "query_id" and list(t.index) == ["q1", "q2", "q3"]
    assert list(t.columns) == ["bm25", "fusion", "llm_rerank"]  # first appearance
    assert all(dt == "float64" for dt in t.dtypes)
    assert t.loc["q1", "fusion"] == 0.25 and t.loc["q2", "llm_rerank"] == 30.0
    assert math.isnan(t.loc["q2", "fusion"]) and t.loc["q3"].isna().all()
    assert t["bm25"].dropna().tolist() == [1.5, 2.0]


def test_flags_and_one_flag_as_columns(folder):
    rf = write(folder)
    f = rf.flags()
    assert list(f.index) == ["q1", "q2", "q3"] and f.loc["q1", "plan"] == "verify"
    assert f.loc["q1", "rerank"] == {"judged": 4, "share_judged": 0.5}
    assert f.loc["q2", "model_path"] == "/m/x.gguf" and pd.isna(f.loc["q3", "plan"])
    rr = rf.flag("rerank")
    assert list(rr.columns) == ["judged", "share_judged"] and rr.loc["q1", "share_judged"] == 0.5
    assert rr.loc[["q2", "q3"]].isna().all().all()
    assert rf.flag("absent").shape == (3, 0)


def test_frame_readers_keep_the_table_index_and_accept_older_cells():
    # as analysis holds them: indexed by query_id; cells may be empty, null or already dicts
    pq = pd.DataFrame(
        {"timings_ms": ['{"a": 1}', "", None], "flags": ['{"plan": "exploit"}', {"plan": "verify"}, None]},
        index=pd.Index(["x", "y", "z"], name="query_id"),
    )
    assert timings_frame(pq)["a"].tolist()[0] == 1.0 and timings_frame(pq)["a"].isna().tolist() == [False, True, True]
    assert flags_frame(pq)["plan"].tolist()[:2] == ["exploit", "verify"]
    assert list(flag_frame(pq, "plan").index) == ["x", "y", "z"]
    no_cols = pd.DataFrame({"query_id": ["a", "b"]})
    assert timings_frame(no_cols).shape == (2, 0) and flags_frame(no_cols).shape == (2, 0)


def test_encode_decode_round_trip():
    cells = encode_cells({"b": 2.0, "a": 1.0}, {"z": [1, 2], "p": Path("/x")})
    assert cells == {"timings_ms": '{"a": 1.0, "b": 2.0}', "flags": '{"p": "/x", "z": [1, 2]}'}
    assert decode_cell(cells["timings_ms"]) == {"a": 1.0, "b": 2.0}
    assert encode_cells({}, {}) == {"timings_ms": "{}", "flags": "{}"}
    for empty in ("", "  ", None, float("nan"), "[1, 2]", "null"):
        assert decode_cell(empty) == {}
    with pytest.raises(json.JSONDecodeError):
        decode_cell("{not json")


def test_done_is_written_last(folder, monkeypatch):
    order: list[str] = []

    def spy(fn, name_of):
        def wrapper(*args, **kwargs):
            order.append(name_of(*args))
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(R, "write_run", spy(R.write_run, lambda run, path, tag: Path(path).name))
    monkeypatch.setattr(R, "write_qrels", spy(R.write_qrels, lambda qrels, path: Path(path).name))
    monkeypatch.setattr(
        pd.DataFrame, "to_parquet", spy(pd.DataFrame.to_parquet, lambda df, path, **kw: Path(path).name)
    )
    monkeypatch.setattr(Path, "write_text", spy(Path.write_text, lambda p, text, *a: p.name))
    write(folder)
    assert sorted(order) == sorted(FILES) and order[-1] == "DONE"


def test_failed_write_leaves_nothing_and_keeps_an_older_folder(folder):
    bad = per_query().assign(ndcg_at_10=[1, "x", None])  # parquet cannot hold a column of int and str
    with pytest.raises(ValueError):  # pyarrow.ArrowInvalid
        RunFolder(folder).write(RUN, QRELS, bad, {}, {}, tag="t")
    assert not folder.exists() and not RunFolder(folder).is_done
    assert list(folder.parent.iterdir()) == []  # no temporary folder left behind
    rf = write(folder, note="first")
    assert rf.metrics["note"] == "first"
    with pytest.raises(ValueError):  # pyarrow.ArrowInvalid
        RunFolder(folder).write(RUN, QRELS, bad, {}, {}, tag="t")
    assert RunFolder(folder).metrics["note"] == "first" and RunFolder(folder).is_done
    write(folder, note="second")
    assert rf.metrics["note"] == "first"  # a reader keeps what it read ...
    assert (
        rf.write(RUN, QRELS, per_query(), {"note": "third"}, {}, tag="t").metrics["note"] == "third"
    )  # ... until it writes


def test_a_folder_without_done_is_not_done(tmp_path, folder):
    write(folder)
    (folder / "DONE").unlink()
    assert not RunFolder(folder).is_done
    assert not RunFolder(tmp_path / "nowhere").is_done
    results = folder.parents[2]
    other = write(run_path(results, "toy", "window", "ffffffffffff"))
    stale = run_path(results, "toy", "window", ".ffffffffffff.x1.tmp")  # a crashed writer's temporary folder
    stale.mkdir()
    (stale / "DONE").write_text("complete\n")
    assert finished_runs(results) == [other]
    write(folder)
    assert finished_runs(results) == [RunFolder(folder), other]  # sorted by path
