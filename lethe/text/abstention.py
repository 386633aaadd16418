"""When an answer abstains: LoCoMo's rule (category 5), shared by answer generation and the answer metrics."""

from __future__ import annotations

ABSTENTION_PHRASES: tuple[str, ...] = ("no information available", "not mentioned")


def abstains(pred: str) -> bool:
    """True iff the lowercased prediction contains one of ``ABSTENTION_PHRASES`` (LoCoMo category 5)."""
    low = str(pred).lower()
    return any(p in low for p in ABSTENTION_PHRASES)
