"""analysis/verdicts.py: the claims table's rule on constructed cases, one per step and boundary."""

from __future__ import annotations

import math

import pytest

from analysis import verdicts as VD
from analysis.verdicts import Claim, verdict


@pytest.mark.parametrize(
    "claim, ci, want",
    [
        # a printed value: inside the CI or not (no null: never inconclusive)
        (Claim.point(0.435), (0.50, 0.55), VD.CONTRADICTED),
        (Claim.point(0.435), (0.40, 0.45), VD.CONSISTENT),
        (Claim.point(0.435), (0.435, 0.50), VD.CONSISTENT),  # a bound counts as inside
        (Claim.point(0.0), (-0.1, 0.1), VD.CONSISTENT),  # a value claim of 0 is not a null
        # a printed difference, null 0
        (Claim.point(0.39, null=0.0), (0.30, 0.45), VD.CONSISTENT),
        (Claim.point(0.39, null=0.0), (-0.02, 0.50), VD.INCONCLUSIVE),
        (Claim.point(0.39, null=0.0), (0.05, 0.10), VD.CONTRADICTED),  # right sign, far smaller
        (Claim.point(0.39, null=0.0), (-0.01, 0.03), VD.CONTRADICTED),  # holds no effect, not the claim
        (Claim.point(0.39, null=0.0), (-0.20, -0.10), VD.CONTRADICTED),
        # a printed range of improvements
        (Claim(0.20, 0.30, 0.0), (0.25, 0.40), VD.CONSISTENT),
        (Claim(0.20, 0.30, 0.0), (-0.05, 0.22), VD.INCONCLUSIVE),
        (Claim(0.20, 0.30, 0.0), (0.01, 0.10), VD.CONTRADICTED),
        # "A beats B" / "A loses" (a win share against one half)
        (Claim.beats(), (0.01, 0.05), VD.CONSISTENT),
        (Claim.beats(), (-0.01, 0.05), VD.INCONCLUSIVE),
        (Claim.beats(), (-0.05, -0.01), VD.CONTRADICTED),
        (Claim.loses(0.5), (0.10, 0.40), VD.CONSISTENT),
        (Claim.loses(0.5), (0.30, 0.60), VD.INCONCLUSIVE),
        (Claim.loses(0.5), (0.55, 0.80), VD.CONTRADICTED),
    ],
)
def test_rule(claim, ci, want):
    got, reason = verdict(claim, *ci)
    assert got == want, reason


def test_reasons_say_which_side_and_why():
    assert verdict(Claim.point(0.435), 0.50, 0.55)[1] == "the CI [0.5000, 0.5500] lies above the claimed 0.435"
    assert verdict(Claim.point(0.39, 0.0), -0.01, 0.03)[1].endswith("; it holds no effect")
    assert verdict(Claim.point(0.39, 0.0), -0.2, -0.1)[1].endswith("; the effect has the opposite sign")
    assert verdict(Claim.point(-0.1, 0.0), 0.05, 0.2)[1].endswith("; the effect has the opposite sign")
    assert "opposite" not in verdict(Claim.point(0.39, 0.0), 0.05, 0.1)[1]
    assert verdict(Claim.point(0.39, 0.0), -0.02, 0.5)[1].endswith("and also no effect (0)")


def test_no_interval_is_not_measured_and_a_treatment_that_never_acted_is_inconclusive():
    assert verdict(Claim.point(0.4), math.nan, math.nan)[0] == VD.NOT_MEASURED
    assert verdict(Claim.point(0.4), None, 0.5)[0] == VD.NOT_MEASURED
    # the CI excludes the claimed 5-10% (a zero-width interval at 0), but no duplicate was ever skipped
    got, reason = verdict(Claim(0.05, 0.10, 0.0), 0.0, 0.0, acted=False)
    assert got == VD.INCONCLUSIVE and reason == "the treatment never acted on the measured queries"
    assert verdict(Claim(0.05, 0.10, 0.0), 0.0, 0.0)[0] == VD.CONTRADICTED


def test_a_judge_that_failed_its_validation_makes_any_interval_inconclusive():
    # B won 1 of 10 decided pairs: consistent with "B loses" by its interval, but the judge cannot tell
    assert verdict(Claim.loses(0.5), 0.02, 0.40)[0] == VD.CONSISTENT
    got, reason = verdict(Claim.loses(0.5), 0.02, 0.40, unfit="accuracy 0.26 [0.18, 0.35]")
    assert got == VD.INCONCLUSIVE and reason == "the judge failed its validation: accuracy 0.26 [0.18, 0.35]"
    assert verdict(Claim.loses(0.5), math.nan, math.nan, unfit="x")[0] == VD.NOT_MEASURED  # no interval comes first
    assert verdict(Claim.loses(0.5), 0.02, 0.40, unfit="")[0] == VD.CONSISTENT


def test_bad_input_raises():
    with pytest.raises(ValueError, match="low <= high"):
        Claim(0.3, 0.2)
    with pytest.raises(ValueError, match="ci_low <= ci_high"):
        verdict(Claim.point(0.1), 0.5, 0.4)


@pytest.mark.parametrize(
    "text, want",
    [
        ("20-30%", (0.2, 0.3)),
        ("10 - 15%", (0.10, 0.15)),
        ("42.3%", (0.423, 0.423)),
        ("+42.3%", (0.423, 0.423)),
        ("1-2", (1.0, 2.0)),
        ("30-20%", (0.2, 0.3)),
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
