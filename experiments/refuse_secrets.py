"""A Hydra callback that refuses a credential in the composed config before Hydra writes any record of it.

Registered as ``hydra.callbacks.secrets`` in every top config of ``conf/`` (a test checks). ``on_run_start`` and
``on_multirun_start`` run after composition and before Hydra saves ``.hydra/{config,hydra,overrides}.yaml`` or
starts a job, so a refused value is in no file and in no console line (the message names keys only). The check
itself is :func:`lethe.core.secrets.refuse_secrets`; the runner applies it again to every run config, so runs made
through the Python API are held to it too.
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig

from lethe.core.secrets import refuse_secrets
from lethe.core.typed_config import ConfigError


def leniently_resolved(node: Any) -> Any:
    """``node`` as plain dicts and lists with interpolations resolved (``${oc.env:...}`` included); a value that
    cannot be resolved yet is left out (it is checked again where the run resolves it)."""
    if isinstance(node, DictConfig):
        out = {}
        for k in node:
            try:
                out[k] = leniently_resolved(node[k])
            except Exception:  # noqa: BLE001 - an interpolation that only resolves inside a job
                continue
        return out
    if isinstance(node, ListConfig):
        out_list = []
        for i in range(len(node)):
            try:
                out_list.append(leniently_resolved(node[i]))
            except Exception:  # noqa: BLE001
                continue
        return out_list
    return node


def stop_on_secrets(config: DictConfig) -> None:
    """Exit the process (status 1, the message on stderr) when ``config`` holds a credential.

    ``SystemExit``, not an exception: Hydra turns an exception raised by a callback into a warning and goes on."""
    try:
        refuse_secrets(leniently_resolved(config), "the composed config")
    except ConfigError as exc:
        raise SystemExit(f"Error: {exc}") from None


class RefuseSecretsCallback(Callback):
    """Stops a run or sweep whose composed config (Hydra's own part included) holds a credential."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        stop_on_secrets(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        stop_on_secrets(config)
