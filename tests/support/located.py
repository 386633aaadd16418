"""A run manifest read back on the machine that made it: its folder tokens (``<cache_dir>``, ``<results_dir>``,
``<processed>``, ``<data_root>``; lethe.core.paths.portable) replaced by the smoke tier's own folders."""

from __future__ import annotations

import json
from typing import Any


def on_this_machine(obj: Any, smoke: dict) -> Any:
    """``obj`` (a JSON value from a manifest of the ``smoke`` fixture's runs) with its folder tokens resolved."""
    text = json.dumps(obj)
    base = smoke["base"]
    for token, folder in (
        ("<cache_dir>", base / "cache"),
        ("<results_dir>", base / "results"),
        ("<processed>", base / "processed"),
    ):
        text = text.replace(token, str(folder))
    return json.loads(text)
