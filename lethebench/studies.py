"""A study folder (``<results_dir>/studies/<name>``, or its copy in the reference store), read through one typed object.

A study (``experiments/studies/``: an LLM study run as its own process) writes into a folder: its document
(``<study>.json``), its table (``<study>.md``), ``manifest.json`` (resolved config, command, git, packages, hardware,
times) and, when ``experiments.reproduce`` made it, ``command.txt`` and ``seconds.txt``; ``DONE`` marks it complete
(the folder is renamed into place whole, so a crash leaves nothing). Analysis and the report read it only through
:class:`StudyFolder`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lethebench.runs import DONE

MANIFEST = "manifest.json"


class StudyFolder:
    """One study folder: ``is_done``, ``manifest``, ``document``, ``table``, ``command`` (module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    @property
    def is_done(self) -> bool:
        return (self.path / DONE).is_file()

    @property
    def manifest(self) -> dict[str, Any]:
        """``manifest.json`` ({} when the study wrote none)."""
        p = self.path / MANIFEST
        return json.loads(p.read_text()) if p.is_file() else {}

    @property
    def documents(self) -> list[Path]:
        """The study's JSON documents (the manifest aside), by name."""
        return [f for f in sorted(self.path.glob("*.json")) if f.name != MANIFEST]

    @property
    def document(self) -> dict[str, Any] | None:
        """The first JSON document (what the claims table and verification read), or None."""
        docs = self.documents
        return json.loads(docs[0].read_text()) if docs else None

    @property
    def tables(self) -> list[Path]:
        """The study's Markdown pages, by name."""
        return sorted(self.path.glob("*.md"))

    @property
    def table(self) -> str | None:
        """The first Markdown page's text, or None."""
        md = self.tables
        return md[0].read_text() if md else None

    @property
    def command(self) -> str | None:
        """The command that made it: ``command.txt`` (written by experiments.reproduce), else the manifest's."""
        p = self.path / "command.txt"
        return p.read_text().strip() if p.is_file() else self.manifest.get("command")
