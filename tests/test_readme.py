"""The README's first screen works as written: its Python comparison runs on small data (two LoCoMo
conversations) and prints the columns it names; every docs page it links exists."""

from __future__ import annotations

import functools
import re

from experiments import api
from lethe.core.paths import PROJECT_ROOT
from tests.conftest import overrides_for

README = (PROJECT_ROOT / "README.md").read_text()


def test_the_first_comparison_runs_as_written(work, monkeypatch, capsys):
    code = re.search(r"## A first comparison from Python\s+```python\n(.*?)```", README, re.S)
    assert code, "the README has no 'A first comparison from Python' code block"
    # the block as written, on two conversations and the session's folders (the README's call takes all ten)
    small = overrides_for(work, "dataset.scopes=[conv-26,conv-30]")
    monkeypatch.setattr(api, "experiment", functools.partial(api.experiment, overrides=small, progress=False))
    exec(compile(code.group(1), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    for column in ("nDCG@10", "nDCG@10 Δ", "nDCG@10 CI low", "nDCG@10 p", "R@50 sig", "n"):
        assert re.search(rf"\|\s+{re.escape(column)}\s+\|", printed), printed  # the wide table's columns, markdown
    assert "('locomo', 'vector')" in printed and "('locomo', 'lethe_iter1')" in printed and "| base " in printed


def test_every_linked_docs_page_exists():
    pages = set(re.findall(r"\]\((docs/[^)#]+)", README))
    assert len(pages) >= 10, pages
    assert [p for p in sorted(pages) if not (PROJECT_ROOT / p).is_file()] == []
