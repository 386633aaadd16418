"""The harness's two ranking orders (lethe.retrieval.ranking): doc-id rankings and array positions."""

from __future__ import annotations

import numpy as np

from lethe.retrieval.ranking import canonical_order, top_indices, top_k


def test_canonical_order_is_score_desc_then_doc_id_desc():
    ranking = [("a", 1.0), ("c", 2.0), ("b", 1.0), ("d", 1.0)]
    assert canonical_order(ranking) == [("c", 2.0), ("d", 1.0), ("b", 1.0), ("a", 1.0)]
    assert top_k(ranking, 2) == [("c", 2.0), ("d", 1.0)]
    assert top_k({"x": 0.5, "y": 0.5, "z": 0.9}, 2) == [("z", 0.9), ("y", 0.5)]  # a mapping is its items
    assert top_k(ranking, 0) == []


def test_top_indices_keeps_exactly_k_and_breaks_ties_by_position_or_tie_rank():
    s = np.array([0.5, 0.9, 0.5, 0.5, 0.1], np.float32)
    # three docs tie at the cut: the lowest positions win, whatever the selection algorithm does
    assert top_indices(s, 3).tolist() == [1, 0, 2]
    assert top_indices(s, 3, tie_rank=np.array([4, 0, 3, 1, 2])).tolist() == [1, 3, 2]
    assert top_indices(s, 10).tolist() == [1, 0, 2, 3, 4]
    assert top_indices(s, 0).tolist() == []


def test_top_indices_positive_only_returns_matching_docs_only():
    s = np.array([0.0, 2.0, 0.0, 1.0], np.float32)
    assert top_indices(s, 3, positive_only=True).tolist() == [1, 3]
    assert top_indices(np.zeros(3), 2, positive_only=True).tolist() == []
