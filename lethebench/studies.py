"""A study folder (``<results_dir>/studies/<name>``, or its copy in the reference store), read through one typed object.

A study (``experiments/studies/``: an LLM study run as its own process) writes its folder through
:meth:`StudyFolder.write`: its document (``<study>.json``), its table (``<study>.md``), any other text file, and
``manifest.json`` (resolved config, command, git, packages, hardware, times, seconds); ``DONE`` is written last and
the folder is assembled under a temporary name and swapped into place (:func:`lethe.core.atomic.atomic_dir`), so a
crash leaves nothing. Folders made before that writer also hold ``command.txt`` and ``seconds.txt`` (written by
``experiments.reproduce``), which the readers prefer. Analysis and the report read a study only through
:class:`StudyFolder`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lethe.core.atomic import atomic_dir
from lethe.core.locking import hold
from lethebench.runs import DONE

MANIFEST = "manifest.json"


class StudyFolder:
    """One study folder: :meth:`write`, and ``is_done``, ``manifest``, ``document``, ``table``, ``command``,
    ``seconds`` (module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    @property
    def is_done(self) -> bool:
        return (self.path / DONE).is_file()

    @contextlib.contextmanager
    def claim(self) -> Iterator[None]:
        """Hold this study's lock for the block (the hidden file ``.<name>.lock`` beside the folder), so that two
        processes making the same study take turns."""
        with hold(self.path):
            yield

    def write(self, files: Mapping[str, str], manifest: Mapping[str, Any]) -> StudyFolder:
        """Write the complete folder atomically, replacing an older one: ``files`` (file name -> text) and
        ``manifest.json``, then ``DONE``."""
        if MANIFEST in files or DONE in files:
            raise ValueError(f"a study's files may not be named {MANIFEST} or {DONE}: write() writes them")
        manifest_text = json.dumps(dict(manifest), indent=2, default=str) + "\n"
        return self._replace({**files, MANIFEST: manifest_text, DONE: "complete\n"})

    def write_failed(self, files: Mapping[str, str]) -> StudyFolder:
        """Replace the folder by ``files`` alone, without manifest or ``DONE``: what a study that failed its own check
        leaves for inspection (e.g. the judge's replies); readers see it as not done."""
        return self._replace(files)

    def _replace(self, files: Mapping[str, str]) -> StudyFolder:
        """Swap in a folder holding exactly ``files`` (name -> text, written in order) atomically."""
        with atomic_dir(self.path) as tmp:
            for name, text in files.items():
                (tmp / name).write_text(text)
        return self

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
        """The command that made it: ``command.txt`` (older folders), else the manifest's."""
        p = self.path / "command.txt"
        return p.read_text().strip() if p.is_file() else self.manifest.get("command")

    @property
    def seconds(self) -> float | None:
        """How long it took: ``seconds.txt`` (older folders), else the manifest's ``seconds``; None when neither."""
        p = self.path / "seconds.txt"
        if p.is_file():
            return float(p.read_text())
        value = self.manifest.get("seconds")
        return None if value is None else float(value)
