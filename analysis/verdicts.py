"""The rule that gives a printed claim its verdict against a measurement (the claims table, analysis/claims.py).

A claim allows a set of values, an interval ``[low, high]``: a printed number is the point ``[x, x]``; a printed
range ("20-30%") is that range; "A beats B" is ``(0, inf)``. A comparative claim (a difference, a relative
improvement, a win rate) also has a no-effect value, ``null`` (0, or 0.5 for a win rate); a claim about a value (an
absolute level) has none. The measurement (:class:`Measured`) is an estimate with its 95% confidence interval and n;
for a difference also the primary test's p (the paired randomization test; adjusted where the row is in a corrected
family), its unadjusted p, the number of non-zero paired differences, and, where the per-query differences are at
hand, the primary test shifted to any value (``shifted_p(x)``: the p of "the mean difference is x").

Every claim is judged against a declared **equivalence margin** around it (``verdicts.margins`` in
``conf/analysis/default.yaml``, per metric): the *band* ``[low - margin, high + margin]``.

In this order (:func:`judge`):

1. **not comparable** when the claimed quantity is defined differently from anything measured here (another
   machine's latency, an undefined rate): the claims spec says why (``fixed`` verdicts, no interval needed); and
   when an absolute level is (or would be) measured on another dataset, generator, model or metric definition than
   the claim's (:func:`comparable`): a level is comparable only when all four are the same, measured or not.
2. **not measured** when there is no measurement (no finished run, fewer than two values); the row says why.
3. **inconclusive** when the treatment never acted on the measured queries, or the instrument that measured it
   failed its validation (an LLM judge): the measurement could not have shown the claim.
4. (step 1's comparability of a level comes first: a level measured elsewhere is never made a verdict of.)
5. An absolute level: **consistent** when its CI lies inside the band, **contradicted** when it lies wholly outside
   it, else **inconclusive** (a CI wider than the band is too imprecise to say). A BCa interval of a mean on fewer
   than ``min_n`` values decides nothing alone: **inconclusive** (a Wilson interval of a share is exact enough).
6. A difference gets two verdicts. *Direction* (the claimed sign against no effect): decided by the primary test,
   **consistent** when p < alpha and the estimate has the claimed sign, **contradicted** when p < alpha and it has
   the other, else **inconclusive** ("n/a" for a claim of no difference). *Magnitude* (the claimed size): with at
   least ``min_n`` pairs and ``min_nonzero`` non-zero differences the BCa CI decides, **consistent** when it lies
   inside the band, **exceeded** when it lies wholly beyond the band on the larger-effect side, **smaller** when
   wholly on the smaller-effect side (for a claim of no difference either side is **contradicted**), else
   **inconclusive**; with fewer, the primary test shifted to the band's edges decides (beyond an edge only when the
   test rejects that edge; inside only when it rejects both), else **inconclusive** ("n/a" for "A beats B", which
   claims no size). A row whose CI and primary test disagree is flagged (``discordance``).
7. The claim's verdict from the two (:func:`combine_difference`): a contradicted direction makes it
   **contradicted**; a consistent direction gives **consistent**, **direction consistent, magnitude exceeded**,
   **direction consistent, magnitude smaller** or **direction consistent, magnitude inconclusive** by the
   magnitude; an inconclusive direction gives **contradicted** when the claimed size is excluded (smaller), else
   **inconclusive**; a claim with no direction takes its magnitude's verdict.

One verdict per claim (:func:`combine_group`): a claim measured on several datasets gets one verdict from its
per-dataset verdicts (:data:`GROUP_RULE`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONSISTENT, CONTRADICTED, INCONCLUSIVE = "consistent", "contradicted", "inconclusive"
EXCEEDED = "direction consistent, magnitude exceeded"
SMALLER = "direction consistent, magnitude smaller"
DIRECTION_ONLY = "direction consistent, magnitude inconclusive"
NOT_COMPARABLE, NOT_MEASURED = "not comparable", "not measured"
VERDICTS = (
    CONSISTENT,
    EXCEEDED,
    SMALLER,
    DIRECTION_ONLY,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_MEASURED,
)
# the part-verdicts of a difference (direction, magnitude); "n/a" where the claim has no such part
EXCEEDS, FALLS_SHORT, NA = "exceeded", "smaller", "n/a"
DIRECTION_CONSISTENT = (CONSISTENT, EXCEEDED, SMALLER, DIRECTION_ONLY)  # claim verdicts whose direction held
ASPECTS = ("dataset", "generator", "model", "metric definition")

GROUP_RULE = (
    "a claim measured on several datasets gets one verdict from its per-dataset rows (shown under it): the rows not "
    "measured are left out; a verdict every measured row shares is the claim's; rows that all hold the claimed "
    "direction but differ in size give **direction consistent, magnitude inconclusive**; any other mix is "
    "**inconclusive** (mixed), the per-dataset verdicts named"
)

_RULE = (
    "Verdict rule (analysis/verdicts.py, in this order): **not comparable** when the claimed quantity is defined "
    "differently from anything measured here (another machine's latency, an undefined rate), or when an absolute "
    "level was measured (or would be) on another dataset, generator, model or metric definition than the claim's (a "
    "level is comparable only when all four are the same); **not measured** when there is no finished run or no "
    "interval; **inconclusive** when the treatment never acted on the measured queries or the instrument that "
    "measured it failed its validation (an LLM judge). Every claim is judged against a declared equivalence "
    "margin around it (per metric, `verdicts.margins` in conf/analysis/default.yaml): an absolute level is "
    "**consistent** when its 95% CI lies inside the claim +/- margin, **contradicted** when wholly outside, else "
    "**inconclusive** (a CI wider than the margin band is too imprecise); a BCa interval of a mean on fewer than "
    "{min_n} values decides nothing alone. A difference gets two verdicts: *direction*, decided by the primary test "
    "(the paired randomization test, its adjusted p where the row is in a corrected family; the exact sign test for "
    "pairwise judgments; at alpha {alpha:g}): "
    "consistent when significant with the claimed sign, contradicted when significant with the other, else "
    "inconclusive; *magnitude*, decided by the BCa CI against the claim +/- margin when there are at least {min_n} "
    "pairs and {min_nonzero} non-zero differences (consistent inside, exceeded beyond it on the larger-effect side, "
    "smaller on the other side, else inconclusive), and with fewer by the primary test shifted to the band's edges "
    "(beyond an edge only when the test rejects that edge, inside only when it rejects both). The claim's verdict: "
    "**contradicted** when the direction is contradicted, or when it is not shown and the size falls short of the "
    "claim (smaller); "
    "with the direction consistent, **consistent**, **direction consistent, magnitude exceeded** (a gain larger "
    "than claimed), **direction consistent, magnitude smaller** or **direction consistent, magnitude inconclusive** "
    "by the magnitude; otherwise **inconclusive**; a claim of no difference takes its magnitude's verdict, a claim "
    '"A beats B" its direction\'s. A row whose CI and primary test disagree is flagged in the column "CI vs test". '
    "One verdict per claim: " + GROUP_RULE + "."
)


@dataclass(frozen=True)
class Rules:
    """The rule's declared parameters: ``alpha`` (1 - confidence), ``margins`` (metric -> equivalence margin, in the
    metric's units; a name is looked up whole, then before its ``@``), ``min_n`` and ``min_nonzero`` (below either,
    the BCa interval of a difference does not decide alone), ``imprecise`` (a CI more than this many times the
    band's width is called too imprecise in the reason)."""

    alpha: float = 0.05
    margins: Mapping[str, float] | None = None
    min_n: int = 50
    min_nonzero: int = 10
    imprecise: float = 1.0
    basis: str = ""

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> Rules:
        """From the report settings: ``confidence`` and the ``verdicts`` block."""
        v = cfg.get("verdicts") or {}
        return cls(
            alpha=1.0 - float(cfg.get("confidence", 0.95)),
            margins=dict(v.get("margins") or {}),
            min_n=int(v.get("min_n", 50)),
            min_nonzero=int(v.get("min_nonzero", 10)),
            imprecise=float(v.get("imprecise", 1.0)),
            basis=str(v.get("basis") or ""),
        )

    def margin(self, metric: str) -> float:
        """The equivalence margin of ``metric`` (whole name, then the part before ``@``); ValueError if undeclared."""
        m = self.margins or {}
        for key in (metric, metric.split("@")[0]):
            if key in m:
                return float(m[key])
        raise ValueError(f"no equivalence margin declared for {metric!r} (verdicts.margins: {sorted(m)})")


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
    def point(cls, x: float, null: float | None = None) -> Claim:
        return cls(float(x), float(x), null)

    @classmethod
    def beats(cls, null: float = 0.0) -> Claim:
        """ "A is better than B": every value above the no-effect value."""
        return cls(null, math.inf, null)

    @classmethod
    def loses(cls, null: float = 0.0) -> Claim:
        """ "A is worse than B": every value below the no-effect value."""
        return cls(-math.inf, null, null)

    @property
    def sign(self) -> int:
        """+1 / -1 when a comparative claim says the effect is above / below no effect, 0 when it claims no
        difference (or straddles it), and 0 for a claim about a value."""
        if self.null is None:
            return 0
        if self.low >= self.null and self.high > self.null:
            return 1
        if self.high <= self.null and self.low < self.null:
            return -1
        return 0

    @property
    def sized(self) -> bool:
        """Whether the claim names a size (both bounds finite), not only a side."""
        return math.isfinite(self.low) and math.isfinite(self.high)

    def band(self, margin: float) -> tuple[float, float]:
        """``[low - margin, high + margin]``: the values equivalent to the claim within ``margin``."""
        return self.low - margin, self.high + margin

    def describe(self) -> str:
        if self.low == self.high:
            return f"{self.low:+.4g}" if self.null is not None else f"{self.low:.4g}"
        if math.isinf(self.high):
            return f"> {self.low:.4g}"
        if math.isinf(self.low):
            return f"< {self.high:.4g}"
        return f"[{self.low:.4g}, {self.high:.4g}]"


@dataclass(frozen=True)
class Measured:
    """A measurement: the estimate and its CI over ``n`` values; ``interval`` "bca" (a bootstrap CI of a mean) or
    "wilson" (a share); for a difference ``p`` (the primary test, adjusted where in a family; None: no test),
    ``p_raw`` (unadjusted; defaults to ``p``), ``p_label`` (what ``p`` is, for the reason), ``n_nonzero`` (non-zero
    paired differences) and ``shifted_p`` (x -> the primary test's p of "the mean difference is x", in the
    estimate's units; None when the per-query differences are not at hand)."""

    est: float
    ci_low: float
    ci_high: float
    n: int
    interval: str = "bca"
    p: float | None = None
    p_raw: float | None = None
    p_label: str = "p"
    n_nonzero: int | None = None
    shifted_p: Callable[[float], float] | None = None

    @property
    def has_interval(self) -> bool:
        return not any(x is None or (isinstance(x, float) and math.isnan(x)) for x in (self.ci_low, self.ci_high))


@dataclass(frozen=True)
class Judgement:
    """A claim's verdict (one of :data:`VERDICTS`), why, its direction and magnitude part-verdicts ("" for a claim
    about a value) and the CI-vs-test discordance ("" when none)."""

    verdict: str
    reason: str
    direction: str = ""
    magnitude: str = ""
    discordance: str = ""


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


def comparable(differs: Mapping[str, str] | None) -> str | None:
    """Why an absolute level is not comparable with the claim: ``differs`` maps each aspect of :data:`ASPECTS` in
    which the measurement's setting is not the claim's to how (empty or None: all four are the same, comparable)."""
    if not differs:
        return None
    bad = [a for a in differs if a not in ASPECTS]
    if bad:
        raise ValueError(f"unknown comparability aspects {bad}; expected some of {ASPECTS}")
    return "; ".join(f"not the same {a}: {differs[a]}" for a in ASPECTS if a in differs)


_EPS = 1e-9  # a band edge computed in floating point (0.435 - 0.02) still holds a CI bound printed at it


def _ci(m: Measured) -> str:
    return f"[{m.ci_low:.4f}, {m.ci_high:.4f}]"


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def _outside(claim: Claim, m: Measured, margin: float, rules: Rules) -> tuple[str, str]:
    """Where the CI lies against the band: ("inside" | "above" | "below" | "straddles", reason)."""
    lo, hi = claim.band(margin)
    band = f"the claim {claim.describe()} +/- {margin:.4g}"
    if lo - _EPS <= m.ci_low and m.ci_high <= hi + _EPS:
        return "inside", f"the CI {_ci(m)} lies inside {band}"
    if m.ci_low > hi + _EPS:
        return "above", f"the CI {_ci(m)} lies above {band}"
    if m.ci_high < lo - _EPS:
        return "below", f"the CI {_ci(m)} lies below {band}"
    width, bw = m.ci_high - m.ci_low, hi - lo
    if math.isfinite(bw) and width > rules.imprecise * bw:
        return "straddles", f"too imprecise: the CI {_ci(m)} is {width:.4f} wide, wider than {band} ({bw:.4f})"
    return "straddles", f"the CI {_ci(m)} crosses an edge of {band}"


def level_verdict(claim: Claim, m: Measured, margin: float, rules: Rules) -> tuple[str, str]:
    """Step 5: an absolute level against the band of ``claim`` (comparability already checked)."""
    if m.interval == "bca" and m.n < rules.min_n:
        return INCONCLUSIVE, f"n = {m.n} < {rules.min_n}: a BCa interval {_ci(m)} alone does not decide"
    where, why = _outside(claim, m, margin, rules)
    if where == "inside":
        return CONSISTENT, why
    if where in ("above", "below"):
        return CONTRADICTED, why
    return INCONCLUSIVE, why


def direction_verdict(claim: Claim, m: Measured, rules: Rules) -> tuple[str, str]:
    """Step 6, direction: by the primary test (``m.p``), "n/a" for a claim of no difference."""
    if claim.sign == 0:
        return NA, "a claim of no difference has no direction"
    if m.p is None or math.isnan(m.p):
        return INCONCLUSIVE, "no primary test: the direction is not tested"
    side = "above" if claim.sign > 0 else "below"
    test = f"{m.p_label} = {_fmt_p(m.p)}"
    if m.p >= rules.alpha:
        return INCONCLUSIVE, f"direction not shown ({test} >= {rules.alpha:g})"
    got = 1 if m.est > (claim.null or 0.0) else -1 if m.est < (claim.null or 0.0) else 0
    if got == claim.sign:
        return CONSISTENT, f"direction holds ({test}, the estimate {side} no effect as claimed)"
    return (
        CONTRADICTED,
        f"the opposite direction ({test}, the estimate {'below' if side == 'above' else 'above'} no effect)",
    )


def _small(m: Measured, rules: Rules) -> str:
    """Why the BCa interval of a difference may not decide alone ("" when it may)."""
    if m.n < rules.min_n:
        return f"n = {m.n} < {rules.min_n}"
    if m.n_nonzero is not None and m.n_nonzero < rules.min_nonzero:
        return f"{m.n_nonzero} non-zero differences < {rules.min_nonzero}"
    return ""


def _side(where: str, claim: Claim) -> str:
    """A CI beyond the band ("above" / "below") as a magnitude verdict: exceeded / smaller by the claim's sign."""
    if claim.sign == 0:
        return CONTRADICTED
    larger = "above" if claim.sign > 0 else "below"
    return EXCEEDS if where == larger else FALLS_SHORT


def magnitude_verdict(claim: Claim, m: Measured, margin: float, rules: Rules) -> tuple[str, str, str]:
    """Step 6, magnitude: (verdict, reason, discordance of the CI's and the shifted test's verdicts, "" if none)."""
    if not claim.sized:
        return NA, "the claim names no size", ""
    where, why = _outside(claim, m, margin, rules)
    by_ci = {"inside": CONSISTENT, "straddles": INCONCLUSIVE}.get(where) or _side(where, claim)
    small = _small(m, rules)
    if not small:
        return by_ci, why, ""
    if m.shifted_p is None:
        return (
            INCONCLUSIVE,
            f"{small}: the BCa interval alone does not decide the size, and no test of it is at hand",
            "",
        )
    lo, hi = claim.band(margin)
    p_lo, p_hi = m.shifted_p(lo), m.shifted_p(hi)
    tested = f"the primary test shifted to the band's edges {lo:+.4g} / {hi:+.4g}: p = {_fmt_p(p_lo)} / {_fmt_p(p_hi)}"
    if m.est < lo and p_lo < rules.alpha:
        by_test, where_t = _side("below", claim), "below"
    elif m.est > hi and p_hi < rules.alpha:
        by_test, where_t = _side("above", claim), "above"
    elif lo < m.est < hi and p_lo < rules.alpha and p_hi < rules.alpha:
        by_test, where_t = CONSISTENT, "inside"
    else:
        by_test, where_t = INCONCLUSIVE, ""
    say = {"inside": "inside", "above": "above", "below": "below"}.get(where_t, "not placed against")
    reason = f"{small}, so the primary test decides the size: {tested} (the size {say} the claim +/- {margin:.4g})"
    disc = f"size: CI {by_ci}, test {by_test}" if by_ci != by_test else ""
    return by_test, reason, disc


def combine_difference(direction: str, magnitude: str) -> str:
    """Step 7: the claim's verdict from its direction and magnitude part-verdicts."""
    if direction == NA:
        return {EXCEEDS: CONTRADICTED, FALLS_SHORT: CONTRADICTED}.get(magnitude, magnitude)
    if direction == CONTRADICTED:
        return CONTRADICTED
    if magnitude == NA:
        return direction
    if direction == CONSISTENT:
        return {CONSISTENT: CONSISTENT, EXCEEDS: EXCEEDED, FALLS_SHORT: SMALLER}.get(magnitude, DIRECTION_ONLY)
    return CONTRADICTED if magnitude == FALLS_SHORT else INCONCLUSIVE


def judge(
    claim: Claim,
    m: Measured | None,
    rules: Rules,
    metric: str | None = None,
    *,
    margin: float | None = None,
    acted: bool = True,
    unfit: str | None = None,
    differs: Mapping[str, str] | None = None,
) -> Judgement:
    """The verdict of ``claim`` against ``m`` (steps 2-7 of the module's rule; step 1 is a fixed verdict the claims
    spec gives without asking). ``margin`` overrides the declared margin of ``metric`` (a relative claim's margin
    in its own units); ``acted`` False when the treatment never acted on the measured queries; ``unfit`` why the
    instrument failed its validation; ``differs`` the aspects in which a level's setting is not the claim's."""
    if claim.null is None:  # comparability first: a level measured elsewhere is not comparable, measured or not
        why = comparable(differs)
        if why:
            return Judgement(NOT_COMPARABLE, why)
    if m is None or not m.has_interval:
        return Judgement(NOT_MEASURED, "no interval (no finished run, or fewer than two values)")
    if m.ci_low > m.ci_high:
        raise ValueError(f"an interval needs ci_low <= ci_high, got [{m.ci_low}, {m.ci_high}]")
    if not acted:
        return Judgement(INCONCLUSIVE, "the treatment never acted on the measured queries")
    if unfit:
        return Judgement(INCONCLUSIVE, f"the judge failed its validation: {unfit}")
    if margin is None:
        margin = rules.margin(metric) if metric is not None else 0.0
    if claim.null is None:
        return Judgement(*level_verdict(claim, m, margin, rules))
    direction, dwhy = direction_verdict(claim, m, rules)
    magnitude, mwhy, size_disc = magnitude_verdict(claim, m, margin, rules)
    disc = [size_disc] if size_disc else []
    if m.p_raw is not None or m.p is not None:
        p0 = m.p_raw if m.p_raw is not None else m.p
        if p0 is not None and not math.isnan(p0) and claim.null is not None:
            excludes = m.ci_low > claim.null or m.ci_high < claim.null
            if excludes != (p0 < rules.alpha):
                which = "excludes" if excludes else "includes"
                disc.insert(0, f"CI {which} no effect, unadjusted p = {_fmt_p(p0)}")
    verdict = combine_difference(direction, magnitude)
    parts = [f"direction {direction}: {dwhy}" if direction != NA else "", f"magnitude {magnitude}: {mwhy}"]
    return Judgement(verdict, "; ".join(p for p in parts if p), direction, magnitude, "; ".join(disc))


def combine_group(verdicts: Sequence[str]) -> tuple[str, str]:
    """One verdict for a claim from its per-dataset verdicts (:data:`GROUP_RULE`), and why."""
    if not verdicts:
        raise ValueError("a group of claims needs at least one row")
    measured = [v for v in verdicts if v != NOT_MEASURED]
    if not measured:
        return NOT_MEASURED, f"none of its {len(verdicts)} rows measured"
    left = f" ({len(verdicts) - len(measured)} not measured left out)" if len(measured) < len(verdicts) else ""
    if len(set(measured)) == 1:
        return measured[0], f"all {len(measured)} measured rows {measured[0]}{left}"
    counts = ", ".join(f"{measured.count(v)} {v}" for v in VERDICTS if v in measured)
    if all(v in DIRECTION_CONSISTENT for v in measured):
        return (
            DIRECTION_ONLY,
            f"the direction holds on all {len(measured)} measured rows, the size differs ({counts}){left}",
        )
    return INCONCLUSIVE, f"mixed: {counts}{left}"


def counts(verdicts: Sequence[str]) -> dict[str, int]:
    """How many of ``verdicts`` are each of :data:`VERDICTS` (every one listed, 0 included); ValueError on another."""
    bad = sorted(set(verdicts) - set(VERDICTS))
    if bad:
        raise ValueError(f"not verdicts of the rule: {bad}")
    return {v: sum(1 for x in verdicts if x == v) for v in VERDICTS}


def rule_text(rules: Rules) -> str:
    """The rule's prose (:data:`RULE`) with the declared parameters of ``rules`` filled in, and its margins with the
    basis they were set on when declared."""
    text = _RULE.format(min_n=rules.min_n, min_nonzero=rules.min_nonzero, alpha=rules.alpha)
    if rules.margins:
        listed = ", ".join(f"{k} {float(x):g}" for k, x in rules.margins.items())
        text += (
            f" Declared margins: {listed} (a relative claim's margin is its metric's divided by the reference mean)"
            + (f"; basis: {rules.basis}" if rules.basis else "")
            + "."
        )
    return text


RULE = rule_text(Rules())  # the prose with the default parameters (the report prints rule_text of its own)
