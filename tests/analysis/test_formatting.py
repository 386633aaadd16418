"""analysis.formatting: the one Markdown table writer and the DataFrame tables built on it."""

from __future__ import annotations

import pandas as pd

from analysis.formatting import markdown_table, to_markdown


def test_markdown_table_lines():
    assert markdown_table(["a", "b"], [[1, None], ["x", 0.5]]) == [
        "| a | b |",
        "|---|---|",
        "| 1 | None |",
        "| x | 0.5 |",
    ]
    assert markdown_table(["only"], []) == ["| only |", "|---|"]


def test_a_frame_is_written_through_it_with_a_footnote():
    text = to_markdown(pd.DataFrame({"method": ["bm25"], "n": [3]}), "note")
    assert text == "| method | n |\n|---|---|\n| bm25 | 3 |\n\nnote\n"
