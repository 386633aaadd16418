"""ruff format --check and ruff check pass on the whole project with the settings in pyproject.toml ([tool.ruff])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lethe.core.paths import PROJECT_ROOT


@pytest.mark.parametrize("command", [["format", "--check"], ["check", "--output-format", "concise"]])
def test_ruff_passes(command):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: make install (it is a dev dependency)"
    out = subprocess.run([ruff, *command, "."], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
