"""One LLM backend per distinct LLM config, shared by every stage of a run that names the same config."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from lethe.core.hashing import canonical_json
from lethe.core.typed_config import ConfigError


class LLMPool:
    """Backends built on first use with ``lethe.llm.backends.make_llm`` and kept per config (canonical JSON)."""

    def __init__(self, cache_dir: str | os.PathLike | None) -> None:
        self.cache_dir = cache_dir
        self._llms: dict[str, Any] = {}

    def get(self, cfg: Mapping[str, Any] | None, where: str) -> Any:
        """The backend of ``cfg`` (a conf/llm/*.yaml mapping); ``where`` names its config key in the error raised
        when it is missing."""
        from lethe.llm.backends import make_llm  # at call time: tests stand in for the backends module

        if not cfg:
            raise ConfigError(f"{where} is required (an LLM config, conf/llm/*.yaml, e.g. ${{llm}})")
        key = canonical_json(dict(cfg))
        if key not in self._llms:
            self._llms[key] = make_llm(dict(cfg), self.cache_dir)
        return self._llms[key]

    def backends(self) -> list[Any]:
        """Every backend built so far, in build order."""
        return list(self._llms.values())

    def close(self) -> None:
        for llm in self._llms.values():
            llm.close()
