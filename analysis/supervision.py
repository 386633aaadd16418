"""What each compared method learned from (``lethebench.supervision``), read from its runs: the supervision column of
Tables 1 and 2 and of the overview, and the eligibility rule of the supervision-matched best baseline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.views import DatasetView
from lethe.core.typed_config import ConfigError
from lethebench import supervision as S

NOT_DECLARED = "not declared"


def of(v: DatasetView, m: str) -> tuple[str, ...] | None:
    """The supervision of ``m``'s run on ``v`` (None: not declared, or no finished run)."""
    run = v.runs.get(m)
    if run is None:
        return None
    return S.of_run(((run.manifest.get("config") or {}).get("method")) or {"name": m})


def text(kinds: tuple[str, ...] | None) -> str:
    """The supervision column's text for ``kinds`` (None: not declared)."""
    return NOT_DECLARED if kinds is None else S.label(kinds)


def cell(v: DatasetView, m: str) -> str:
    """The supervision column's text for ``m`` on ``v``."""
    return text(of(v, m))


def eligible(v: DatasetView, baseline: str, method: str | None) -> bool:
    """Whether ``baseline`` saw the same or more labels than ``method`` on ``v`` (every baseline when ``method`` is
    None or either supervision is not declared)."""
    if method is None:
        return True
    b, m = of(v, baseline), of(v, method)
    return b is None or m is None or S.at_least(b, m)


def by_method(views: Mapping[str, DatasetView], methods: list[str]) -> dict[str, str]:
    """method -> its supervision text, from the first dataset with a finished run of it (one declaration per
    method; the cross-encoder's regime is part of its label, e.g. ``cross_encoder+transfer``), else its declaration."""
    out: dict[str, Any] = {}
    for m in methods:
        ran = [ds for ds in sorted(views) if m in views[ds].runs]
        out[m] = cell(views[ran[0]], m) if ran else declared_cell(m)
    return out


def declared_cell(label: str) -> str:
    """The supervision text of a method label with no finished run, from its method's declaration (a regime-dependent
    one cannot be read without the run's config: not declared)."""
    try:
        return text(S.of_run({"name": label.split("+")[0]}))
    except ConfigError:
        return NOT_DECLARED
