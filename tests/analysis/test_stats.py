"""analysis.stats against values computed independently: hand-worked textbook examples, exact
enumeration, and a direct BCa implementation (Efron & Tibshirani 1993, ch. 14)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtr, ndtri

from analysis.stats import (
    adjust,
    align,
    ci_test_disagreement,
    correct_family,
    mean_ci,
    paired_test,
    sign_test,
    with_primary_test,
)

# ----------------------------------------------------------------------------- helpers


def average_ranks(v: np.ndarray) -> np.ndarray:
    """Ranks 1..n of v, ties get the average of the ranks they span (written out, no scipy)."""
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + 1 + j + 1) / 2
        i = j + 1
    return ranks


def pratt_rank_sums(d: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Pratt: rank |d| with the zeros included, then drop the zeros' ranks."""
    r = average_ranks(np.abs(d))
    return r[d != 0], float(r[d > 0].sum()), float(r[d < 0].sum())


def signed_rank_p_by_enumeration(d: np.ndarray) -> float:
    """Two-sided p of the signed-rank test: all 2^k sign assignments of the non-zero ranks,
    p = min(1, 2 * min(P(W+ >= obs), P(W+ <= obs)))."""
    ranks, w_plus, _ = pratt_rank_sums(d)
    sums = np.array(
        [
            sum(r for r, s in zip(ranks, signs, strict=True) if s)
            for signs in itertools.product((0, 1), repeat=len(ranks))
        ]
    )
    ge, le = np.mean(sums >= w_plus), np.mean(sums <= w_plus)
    return min(1.0, 2 * min(ge, le))


def bca_direct(x: np.ndarray, idx: np.ndarray, confidence: float) -> tuple[float, float]:
    """BCa interval of the mean written out from Efron & Tibshirani (1993) eqs. 14.9-14.15."""
    theta = x.mean()
    boot = x[idx].mean(axis=1)
    z0 = ndtri(np.mean(boot < theta))  # 14.14
    jack = np.array([np.delete(x, i).mean() for i in range(len(x))])
    u = jack.mean() - jack
    acc = (u**3).sum() / (6 * ((u**2).sum()) ** 1.5)  # 14.15
    z = ndtri((1 - confidence) / 2)
    a1 = ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z)))  # 14.10
    a2 = ndtr(z0 + (z0 - z) / (1 - acc * (z0 - z)))
    lo, hi = np.quantile(boot, [a1, a2], method="linear")
    return float(lo), float(hi)


def dumps(d: dict) -> str:
    return json.dumps(d, sort_keys=True)  # NaN-safe equality (NaN != NaN in a dict compare)


# ----------------------------------------------------------------------------- Wilcoxon


def test_wilcoxon_exact_small_sample_by_hand():
    # |d| ranks: 0.2->1, 0.7->2, 0.9->3, 1.5->4, 2.2->5, 2.6->6, 3.1->7, 4.0->8
    # W- = 1 + 2 = 3, W+ = 33. Subsets of {1..8} with sum <= 3: {}, {1}, {2}, {3}, {1,2} -> 5,
    # so P(W- <= 3) = 5/256 and the two-sided p = 10/256.
    d = np.array([1.5, -0.2, 3.1, 2.2, -0.7, 4.0, 0.9, 2.6])
    r = paired_test(d, np.zeros_like(d), resamples=2000)
    assert r["wilcoxon_stat"] == 3.0
    assert r["p_wilcoxon"] == pytest.approx(10 / 256, abs=1e-12)
    assert r["p_wilcoxon"] == pytest.approx(signed_rank_p_by_enumeration(d), abs=1e-12)
    assert r["n_nonzero"] == 8 and r["wilcoxon_method"] == "exact"


