"""Links the site renders run no script (issue 58, item 6): only http(s), mailto and relative links become links;
``javascript:``, ``data:`` and other schemes, however spelt, stay text, and a path named like a scheme stays relative."""

from __future__ import annotations

import pytest

from analysis import html_page as H


@pytest.mark.parametrize(
    "link",
    [
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "java\tscript:alert(1)",
        " javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
    ],
)
def test_an_unsafe_scheme_renders_as_text(link):
    out = H.inline_md(f"see [x]({link}) and **more**")
    assert "<a " not in out and "<script" not in out and out.startswith("see ") and "<strong>more</strong>" in out, out
    assert "<a " not in H.markdown(f"| a |\n|---|\n| [x]({link}) |")


@pytest.mark.parametrize(
    "link, expected",
    [
        ("https://example.org/a?b=1", "https://example.org/a?b=1"),
        ("mailto:me@example.org", "mailto:me@example.org"),
        ("#top", "#top"),
        ("/abs/page.html", "/abs/page.html"),
        ("tables/t.md", "../tables/t.md"),
    ],
)
def test_safe_and_relative_links_stay_links(link, expected):
    assert H.inline_md(f"[x]({link})", base="../") == f'<a href="{H.esc(expected)}">x</a>'


def test_a_path_named_like_a_scheme_stays_relative():
    assert H.href("javascript:alert(1)").startswith("./javascript:")
    assert H.href("runs/locomo/bm25.html") == "runs/locomo/bm25.html"
