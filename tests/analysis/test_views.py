"""analysis/views.py: the per-dataset views the report reads, on real runs."""

from __future__ import annotations

import pandas as pd

from analysis import views as V
from analysis.declared_runs import RunRef
from analysis.labels import answer_recall_at_chars
from experiments.runner import run_experiment
from lethebench.runs import RunFolder

CFG = {
    "coverage_n": 10,
    "contradiction_k": 10,
    "answer_recall_chars": 3000,
    "best_baseline_metric": "ndcg@10",
    "gate_metric": "ndcg@10",
    "family_metrics": ["ndcg@10"],
}


def test_runs_of_one_dataset_with_their_own_chunking_are_scored_on_their_own_units(cfg_for, tmp_path):
    """A chunking variant has its own dataset build (other doc ids): its label metrics read its own corpus. The
    report step crashed (KeyError on a doc id) when a chunking variant was read beside the default build."""
    refs = []  # results in a folder of their own: the session's results folder is counted by other tests
    for label, extra in (
        ("bm25", []),
        ("bm25+short", ["chunking.size_tokens=8", "chunking.overlap_tokens=2", "++method.variant=short"]),
    ):
        f = run_experiment(cfg_for("method=bm25", "dataset.scopes=[conv-26]", f"results_dir={tmp_path}", *extra))
        refs.append(RunRef("locomo", label, "test", f, RunFolder(f).dataset_folder, "x"))
    assert refs[0].dataset_folder != refs[1].dataset_folder
    views = V.collect(CFG, refs)
    v = views["locomo"]
    assert set(v.label_data) == {r.dataset_folder for r in refs}
    for ref in refs:
        run = v.runs[ref.label]
        corpus = pd.read_parquet(ref.dataset_folder / "corpus.parquet")
        evaluated = v.queries[v.queries["query_id"].isin(v.per_query[ref.label].index)]
        want = answer_recall_at_chars(run.run, evaluated, corpus, 3000)
        got = v.per_query[ref.label]["answer_recall@3000c"].dropna()
        assert len(got) > 100 and got.to_dict() == want.to_dict()
    short = pd.read_parquet(refs[1].dataset_folder / "corpus.parquet")["doc_id"]
    assert short.str.contains("#").any()  # the variant really split turns into other units