def test_wilcoxon_pratt_zero_textbook():
    # Classic 10-pair example (Wikipedia, "Wilcoxon signed-rank test"): differences
    # 15, -7, 5, 20, 0, -9, 17, -12, 5, -10. Pratt ranks the zero (rank 1), so the others get
    # 2.5, 2.5 (the two 5s), 4 (7), 5 (9), 6 (10), 7 (12), 8 (15), 9 (17), 10 (20):
    # W+ = 2.5 + 2.5 + 8 + 9 + 10 = 32, W- = 4 + 5 + 6 + 7 = 22. (Dropping the zero first, as
    # zero_method="wilcox" does, would give W+ = 27, W- = 18.)
    x2 = np.array([125, 115, 130, 140, 140, 115, 140, 125, 140, 135], dtype=float)
    x1 = np.array([110, 122, 125, 120, 140, 124, 123, 137, 135, 145], dtype=float)
    _, w_plus, w_minus = pratt_rank_sums(x2 - x1)
    assert (w_plus, w_minus) == (32.0, 22.0)
    r = paired_test(x2, x1, resamples=2000)
    assert r["wilcoxon_stat"] == 22.0
    assert r["n_nonzero"] == 9 and (r["wins"], r["ties"], r["losses"]) == (5, 1, 4)
    assert r["p_wilcoxon"] == pytest.approx(signed_rank_p_by_enumeration(x2 - x1), abs=1e-12)


def test_wilcoxon_pratt_asymptotic_matches_direct_normal_approximation():
    # n > 50 with zeros and ties -> normal approximation. Under H0 each non-zero rank r_i
    # enters W+ with probability 1/2 independently: E = sum r_i / 2, Var = sum r_i^2 / 4
    # (this includes the tie correction and Pratt's zero adjustment by construction).
    rng = np.random.default_rng(3)
    d = rng.integers(-4, 6, size=60) / 10  # many zeros and ties
    ranks, w_plus, w_minus = pratt_rank_sums(d)
    z = (w_plus - ranks.sum() / 2) / math.sqrt((ranks**2).sum() / 4)
    p = math.erfc(abs(z) / math.sqrt(2))
    r = paired_test(d, np.zeros_like(d), resamples=1000)
    assert r["wilcoxon_method"].startswith("asymptotic")
    assert r["wilcoxon_stat"] == min(w_plus, w_minus)
    assert r["p_wilcoxon"] == pytest.approx(p, rel=1e-10)
    assert r["n_nonzero"] == int(np.count_nonzero(d))


# ----------------------------------------------------------------------------- BCa


def test_bca_matches_direct_implementation_with_same_resamples():
    # Same seed -> same resample indices (scipy draws rng.integers(0, n, (B, n)) from the
    # Generator; we check that too). With continuous data no bootstrap mean equals the sample
    # mean, so E&T's z0 = Phi^-1(#{boot < theta}/B) equals scipy's mid-rank version, and the
    # two implementations differ only by float summation order (~1e-15). rtol 1e-9 is far
    # below the Monte Carlo error of the endpoints (~1e-2 of the width) and below the
    # BCa-vs-percentile gap asserted below, so the check discriminates.
    x = np.random.default_rng(11).lognormal(sigma=1.0, size=30)  # skewed: acceleration matters
    B, seed, conf = 4000, 5, 0.95
    idx = np.random.default_rng(seed).integers(0, len(x), size=(B, len(x)))
    lo, hi = bca_direct(x, idx, conf)
    r = mean_ci(x, resamples=B, confidence=conf, seed=seed)
    assert r["method"] == "BCa" and r["n"] == 30 and r["mean"] == pytest.approx(x.mean(), rel=1e-14)
    assert r["ci_low"] == pytest.approx(lo, rel=1e-9)
    assert r["ci_high"] == pytest.approx(hi, rel=1e-9)
    pct = np.quantile(x[idx].mean(axis=1), [0.025, 0.975])
    assert abs(hi - pct[1]) > 1e-3 or abs(lo - pct[0]) > 1e-3  # BCa is not the percentile CI


def test_paired_ci_is_mean_ci_of_differences():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(size=50), rng.uniform(size=50)
    r = paired_test(a, b, resamples=3000, seed=4)
    c = mean_ci(np.round(a - b, 12), resamples=3000, seed=4)
    assert (r["ci_low"], r["ci_high"], r["mean_diff"]) == (c["ci_low"], c["ci_high"], c["mean"])
    assert r["ci_low"] < r["mean_diff"] < r["ci_high"]


