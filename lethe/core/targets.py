"""Which ``_target_`` a config may name: the one gate before Hydra imports and calls anything.

Hydra instantiates any importable callable a config names, so ``+embedder.evil._target_=pandas.read_pickle`` ran a
pickle's payload and ``builtins.open`` emptied a file. Every instantiation of a config section here goes through
:func:`build`, and every command line through :func:`refuse_target_arguments` (Hydra instantiates its callbacks and
launchers at start-up, before any of the project's code runs): a target outside the project's own packages and the
named library classes it needs stops before import, with the key path and the target named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lethe.core.typed_config import ConfigError

TARGET_KEY = "_target_"
# the project's own packages
PROJECT_PACKAGES = (
    "lethe.",
    "baselines.",
    "experiments.",
    "analysis.",
    "lethebench.",
    "hydra_plugins.lethe_",
    "tests.support.",
)
# library classes a composed config names: Hydra's own launchers and sweepers, and the Slurm/local launchers of
# hydra-submitit-launcher (conf/hydra/launcher/)
LIBRARY_TARGETS = frozenset(
    {
        "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
        "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
    }
)


def allowed(target: Any) -> bool:
    """Whether ``target`` (a ``_target_`` value) may be instantiated."""
    return isinstance(target, str) and (target.startswith(PROJECT_PACKAGES) or target in LIBRARY_TARGETS)


def refused_targets(tree: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(key path, target) of every ``_target_`` in ``tree`` (nested mappings and sequences) that is not allowed."""
    found: list[tuple[str, str]] = []
    if isinstance(tree, Mapping):
        for k, v in tree.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if k == TARGET_KEY and not allowed(v):
                found.append((path, str(v)))
            else:
                found.extend(refused_targets(v, path))
    elif isinstance(tree, Sequence) and not isinstance(tree, (str, bytes)):
        for i, v in enumerate(tree):
            found.extend(refused_targets(v, f"{prefix}[{i}]"))
    return found


def check_targets(tree: Any, where: str = "the config") -> None:
    """ConfigError naming every refused ``_target_`` of ``tree`` (see :func:`refused_targets`)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(tree, (DictConfig, ListConfig)):
        tree = OmegaConf.to_container(tree, resolve=False)
    bad = refused_targets(tree)
    if bad:
        raise ConfigError(
            f"{'; '.join(f'{p}={t}' for p, t in bad)}: a _target_ outside the project's packages in {where}, refused "
            f"before import (allowed: {', '.join(p + '*' for p in PROJECT_PACKAGES)} and Hydra's launchers). "
            "A method of your own: a module inside the project, or the Python API's bring-your-own systems."
        )


def target_class(target: str) -> Any:
    """The class or function an allowed ``_target_`` names, imported (a ConfigError names one that is refused or
    cannot be imported)."""
    import importlib

    if not allowed(target):
        raise ConfigError(f"_target_: {target} is outside the project's packages, refused before import")
    module, _, name = str(target).rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"_target_: {target} cannot be imported ({type(exc).__name__}: {exc})") from exc


def build(section: Any, **kwargs: Any) -> Any:
    """``hydra.utils.instantiate(section, **kwargs)`` after :func:`check_targets` on the section and the keyword
    arguments: the only way the project instantiates a config section."""
    from hydra.utils import instantiate

    check_targets(section)
    check_targets(kwargs, "the arguments")
    return instantiate(section, **kwargs)


def refuse_target_arguments(argv: Sequence[str]) -> None:
    """Exit (status 1, naming the override) when a command-line override sets a ``_target_`` that is not allowed:
    checked before Hydra reads ``argv``, since Hydra instantiates its callbacks at start-up."""
    bad = []
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        if key.lstrip("+~").split(".")[-1] == TARGET_KEY and not allowed(value.strip().strip("'\"")):
            bad.append(arg)
    if bad:
        raise SystemExit(
            f"Error: {', '.join(repr(b) for b in bad)}: a _target_ outside the project's packages, refused before "
            f"Hydra imports it (allowed: {', '.join(p + '*' for p in PROJECT_PACKAGES)} and Hydra's launchers)"
        )
