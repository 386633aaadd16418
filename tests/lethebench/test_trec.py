"""TREC qrels and runs: a malformed line names the file and the line."""

from __future__ import annotations

import pytest

from lethebench.trec import read_qrels, read_run, write_qrels


def test_qrels_round_trip_drops_non_relevant(tmp_path):
    path = tmp_path / "qrels.trec"
    write_qrels({"q1": {"d2": 2, "d1": 1}}, path)
    assert path.read_text() == "q1 0 d1 1\nq1 0 d2 2\n"
    path.write_text(path.read_text() + "q1 0 d3 0\n\nq2 0 d9 -1\n")
    assert read_qrels(path) == {"q1": {"d1": 1, "d2": 2}, "q2": {}}


@pytest.mark.parametrize(
    "line, message",
    [
        ("q1 0 d1 high", r"qrels\.trec:2: grade 'high' is not an integer \(line 'q1 0 d1 high'"),
        ("q1 0 d1 1.5", r"qrels\.trec:2: grade '1\.5' is not an integer"),
        ("q1 0 d1", r"qrels\.trec:2: expected 'qid 0 docid grade'"),
    ],
)
def test_malformed_qrels_line_names_file_and_line(tmp_path, line, message):
    # a non-integer grade used to raise a bare "invalid literal for int() with base 10"
    path = tmp_path / "qrels.trec"
    path.write_text(f"q0 0 d0 1\n{line}\n")
    with pytest.raises(ValueError, match=message):
        read_qrels(path)


def test_non_utf8_qrels_names_the_file(tmp_path):
    path = tmp_path / "qrels.trec"
    path.write_bytes(b"q0 0 d\xff 1\n")
    with pytest.raises(ValueError, match=r"qrels\.trec: not UTF-8 text \(byte 0xff at offset 6\)"):
        read_qrels(path)


def test_run_score_that_is_not_a_number(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 n/a t\n")
    with pytest.raises(ValueError, match=r"run\.trec:2: score 'n/a' is not a number"):
        read_run(path)