# ----------------------------------------------------------------------------- randomization


def test_randomization_close_to_exact_enumeration():
    d = np.array([3, -1, 4, 1, 5, 9, -2, 6, 5, -3], dtype=float)  # integers: exact sums
    obs = abs(d.sum())
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=len(d))))
    p_exact = np.mean(np.abs(flips @ d) >= obs)  # all 2^10 sign vectors, identity included
    B = 20_000
    r = paired_test(d, np.zeros_like(d), resamples=B, seed=0)
    se = math.sqrt(p_exact * (1 - p_exact) / B)
    assert abs(r["p_randomization"] - p_exact) <= 4 * se + 1 / (B + 1)
    assert r["p_randomization"] >= 1 / (B + 1)


def test_randomization_floor_is_one_over_b_plus_one():
    d = np.linspace(0.1, 2.0, 20)  # all positive: exact p = 2 / 2^20
    B = 2000
    r = paired_test(d, np.zeros_like(d), resamples=B, seed=0)
    assert 1 / (B + 1) <= r["p_randomization"] < 3 / (B + 1)


# ----------------------------------------------------------------------------- multiple testing

P = [0.01, 0.04, 0.03, 0.005, 0.02]


def test_adjust_textbook_values():
    # m = 5; sorted: 0.005, 0.01, 0.02, 0.03, 0.04
    # Holm: 5*.005=.025, 4*.01=.04, 3*.02=.06, 2*.03=.06, 1*.04=.04 -> running max .025 .04 .06 .06 .06
    # BH:   5/1*.005=.025, 5/2*.01=.025, 5/3*.02=.0333, 5/4*.03=.0375, 5/5*.04=.04 (already monotone)
    np.testing.assert_allclose(adjust(P, "bonferroni"), [0.05, 0.20, 0.15, 0.025, 0.10], rtol=1e-12)
    np.testing.assert_allclose(adjust(P, "holm"), [0.04, 0.06, 0.06, 0.025, 0.06], rtol=1e-12)
    np.testing.assert_allclose(adjust(P, "bh"), [0.025, 0.04, 0.0375, 0.025, 0.1 / 3], rtol=1e-12)


def test_adjust_monotonicity_clipping_and_nan():
    # BH step-up: 3*0.01 = 0.03 is lowered to 3/2*0.011 = 0.0165
    np.testing.assert_allclose(adjust([0.011, 0.01, 0.5], "bh"), [0.0165, 0.0165, 0.5], rtol=1e-12)
    # Holm step-down: 3*.3=.9, max(.9, 2*.4)=.9, max(.9, .5)=.9; Bonferroni clipped at 1
    np.testing.assert_allclose(adjust([0.3, 0.4, 0.5], "holm"), [0.9, 0.9, 0.9], rtol=1e-12)
    np.testing.assert_allclose(adjust([0.3, 0.4, 0.5], "bonferroni"), [0.9, 1.0, 1.0], rtol=1e-12)
    with_nan = [np.nan, *P[:2], np.nan, *P[2:]]
    for method in ("bonferroni", "holm", "bh"):
        out = adjust(with_nan, method)
        assert np.isnan(out[[0, 3]]).all()
        np.testing.assert_allclose(out[[1, 2, 4, 5, 6]], adjust(P, method), rtol=1e-12)
    assert np.isnan(adjust([np.nan, np.nan], "holm")).all()
    with pytest.raises(ValueError):
        adjust([0.1, 1.2], "bh")
    with pytest.raises(ValueError):
        adjust([0.1], "fdr")


def test_bh_matches_scipy_false_discovery_control():
    from scipy.stats import false_discovery_control

    p = np.random.default_rng(2).uniform(size=40) ** 3
    np.testing.assert_allclose(adjust(p, "bh"), false_discovery_control(p, method="bh"), rtol=1e-12)


