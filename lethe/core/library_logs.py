"""Whether the libraries' own log lines are shown: FAISS's CPU-feature probes ("Could not load library with AVX2
support"), Lucene's "Using MemorySegmentIndexInput", Anserini's per-index INFO lines and transformers' "Loading
weights" progress bar (one per model load, hundreds of lines in a tier's log). Hidden unless the environment sets
``LETHE_LIBRARY_LOGS=1``; their warnings and errors are always shown."""

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


def quiet_model_loading() -> None:
    """transformers' "Loading weights" progress bar off (call before a model is loaded), unless the libraries' lines
    are wanted. The project's own progress bars (``run.progress``) are not touched."""
    if not wanted():
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
