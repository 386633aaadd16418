"""Command-line overrides read by Hydra's own parser (the one parser of the project): which config key each sets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def override_key(override: Any) -> str:
    """The key one parsed override (Hydra's ``Override``) sets, as :func:`override_keys` spells it."""
    return override.key_or_group if override.package is None else f"{override.key_or_group}@{override.package}"


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The key each override sets, in order, without its ``+``/``++``/``~`` prefix: ``+a.b=1`` and ``~a.b`` give
    ``a.b``; a config group chosen into another package keeps it (``llm@method.stages.llm_rerank.llm=smollm2`` gives
    ``llm@method.stages.llm_rerank.llm``). Raises Hydra's ``OverrideParseException`` on one it cannot parse (entry points
    check their command line first: ``lethe.core.arguments``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return [override_key(o) for o in OverridesParser.create().parse_overrides(list(overrides))]