def test_correct_family_adds_columns_over_whole_frame():
    df = pd.DataFrame({"method": list("abcde"), "p_wilcoxon": P})
    out = correct_family(df)
    assert list(df.columns) == ["method", "p_wilcoxon"]  # input untouched
    np.testing.assert_allclose(out["p_holm"], [0.04, 0.06, 0.06, 0.025, 0.06], rtol=1e-12)
    np.testing.assert_allclose(out["p_bh"], adjust(P, "bh"))
    np.testing.assert_allclose(out["p_bonferroni"], adjust(P, "bonferroni"))
    with pytest.raises(ValueError, match="p_rand"):
        correct_family(df, p_col="p_rand")


@pytest.mark.parametrize(
    "lo, hi, p, expected",
    [
        (0.01, 0.03, 0.001, ""),  # CI above 0, significant: agree
        (-0.03, -0.01, 0.02, ""),  # CI below 0, significant: agree
        (-0.01, 0.02, 0.40, ""),  # CI spans 0, not significant: agree
        (-0.002, 0.028, 0.0006, "CI includes 0, p < 0.05"),  # the TechQA row under Wilcoxon
        (0.001, 0.03, 0.069, "CI excludes 0, p >= 0.05"),
        (0.0, 0.03, 0.01, "CI includes 0, p < 0.05"),  # a bound at exactly 0 includes 0
        (float("nan"), 0.03, 0.01, ""),  # undefined CI: nothing to compare
    ],
)
def test_ci_test_disagreement_on_constructed_rows(lo, hi, p, expected):
    assert ci_test_disagreement(lo, hi, p, 0.05) == expected


def test_with_primary_test_corrects_only_the_primary_and_flags_rows():
    df = pd.DataFrame(
        {
            "method": list("abcde"),
            "p_randomization": P,
            "p_wilcoxon": P[::-1],
            "ci_low": [0.01, -0.02, 0.02, -0.01, 0.001],
            "ci_high": [0.05, 0.01, 0.04, 0.01, 0.01],
        }
    )
    out = with_primary_test(df, "randomization", 0.05)
    np.testing.assert_allclose(out["p_holm"], adjust(P, "holm"))
    assert out["p_wilcoxon"].tolist() == P[::-1]  # the secondary is left as it is
    expected = [ci_test_disagreement(lo, hi, p, 0.05) for lo, hi, p in zip(df["ci_low"], df["ci_high"], P, strict=True)]
    assert out["ci_vs_test"].tolist() == expected and out.attrs["primary_test"] == "randomization"
    np.testing.assert_allclose(with_primary_test(df, "wilcoxon", 0.05)["p_holm"], adjust(P[::-1], "holm"))
    with pytest.raises(ValueError, match="primary test 'ttest'"):
        with_primary_test(df, "ttest", 0.05)


def test_sign_test_by_enumeration():
    def two_sided(k: int, n: int) -> float:  # fair coin, symmetric: twice the tail beyond the larger count
        hi = max(k, n - k)
        return min(1.0, 2 * sum(math.comb(n, j) for j in range(hi, n + 1)) / 2**n)

    assert sign_test(11, 6) == pytest.approx(two_sided(11, 17), rel=1e-12)  # the cs_local 11 vs 6: p 0.33
    assert sign_test(11, 6) == pytest.approx(0.3323, abs=1e-4)
    assert sign_test(6, 11) == sign_test(11, 6)
    assert sign_test(20, 0) == pytest.approx(two_sided(20, 20), rel=1e-12) and sign_test(20, 0) < 1e-5
    assert sign_test(5, 5) == 1.0 and math.isnan(sign_test(0, 0))
    with pytest.raises(ValueError, match="counts >= 0"):
        sign_test(-1, 3)


# ----------------------------------------------------------------------------- invariances


@pytest.fixture(scope="module")
def systems() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    b = rng.uniform(size=40)
    a = np.clip(b + rng.normal(0.05, 0.1, size=40), 0, 1)
    a[:6] = b[:6]  # some ties
    return a, b


