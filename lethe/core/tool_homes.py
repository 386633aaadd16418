"""Third-party tools that write under ``$HOME`` on import, kept to the system temp folder (or switched off).

The harness writes only under ``cache_dir``, ``results_dir``, ``data.processed`` and the system temp folder (read-only
homes on clusters). Without these settings, importing matplotlib writes its font cache to ``~/.cache/matplotlib``,
ir_datasets (imported by Pyserini) makes ``~/.ir_datasets/``, and ONNX Runtime writes a device id and a usage
database to ``~/.cache/Microsoft/DeveloperTools/``. A value the user set is kept.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

TOOL_HOMES = {"MPLCONFIGDIR": "matplotlib", "IR_DATASETS_HOME": "ir_datasets"}  # variable -> folder in temp
SWITCHED_OFF = {"ORT_DISABLE_TELEMETRY": "1"}  # ONNX Runtime's device id and usage database


def keep_tools_out_of_home() -> None:
    """Point each tool of :data:`TOOL_HOMES` at ``<temp>/lethe-<uid>/<folder>`` and set :data:`SWITCHED_OFF`,
    unless the environment sets them already. Called when ``lethe`` is imported, before those tools are."""
    base = Path(tempfile.gettempdir()) / f"lethe-{os.getuid()}"
    for var, folder in TOOL_HOMES.items():
        os.environ.setdefault(var, str(base / folder))
    for var, value in SWITCHED_OFF.items():
        os.environ.setdefault(var, value)
