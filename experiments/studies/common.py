"""What every LLM study (the modules of ``experiments.studies``) writes
beside its tables, so its folder describes itself: ``manifest.json`` with the resolved config, the
command line, git commit and dirty flag, package versions, hardware, start and end time; and how a study
builds its LLM."""

from __future__ import annotations

import datetime as dt
from typing import Any

from omegaconf import DictConfig, OmegaConf

from lethebench.provenance import PACKAGES, git_info, hardware, package_versions

STUDY_PACKAGES = (*PACKAGES, "llama-cpp-python")  # the LLM backend's build can change a token


def command_line(module: str) -> str | None:
    """``python -m <module> <overrides>`` of the running Hydra entry point (None outside one): the
    overrides of its top config; ``hydra.*`` ones (where Hydra keeps its logs) change no result and are left out."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    return " ".join(["python", "-m", module, *HydraConfig.get().overrides.task])


def manifest(cfg: DictConfig, command: str | None, started: dt.datetime, **extra: Any) -> dict[str, Any]:
    """A study's ``manifest.json`` (for lethebench.studies.StudyFolder.write), ended now; ``extra`` adds
    study-specific entries (e.g. the dataset's build key)."""
    ended = dt.datetime.now(dt.UTC)
    return {
        "config": OmegaConf.to_container(cfg, resolve=True),
        "command": command,
        "git": git_info(),
        "packages": package_versions(STUDY_PACKAGES),
        "hardware": hardware(),
        "started": started.isoformat(),
        "ended": ended.isoformat(),
        "seconds": round((ended - started).total_seconds(), 1),
        **extra,
    }


def study_llm(name: str, cfg: DictConfig) -> Any:
    """The backend of ``conf/llm/<name>.yaml`` as a study runs it: ``cfg.n_threads`` llama.cpp threads, the response
    cache only with ``cfg.llm_cache``, GGUF files and cache under ``cfg.cache_dir``."""
    from lethe.core.paths import CONF_DIR, Paths
    from lethe.llm.backends import make_llm

    llm_cfg = OmegaConf.load(CONF_DIR / "llm" / f"{name}.yaml")
    llm_cfg.n_threads = int(cfg.n_threads)
    if not cfg.llm_cache:
        llm_cfg.cache = False
    return make_llm(llm_cfg, cache_dir=Paths.of(cfg).cache)
