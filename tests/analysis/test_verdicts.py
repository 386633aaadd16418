"""analysis/verdicts.py: the claims table's rule on constructed cases, one per step, case and boundary."""

from __future__ import annotations

import math

import pytest

from analysis import verdicts as VD
from analysis.verdicts import Claim, Measured, Rules, judge

R = Rules(alpha=0.05, margins={"ndcg": 0.02, "answer_f1": 0.05, "share": 0.05}, min_n=50, min_nonzero=10)


def diff(est, lo, hi, n=500, p=0.001, p_raw=None, nonzero=400, shifted=None) -> Measured:
    """A measured paired difference with its primary test."""
    return Measured(est, lo, hi, n, p=p, p_raw=p_raw, n_nonzero=nonzero, shifted_p=shifted)


def level(est, lo, hi, n=500, interval="bca") -> Measured:
    return Measured(est, lo, hi, n, interval=interval)


# --------------------------------------------------------------------------- comparability and the fixed steps


def test_a_level_measured_elsewhere_is_not_comparable_with_every_differing_aspect_named():
    differs = {"dataset": "theirs is not ours", "generator": "unnamed"}
    j = judge(Claim.point(0.435), level(0.53, 0.50, 0.56), R, "ndcg@10", differs=differs)
    assert j.verdict == VD.NOT_COMPARABLE
    assert j.reason == "not the same dataset: theirs is not ours; not the same generator: unnamed"
    # the same interval on the same setting is judged: it lies far above the claim
    assert judge(Claim.point(0.435), level(0.53, 0.50, 0.56), R, "ndcg@10").verdict == VD.CONTRADICTED
    assert VD.comparable({}) is None and VD.comparable(None) is None
    with pytest.raises(ValueError, match="unknown comparability aspects"):
        VD.comparable({"machine": "another"})


def test_comparability_concerns_levels_only_a_difference_is_still_judged():
    j = judge(Claim.point(0.05, 0.0), diff(0.05, 0.04, 0.06), R, "ndcg@10", differs={"dataset": "x"})
    assert j.verdict == VD.CONSISTENT


def test_not_measured_then_acted_then_unfit_come_before_the_interval():
    assert judge(Claim.point(0.4), None, R, "ndcg@10").verdict == VD.NOT_MEASURED
    assert judge(Claim.point(0.4), level(math.nan, math.nan, math.nan), R, "ndcg@10").verdict == VD.NOT_MEASURED
    j = judge(Claim(0.05, 0.10, 0.0), diff(0.0, 0.0, 0.0), R, "answer_f1", acted=False)
    assert (j.verdict, j.reason) == (VD.INCONCLUSIVE, "the treatment never acted on the measured queries")
    j = judge(Claim.point(0.3), level(0.3, 0.29, 0.31, interval="wilson"), R, "share", unfit="kappa 0.3")
    assert (j.verdict, j.reason) == (VD.INCONCLUSIVE, "the judge failed its validation: kappa 0.3")
    # comparability comes first: a level measured with another model is not comparable, judge or no judge, and
    # whether or not it was measured
    j = judge(
        Claim.point(0.3), level(0.3, 0.29, 0.31, interval="wilson"), R, "share", unfit="x", differs={"model": "y"}
    )
    assert j.verdict == VD.NOT_COMPARABLE
    assert judge(Claim.point(0.4), None, R, "ndcg@10", differs={"dataset": "x"}).verdict == VD.NOT_COMPARABLE
    with pytest.raises(ValueError, match="ci_low <= ci_high"):
        judge(Claim.point(0.1), level(0.45, 0.5, 0.4), R, "ndcg@10")


# --------------------------------------------------------------------------- absolute levels and the margin


@pytest.mark.parametrize(
    "ci, want, why",
    [
        ((0.42, 0.45), VD.CONSISTENT, "lies inside the claim 0.435 +/- 0.02"),
        ((0.415, 0.455), VD.CONSISTENT, "lies inside"),  # the band's edges count as inside
        ((0.46, 0.50), VD.CONTRADICTED, "lies above"),
        ((0.30, 0.41), VD.CONTRADICTED, "lies below"),
        ((0.40, 0.44), VD.INCONCLUSIVE, "crosses an edge"),
        ((0.30, 0.50), VD.INCONCLUSIVE, "too imprecise"),  # holds the claim, but 0.2 wide against a 0.04 band
    ],
)
def test_a_level_is_consistent_only_inside_its_equivalence_band(ci, want, why):
    j = judge(Claim.point(0.435), level(sum(ci) / 2, *ci), R, "ndcg@10")
    assert j.verdict == want and why in j.reason, j.reason
    assert (j.direction, j.magnitude, j.discordance) == ("", "", "")


