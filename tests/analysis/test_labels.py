"""analysis/labels.py, answer recall at a text budget: exact values on a constructed corpus, then the real LoCoMo
end-to-end runs: bounded by the budget, monotone in it, equal to a whole-ranking count at a budget past the
ranking's text, and added by the report's views beside Coverage@N."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import views as V
from analysis.declared_runs import RunRef
from analysis.labels import answer_recall_at_chars
from lethebench.runs import RunFolder

CORPUS = pd.DataFrame(
    {"doc_id": ["d1", "d2", "d3"], "text": ["We met in Paris.", "It was the month of May, 2023.", "Nothing here."]}
)
QUERIES = pd.DataFrame(
    {"query_id": ["q1", "q2", "q3", "q4"], "answer": ["Paris in May", "the May of 2023", None, "Paris"]}
)


def test_constructed_values():
    run = {"q1": [("d1", 2.0), ("d2", 1.0)], "q2": [("d3", 1.0), ("d2", 0.5)], "q3": [("d1", 1.0)]}
    whole = answer_recall_at_chars(run, QUERIES, CORPUS, 1000)
    # q1: {paris, in, may} all in d1 + d2; q2: {may, of, 2023} (articles dropped) in d2; q3 has no answer (not
    # defined); q4 has no ranking (0)
    assert whole.to_dict() == {"q1": 1.0, "q2": 1.0, "q4": 0.0} and whole.name == "answer_recall@1000c"
    cut = answer_recall_at_chars(run, QUERIES, CORPUS, len("We met in Paris.") + 2 + len("It was"))
    assert cut["q1"] == pytest.approx(2 / 3)  # "May" lies past the budget
    assert answer_recall_at_chars(run, QUERIES, CORPUS, 3)["q1"] == 0.0  # "We " holds no answer word
    split = answer_recall_at_chars(
        {"q": [("d", 1.0)]},
        pd.DataFrame({"query_id": ["q"], "answer": ["in"]}),
        pd.DataFrame({"doc_id": ["d"], "text": ["inside"]}),
        2,
    )
    assert split["q"] == 0.0  # "in" is the start of a word the budget splits, not a word of the text
    with pytest.raises(ValueError, match="at least one character"):
        answer_recall_at_chars(run, QUERIES, CORPUS, 0)


def test_on_real_runs(e2e_runs):
    folder = RunFolder(e2e_runs["bm25"])
    ds = folder.dataset_folder
    queries = pd.read_parquet(ds / "queries.parquet")
    corpus = pd.read_parquet(ds / "corpus.parquet", columns=["doc_id", "text"])
    run = folder.run
    evaluated = queries[queries["query_id"].isin(run)]
    small, mid, big = (answer_recall_at_chars(run, evaluated, corpus, c) for c in (200, 3000, 10**9))
    answered = evaluated["answer"].notna() & evaluated["answer"].astype(str).str.strip().ne("")
    assert 0 < len(mid) <= int(answered.sum())
    assert ((small <= mid + 1e-12) & (mid <= big + 1e-12)).all() and mid.between(0, 1).all()
    assert (big > small).any()
    text = dict(zip(corpus["doc_id"], corpus["text"].str.lower(), strict=True))
    for qid in list(big.index)[:20]:  # past the ranking's text: every gold word anywhere in the ranked docs
        gold = set(pd.Series(str(queries.set_index("query_id").loc[qid, "answer"]).lower()).str.findall(r"\w+")[0])
        gold -= {"a", "an", "the", "and"}
        ranked = set(pd.Series(" ".join(text[d] for d, _ in run[qid])).str.findall(r"\w+")[0])
        assert big[qid] == pytest.approx(len(gold & ranked) / len(gold))
    refs = [RunRef("locomo", "bm25", "test", e2e_runs["bm25"], ds, "2 conversations")]
    v = V.collect({"coverage_n": 10, "contradiction_k": 10, "answer_recall_chars": 3000}, refs)["locomo"]
    assert "answer_recall@3000c" in v.label_metrics
    pd.testing.assert_series_equal(
        v.per_query["bm25"]["answer_recall@3000c"].dropna().sort_index(), mid.sort_index(), check_names=False
    )
    assert (
        "answer_recall@3000c" not in V.collect({"coverage_n": 10, "contradiction_k": 10}, refs)["locomo"].label_metrics
    )
