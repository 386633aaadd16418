"""Expected scores: written from results folders, read back bit-for-bit, verified OK / OKish / FAIL / MISSING."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis import expected as E
from analysis.expected import (
    Tolerance,
    compare,
    expected_record,
    format_verification,
    measure,
    measure_study,
    passed,
    provenance,
    read_expected,
    summary_line,
    tolerance_for,
    verify,
    write_expected,
)
from lethe.core.paths import PROJECT_ROOT
from lethebench.runs import RunFolder

METRICS = ["ndcg@10", "recall@50", "mrr@10"]
ANSWER_METRICS = ["f1", "rouge_l", "exact_match", "hallucination_rate"]
DENSE = Tolerance("dense", 0.0005, "MiniLM last bits")
ANSWERS = Tolerance("answers", 0.1, "generated text")
CLASSES = {t.klass: t for t in (DENSE, ANSWERS)}
RULES = {
    "classes": {
        "dense": {"tolerance": 0.0005, "why": "MiniLM\n  last   bits"},
        "trained": {"tolerance": 0.01, "why": "fitted"},
        "budget": {"tolerance": 0.03, "why": "wall clock"},
        "answers": {"tolerance": 0.1, "why": "generated text"},
    },
    "methods": {"vector": "dense", "lethe_iter4": "trained", "lethe_iter4+budget300ms": "budget"},
    "answer_metrics": "answers",
}


@pytest.fixture(autouse=True)
def summaries_stand_in_for_run_files(monkeypatch):
    """These tests are about comparing, and their runs are folders without rankings: their "run files" give the
    values their metrics.json holds. test_verification_computes_from_the_run_files (and the smoke tier's tests)
    check that verification computes them from run.trec and qrels.trec."""

    def from_summary(run, metrics):
        m = run.metrics
        return {
            "evaluated": int(m["queries"]["evaluated"]),
            **{k: float(m["means"][k]) for k in metrics if k in m["means"]},
        }

    monkeypatch.setattr(E, "retrieval_values", from_summary)


def make_run(
    folder: Path,
    evaluated: int = 100,
    means: dict | None = None,
    answers: dict | None = None,
    config_hash: str = "abc123def456",
    dirty: bool = False,
    seconds: float = 12.5,
    timing_valid: bool | None = None,
) -> Path:
    """A finished results folder as the runner writes it (empty rankings: verification reads the metrics
    and the manifest only)."""
    if means is None:
        means = {"ndcg@10": 0.1 + 0.2, "recall@50": 1 / 3, "mrr@10": 2 / 3, "latency_ms_p50": 4.2}
    metrics = {"queries": {"total": evaluated + 2, "evaluated": evaluated}, "means": means, "answers": answers or {}}
    manifest = {
        "config_hash": config_hash,
        "git": {"commit": "0123456789abcdef", "dirty": dirty},
        "wall_seconds": seconds,
    }
    if timing_valid is not None:
        manifest["timing_valid"] = timing_valid
    return RunFolder(folder).write({}, {}, pd.DataFrame({"query_id": []}), metrics, manifest, tag="t").path


def expected_file(tmp_path: Path, entries: dict[str, Path], tol: Tolerance = DENSE) -> dict:
    path = write_expected(
        tmp_path / "expected" / "t.yaml",
        "t",
        {k: expected_record(f, tol, ANSWERS, METRICS, ANSWER_METRICS) for k, f in entries.items()},
        {**CLASSES, tol.klass: tol},
    )
    return read_expected(path)


def rows(df, key: str) -> dict[str, dict]:
    return {r["metric"]: r for r in df[df["run"] == key].to_dict("records")}


def test_measure_and_provenance(tmp_path):
    answers = {"generated": 30, "f1": 0.25, "rouge_l": None, "exact_match": 0.5}
    run = make_run(tmp_path / "r", evaluated=57, answers=answers, dirty=True, seconds=3.25)
    assert measure(run, METRICS, ANSWER_METRICS) == {
        "evaluated": 57,
        "ndcg@10": 0.1 + 0.2,
        "recall@50": 1 / 3,
        "mrr@10": 2 / 3,
        "answer_f1": 0.25,
        "answer_exact_match": 0.5,
    }
    assert provenance(run) == {
        "config_hash": "abc123def456",
        "commit": "0123456789abcdef",
        "dirty": True,
        "seconds": 3.25,
        "timing_valid": None,
    }


def test_a_rewritten_entry_keeps_its_time_when_the_new_run_was_not_timed_alone(tmp_path):
    previous = {"seconds": 40.0}
    loaded = make_run(tmp_path / "loaded", seconds=95.5, timing_valid=False)
    alone = make_run(tmp_path / "alone", seconds=38.0, timing_valid=True)
    assert expected_record(loaded, DENSE, ANSWERS, METRICS, ANSWER_METRICS, previous)["seconds"] == 40.0
    assert expected_record(alone, DENSE, ANSWERS, METRICS, ANSWER_METRICS, previous)["seconds"] == 38.0
    # nothing to keep (a new entry), or a manifest older than timing_valid: the run's own time
    assert expected_record(loaded, DENSE, ANSWERS, METRICS, ANSWER_METRICS)["seconds"] == 95.5
    assert (
        expected_record(make_run(tmp_path / "old", seconds=7.0), DENSE, ANSWERS, METRICS, ANSWER_METRICS, previous)[
            "seconds"
        ]
        == 7.0
    )


def test_write_then_read_round_trips_floats_bit_for_bit(tmp_path):
    tricky = {"ndcg@10": 0.1 + 0.2, "recall@50": 1 / 3, "mrr@10": 1e-05, "answer_x": 5e-324}
    means = {"ndcg@10": tricky["ndcg@10"], "recall@50": tricky["recall@50"], "mrr@10": tricky["mrr@10"]}
    run = make_run(tmp_path / "r", evaluated=123, means=means, answers={"f1": 2 / 3, "rouge_l": 0.123456789012345678})
    rec = expected_record(run, DENSE, ANSWERS, METRICS, ANSWER_METRICS)
    path = write_expected(
        tmp_path / "out" / "core.yaml",
        "core",
        {"locomo/vector": rec},
        {**CLASSES, "unused": Tolerance("unused", 1.0, "-")},
        {"datasets": 12.345},
    )
    text = path.read_text()
    assert text.startswith("# Expected scores of tier `core`")
    doc = read_expected(path)
    assert doc["tier"] == "core" and doc["prepare_seconds"] == {"datasets": 12.3}
    # the classes the runs name, once, with their reason (and only those)
    assert doc["tolerance_classes"] == {
        "answers": {"tolerance": 0.1, "why": "generated text"},
        "dense": {"tolerance": 0.0005, "why": "MiniLM last bits"},
    }
    got = doc["runs"]["locomo/vector"]
    assert got == rec
    floats = {k: v for k, v in rec["metrics"].items() if isinstance(v, float)}
    assert len(floats) == 5
    assert {k: got["metrics"][k].hex() for k in floats} == {k: v.hex() for k, v in floats.items()}
    assert got["metrics"]["evaluated"] == 123 and type(got["metrics"]["evaluated"]) is int
    assert got["class"] == "dense" and got["tolerance"] == 0.0005 and got["seconds"] == 12.5
    assert got["answer_class"] == "answers" and got["answer_tolerance"] == 0.1
    # a file of raw tricky floats also survives
    write_expected(tmp_path / "raw.yaml", "raw", {"k": {"metrics": tricky}}, {})
    back = read_expected(tmp_path / "raw.yaml")["runs"]["k"]["metrics"]
    assert {k: v.hex() for k, v in back.items()} == {k: v.hex() for k, v in tricky.items()}


def test_record_without_answers_has_no_answer_tolerance(tmp_path):
    rec = expected_record(make_run(tmp_path / "r"), DENSE, ANSWERS, METRICS, ANSWER_METRICS)
    assert list(rec) == ["config_hash", "class", "tolerance", "metrics", "seconds"]
    assert list(rec["metrics"]) == ["evaluated", *METRICS]


def test_read_expected_of_a_missing_file_is_empty(tmp_path):
    assert read_expected(tmp_path / "none.yaml") == {"runs": {}}


def test_identical_values_are_ok(tmp_path):
    run = make_run(tmp_path / "a")
    df = verify([("locomo/vector", run)], expected_file(tmp_path, {"locomo/vector": run}), METRICS, ANSWER_METRICS)
    assert list(df["metric"]) == ["evaluated", *METRICS]
    assert set(df["status"]) == {"OK"} and list(df["diff"]) == [0, 0.0, 0.0, 0.0]
    assert set(df["note"]) == {""}
    assert passed(df)


def test_within_tolerance_is_okish_beyond_is_fail(tmp_path):
    ref = make_run(tmp_path / "ref")
    exp = expected_file(tmp_path, {"locomo/vector": ref})
    near = make_run(tmp_path / "near", means={"ndcg@10": 0.3003, "recall@50": 1 / 3, "mrr@10": 2 / 3})
    far = make_run(tmp_path / "far", means={"ndcg@10": 0.3, "recall@50": 1 / 3 + 0.002, "mrr@10": 2 / 3})
    r = rows(verify([("locomo/vector", near)], exp, METRICS, ANSWER_METRICS), "locomo/vector")
    assert {m: r[m]["status"] for m in r} == {"evaluated": "OK", "ndcg@10": "OKish", "recall@50": "OK", "mrr@10": "OK"}
    assert r["ndcg@10"]["diff"] == pytest.approx(0.0003) and r["ndcg@10"]["tolerance"] == 0.0005
    assert passed(verify([("locomo/vector", near)], exp, METRICS, ANSWER_METRICS))
    df = verify([("locomo/vector", far)], exp, METRICS, ANSWER_METRICS)
    r = rows(df, "locomo/vector")
    # 0.3 is not bit-identical to 0.1 + 0.2, but within tolerance; recall moved by 0.002 > 0.0005
    assert r["ndcg@10"]["status"] == "OKish" and r["recall@50"]["status"] == "FAIL"
    assert r["recall@50"]["diff"] == pytest.approx(0.002)
    assert not passed(df)


def test_a_different_query_count_fails_even_with_a_large_tolerance(tmp_path):
    ref = make_run(tmp_path / "ref", evaluated=100)
    exp = expected_file(tmp_path, {"locomo/vector": ref}, Tolerance("loose", 10.0, "anything goes"))
    df = verify([("locomo/vector", make_run(tmp_path / "b", evaluated=99))], exp, METRICS, ANSWER_METRICS)
    r = rows(df, "locomo/vector")
    assert r["evaluated"]["status"] == "FAIL" and r["evaluated"]["diff"] == -1 and r["evaluated"]["tolerance"] == 0.0
    assert {r[m]["status"] for m in METRICS} == {"OK"}
    assert not passed(df)


def test_answer_metrics_use_the_answer_tolerance(tmp_path):
    ref = make_run(tmp_path / "ref", answers={"f1": 0.40, "rouge_l": 0.30})
    exp = expected_file(tmp_path, {"lethebench/lethe_iter4": ref})
    run = make_run(tmp_path / "b", answers={"f1": 0.45, "rouge_l": 0.50})
    r = rows(verify([("lethebench/lethe_iter4", run)], exp, METRICS, ANSWER_METRICS), "lethebench/lethe_iter4")
    assert r["answer_f1"]["status"] == "OKish" and r["answer_f1"]["tolerance"] == 0.1
    assert r["answer_rouge_l"]["status"] == "FAIL"
    # a run that no longer generates answers fails on the expected answer metrics
    r = rows(
        verify([("lethebench/lethe_iter4", make_run(tmp_path / "c"))], exp, METRICS, ANSWER_METRICS),
        "lethebench/lethe_iter4",
    )
    assert r["answer_f1"]["status"] == "FAIL" and r["answer_f1"]["note"] == "not measured by this run"


def test_missing_runs(tmp_path):
    ref = make_run(tmp_path / "ref")
    exp = expected_file(tmp_path, {"locomo/vector": ref})
    df = verify([("locomo/vector", None), ("locomo/bm25", make_run(tmp_path / "new"))], exp, METRICS, ANSWER_METRICS)
    no_folder, no_entry = rows(df, "locomo/vector"), rows(df, "locomo/bm25")
    assert {r["status"] for r in no_folder.values()} == {"MISSING"}
    assert no_folder["evaluated"]["expected"] == 100 and no_folder["evaluated"]["note"].startswith("not run")
    assert {r["status"] for r in no_entry.values()} == {"MISSING"}
    assert no_entry["ndcg@10"]["measured"] == 0.1 + 0.2
    assert "write the expected-scores file" in no_entry["ndcg@10"]["note"]
    assert not passed(df)


def test_notes_name_a_config_hash_change_and_a_dirty_tree(tmp_path):
    exp = expected_file(tmp_path, {"locomo/vector": make_run(tmp_path / "ref", config_hash="aaaaaaaaaaaa")})
    run = make_run(tmp_path / "b", config_hash="bbbbbbbbbbbb", dirty=True)
    df = verify([("locomo/vector", run)], exp, METRICS, ANSWER_METRICS)
    assert set(df["status"]) == {"OK"}
    assert set(df["note"]) == {"made from a dirty tree; config changed: hash bbbbbbbbbbbb, expected aaaaaaaaaaaa"}


def test_passed_and_summary_line(tmp_path):
    ref = make_run(tmp_path / "ref")
    exp = expected_file(tmp_path, {"locomo/vector": ref, "locomo/hybrid": ref, "locomo/mmr": ref})
    okish = make_run(tmp_path / "okish", means={"ndcg@10": 0.3, "recall@50": 1 / 3, "mrr@10": 2 / 3})
    fail = make_run(tmp_path / "fail", means={"ndcg@10": 0.9, "recall@50": 1 / 3, "mrr@10": 2 / 3})
    df = verify([("locomo/vector", ref), ("locomo/hybrid", okish), ("locomo/mmr", None)], exp, METRICS, ANSWER_METRICS)
    assert summary_line(df) == "3 runs, 12 values: 7 OK, 1 OKish, 0 FAIL, 4 MISSING"
    assert not passed(df)
    assert passed(df[df["status"] != "MISSING"])
    df = verify([("locomo/vector", ref), ("locomo/mmr", fail)], exp, METRICS, ANSWER_METRICS)
    assert summary_line(df) == "2 runs, 8 values: 7 OK, 0 OKish, 1 FAIL, 0 MISSING"
    assert not passed(df)
    empty = verify([], exp, METRICS, ANSWER_METRICS)
    assert summary_line(empty) == "0 runs, 0 values: 0 OK, 0 OKish, 0 FAIL, 0 MISSING"


def test_format_verification(tmp_path):
    ref = make_run(tmp_path / "ref", means={"ndcg@10": 0.5, "recall@50": 0.75, "mrr@10": 0.25})
    exp = expected_file(tmp_path, {"locomo/vector": ref, "locomo/mmr": ref})
    run = make_run(tmp_path / "b", evaluated=99, means={"ndcg@10": 0.5002, "recall@50": 0.75, "mrr@10": 0.25})
    df = verify([("locomo/vector", run), ("locomo/mmr", None)], exp, METRICS, ANSWER_METRICS)
    text = format_verification(df, "tier core")
    lines = text.splitlines()
    assert lines[0] == "### Verification: tier core"
    assert "| run | metric | expected | measured | diff | tolerance | status | note |" in lines
    assert "| locomo/vector | evaluated | 100 | 99 | -1.00e+00 | 0 | FAIL |  |" in lines
    assert "| locomo/vector | ndcg@10 | 0.500000 | 0.500200 | +2.00e-04 | 0.0005 | OKish |  |" in lines
    assert "| locomo/vector | recall@50 | 0.750000 | 0.750000 | 0 | 0.0005 | OK |  |" in lines
    assert "| locomo/mmr | evaluated | 100 | - | - | - | MISSING | not run (no finished results folder) |" in lines
    assert lines[-1] == summary_line(df) == "2 runs, 8 values: 2 OK, 1 OKish, 1 FAIL, 4 MISSING"
    assert text.endswith("\n")


def test_a_studys_counts_print_as_counts(tmp_path):
    """A study's counts (judged pairs, ties) were printed as 20.000000 beside its accuracy."""
    df = compare(
        [("study/x", {"judge | date: judged": 20, "judge | date: accuracy": 0.15}, None)],
        {
            "runs": {
                "study/x": {
                    "class": "llm",
                    "tolerance": 0.05,
                    "metrics": {"judge | date: judged": 20, "judge | date: accuracy": 0.15},
                }
            }
        },
    )
    text = format_verification(df, "t")
    assert "| study/x | judge \\| date: judged | 20 | 20 | 0 | 0.05 | OK |  |" in text, text
    assert "| study/x | judge \\| date: accuracy | 0.150000 | 0.150000 | 0 | 0.05 | OK |  |" in text


def test_tolerance_for():
    assert tolerance_for("vector", RULES) == Tolerance("dense", 0.0005, "MiniLM last bits")
    # the full label's class comes before its method's
    assert tolerance_for("lethe_iter4+budget300ms", RULES).klass == "budget"
    assert tolerance_for("lethe_iter4+budget300ms", RULES).value == 0.03
    assert tolerance_for("lethe_iter4+other", RULES).klass == "trained"
    exact = tolerance_for("bm25", RULES)
    assert (exact.klass, exact.value) == ("exact", 0.0)
    assert tolerance_for("vector", RULES, answers=True) == Tolerance("answers", 0.1, "generated text")
    assert tolerance_for("vector", {"classes": RULES["classes"]}, answers=True).klass == "exact"
    with pytest.raises(ValueError, match="'nope'.*hyde"):
        tolerance_for("hyde", {**RULES, "methods": {"hyde": "nope"}})
    with pytest.raises(ValueError, match="'missing'"):
        tolerance_for("vector", {**RULES, "answer_metrics": "missing"}, answers=True)


def test_real_tolerances_define_every_class_they_use():
    rules = yaml.safe_load((PROJECT_ROOT / "conf" / "reference" / "tolerances.yaml").read_text())
    classes = rules["classes"]
    used = set(rules["methods"].values()) | {rules["answer_metrics"]}
    assert used <= set(classes), used - set(classes)
    assert all(float(c["tolerance"]) > 0 and str(c["why"]).strip() for c in classes.values())
    for method, klass in rules["methods"].items():
        t = tolerance_for(method, rules)
        assert (t.klass, t.value) == (klass, float(classes[klass]["tolerance"]))
    assert tolerance_for("lethe_iter4+budget300ms", rules).klass == "llm"  # verified by replay: no wall-clock class
    assert tolerance_for("lethe_iter1+no_plan", rules).klass == "dense"
    assert tolerance_for("bm25", rules).value == 0.0
    assert tolerance_for("bm25", rules, answers=True).klass == "answers"


def test_a_study_is_measured_and_compared_row_by_row(tmp_path):
    """A study's JSON rows give one value per (row key, metric); comparing works as for runs."""
    folder = tmp_path / "study"
    folder.mkdir()
    rows = [
        {"backend": "rules", "model": "-", "precision": 1.0, "recall": 0.5, "tp": 4, "wall_s": 2.3},
        {"backend": "llm", "model": "m", "precision": 0.25, "recall": None, "tp": 1, "wall_s": 900.0},
    ]
    (folder / "out.json").write_text(json.dumps({"meta": {}, "rows": rows}))
    (folder / "manifest.json").write_text(
        json.dumps({"config": {}, "rows": [{"backend": "x", "tp": 9}]})
    )  # not an output
    got = measure_study(folder, ["backend", "model"], ["precision", "recall", "tp"])
    assert got == {
        "rules | -: precision": 1.0,
        "rules | -: recall": 0.5,
        "rules | -: tp": 4,
        "llm | m: precision": 0.25,
        "llm | m: tp": 1,
    }  # no timing, no missing value
    expected = {"runs": {"study/x": {"tolerance": 0.02, "metrics": {**got, "llm | m: precision": 0.26}}}}
    df = compare([("study/x", got, None), ("study/y", None, None)], expected)
    status = dict(zip(df["run"] + " " + df["metric"], df["status"], strict=True))
    assert status["study/x llm | m: precision"] == "OKish" and status["study/x rules | -: tp"] == "OK"
    assert set(df.loc[df["run"] == "study/y", "status"]) == {"MISSING"}
    (folder / "other.json").write_text("{}")
    with pytest.raises(ValueError, match="exactly one JSON"):
        measure_study(folder, ["backend"], ["tp"])


def test_verification_computes_from_the_run_files(tmp_path, monkeypatch):
    """Without the stand-in: the measured values come from run.trec and qrels.trec, and a metrics.json that claims
    other values is named in the note."""
    monkeypatch.undo()
    run = {"q1": [("a", 2.0), ("b", 1.0)], "q2": [("c", 2.0), ("x", 1.0)], "q3": []}
    qrels = {"q1": {"a": 1}, "q2": {"x": 1}, "q3": {"y": 1}}
    metrics = {"queries": {"evaluated": 3}, "means": {"ndcg@10": 0.9, "recall@50": 2 / 3, "mrr@10": 0.5}}
    folder = (
        RunFolder(tmp_path / "r")
        .write(run, qrels, pd.DataFrame({"query_id": ["q1", "q2", "q3"]}), metrics, {"config_hash": "abc"}, tag="t")
        .path
    )
    got = measure(folder, METRICS, ANSWER_METRICS)
    assert got == {
        "evaluated": 3,
        "ndcg@10": pytest.approx((1 + 1 / math.log2(3)) / 3),
        "recall@50": 2 / 3,
        "mrr@10": 0.5,
    }
    expected = {"runs": {"k": {"config_hash": "abc", "tolerance": 0.0, "metrics": got}}}
    r = rows(verify([("k", folder)], expected, METRICS, ANSWER_METRICS), "k")
    assert {m: v["status"] for m, v in r.items()} == {
        "evaluated": "OK",
        "ndcg@10": "OK",
        "recall@50": "OK",
        "mrr@10": "OK",
    }
    assert r["ndcg@10"]["note"] == (
        "metrics.json differs from the run files on ndcg@10 "
        "(the measured value is computed from run.trec and qrels.trec)"
    )


def test_a_per_query_difference_fails_where_the_means_agree(tmp_path, monkeypatch):
    """Two queries whose scores swapped give the same means, so the mean rows are OK; the per-query rows against the
    reference store FAIL and say how many queries differ."""
    monkeypatch.undo()
    run = {"q1": [("a", 2.0), ("z", 1.0)], "q2": [("z", 2.0), ("y", 1.0)]}
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    metrics = {"queries": {"evaluated": 2}, "means": {"ndcg@10": 0.5, "recall@50": 0.5, "mrr@10": 0.5}}
    folder = (
        RunFolder(tmp_path / "run")
        .write(run, qrels, pd.DataFrame({"query_id": ["q1", "q2"]}), metrics, {"config_hash": "abc"}, tag="t")
        .path
    )
    stored = pd.DataFrame(
        {"query_id": ["q1", "q2"], "ndcg@10": [0.0, 1.0], "recall@50": [0.0, 1.0], "mrr@10": [0.0, 1.0]}
    )
    store = RunFolder(tmp_path / "store").write({}, {}, stored, metrics, {"config_hash": "abc"}, tag="t").path
    expected = {
        "runs": {
            "k": {
                "config_hash": "abc",
                "tolerance": 0.0,
                "metrics": {"evaluated": 2, "ndcg@10": 0.5, "recall@50": 0.5, "mrr@10": 0.5},
            }
        }
    }
    df = verify([("k", folder)], expected, METRICS, ANSWER_METRICS, stored={"k": store})
    r = rows(df, "k")
    assert [r[m]["status"] for m in ["evaluated", *METRICS]] == ["OK"] * 4
    assert [r[f"per-query {m}"]["status"] for m in METRICS] == ["FAIL"] * 3
    assert r["per-query ndcg@10"]["measured"] == 0 and r["per-query ndcg@10"]["expected"] == 2
    assert r["per-query ndcg@10"]["note"] == "2 queries differ; largest on q1"
    assert "| k | per-query ndcg@10 | 2 | 0 | +1.00e+00 | 0 | FAIL |" in format_verification(df, "t")  # counts
    right = stored.assign(**{m: [1.0, 0.0] for m in METRICS})
    store = RunFolder(tmp_path / "right").write({}, {}, right, metrics, {"config_hash": "abc"}, tag="t").path
    same = verify([("k", folder)], expected, METRICS, ANSWER_METRICS, stored={"k": store})
    assert (
        set(same["status"]) == {"OK"}
        and len(same) == 7
        and list(same["metric"])[4:] == [f"per-query {m}" for m in METRICS]
    )