def test_the_old_rule_called_a_wide_interval_consistent_the_margin_does_not():
    # TechQA ROUGE-L 0.1834 against a mean of 0.1003 [0.0574, 0.1838] (n = 60 here, so the BCa may decide)
    j = judge(Claim.point(0.1834), level(0.1003, 0.0574, 0.1838, n=60), R, "answer_f1")
    assert j.verdict == VD.INCONCLUSIVE and "too imprecise" in j.reason


def test_a_bca_level_on_few_values_decides_nothing_a_wilson_share_does():
    assert judge(Claim.point(0.435), level(0.43, 0.425, 0.44, n=20), R, "ndcg@10").verdict == VD.INCONCLUSIVE
    assert "n = 20 < 50" in judge(Claim.point(0.435), level(0.43, 0.425, 0.44, n=20), R, "ndcg@10").reason
    w = level(0.85, 0.64, 0.95, n=20, interval="wilson")
    assert judge(Claim.point(0.3), w, R, "share").verdict == VD.CONTRADICTED


# --------------------------------------------------------------------------- differences: direction and magnitude


def test_direction_is_decided_by_the_primary_test_and_its_sign():
    c = Claim.beats()  # "A beats B": no size, so the direction is the verdict
    assert judge(c, diff(0.03, 0.01, 0.05, p=0.001), R, "ndcg@10").verdict == VD.CONSISTENT
    assert judge(c, diff(-0.03, -0.05, -0.01, p=0.001), R, "ndcg@10").verdict == VD.CONTRADICTED
    j = judge(c, diff(0.01, -0.01, 0.03, p=0.3), R, "ndcg@10")
    assert (j.verdict, j.direction, j.magnitude) == (VD.INCONCLUSIVE, VD.INCONCLUSIVE, VD.NA)
    assert "direction not shown (p = 0.3 >= 0.05)" in j.reason
    assert judge(Claim.loses(0.5), diff(0.2, 0.05, 0.4, n=10, p=0.02), R, "share").verdict == VD.CONSISTENT


def test_the_adjusted_p_decides_and_the_unadjusted_one_is_checked_against_the_ci():
    m = diff(0.03, 0.01, 0.05, p=0.2, p_raw=0.003)  # significant alone, not after the family's correction
    j = judge(Claim.beats(), m, R, "ndcg@10")
    assert j.verdict == VD.INCONCLUSIVE and j.discordance == ""  # CI and unadjusted p agree
    j = judge(Claim.beats(), diff(0.03, 0.01, 0.05, p=0.2, p_raw=0.2), R, "ndcg@10")
    assert j.discordance == "CI excludes no effect, unadjusted p = 0.2"


@pytest.mark.parametrize(
    "ci, want, direction, magnitude",
    [
        ((0.31, 0.345), VD.CONSISTENT, VD.CONSISTENT, VD.CONSISTENT),
        ((0.40, 0.45), VD.EXCEEDED, VD.CONSISTENT, VD.EXCEEDS),  # a larger gain than claimed is not a contradiction
        ((0.03, 0.05), VD.SMALLER, VD.CONSISTENT, VD.FALLS_SHORT),  # Table 2: the gain holds, far smaller
        ((0.20, 0.40), VD.DIRECTION_ONLY, VD.CONSISTENT, VD.INCONCLUSIVE),
    ],
)
def test_a_difference_gets_a_direction_and_a_magnitude(ci, want, direction, magnitude):
    j = judge(Claim.point(0.328, 0.0), diff(sum(ci) / 2, *ci, p=1e-4), R, "ndcg@10")
    assert (j.verdict, j.direction, j.magnitude) == (want, direction, magnitude), j.reason


def test_a_difference_of_the_wrong_sign_is_contradicted_whatever_its_size():
    j = judge(Claim.point(0.328, 0.0), diff(-0.04, -0.05, -0.03, p=1e-4), R, "ndcg@10")
    assert (j.verdict, j.direction, j.magnitude) == (VD.CONTRADICTED, VD.CONTRADICTED, VD.FALLS_SHORT)
    # a negative claim: a CI further below is exceeded, one nearer 0 smaller
    assert judge(Claim.point(-0.1, 0.0), diff(-0.3, -0.35, -0.25, p=1e-4), R, "ndcg@10").verdict == VD.EXCEEDED
    assert judge(Claim.point(-0.1, 0.0), diff(-0.03, -0.04, -0.02, p=1e-4), R, "ndcg@10").verdict == VD.SMALLER


def test_no_shown_direction_with_the_claimed_size_excluded_is_contradicted_otherwise_inconclusive():
    j = judge(Claim.point(0.328, 0.0), diff(0.005, -0.005, 0.015, p=0.4), R, "ndcg@10")
    assert (j.verdict, j.direction, j.magnitude) == (VD.CONTRADICTED, VD.INCONCLUSIVE, VD.FALLS_SHORT)
    j = judge(Claim.point(0.01, 0.0), diff(0.005, -0.005, 0.015, p=0.4), R, "ndcg@10")
    assert (j.verdict, j.magnitude) == (VD.INCONCLUSIVE, VD.CONSISTENT)


