"""Entity-coverage diversification: coverage properties, greedy quality, tie rules, hand-built cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp

from lethe.stages.diversify import coverage, entity_matrix, entity_weights, greedy_diversify


def _random_instance(seed: int, n: int, m: int, density: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    """(n, m) boolean incidence and (m,) positive weights."""
    rng = np.random.default_rng(seed)
    inc = rng.random((n, m)) < density
    w = rng.uniform(0.1, 2.0, size=m)
    return inc, w


def _reference_greedy(rel: np.ndarray, inc: np.ndarray, w: np.ndarray, lam: float, k: int) -> list[int]:
    """Greedy straight from the definition, recomputing f with `coverage` (slow, no incremental state)."""
    span = rel.max() - rel.min()
    rel_norm = (rel - rel.min()) / span if span > 0 else np.ones_like(rel)
    W = w.sum()
    S: list[int] = []
    for _ in range(min(k, len(rel))):
        f_S = coverage(S, inc, w)
        best = None
        for i in range(len(rel)):
            if i in S:
                continue
            obj = (1 - lam) * rel_norm[i] + (lam * (coverage(S + [i], inc, w) - f_S) / W if W > 0 else 0.0)
            key = (round(obj, 10), rel[i], -i)
            if best is None or key > best[0]:
                best = (key, i)
        S.append(best[1])
    return S


# --- coverage function ---------------------------------------------------------------------


def test_coverage_is_monotone():
    inc, w = _random_instance(0, 30, 40)
    rng = np.random.default_rng(1)
    for _ in range(300):
        S = list(rng.choice(30, size=rng.integers(0, 30), replace=False))
        x = int(rng.integers(30))
        assert coverage(S, inc, w) <= coverage(S + [x], inc, w) + 1e-12


def test_coverage_is_submodular():
    inc, w = _random_instance(2, 30, 40)
    rng = np.random.default_rng(3)
    strict = 0
    for _ in range(300):
        B = rng.choice(30, size=rng.integers(1, 29), replace=False)
        A = [int(b) for b in B if rng.random() < 0.5]
        x = int(rng.choice(np.setdiff1d(np.arange(30), B)))
        gain_a = coverage(A + [x], inc, w) - coverage(A, inc, w)
        gain_b = coverage(list(B) + [x], inc, w) - coverage(B, inc, w)
        assert gain_a >= gain_b - 1e-12
        strict += gain_a > gain_b + 1e-9
    assert strict > 50  # the fixture exercises genuinely diminishing returns, not just equalities


def test_coverage_empty_all_duplicates_and_sparse():
    inc, w = _random_instance(4, 30, 40, density=0.05)
    inc[:, [3, 17, 29]] = False  # entities nobody mentions never count
    present = inc.any(axis=0)
    assert (~present).sum() >= 3
    assert coverage([], inc, w) == 0.0
    assert coverage(range(30), inc, w) == pytest.approx(w[present].sum(), abs=1e-12)
    assert coverage([5, 2, 5, 2], inc, w) == coverage([2, 5], inc, w)
    assert coverage([2, 5], inc, w) == pytest.approx(w[inc[2] | inc[5]].sum(), abs=1e-12)
    assert coverage([2, 5, 9], sp.csr_matrix(inc), w) == pytest.approx(coverage([9, 2, 5], inc, w), abs=1e-12)


# --- greedy quality --------------------------------------------------------------------------


def test_greedy_coverage_beats_random_subsets():
    inc, w = _random_instance(5, 40, 60, density=0.08)
    rel = np.random.default_rng(6).random(40)
    k = 5
    greedy = coverage(greedy_diversify(rel, inc, w, lam=1.0, k=k), inc, w)
    rng = np.random.default_rng(7)
    rand = np.array([coverage(rng.choice(40, size=k, replace=False), inc, w) for _ in range(1000)])
    assert greedy > rand.mean()
    assert greedy >= np.percentile(rand, 95)


@pytest.mark.parametrize("seed", range(10))
def test_greedy_within_1_minus_1_over_e_of_optimum(seed):
    inc, w = _random_instance(100 + seed, 10, 12, density=0.25)
    rel = np.random.default_rng(seed).random(10)
    k = 3
    greedy = coverage(greedy_diversify(rel, inc, w, lam=1.0, k=k), inc, w)
    opt = max(coverage(S, inc, w) for S in itertools.combinations(range(10), k))
    assert opt > 0
    assert greedy >= (1 - 1 / math.e) * opt - 1e-12


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_incremental_greedy_matches_definition(lam, seed):
    inc, w = _random_instance(200 + seed, 25, 30, density=0.12)
    rel = np.random.default_rng(300 + seed).normal(size=25) * 7 + 3  # arbitrary scale
    got = greedy_diversify(rel, inc, w, lam=lam, k=25)
    assert got == _reference_greedy(rel, inc, w, lam, 25)
    assert sorted(got) == list(range(25))
    assert greedy_diversify(rel, sp.csr_matrix(inc), w, lam=lam, k=10) == got[:10]


# --- relevance order, ties, hand-built promotion ---------------------------------------------


def test_lam_zero_is_relevance_order_with_ties():
    rel = np.array([0.5, 0.9, 0.5, 0.9, 0.1, 0.5])
    inc, _ = entity_matrix(
        [
            frozenset({"a"}),
            frozenset({"a"}),
            frozenset({"b"}),
            frozenset({"a"}),
            frozenset({"c", "d", "e"}),
            frozenset({"f"}),
        ]
    )
    w = np.ones(inc.shape[1])
    assert greedy_diversify(rel, inc, w, lam=0.0, k=6) == [1, 3, 0, 2, 5, 4]
    assert greedy_diversify(rel, inc, w, lam=0.0, k=3) == [1, 3, 0]

    inc2, w2 = _random_instance(8, 50, 40)
    rel2 = np.random.default_rng(9).integers(0, 5, size=50).astype(float)  # many ties
    assert greedy_diversify(rel2, inc2, w2, lam=0.0, k=50) == np.argsort(-rel2, kind="stable").tolist()


def test_diversification_promotes_new_entity_over_near_duplicate():
    docs = [
        frozenset({"kafka", "consumer lag"}),  # top doc
        frozenset({"kafka", "consumer lag"}),  # near-duplicate, almost as relevant
        frozenset({"zookeeper", "ECONNREFUSED"}),  # less relevant, new entities
        frozenset(),
    ]
    inc, names = entity_matrix(docs)
    w = entity_weights(inc)  # uniform, W = 4
    rel = np.array([10.0, 9.5, 5.0, 0.0])  # rel_norm = [1, .95, .5, 0]
    # lam = .5, obj = .5 * rel_norm + .5 * gain / 4
    # step 1: [.5 + .25, .475 + .25, .25 + .25, 0] -> 0
    # step 2: [-, .475 + 0, .25 + .25, 0]           -> 2 (the near-duplicate adds nothing)
    # step 3: [-, .475, -, 0]                        -> 1, then 3
    assert greedy_diversify(rel, inc, w, lam=0.5, k=4) == [0, 2, 1, 3]
    assert greedy_diversify(rel, inc, w, lam=0.0, k=4) == [0, 1, 2, 3]
    assert greedy_diversify(rel, inc, w, lam=0.5, k=2) == [0, 2]


def test_ties_go_to_higher_relevance_then_lower_index():
    inc, _ = entity_matrix([frozenset({"a"}), frozenset({"b"}), frozenset({"c"}), frozenset({"a"})])
    rel = np.array([0.2, 0.9, 0.9, 0.2])
    # lam = 1: all first-round gains are 1/3 -> 1 (rel .9, lower index), then 2; then 0 and 3 tie (gain 1/3) -> 0, then 3
    assert greedy_diversify(rel, inc, np.ones(3), lam=1.0, k=4) == [1, 2, 0, 3]
    # constant relevance: coverage decides, ties by index
    assert greedy_diversify(np.ones(4), inc, np.array([1.0, 3.0, 2.0]), lam=0.5, k=4) == [1, 2, 0, 3]
    # W == 0: coverage term vanishes, relevance order
    assert greedy_diversify(rel, inc, np.zeros(3), lam=1.0, k=4) == [1, 2, 0, 3]


def test_exact_tie_survives_float_rounding():
    inc, _ = entity_matrix([frozenset("abcd"), frozenset("e"), frozenset("a"), frozenset()])
    rel = np.array([1.0, 0.1, 0.3, 0.0])  # already in [0, 1]; W = 5, lam = .5
    # step 1: doc 0 (.5 + .5 * 4/5). step 2 ties in exact arithmetic: doc 1 = .5*.1 + .5*1/5 = .15,
    # doc 2 = .5*.3 + 0 = .15; in floats .05 + .1 = 0.15000000000000002 > .15, yet the tie rule
    # must give doc 2 (higher relevance).
    assert greedy_diversify(rel, inc, np.ones(5), lam=0.5, k=4) == [0, 2, 1, 3]


def test_k_bounds_and_empty_pool():
    inc, w = _random_instance(10, 6, 8)
    rel = np.arange(6.0)
    assert greedy_diversify(rel, inc, w, lam=0.5, k=0) == []
    assert sorted(greedy_diversify(rel, inc, w, lam=0.5, k=100)) == list(range(6))
    assert greedy_diversify(np.zeros(0), np.zeros((0, 3), dtype=bool), np.ones(3), lam=0.5, k=5) == []


@pytest.mark.parametrize("lam", [-0.1, 1.1, float("nan"), float("inf")])
def test_invalid_lam_raises(lam):
    inc, w = _random_instance(11, 5, 5)
    with pytest.raises(ValueError, match="lam"):
        greedy_diversify(np.arange(5.0), inc, w, lam=lam, k=3)


def test_invalid_shapes_and_weights_raise():
    inc, w = _random_instance(12, 5, 5)
    with pytest.raises(ValueError, match="relevance"):
        greedy_diversify(np.arange(4.0), inc, w, lam=0.5, k=3)
    with pytest.raises(ValueError, match="weights"):
        greedy_diversify(np.arange(5.0), inc, w[:4], lam=0.5, k=3)
    with pytest.raises(ValueError, match="weights"):
        greedy_diversify(np.arange(5.0), inc, -w, lam=0.5, k=3)


# --- incidence and weights ---------------------------------------------------------------------


def test_entity_matrix_hand_written():
    inc, names = entity_matrix([frozenset({"b", "a"}), frozenset({"c"}), frozenset(), frozenset({"a", "c"})])
    assert names == ["a", "b", "c"]
    assert sp.issparse(inc) and inc.format == "csr" and inc.dtype == bool
    assert inc.shape == (4, 3)
    assert inc.toarray().tolist() == [
        [True, True, False],
        [False, False, True],
        [False, False, False],
        [True, False, True],
    ]
    again, names_again = entity_matrix([frozenset({"c", "a"}), frozenset({"a", "b"})])
    assert names_again == ["a", "b", "c"] and again.toarray().tolist() == [[True, False, True], [True, True, False]]
    empty, none = entity_matrix([])
    assert empty.shape == (0, 0) and none == []


def test_entity_weights_values():
    inc, _ = entity_matrix([frozenset({"b", "a"}), frozenset({"c"}), frozenset(), frozenset({"a", "c"})])
    # df = [2, 1, 2], n_docs = 4
    np.testing.assert_array_equal(entity_weights(inc), [1.0, 1.0, 1.0])
    idf = entity_weights(inc, "idf")
    np.testing.assert_allclose(idf, [math.log(3.0), math.log(5.0), math.log(3.0)], rtol=1e-15)
    np.testing.assert_allclose(entity_weights(inc.toarray(), "idf"), idf, rtol=1e-15)
    boosted = entity_weights(inc, "idf", query_entities=[1, 1], query_weight=0.5)  # duplicate counted once
    np.testing.assert_allclose(boosted, [math.log(3.0), math.log(5.0) + 0.5, math.log(3.0)], rtol=1e-15)
    np.testing.assert_array_equal(entity_weights(inc, query_entities=[0, 2]), [2.0, 1.0, 2.0])
    # an entity no candidate mentions gets idf weight 0 (never infinite)
    np.testing.assert_allclose(entity_weights(np.array([[1, 0], [1, 0]], dtype=bool), "idf"), [math.log(2.0), 0.0])


def test_entity_weights_errors():
    inc, _ = entity_matrix([frozenset({"a"})])
    with pytest.raises(ValueError, match="uniform.*idf"):
        entity_weights(inc, "bm25")
    with pytest.raises(ValueError, match="range"):
        entity_weights(inc, query_entities=[1])
    with pytest.raises(ValueError, match="query_weight"):
        entity_weights(inc, query_weight=-1.0)
