"""The rule that gives a printed claim its verdict against a measurement (the claims table, analysis/claims.py).

A claim allows a set of values, an interval ``[low, high]``: a printed number is the point ``[x, x]``; a printed
range ("20-30%") is that range; "A beats B" is ``(0, inf)``. A comparative claim (a difference, a relative
improvement, a win rate) also has a no-effect value, ``null`` (0, or 0.5 for a win rate). The measurement is a
95% confidence interval ``[ci_low, ci_high]``. In this order:

1. **not comparable** when the measured quantity is not the claimed one (a redefined metric, another machine's
   latency); the claims spec says why, and this module is not asked.
2. **not measured** when there is no interval (no finished run, or fewer than two values); the row says why.
3. **contradicted** when the interval holds none of the values the claim allows.
4. **inconclusive** when it holds some of them and also the no-effect value: the data cannot tell the claim
   from no effect.
5. **consistent** otherwise.

A claim whose treatment never acted on the measured queries (a deduplication that found no duplicate), or whose
measuring instrument failed its validation (an LLM judge that does not pick the known-better answer of data-labelled
pairs), is **inconclusive** whatever the interval: the measurement could not have shown the effect.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

CONSISTENT, CONTRADICTED, INCONCLUSIVE = "consistent", "contradicted", "inconclusive"
NOT_COMPARABLE, NOT_MEASURED = "not comparable", "not measured"
VERDICTS = (CONSISTENT, CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, NOT_MEASURED)

RULE = (
    "Verdict rule (analysis/verdicts.py, in this order): **not comparable** when the measured quantity is not the "
    "claimed one (the reason names the difference); **not measured** when there is no finished run or no interval; "
    "**contradicted** when the 95% CI of the measurement holds none of the values the claim allows (a printed "
    'number allows itself, a printed range its range, "A beats B" every positive difference); **inconclusive** '
    "when the CI holds an allowed value and also the no-effect value of a comparative claim (difference 0, win "
    "rate 0.5), when the treatment never acted on the measured queries, or when the instrument that measured it failed "
    "its validation (an LLM judge whose accuracy on pairs with a known better answer is below the required share); "
    "**consistent** otherwise."
)


@dataclass(frozen=True)
class Claim:
    """The values a claim allows, ``[low, high]`` (bounds may be infinite), and for a comparative claim its
    no-effect value ``null`` (None for a claim about a value)."""

    low: float
    high: float
    null: float | None = None

    def __post_init__(self) -> None:
        if math.isnan(self.low) or math.isnan(self.high) or self.low > self.high:
            raise ValueError(f"a claim allows [low, high] with low <= high, got [{self.low}, {self.high}]")

    @classmethod
    def point(cls, x: float, null: float | None = None) -> "Claim":
        return cls(float(x), float(x), null)

    @classmethod
    def beats(cls, null: float = 0.0) -> "Claim":
        """ "A is better than B": every value above the no-effect value."""
        return cls(null, math.inf, null)

    @classmethod
    def loses(cls, null: float = 0.0) -> "Claim":
        """ "A is worse than B": every value below the no-effect value."""
        return cls(-math.inf, null, null)

    def describe(self) -> str:
        if self.low == self.high:
            return f"{self.low:+.4g}" if self.null is not None else f"{self.low:.4g}"
        if math.isinf(self.high):
            return f"> {self.low:.4g}"
        if math.isinf(self.low):
            return f"< {self.high:.4g}"
        return f"[{self.low:.4g}, {self.high:.4g}]"


_RANGE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(?:(?:-|to|–)\s*([-+]?\d+(?:\.\d+)?))?\s*(%?)\s*$")


def parse_range(text: str) -> tuple[float, float]:
    """A printed number or range, as fractions when in percent: ``"20-30%"`` -> (0.2, 0.3), ``"+42.3%"`` ->
    (0.423, 0.423), ``"1-2"`` -> (1.0, 2.0)."""
    m = _RANGE.match(str(text))
    if not m:
        raise ValueError(f"not a printed number or range like '20-30%' or '+42.3%': {text!r}")
    scale = 0.01 if m.group(3) else 1.0
    lo = float(m.group(1)) * scale
    hi = float(m.group(2)) * scale if m.group(2) is not None else lo
    return (lo, hi) if lo <= hi else (hi, lo)


def verdict(
    claim: Claim, ci_low: float | None, ci_high: float | None, acted: bool = True, unfit: str | None = None
) -> tuple[str, str]:
    """(verdict, reason) of ``claim`` against a measured interval ``[ci_low, ci_high]`` (the module's rule, steps
    2-5); ``acted`` False when the treatment the claim is about never acted on the measured queries; ``unfit`` why
    the instrument that measured it failed its validation (None: it passed, or none was needed)."""
    if ci_low is None or ci_high is None or math.isnan(ci_low) or math.isnan(ci_high):
        return NOT_MEASURED, "no interval (no finished run, or fewer than two values)"
    if ci_low > ci_high:
        raise ValueError(f"an interval needs ci_low <= ci_high, got [{ci_low}, {ci_high}]")
    ci = f"[{ci_low:.4f}, {ci_high:.4f}]"
    if not acted:
        return INCONCLUSIVE, "the treatment never acted on the measured queries"
    if unfit:
        return INCONCLUSIVE, f"the judge failed its validation: {unfit}"
    if ci_high < claim.low or ci_low > claim.high:
        side = "below" if ci_high < claim.low else "above"
        why = f"the CI {ci} lies {side} the claimed {claim.describe()}"
        if claim.null is not None and ci_low <= claim.null <= ci_high:
            why += "; it holds no effect"
        elif claim.null is not None and (ci_high < claim.null if claim.low >= claim.null else ci_low > claim.null):
            why += "; the effect has the opposite sign"
        return CONTRADICTED, why
    if claim.null is not None and ci_low <= claim.null <= ci_high:
        return INCONCLUSIVE, f"the CI {ci} holds the claimed {claim.describe()} and also no effect ({claim.null:g})"
    return CONSISTENT, f"the CI {ci} holds the claimed {claim.describe()}"
