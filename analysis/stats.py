"""Paired per-query statistics: BCa bootstrap CIs, Wilcoxon signed-rank, sign-flip
randomization test, d_z effect size, win/tie/loss, and multiple-testing correction.

Pure functions on numpy arrays / pandas frames; no file I/O. Everything is deterministic under
``seed`` (same inputs and seed -> identical outputs).

Conventions (see DESIGN.md, "Statistics"):

- Tests are *paired*, per query, on the *identical* query set (:func:`align` enforces this).
- Per-query differences ``d = a - b`` are rounded to ``DIFF_DECIMALS`` (12) decimal places
  before anything else, so float noise never creates spurious non-zero differences or breaks
  ties (``0.3 - 0.1 != 0.5 - 0.3`` in binary floating point; per-query metrics differ by far more
  than 1e-12 when they really differ).
- Degenerate inputs are reported, never raised: the ``method`` / ``notes`` keys say why.
  Mean CIs: a sample with n < 2 gets a NaN interval (there is no spread to resample, so no
  interval can honestly be claimed); a sample whose values are all equal gets the zero-width
  interval (mean, mean), which is exactly the bootstrap distribution (a point mass), labelled
  degenerate; if BCa itself is undefined (NaN) the interval is NaN, labelled degenerate.
- Bad input (non-finite values, mismatched lengths, p-values outside [0, 1]) raises ValueError.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

DIFF_DECIMALS = 12
"""Per-query differences are rounded to this many decimals (float-noise guard)."""

_BATCH_ELEMENTS = 2_000_000
"""Upper bound on array elements held at once by resampling loops (memory, not results)."""

ADJUST_METHODS = ("bonferroni", "holm", "bh")


# --------------------------------------------------------------------------- helpers


def _as_1d_finite(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{name} has {int(bad.sum())} non-finite value(s) (NaN/inf); per-query "
            "metrics must be finite (failed queries score 0, see docs/running.md, 'Evaluation conventions')"
        )
    return arr


def _check_resampling_args(resamples: int, confidence: float) -> None:
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _batch_rows(n: int, total: int) -> int:
    return max(1, min(total, _BATCH_ELEMENTS // max(n, 1)))


# --------------------------------------------------------------------------- mean CI


def mean_ci(x: Any, resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Mean of ``x`` with a BCa bootstrap confidence interval.

    Uses ``scipy.stats.bootstrap(method="BCa")`` with ``np.random.default_rng(seed)`` (passed as
    ``rng``, the current name of the former ``random_state`` argument; same behaviour).

    Returns:
        mean: sample mean (NaN for an empty sample).
        ci_low, ci_high: interval bounds. NaN when n < 2 or when BCa is undefined;
            (mean, mean) when all values are equal (the bootstrap distribution is a point mass).
        n: sample size.
        method: "BCa", or "degenerate: <reason>" when the interval is not a BCa interval.
    """
    _check_resampling_args(resamples, confidence)
    arr = _as_1d_finite(x, "x")
    n = int(arr.size)
    if n == 0:
        return {
            "mean": float("nan"),
            "ci_low": float("nan"),
            "ci_high": float("nan"),
            "n": 0,
            "method": "degenerate: empty sample",
        }
    mean = float(np.mean(arr))
    if n < 2:
        return {
            "mean": mean,
            "ci_low": float("nan"),
            "ci_high": float("nan"),
            "n": n,
            "method": "degenerate: n < 2, no interval can be estimated",
        }
    if np.ptp(arr) == 0:
        return {
            "mean": mean,
            "ci_low": mean,
            "ci_high": mean,
            "n": n,
            "method": "degenerate: all values equal, zero-width interval",
        }

    with warnings.catch_warnings():
        # scipy warns (DegenerateDataWarning / RuntimeWarning) when BCa is undefined; we report it
        warnings.simplefilter("ignore")
        res = scipy_stats.bootstrap(
            (arr,),
            _mean_along,
            n_resamples=int(resamples),
            vectorized=True,
            paired=False,
            confidence_level=confidence,
            alternative="two-sided",
            method="BCa",
            batch=_batch_rows(n, int(resamples)),
            rng=np.random.default_rng(seed),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if np.isnan(low) or np.isnan(high):
        return {
            "mean": mean,
            "ci_low": float("nan"),
            "ci_high": float("nan"),
            "n": n,
            "method": "degenerate: BCa interval undefined (NaN), e.g. too few distinct bootstrap values",
        }
    return {"mean": mean, "ci_low": low, "ci_high": high, "n": n, "method": "BCa"}


def _mean_along(sample: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(sample, axis=axis)


# --------------------------------------------------------------------------- paired test


def _wilcoxon_method_used(d: np.ndarray) -> str:
    """Which null distribution scipy's ``method="auto"`` uses for this d (scipy 1.17 rules)."""
    n = d.size
    has_zeros = bool(np.any(d == 0))
    has_ties = np.unique(np.abs(d)).size < n
    if n <= 50 and not (has_zeros or has_ties):
        return "exact"
    if n <= 13:
        return "permutation (all 2^n sign assignments)"
    return "asymptotic (normal, Pratt/tie-corrected variance, no continuity correction)"


def _sign_flip_pvalue(d: np.ndarray, resamples: int, seed: int) -> tuple[float, int]:
    """Two-sided sign-flip p = (b+1)/(B+1); b counts |mean(s*d)| >= |mean(d)| over B draws."""
    n = d.size
    # own stream, independent of the bootstrap's default_rng(seed), still fixed by seed
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    observed = abs(float(np.sum(d)))
    # any two signed sums equal in exact arithmetic differ by < 1e-12 * sum|d| in float64
    # (for n up to ~9000 even with naive summation), so compare with that slack
    tol = 1e-12 * float(np.sum(np.abs(d)))
    count = 0
    rows = _batch_rows(n, resamples)
    done = 0
    while done < resamples:
        m = min(rows, resamples - done)
        # rng.random draws one 64-bit word per value, so the stream does not depend on batching
        signs = np.where(rng.random((m, n)) < 0.5, -1.0, 1.0)
        count += int(np.count_nonzero(np.abs(signs @ d) >= observed - tol))
        done += m
    return (count + 1) / (resamples + 1), count


def paired_test(a: Any, b: Any, resamples: int = 10_000, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Compare system ``a`` against baseline ``b`` on the same queries (aligned arrays).

    With d = a - b (rounded to ``DIFF_DECIMALS``), returns:
        n: number of queries (pairs).
        mean_a, mean_b: the two systems' means.
        mean_diff: mean(d) (> 0 means a scores higher than b).
        ci_low, ci_high, ci_method: BCa CI of mean(d), exactly ``mean_ci(d, resamples,
            confidence, seed)`` (see there for degenerate cases).
        wilcoxon_stat: min(W+, W-) of the two-sided signed-rank test, Pratt zero handling
            (zeros are ranked, then dropped from the rank sums).
        p_wilcoxon: its two-sided p-value (scipy ``method="auto"``).
        wilcoxon_method: which null distribution that p-value comes from.
        n_nonzero: number of non-zero differences.
        p_randomization: two-sided paired sign-flip test, p = (b+1)/(B+1), where b counts random
            sign vectors (B = resamples, seeded) with |mean of flipped d| >= |mean(d)|.
        resamples: B used for the bootstrap and the randomization test.
        d_z: mean(d) / sd(d, ddof=1), the standardized mean difference of paired data (not
            Cohen's d); NaN when n < 2 or all differences are equal (reason in ``notes``).
        wins, ties, losses: queries where a > b, a == b, a < b.
        notes: "; "-joined reasons for any degenerate value ("" when none).
    """
    _check_resampling_args(resamples, confidence)
    if isinstance(a, pd.Series) and isinstance(b, pd.Series) and not a.index.equals(b.index):
        raise ValueError("a and b are Series with different indexes; align them first (align())")
    xa, xb = _as_1d_finite(a, "a"), _as_1d_finite(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"a and b must be paired per query: lengths {xa.size} != {xb.size}")
    d = np.round(xa - xb, DIFF_DECIMALS) + 0.0  # + 0.0 turns -0.0 into 0.0
    n = int(d.size)
    notes: list[str] = []
    nan = float("nan")

    ci = mean_ci(d, resamples=resamples, confidence=confidence, seed=seed)
    if ci["method"] != "BCa":
        notes.append(f"CI {ci['method']}")
    n_nonzero = int(np.count_nonzero(d))
    out: dict[str, Any] = {
        "n": n,
        "mean_a": float(np.mean(xa)) if n else nan,
        "mean_b": float(np.mean(xb)) if n else nan,
        "mean_diff": ci["mean"],
        "ci_low": ci["ci_low"],
        "ci_high": ci["ci_high"],
        "ci_method": ci["method"],
    }

    if n == 0:
        notes.append("no queries: tests undefined")
        out.update(wilcoxon_stat=nan, p_wilcoxon=nan, wilcoxon_method="none", n_nonzero=0, p_randomization=nan)
    elif n_nonzero == 0:
        notes.append("all differences are 0 (identical systems on these queries): p-values 1.0")
        out.update(
            wilcoxon_stat=0.0,
            p_wilcoxon=1.0,
            wilcoxon_method="none (no non-zero differences)",
            n_nonzero=0,
            p_randomization=1.0,
        )
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = scipy_stats.wilcoxon(d, zero_method="pratt", correction=False, alternative="two-sided", method="auto")
        p_rand, _ = _sign_flip_pvalue(d, int(resamples), seed)
        out.update(
            wilcoxon_stat=float(w.statistic),
            p_wilcoxon=float(w.pvalue),
            wilcoxon_method=_wilcoxon_method_used(d),
            n_nonzero=n_nonzero,
            p_randomization=float(p_rand),
        )
    out["resamples"] = int(resamples)

    if n < 2:
        out["d_z"] = nan
        notes.append("d_z undefined: n < 2")
    elif np.ptp(d) == 0:  # exact test; np.std of equal floats can be a tiny non-zero
        out["d_z"] = nan
        notes.append("d_z undefined: sd of differences is 0 (all differences equal)")
    else:
        out["d_z"] = float(np.mean(d) / np.std(d, ddof=1))

    out["wins"] = int(np.count_nonzero(d > 0))
    out["ties"] = int(np.count_nonzero(d == 0))
    out["losses"] = int(np.count_nonzero(d < 0))
    out["notes"] = "; ".join(notes)
    return out


# --------------------------------------------------------------------------- alignment


def align(per_query: Mapping[str, pd.DataFrame], metric: str) -> pd.DataFrame:
    """One column per system holding ``metric``, rows = query_id (sorted), inner-joined.

    Each frame needs a ``query_id`` column (or index named ``query_id``) and a ``metric``
    column. Raises ValueError if any system's query set differs from the first system's
    (naming the system and how many ids are missing / extra), if ids repeat, or if the metric
    is missing or non-finite: paired tests need the identical query set.
    """
    if not per_query:
        raise ValueError("align() needs at least one system")
    series: dict[str, pd.Series] = {}
    for name, df in per_query.items():
        if "query_id" in df.columns:
            ids = df["query_id"]
        elif df.index.name == "query_id":
            ids = df.index.to_series()
        else:
            raise ValueError(f"system {name!r}: no 'query_id' column or index")
        if metric not in df.columns:
            raise ValueError(f"system {name!r}: no column {metric!r} (has {list(df.columns)})")
        ids = ids.astype(str).to_numpy()
        dup = pd.Index(ids).duplicated()
        if dup.any():
            raise ValueError(f"system {name!r}: {int(dup.sum())} duplicated query_id(s), e.g. {ids[dup][0]!r}")
        values = pd.to_numeric(df[metric], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(
                f"system {name!r}: {int(bad.sum())} non-finite {metric!r} value(s), e.g. query {ids[bad][0]!r}"
            )
        series[name] = pd.Series(values, index=pd.Index(ids, name="query_id"), name=name)

    names = list(series)
    ref_name = names[0]
    ref = set(series[ref_name].index)
    problems = []
    for name in names[1:]:
        other = set(series[name].index)
        missing, extra = sorted(ref - other), sorted(other - ref)
        if missing or extra:
            example = (missing or extra)[0]
            problems.append(
                f"system {name!r}: {len(missing)} query id(s) of {ref_name!r} missing, "
                f"{len(extra)} extra (e.g. {example!r})"
            )
    if problems:
        raise ValueError(
            f"query sets differ for metric {metric!r}; paired tests need the "
            "identical query set: " + "; ".join(problems)
        )
    out = pd.concat([series[n] for n in names], axis=1, join="inner").sort_index()
    out.columns = pd.Index(names)
    return out


# --------------------------------------------------------------------------- multiple testing


def adjust(pvalues: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    """Adjusted p-values, in the input order, clipped to [0, 1].

    ``method``: "bonferroni" (min(1, m p)), "holm" (step-down), "bh" (Benjamini-Hochberg
    step-up FDR). NaNs stay NaN and are not counted in the family size m.
    """
    if method not in ADJUST_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {ADJUST_METHODS}")
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"pvalues must be one-dimensional, got shape {p.shape}")
    ok = ~np.isnan(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1] (or be NaN)")
    out = np.full(p.shape, np.nan)
    q = p[ok]
    m = q.size
    if m == 0:
        return out
    if method == "bonferroni":
        adj = q * m
    else:
        order = np.argsort(q, kind="stable")
        s = q[order]
        rank = np.arange(1, m + 1)
        if method == "holm":
            stepped = np.maximum.accumulate((m - rank + 1) * s)
        else:  # bh
            stepped = np.minimum.accumulate((m / rank * s)[::-1])[::-1]
        adj = np.empty(m)
        adj[order] = stepped
    out[ok] = np.clip(adj, 0.0, 1.0)
    return out


def correct_family(df: pd.DataFrame, p_col: str = "p_wilcoxon") -> pd.DataFrame:
    """Copy of ``df`` with ``p_bonferroni``, ``p_holm``, ``p_bh`` columns: ``p_col`` adjusted
    over all rows of ``df``, which the caller declares to be the whole family (methods x
    metrics x datasets). Rows with NaN p stay NaN and do not count in the family size.
    """
    if p_col not in df.columns:
        raise ValueError(f"no p-value column {p_col!r} (has {list(df.columns)})")
    out = df.copy()
    p = out[p_col].to_numpy(dtype=float)
    out["p_bonferroni"] = adjust(p, "bonferroni")
    out["p_holm"] = adjust(p, "holm")
    out["p_bh"] = adjust(p, "bh")
    return out


TESTS = ("randomization", "wilcoxon")  # the paired tests a table may name as primary or secondary (p_<name> columns)
TEST_NAMES = {
    "randomization": "the paired randomization (sign-flip) test of the mean difference",
    "wilcoxon": "the Wilcoxon signed-rank test",
}


def test_order(primary: str) -> tuple[str, ...]:
    """``TESTS`` with ``primary`` first (the others are secondary)."""
    if primary not in TESTS:
        raise ValueError(f"primary test {primary!r}: expected one of {TESTS}")
    return (primary, *(t for t in TESTS if t != primary))


def ci_test_disagreement(ci_low: float, ci_high: float, p: float, alpha: float) -> str:
    """ "" when the CI of the mean difference and a test's (unadjusted) p agree at level ``alpha``
    (CI excludes 0 exactly when p < alpha), else which way they disagree; "" when either is undefined."""
    if any(x is None or np.isnan(x) for x in (ci_low, ci_high, p)):
        return ""
    excludes = ci_low > 0 or ci_high < 0
    if excludes == (p < alpha):
        return ""
    return f"CI excludes 0, p >= {alpha:g}" if excludes else f"CI includes 0, p < {alpha:g}"


def with_primary_test(df: pd.DataFrame, primary: str, alpha: float) -> pd.DataFrame:
    """``correct_family`` over ``p_<primary>`` (the test that decides; the other p columns stay as they are), plus
    ``ci_vs_test``: ``ci_test_disagreement`` of each row's CI and unadjusted primary p. ``attrs["primary_test"]``
    records the choice."""
    test_order(primary)  # a known test, or ValueError
    out = correct_family(df, p_col=f"p_{primary}")
    out["ci_vs_test"] = [
        ci_test_disagreement(lo, hi, p, alpha)
        for lo, hi, p in zip(out["ci_low"], out["ci_high"], out[f"p_{primary}"], strict=True)
    ]
    out.attrs["primary_test"] = primary
    return out


# --------------------------------------------------------------------------- proportions and power


def proportion_ci(k: int, n: int, confidence: float = 0.95) -> dict[str, Any]:
    """Share ``k / n`` with its Wilson score interval (scipy.stats.binomtest(...).proportion_ci(method="wilson")).

    Returns share, ci_low, ci_high, k, n; NaN share and interval when n == 0 (nothing was observed)."""
    k, n = int(k), int(n)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n == 0:
        return {"share": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "k": 0, "n": 0}
    ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return {"share": k / n, "ci_low": float(ci.low), "ci_high": float(ci.high), "k": k, "n": n}


def proportion_cells(name: str, k: int, n: int, confidence: float = 0.95) -> dict[str, Any]:
    """``{name, name_low, name_high}``: :func:`proportion_ci`'s share and Wilson interval, as table cells."""
    ci = proportion_ci(k, n, confidence)
    return {name: ci["share"], f"{name}_low": ci["ci_low"], f"{name}_high": ci["ci_high"]}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test of ``wins`` against ``losses`` (ties left out): the binomial p of a split at least
    this uneven when each decisive outcome is a fair coin; NaN when there is no decisive outcome."""
    wins, losses = int(wins), int(losses)
    if wins < 0 or losses < 0:
        raise ValueError(f"need counts >= 0, got wins={wins}, losses={losses}")
    if wins + losses == 0:
        return float("nan")
    return float(scipy_stats.binomtest(wins, wins + losses, 0.5).pvalue)


def min_detectable_difference(sd_diff: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest mean paired difference a two-sided test at level ``alpha`` detects with probability ``power`` on
    ``n`` queries whose per-query differences have standard deviation ``sd_diff`` (paired t-test, the usual
    approximation): ``(t[1 - alpha/2; n-1] + t[power; n-1]) * sd_diff / sqrt(n)``; Student's t rather than the
    normal, which understates it at small n (by 5% at n = 20). In the metric's units; NaN when n < 2."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha}, {power}")
    if n < 2 or not np.isfinite(sd_diff):
        return float("nan")
    t = scipy_stats.t.ppf(1 - alpha / 2, n - 1) + scipy_stats.t.ppf(power, n - 1)
    return float(t * sd_diff / np.sqrt(n))
