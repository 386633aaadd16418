"""experiments/folds.py: gold-document groups and grouped fold assignment, on constructed cases and on TechQA's
real gold technotes (many questions share one)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from lethebench.folds import assign_folds, gold_groups
from lethebench.loaders.techqa import load_techqa
from tests.conftest import DATA_ROOT


def test_queries_sharing_a_gold_source_are_one_group_transitively():
    qrels = {"q1": {"a#0": 1}, "q2": {"a#1": 1, "b#0": 1}, "q3": {"b#2": 1}, "q4": {"c#0": 1}, "q5": {}}
    source_of = {"a#0": "a", "a#1": "a", "b#0": "b", "b#2": "b", "c#0": "c"}
    groups = gold_groups(["q1", "q2", "q3", "q4", "q5"], qrels, source_of)
    assert groups == {"q1": "q1", "q2": "q1", "q3": "q1", "q4": "q4", "q5": "q5"}
    # without the chunk -> source map, chunks of one document are different documents
    assert gold_groups(["q1", "q2", "q3"], qrels, {}) == {"q1": "q1", "q2": "q2", "q3": "q3"}


def test_the_grouping_falls_back_from_scope_to_gold_document_to_query():
    meta = pd.DataFrame({"scope_id": ["s1"] * 6, "query_id": [f"q{i}" for i in range(6)]})
    groups = {"q0": "q0", "q1": "q0", "q2": "q0", "q3": "q3", "q4": "q4", "q5": "q5"}
    folds, how = assign_folds(meta, 3, 0, groups)
    assert how == "gold document" and len(set(folds[:3])) == 1 and set(folds) == {0, 1, 2}
    assert assign_folds(meta, 3, 0)[1] == "query"
    many = meta.assign(scope_id=["s1", "s1", "s2", "s2", "s3", "s3"])
    folds, how = assign_folds(many, 3, 0, groups)  # enough scopes: scopes win over gold groups
    assert how == "scope" and folds[0] == folds[1] and folds[2] == folds[3] and folds[4] == folds[5]


def test_query_grouping_is_the_one_learned_fusion_was_trained_with():
    """Learned fusion passes no groups; its folds must stay those of its saved models (a seeded permutation of
    the rows, dealt in turn)."""
    meta = pd.DataFrame({"scope_id": ["s"] * 10, "query_id": [f"q{i}" for i in range(10)]})
    order = np.random.default_rng(7).permutation(10)
    want = np.empty(10, dtype=np.int64)
    want[order] = np.arange(10) % 5
    got, how = assign_folds(meta, 5, 7)
    assert how == "query" and got.tolist() == want.tolist()


def test_no_techqa_gold_technote_is_in_two_folds():
    tq = load_techqa(DATA_ROOT / "techqa" / "techqa_rag_eval_sample_480.jsonl")
    ids = [q for q in tq.queries["query_id"] if tq.qrels.get(q)]
    shared = Counter(d for q in ids for d in tq.qrels[q])
    n_sharing = sum(any(shared[d] > 1 for d in tq.qrels[q]) for q in ids)
    assert n_sharing > 50  # the reason for grouping: many questions share their technote
    groups = gold_groups(ids, tq.qrels, {})
    meta = pd.DataFrame({"scope_id": "techqa", "query_id": ids})
    folds, how = assign_folds(meta, 3, 0, groups)
    assert how == "gold document"
    fold_of = dict(zip(ids, folds, strict=True))
    folds_of_doc: dict[str, set[int]] = {}
    for q in ids:
        for d in tq.qrels[q]:
            folds_of_doc.setdefault(d, set()).add(int(fold_of[q]))
    assert all(len(f) == 1 for f in folds_of_doc.values())
    sizes = Counter(folds.tolist())
    assert len(sizes) == 3 and min(sizes.values()) > 0.25 * len(ids)
    # per query they would not be: some technote lands in two folds
    per_query, _ = assign_folds(meta, 3, 0)
    by_q = dict(zip(ids, per_query, strict=True))
    assert any(len({int(by_q[q]) for q in ids if d in tq.qrels[q]}) > 1 for d in shared if shared[d] > 1)
