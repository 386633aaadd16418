"""A small reproduction for tests that stop or kill it: a reference folder holding one tier, and
``python -m experiments.reproduce`` in a child process with ``LETHE_KILL_AT`` set (lethe.core.faults)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lethe.core.paths import CONF_DIR, PROJECT_ROOT


def write_reference(folder: Path, name: str, tier: Mapping[str, Any]) -> Path:
    """``folder`` with tier ``name`` (``<name>.yaml``) and the project's tolerances, for ``reference_dir=``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(dict(tier), sort_keys=False))
    (folder / "tolerances.yaml").write_text((CONF_DIR / "reference" / "tolerances.yaml").read_text())
    return folder


def reproduce_process(
    args: Sequence[str], kill_at: str | None = None, timeout: float = 900, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m experiments.reproduce *args`` from the project root, with ``LETHE_KILL_AT=kill_at`` (unset
    when None, whatever the caller's environment holds) and the variables ``env`` added; output captured as text.
    The output goes through files, not pipes, so that a process the killed one left behind (holding its copies of
    the output) cannot keep this call waiting: the caller sees the exit and can look for such processes."""
    env = {**{k: v for k, v in os.environ.items() if k != "LETHE_KILL_AT"}, **(env or {})}
    if kill_at:
        env["LETHE_KILL_AT"] = kill_at
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.run(
            [sys.executable, "-m", "experiments.reproduce", *args],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=err,
            text=True,
            timeout=timeout,
        )
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
