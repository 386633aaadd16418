"""Whitespace collapsing: the one normaliser of text put into a prompt, a key or a table cell."""

from __future__ import annotations


def collapse(text: str | None, max_chars: int | None = None) -> str:
    """``text`` with every run of whitespace (newlines included) made one space and the ends stripped, then cut to
    its first ``max_chars`` characters (no ellipsis; None: whole). None gives ""."""
    out = " ".join((text or "").split())
    return out if max_chars is None else out[:max_chars]


def comparison_key(text: str) -> str:
    """Case-, whitespace- and trailing-punctuation-insensitive key: collapsed, casefolded, trailing ``?.!`` and
    spaces removed (two sub-queries or rewrites with the same key are one)."""
    return collapse(text).casefold().rstrip("?.! ")