def test_a_claim_of_no_difference_is_an_equivalence_claim():
    plateau = Claim.point(0.0, 0.0)
    j = judge(plateau, diff(0.002, -0.01, 0.015, p=0.7), R, "ndcg@10")
    assert (j.verdict, j.direction, j.magnitude) == (VD.CONSISTENT, VD.NA, VD.CONSISTENT)
    assert judge(plateau, diff(0.05, 0.03, 0.07, p=1e-4), R, "ndcg@10").verdict == VD.CONTRADICTED  # still rising
    assert judge(plateau, diff(0.01, -0.03, 0.05, p=0.6), R, "ndcg@10").verdict == VD.INCONCLUSIVE


def test_a_range_claim_and_a_relative_margin():
    c = Claim(0.20, 0.30, 0.0)  # "20-30%"
    assert judge(c, diff(0.86, 0.75, 0.98), R, margin=0.04).verdict == VD.EXCEEDED
    assert judge(c, diff(0.07, 0.04, 0.10), R, margin=0.04).verdict == VD.SMALLER
    assert judge(c, diff(0.14, 0.07, 0.21), R, margin=0.04).verdict == VD.DIRECTION_ONLY
    assert judge(c, diff(0.25, 0.17, 0.33), R, margin=0.04).verdict == VD.CONSISTENT


# --------------------------------------------------------------------------- few pairs: the primary test decides


def test_on_few_pairs_a_bca_interval_that_excludes_0_does_not_decide_alone():
    # TechQA keyword boost: BCa [-0.0760, -0.0004] on n = 20, randomization p = 0.375
    m = diff(-0.0172, -0.0760, -0.0004, n=20, p=0.375, nonzero=15)
    j = judge(Claim.point(0.0109, 0.0), m, R, "answer_f1")
    assert (j.verdict, j.direction, j.magnitude) == (VD.INCONCLUSIVE, VD.INCONCLUSIVE, VD.INCONCLUSIVE)
    assert "n = 20 < 50" in j.reason and "no test of it is at hand" in j.reason
    assert j.discordance == "CI excludes no effect, unadjusted p = 0.38"


def test_few_non_zero_differences_count_as_few_pairs():
    m = diff(0.002, 0.001, 0.004, n=130, p=0.25, nonzero=4)  # UltraDomain mix R@50: BCa on 4 non-zero differences
    j = judge(Claim.point(0.2, 0.0), m, R, "ndcg@10")
    assert j.magnitude == VD.INCONCLUSIVE and "4 non-zero differences < 10" in j.reason
    assert j.verdict == VD.INCONCLUSIVE and j.discordance.startswith("CI excludes no effect")


def test_on_few_pairs_the_shifted_primary_test_decides_the_size():
    band = (0.328 - 0.02, 0.328 + 0.02)
    rejects_low_edge = {band[0]: 1e-4, band[1]: 1e-4}
    m = diff(0.0, 0.0, 0.0, n=500, p=1.0, nonzero=0, shifted=lambda x: rejects_low_edge[x])
    j = judge(Claim.point(0.328, 0.0), m, R, "ndcg@10")  # R@50: every difference 0, claimed +0.121 or so
    assert (j.verdict, j.direction, j.magnitude) == (VD.CONTRADICTED, VD.INCONCLUSIVE, VD.FALLS_SHORT)
    assert "the primary test decides the size" in j.reason
    # the test cannot reject the edge: inconclusive, and it says where the CI alone would have put it
    m = diff(0.0, 0.0, 0.0, n=500, p=1.0, nonzero=0, shifted=lambda x: 0.5)
    j = judge(Claim.point(0.328, 0.0), m, R, "ndcg@10")
    assert (j.verdict, j.magnitude) == (VD.INCONCLUSIVE, VD.INCONCLUSIVE)
    assert "size: CI smaller, test inconclusive" in j.discordance


def test_on_few_pairs_equivalence_needs_the_test_to_reject_both_edges():
    inside = diff(0.001, -0.005, 0.006, n=30, p=0.8, nonzero=20, shifted=lambda x: 1e-3)
    assert judge(Claim.point(0.0, 0.0), inside, R, "ndcg@10").verdict == VD.CONSISTENT
    one = diff(0.001, -0.005, 0.006, n=30, p=0.8, nonzero=20, shifted=lambda x: 1e-3 if x < 0 else 0.2)
    j = judge(Claim.point(0.0, 0.0), one, R, "ndcg@10")
    assert j.verdict == VD.INCONCLUSIVE and j.discordance == "size: CI consistent, test inconclusive"


# --------------------------------------------------------------------------- one verdict per claim