def test_swap_flips_signs_and_keeps_p(systems):
    a, b = systems
    r, s = paired_test(a, b, resamples=3000), paired_test(b, a, resamples=3000)
    assert s["mean_diff"] == pytest.approx(-r["mean_diff"], abs=1e-15)
    assert s["ci_low"] == pytest.approx(-r["ci_high"], rel=1e-9)
    assert s["ci_high"] == pytest.approx(-r["ci_low"], rel=1e-9)
    assert s["d_z"] == pytest.approx(-r["d_z"], rel=1e-12)
    assert (s["wins"], s["ties"], s["losses"]) == (r["losses"], r["ties"], r["wins"])
    for k in ("p_wilcoxon", "p_randomization", "wilcoxon_stat", "n_nonzero", "n"):
        assert s[k] == pytest.approx(r[k], rel=1e-12), k


def test_adding_constant_to_both_changes_nothing(systems):
    a, b = systems
    r, s = paired_test(a, b, resamples=3000), paired_test(a + 0.37, b + 0.37, resamples=3000)
    for k in ("mean_a", "mean_b"):
        r.pop(k), s.pop(k)
    assert dumps(r) == dumps(s)


def test_adding_constant_to_one_shifts_mean_diff(systems):
    a, b = systems
    c = 0.05
    r, s = paired_test(a, b, resamples=3000), paired_test(a + c, b, resamples=3000)
    assert s["mean_diff"] == pytest.approx(r["mean_diff"] + c, abs=1e-12)
    assert s["ci_low"] == pytest.approx(r["ci_low"] + c, abs=1e-9)
    assert s["ci_high"] == pytest.approx(r["ci_high"] + c, abs=1e-9)


# ----------------------------------------------------------------------------- degenerate


@pytest.mark.filterwarnings("error")
def test_mean_ci_degenerate_cases():
    one = mean_ci([0.4])
    assert one["mean"] == 0.4 and one["n"] == 1 and np.isnan(one["ci_low"]) and np.isnan(one["ci_high"])
    assert one["method"].startswith("degenerate: n < 2")
    same = mean_ci([0.2] * 7)
    assert same["ci_low"] == same["ci_high"] == same["mean"]
    assert same["method"].startswith("degenerate: all values equal")
    empty = mean_ci([])
    assert empty["n"] == 0 and np.isnan(empty["mean"]) and empty["method"] == "degenerate: empty sample"
    # BCa itself undefined: with [0, 1] the acceleration is 0, and a single resample of [0, 0]
    # or [1, 1] puts z0 at -/+inf, so 0 * inf = NaN in the adjusted level
    results = [mean_ci([0.0, 1.0], resamples=1, seed=s) for s in range(8)]
    assert any(r["method"].startswith("degenerate: BCa") for r in results)
    assert all(r["mean"] == 0.5 for r in results)


@pytest.mark.filterwarnings("error")
def test_paired_identical_systems():
    a = np.array([0.1, 0.5, 0.5, 0.0, 1.0])
    r = paired_test(a, a.copy(), resamples=500)
    assert r["p_wilcoxon"] == 1.0 and r["p_randomization"] == 1.0
    assert (r["ci_low"], r["ci_high"], r["mean_diff"]) == (0.0, 0.0, 0.0)
    assert r["n_nonzero"] == 0 and (r["wins"], r["ties"], r["losses"]) == (0, 5, 0)
    assert np.isnan(r["d_z"]) and "identical" in r["notes"] and "sd of differences is 0" in r["notes"]


@pytest.mark.filterwarnings("error")
def test_paired_degenerate_n1_and_constant_shift():
    r = paired_test([0.7], [0.2], resamples=500)
    assert r["n"] == 1 and r["mean_diff"] == pytest.approx(0.5) and r["wins"] == 1
    assert np.isnan(r["ci_low"]) and np.isnan(r["d_z"]) and "n < 2" in r["notes"]
    assert r["p_randomization"] == 1.0 and r["p_wilcoxon"] == 1.0
    b = np.array([0.1, 0.2, 0.3, 0.4])
    s = paired_test(b + 0.1, b, resamples=500)  # float noise: 0.2 - 0.1 != 0.3 - 0.2 unrounded
    assert s["ci_low"] == s["ci_high"] == pytest.approx(0.1) and s["ci_method"].startswith("degenerate")
    assert np.isnan(s["d_z"]) and "sd of differences is 0" in s["notes"]
    e = paired_test([], [], resamples=10)
    assert e["n"] == 0 and np.isnan(e["p_wilcoxon"]) and "no queries" in e["notes"]


