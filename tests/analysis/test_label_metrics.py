"""analysis/label_metrics.py: the registry the views and the reference store loop over; a new label metric is one
register() call (a toy one here), on real runs."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import label_metrics as LM
from analysis import views as V
from analysis.declared_runs import RunRef
from lethebench.runs import RunFolder

CFG = {
    "coverage_n": 10,
    "contradiction_k": 10,
    "answer_recall_chars": None,
    "best_baseline_metric": "ndcg@10",
    "gate_metric": "ndcg@10",
    "family_metrics": ["ndcg@10"],
}


def _answer_in_top(run, data: LM.LabelData, evaluated: pd.DataFrame, n: int) -> pd.Series:
    """Toy: 1 when the gold answer occurs verbatim (case-insensitively) in the text of the top n, per query with one."""
    text = dict(zip(data.corpus["doc_id"], data.corpus["text"].str.lower(), strict=True))
    out = {
        q: float(str(a).lower() in " ".join(text[d] for d, _ in run.get(q, [])[:n]))
        for q, a in zip(evaluated["query_id"], evaluated["answer"], strict=True)
        if isinstance(a, str) and a.strip()
    }
    return pd.Series(out, dtype=float)


@pytest.fixture
def toy():
    metric = LM.register(LM.LabelMetric("toy_answer_top", "answer_in_top@{}", _answer_in_top))
    yield metric
    del LM.LABEL_METRICS["toy_answer_top"]


def test_a_new_label_metric_is_one_registered_record(e2e_runs, toy):
    refs = [RunRef("locomo", m, "test", f, RunFolder(f).dataset_folder, "x") for m, f in e2e_runs.items()]
    views = V.collect({**CFG, "toy_answer_top": 5}, refs)
    v = views["locomo"]
    assert v.label_metrics == ["answer_in_top@5"]  # LoCoMo has no gold entities nor stale/current pairs
    corpus = pd.read_parquet(refs[0].dataset_folder / "corpus.parquet", columns=["doc_id", "text"])
    for ref in refs:
        got = v.per_query[ref.label]["answer_in_top@5"].dropna()
        evaluated = v.queries[v.queries["query_id"].isin(v.per_query[ref.label].index)]
        want = _answer_in_top(v.runs[ref.label].run, LM.LabelData(corpus, None), evaluated, 5)
        assert len(got) > 100 and got.to_dict() == want.to_dict()
    # the reference store stores each metric's setting beside its column (experiments.expected_scores)
    assert LM.label_params({**CFG, "toy_answer_top": 5}) == {
        "coverage_n": 10,
        "contradiction_k": 10,
        "answer_recall_chars": None,
        "toy_answer_top": 5,
    }
    assert "answer_in_top@5" not in V.collect(CFG, refs)["locomo"].label_metrics  # null: switched off


def test_a_setting_is_registered_once(toy):
    with pytest.raises(ValueError, match="setting 'toy_answer_top' is registered already"):
        LM.register(LM.LabelMetric("toy_answer_top", "other@{}", _answer_in_top))