@pytest.mark.parametrize(
    "rows, want, why",
    [
        ([VD.CONSISTENT] * 3, VD.CONSISTENT, "all 3 measured rows consistent"),
        ([VD.CONTRADICTED, VD.CONTRADICTED, VD.NOT_MEASURED], VD.CONTRADICTED, "(1 not measured left out)"),
        ([VD.EXCEEDED, VD.SMALLER, VD.CONSISTENT], VD.DIRECTION_ONLY, "the direction holds on all 3"),
        (
            [VD.EXCEEDED, VD.CONTRADICTED],
            VD.INCONCLUSIVE,
            "mixed: 1 direction consistent, magnitude exceeded, 1 contradicted",
        ),
        ([VD.CONSISTENT, VD.INCONCLUSIVE], VD.INCONCLUSIVE, "mixed"),
        ([VD.NOT_MEASURED] * 2, VD.NOT_MEASURED, "none of its 2 rows measured"),
    ],
)
def test_a_claim_on_several_datasets_gets_one_verdict(rows, want, why):
    got, reason = VD.combine_group(rows)
    assert got == want and why in reason, reason


def test_combine_needs_rows():
    with pytest.raises(ValueError):
        VD.combine_group([])


# --------------------------------------------------------------------------- vocabulary, parameters, prose


def test_the_vocabulary_is_countable():
    n = VD.counts([VD.CONSISTENT, VD.EXCEEDED, VD.CONSISTENT])
    assert list(n) == list(VD.VERDICTS) and n[VD.CONSISTENT] == 2 and n[VD.EXCEEDED] == 1 and n[VD.NOT_MEASURED] == 0
    with pytest.raises(ValueError, match="not verdicts"):
        VD.counts(["consistent-ish"])
    assert VD.EXCEEDED == "direction consistent, magnitude exceeded"


def test_rules_read_the_config_and_look_margins_up_by_name_then_family():
    r = Rules.from_cfg({"confidence": 0.95, "verdicts": {"margins": {"ndcg": 0.02, "coverage@10": 0.03}, "min_n": 40}})
    assert r.alpha == pytest.approx(0.05) and r.min_n == 40 and r.min_nonzero == 10
    assert r.margin("ndcg@10") == 0.02 and r.margin("coverage@10") == 0.03 and r.basis == ""
    assert Rules.from_cfg({"verdicts": {"basis": "scale"}}).basis == "scale"
    with pytest.raises(ValueError, match="no equivalence margin declared for 'answer_f1'"):
        r.margin("answer_f1")


def test_the_printed_rule_names_every_verdict_and_its_parameters():
    text = VD.rule_text(Rules(min_n=40, min_nonzero=8, alpha=0.01))
    assert "at least 40 pairs and 8 non-zero differences" in text and "at alpha 0.01" in text
    for v in VD.VERDICTS:
        assert f"**{v}**" in text, v
    assert VD.rule_text(Rules()) == VD.RULE and "{" not in VD.RULE and "Declared margins" not in VD.RULE
    declared = VD.rule_text(Rules(margins={"ndcg": 0.02, "answer_f1": 0.05}, basis="a fraction of the scale"))
    assert declared.endswith(
        "Declared margins: ndcg 0.02, answer_f1 0.05 (a relative claim's margin is its metric's divided by the "
        "reference mean); basis: a fraction of the scale."
    )


def test_bad_claims_raise():
    with pytest.raises(ValueError, match="low <= high"):
        Claim(0.3, 0.2)


def test_claim_sign_and_size():
    assert Claim.point(0.3, 0.0).sign == 1 and Claim.point(-0.3, 0.0).sign == -1 and Claim.point(0, 0.0).sign == 0
    assert Claim.beats().sign == 1 and Claim.loses(0.5).sign == -1 and Claim.point(0.4).sign == 0
    assert Claim.point(0.3, 0.0).sized and not Claim.beats().sized


@pytest.mark.parametrize(
    "text, want",
    [
        ("20-30%", (0.2, 0.3)),
        ("10 - 15%", (0.10, 0.15)),
        ("42.3%", (0.423, 0.423)),
        ("+42.3%", (0.423, 0.423)),
        ("1-2", (1.0, 2.0)),
        ("30-20%", (0.2, 0.3)),
        ("0", (0.0, 0.0)),
    ],
)
def test_parse_range(text, want):
    assert VD.parse_range(text) == pytest.approx(want)


def test_parse_range_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="'about a third'"):
        VD.parse_range("about a third")


def test_describe():
    assert Claim.point(0.435).describe() == "0.435"
    assert Claim.point(0.39, 0.0).describe() == "+0.39"
    assert Claim.beats().describe() == "> 0" and Claim.loses(0.5).describe() == "< 0.5"
    assert Claim(0.2, 0.3, 0.0).describe() == "[0.2, 0.3]"
