"""A report table as one record: its file name, title, data and footnote, written by one writer.

``Table.write`` puts ``<name>.csv`` / ``.md`` / ``.tex`` under a tables folder (:func:`analysis.formatting.write_table`)
and ``Table.markdown`` renders it for report.md, so a table's title and footnote are typed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis import formatting as F

_OWN = object()  # markdown(): the table's own footnote


@dataclass(frozen=True)
class Table:
    """``name``: the file stem under tables/; ``title``: the caption; ``frame``: the rows as written (CSV: floats
    with 6 significant digits); ``footnote``: printed under it (None: none)."""

    name: str
    title: str
    frame: pd.DataFrame
    footnote: str | None = F.FOOTNOTE_NM

    def write(self, tables_dir: Path) -> dict[str, Path]:
        """Write the CSV, Markdown and LaTeX files; their paths by format (``csv``, ``md``, ``tex``)."""
        return F.write_table(self.frame, tables_dir, self.name, self.title, footnote=self.footnote)

    def markdown(self, frame: pd.DataFrame | None = None, footnote: str | None | object = _OWN) -> str:
        """The table as report.md shows it: ``frame`` (default: the whole table; e.g. a subset of its columns) with
        ``footnote`` (default: its own)."""
        shown = self.frame if frame is None else frame
        return F.to_markdown(shown, self.footnote if footnote is _OWN else footnote)  # type: ignore[arg-type]
