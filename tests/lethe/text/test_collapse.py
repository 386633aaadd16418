"""The one whitespace normaliser: what every prompt, key and table cell of collapsed text is built from."""

from __future__ import annotations

from lethe.text.collapse import collapse, comparison_key


def test_collapse_joins_whitespace_runs_strips_and_cuts():
    assert collapse("  a\n\tb   c \n") == "a b c"
    assert collapse("a  b  c", 3) == "a b" and collapse("abc", 0) == "" and collapse("abc", None) == "abc"
    assert collapse(None) == "" and collapse("") == ""


def test_comparison_key_ignores_case_whitespace_and_trailing_punctuation():
    assert comparison_key("  Where did  Ann GO?! ") == comparison_key("where did ann go") == "where did ann go"
    assert comparison_key("What?  Why.") == "what? why"
