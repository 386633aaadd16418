"""ruff check passes on the whole project with the settings in pyproject.toml ([tool.ruff])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from lethe.core.paths import PROJECT_ROOT


def test_ruff_check_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed: make install (it is a dev dependency)"
    out = subprocess.run([ruff, "check", "--output-format", "concise", "."], cwd=PROJECT_ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
