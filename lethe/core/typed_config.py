"""Checks of config sections that Hydra will build (``_target_``), run before any compute.

Each section's keys are checked against the signature of its ``_target_``: an unknown key, a missing
required one, or a value of the wrong simple type (int, float, str, bool, optionally null) is refused
with an error naming the key, the value and what is allowed. Annotations that are not simple (a
Mapping, a model object) are left to the target itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_HYDRA_KEYS = {"_target_", "_convert_", "_partial_", "_recursive_", "_args_"}
_SIMPLE: dict[str, Callable[[Any], bool]] = {
    "bool": lambda v: isinstance(v, bool),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "None": lambda v: v is None,
}


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""


def _simple_types(annotation: Any) -> list[str] | None:
    """The simple type names an annotation allows, or None when it is not a union of simple types."""
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    text = text.replace(" ", "")
    if text.startswith("Optional[") and text.endswith("]"):
        text = text[len("Optional[") : -1] + "|None"
    names = text.split("|")
    return names if all(n in _SIMPLE for n in names) else None


def _import(target: str, key: str) -> Callable[..., Any]:
    from hydra.utils import get_object

    try:
        return get_object(target)
    except Exception as exc:  # noqa: BLE001 - Hydra's import error, re-raised with the key
        raise ConfigError(f"{key}._target_={target!r} cannot be imported: {exc}") from exc


def check_section(section: Mapping[str, Any], key: str, given: Iterable[str] = ()) -> None:
    """Check ``section`` (and every nested section with a ``_target_``); ``given`` names the arguments the
    caller passes itself (not in the config). Raises ConfigError naming ``<key>.<param>``."""
    target = section.get("_target_")
    if target is not None:
        obj = _import(str(target), key)
        params = inspect.signature(obj).parameters
        open_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        named = {
            n: p
            for n, p in params.items()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        }
        for k, v in section.items():
            if k in _HYDRA_KEYS:
                continue
            if k not in named:
                if not open_kw:
                    raise ConfigError(f"{key}.{k}: unknown parameter of {target}; known: {sorted(named)}")
                continue
            allowed = _simple_types(named[k].annotation)
            if allowed is not None and not any(_SIMPLE[t](v) for t in allowed):
                raise ConfigError(f"{key}.{k}={v!r}: must be {' or '.join(allowed)} ({target})")
        missing = [
            n
            for n, p in named.items()
            if p.default is inspect.Parameter.empty and n not in section and n not in set(given)
        ]
        if missing:
            raise ConfigError(f"{key}: missing required parameter(s) {missing} of {target}")
    for k, v in section.items():
        if isinstance(v, Mapping):
            check_section(v, f"{key}.{k}")


def plain_values(cfg: Any) -> Any:
    """Plain dicts/lists from a mapping or sequence that may hold OmegaConf nodes (interpolations resolved): what a
    class built by Hydra without recursion (``_recursive_: false``) or a config read as it stands gets."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(cfg, (DictConfig, ListConfig)):
        return OmegaConf.to_container(cfg, resolve=True)
    if isinstance(cfg, Mapping):
        return {k: plain_values(v) for k, v in cfg.items()}
    if isinstance(cfg, (list, tuple)):
        return [plain_values(v) for v in cfg]
    return cfg
