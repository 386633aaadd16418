"""The project's root and config folder, and how a relative path is read (relative to the root)."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = PROJECT_ROOT / "conf"


def project_path(p: str | Path) -> Path:
    """Absolute path; a relative one is taken relative to the project root."""
    p = Path(p).expanduser()
    return p if p.is_absolute() else (PROJECT_ROOT / p).resolve()
