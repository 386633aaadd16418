"""Bring-your-own inputs are checked before they count (issue 58, item 8): a NaN score, a ranking of nothing this run
knows, a fractional grade, a bad ad-hoc dataset name and a callable returning the wrong type each stop with the
system, query, row or name named, before a run is made or a file is written."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import byo
from lethe.core.protocol import Doc, Query

DOCS = [Doc("d1", "alpha beta", 0), Doc("d2", "gamma", 1)]


def test_a_nan_score_is_refused_with_its_query_and_doc_named(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d1 1 nan mine\nq1 Q0 d2 2 1.0 mine\n")
    with pytest.raises(ValueError, match=r"run\.trec, query q1.*'d1'.*not a finite number"):
        byo.ranking_scores(run)
    with pytest.raises(ValueError, match=r"row 0, query 'q1', doc 'd1'.*not a finite number"):
        byo.ranking_scores(pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": [float("nan")]}))
    with pytest.raises(ValueError, match=r"query 'q1'.*'d1'.*not a finite number"):
        byo.ranking_scores({"q1": {"d1": float("nan")}})
    fn = byo.CallableAdapter("mine", lambda text: {"d1": float("nan")})
    fn.index(DOCS)
    with pytest.raises(ValueError, match=r"system 'mine'.*'d1'.*not a finite number"):
        fn.search(Query("alpha", (), "q1", None), 10)


@pytest.mark.parametrize("returned", ["n", None, 3])
def test_a_callable_returning_the_wrong_type_is_named(returned):
    fn = byo.CallableAdapter("mine", lambda text: returned)
    fn.index(DOCS)
    with pytest.raises(TypeError, match=rf"system 'mine' \(.*\): returned {type(returned).__name__}"):
        fn.search(Query("alpha", (), "q1", None), 10)


def test_a_ranking_of_nothing_this_run_knows_stops_before_any_search(tmp_path):
    empty = byo.RankingAdapter("theirs", {}, "run.trec", "0")
    with pytest.raises(ValueError, match="'theirs' .* is empty"):
        empty.set_collection(DOCS)
    other = byo.RankingAdapter("theirs", {"q1": {"x9": 1.0}}, "run.trec", "0")
    with pytest.raises(ValueError, match="names no document of this dataset"):
        other.set_collection(DOCS)
    known = byo.RankingAdapter("theirs", {"q9": {"d1": 1.0}}, "run.trec", "0")
    known.set_collection(DOCS)
    with pytest.raises(ValueError, match="names none of the run's 2 queries"):
        known.set_queries(["q1", "q2"])
    known.set_queries(["q1", "q9"])  # one known query is enough: the others are recorded as missing per query


@pytest.mark.parametrize("grade", [0.7, "high", float("nan")])
def test_a_fractional_or_non_numeric_grade_is_refused(grade, tmp_path):
    spec = {"corpus": {"d1": "alpha"}, "queries": {"q1": "alpha"}, "qrels": {"q1": {"d1": grade}}}
    with pytest.raises(ValueError, match="relevance grade .* is not"):
        byo.adhoc_dataset("mine", spec, tmp_path)
    frame = pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "relevance": [grade]})
    with pytest.raises(ValueError, match="row 0: relevance grade"):
        byo.adhoc_dataset("mine", {**spec, "qrels": frame}, tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["../../escape", "/abs/path", "<script>x</script>", "", "a" * 65, ".hidden"])
def test_an_adhoc_dataset_name_is_checked_before_anything_is_written(name, tmp_path):
    spec = {"corpus": {"d1": "alpha"}, "queries": {"q1": "alpha"}, "qrels": {"q1": {"d1": 1}}}
    with pytest.raises(ValueError, match="ad-hoc dataset name"):
        byo.adhoc_dataset(name, spec, tmp_path / "root")
    assert not (tmp_path / "root").exists() and not (tmp_path / "escape").exists()
    assert byo.adhoc_dataset("mine_1", spec, tmp_path / "root")[0] == "dataset.name=mine_1"
