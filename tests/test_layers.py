"""The layer contracts of pyproject.toml ([tool.importlinter]) hold: imports only run down the layers
(docs/layout.md "Layout"), analysis never imports a stage, a language model, a method or a baseline (it reads
results; the LLM studies live in experiments.studies), and no package has an import cycle among its modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout, done.stdout
    assert "Analysis reads results" in done.stdout  # the forbidden contract is one of them


def test_no_analysis_module_names_a_stage_a_model_or_a_baseline():
    """Also at run time: a lazy import inside a function is a real import too (the contract sees those as well)."""
    import re

    pattern = re.compile(r"^\s*(from|import)\s+(lethe\.(stages|llm|methods)|baselines)\b", re.M)
    hits = [p.name for p in (ROOT / "analysis").glob("*.py") if pattern.search(p.read_text())]
    assert hits == []
