"""Fusion and MMR building blocks against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from lethe.retrieval.fusion import convex, minmax, rrf
from lethe.retrieval.mmr import mmr
from lethe.retrieval.ranking import top_k


def test_mmr_hand_computed():
    q = np.array([0.9, 0.85, 0.5])
    s = np.array([[1.0, 0.95, 0.1], [0.95, 1.0, 0.2], [0.1, 0.2, 1.0]])
    # step 1: 0.7*q = [.63, .595, .35] -> 0; step 2: [.595 - .3*.95, .35 - .3*.1] = [.31, .32] -> 2; then 1
    assert mmr(q, s, lam=0.7) == [0, 2, 1]
    assert mmr(q, s, lam=1.0) == [0, 1, 2]  # pure relevance
    assert mmr(q, s, lam=0.7, k=2) == [0, 2]


def test_minmax_edge_cases():
    assert minmax(np.array([3.0, 3.0, 3.0])).tolist() == [1.0, 1.0, 1.0]
    assert minmax(np.array([])).size == 0
    assert minmax(np.array([1.0, 3.0, 2.0])).tolist() == [0.0, 1.0, 0.5]


def test_convex_union_and_empty_list():
    a = {"x": 10.0, "y": 5.0}
    b = {"y": 0.9, "z": 0.4}
    fused = convex(a, b, alpha=0.5)
    assert fused == pytest.approx({"x": 0.5, "y": 0.45, "z": 0.2})
    assert convex({}, b, alpha=0.5) == pytest.approx({"y": 0.45, "z": 0.2})
    assert convex(a, {}, alpha=0.5) == pytest.approx({"x": 0.5, "y": 0.0})
    assert convex({"x": 2.0, "y": 2.0}, {}, alpha=0.5) == pytest.approx({"x": 0.5, "y": 0.5})


def test_rrf_and_ranked():
    f = rrf([["a", "b"], ["b", "c"]], k=60)
    assert f["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert [d for d, _ in top_k(f, 3)] == ["b", "a", "c"]
