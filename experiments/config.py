"""Config helpers: compose configs outside Hydra's CLI and resolve project-relative paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = PROJECT_ROOT / "conf"


def load_config(overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``conf/config.yaml`` with Hydra overrides (for tools and tests, not the CLI)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def project_path(p: str | Path) -> Path:
    """Absolute path; a relative one is taken relative to the project root."""
    p = Path(p).expanduser()
    return p if p.is_absolute() else (PROJECT_ROOT / p).resolve()


def to_dict(cfg: DictConfig | dict) -> dict[str, Any]:
    """Resolved plain-dict copy of a config."""
    if isinstance(cfg, dict):
        return cfg
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def all_dataset_names() -> list[str]:
    """Dataset configs that build from upstream files or a generator (all but ``custom``)."""
    return sorted(p.stem for p in (CONF_DIR / "dataset").glob("*.yaml") if p.stem != "custom")
