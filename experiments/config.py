"""Config helpers: compose configs outside Hydra's CLI and resolve project-relative paths."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lethe.core.paths import CONF_DIR


def load_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` (the run config by default) with Hydra overrides (for tools
    and tests, not the CLI).

    Inside a ``@hydra.main`` entry point of this project (already initialized on ``conf/``), Hydra's
    compose API is used as it is, so the entry point's own Hydra state is left intact. A process composes each
    (overrides, ``conf/`` contents) once and hands out copies: a report resolves every declared run twice, and
    interpolations (``${oc.env:...}``) stay unresolved, so a copy reads the environment as a fresh compose would.
    Overrides of ``hydra.*`` (a search path elsewhere) are composed afresh every time.
    """
    overrides = tuple(overrides)
    if any(o.lstrip("+~").startswith("hydra.") for o in overrides):
        return _compose(config_name, overrides)
    return copy.deepcopy(_composed(config_name, overrides, _conf_signature()))


def _conf_signature() -> tuple[tuple[str, int, int], ...]:
    """Every file under ``conf/`` with its size and modification time: a changed file composes afresh."""
    out = []
    for root, _, files in os.walk(CONF_DIR):
        for name in files:
            st = os.stat(os.path.join(root, name))
            out.append((os.path.join(root, name), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


@functools.lru_cache(maxsize=1024)
def _composed(config_name: str, overrides: tuple[str, ...], signature: tuple) -> DictConfig:
    return _compose(config_name, overrides)


def _compose(config_name: str, overrides: tuple[str, ...]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    gh = GlobalHydra.instance()
    if gh.is_initialized() and any(
        s.scheme() == "file" and Path(s.path.removeprefix("file://")).resolve() == CONF_DIR
        for s in gh.config_loader().get_sources()
    ):
        return compose(config_name=config_name, overrides=list(overrides))
    gh.clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides))


def to_dict(cfg: DictConfig | dict) -> dict[str, Any]:
    """Resolved plain-dict copy of a config."""
    if isinstance(cfg, dict):
        return cfg
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