def test_bad_input_raises():
    with pytest.raises(ValueError, match="lengths"):
        paired_test([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="non-finite"):
        paired_test([1, np.nan], [1, 2])
    with pytest.raises(ValueError, match="indexes"):
        paired_test(pd.Series([1.0, 2.0], index=["q1", "q2"]), pd.Series([1.0, 2.0], index=["q2", "q1"]))


# ----------------------------------------------------------------------------- determinism


def test_deterministic_under_seed(systems):
    a, b = systems
    assert dumps(paired_test(a, b, resamples=2000, seed=3)) == dumps(paired_test(a, b, resamples=2000, seed=3))
    assert dumps(mean_ci(a, resamples=2000, seed=3)) == dumps(mean_ci(a, resamples=2000, seed=3))
    assert dumps(paired_test(a, b, resamples=2000, seed=3)) != dumps(paired_test(a, b, resamples=2000, seed=4))


# ----------------------------------------------------------------------------- align


def test_align_joins_on_query_id():
    base = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "ndcg@10": [0.1, 0.2, 0.3]})
    other = pd.DataFrame({"query_id": ["q3", "q1", "q2"], "ndcg@10": [0.9, 0.7, 0.8]}).set_index("query_id")
    out = align({"bm25": base, "lethe": other}, "ndcg@10")
    assert list(out.columns) == ["bm25", "lethe"] and list(out.index) == ["q1", "q2", "q3"]
    np.testing.assert_array_equal(out["lethe"], [0.7, 0.8, 0.9])


def test_align_rejects_different_query_sets():
    base = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "m": [0.1, 0.2, 0.3]})
    short = pd.DataFrame({"query_id": ["q1", "q2", "q4", "q5"], "m": [0.1, 0.2, 0.3, 0.4]})
    with pytest.raises(ValueError, match=r"system 'lethe': 1 query id\(s\) of 'bm25' missing, 2 extra"):
        align({"bm25": base, "lethe": short}, "m")
    dup = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "m": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match="duplicated"):
        align({"bm25": base, "x": dup}, "m")
    with pytest.raises(ValueError, match="no column"):
        align({"bm25": base}, "recall@50")


def test_proportion_ci_is_wilson_by_hand():
    from analysis.stats import proportion_ci

    k, n, z = 7, 10, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    r = proportion_ci(k, n)
    assert r["share"] == 0.7 and r["ci_low"] == pytest.approx(centre - half, abs=1e-9)
    assert r["ci_high"] == pytest.approx(centre + half, abs=1e-9)  # 0.3968 .. 0.8922
    assert proportion_ci(0, 5)["ci_low"] == 0.0 and np.isnan(proportion_ci(0, 0)["share"])
    with pytest.raises(ValueError):
        proportion_ci(6, 5)


def test_min_detectable_difference_by_hand():
    from analysis.stats import min_detectable_difference

    # (t_0.975;19 + t_0.8;19) * sd / sqrt(n) = (2.093024 + 0.860951) * 0.3 / sqrt(20)
    assert min_detectable_difference(0.3, 20) == pytest.approx(2.953975 * 0.3 / np.sqrt(20), abs=1e-6)
    assert min_detectable_difference(0.3, 80) == pytest.approx(2.836645 * 0.3 / np.sqrt(80), abs=1e-6)
    # large n: the normal's (z_0.975 + z_0.8) = 2.801585
    assert min_detectable_difference(0.3, 10**6) == pytest.approx(2.801585 * 0.3 / 1e3, rel=1e-5)
    assert np.isnan(min_detectable_difference(0.3, 1))
