"""Typed config sections: a dataclass built from a config mapping, unknown keys refused by name."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping


def build_section(cls: type, values: Mapping[str, Any] | None, section: str) -> Any:
    """``cls(**values)``; a key ``cls`` does not declare raises ValueError naming ``method.<section>``."""
    values = dict(values or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in method.{section}; known: {sorted(known)}")
    return cls(**values)
