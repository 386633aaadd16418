"""Source pins: a loader refactor proven to leave its output byte-identical keeps the version its builds are keyed by.

``lethebench.build.loader_version`` hashes a loader's source, so an edited loader or generator never reuses a folder
built by older code, and every run on that dataset gets a new identity. When a refactor leaves the loader's output
exactly as it was, that move would orphan every finished run for nothing. A pin in ``source_pins.json`` (beside this
file; not a .py file, so it is not part of any hashed source) maps the refactored source's version to the version
the builds were keyed by, for the parameters it was proven on, with the sha256 of that output
(:func:`output_sha256`). ``tests/lethebench/test_generator.py`` regenerates every pinned output and fails when a
pin does not hold (the output moved) or names a version the source no longer has (a stale pin: re-prove it or
delete it and let the builds move).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lethe.core.hashing import content_hash
from lethebench.schema import SourceDataset

PINS_FILE = Path(__file__).with_name("source_pins.json")


def output_sha256(src: SourceDataset) -> str:
    """sha256 of a loader's whole output: sources, queries, qrels, contradictions and card, in canonical JSON."""

    def frame(df: Any) -> Any:
        return None if df is None else json.loads(df.to_json(orient="split", index=False, date_format="iso"))

    doc = {
        "name": src.name,
        "sources": frame(src.sources),
        "queries": frame(src.queries),
        "qrels": {q: dict(sorted(r.items())) for q, r in sorted(src.qrels.items())},
        "contradictions": frame(src.contradictions),
        "card": src.card,
    }
    return content_hash(doc)


def pins(path: Path = PINS_FILE) -> list[dict[str, Any]]:
    """Every pin: ``loader``, ``version`` (the source's version now), ``pinned`` (the version its builds keep),
    ``params`` (the loader parameters the proof generated with), ``output_sha256`` and ``why``."""
    return json.loads(path.read_text())["pins"] if path.is_file() else []


def pinned_version(loader: str, version: str) -> str:
    """The version builds of ``loader`` are keyed by: a pin's ``pinned`` version when one maps ``version``, else
    ``version`` (a pin is proven on its ``params``; it holds for the code, whatever parameters a build uses)."""
    for pin in pins():
        if pin["loader"] == loader and pin["version"] == version:
            return str(pin["pinned"])
    return version
