"""Whether the libraries' own log lines are shown: FAISS's CPU-feature probes ("Could not load library with AVX2
support"), Lucene's "Using MemorySegmentIndexInput" and Anserini's per-index INFO lines. Hidden unless the
environment sets ``LETHE_LIBRARY_LOGS=1``; their warnings and errors are always shown."""

from __future__ import annotations

import logging
import os

ENV = "LETHE_LIBRARY_LOGS"


def wanted() -> bool:
    """True when ``LETHE_LIBRARY_LOGS`` asks for the libraries' informational lines."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes")


def quiet(*loggers: str) -> None:
    """Python ``loggers`` at WARNING, unless the libraries' lines are wanted."""
    if not wanted():
        for name in loggers:
            logging.getLogger(name).setLevel(logging.WARNING)
