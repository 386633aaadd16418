"""Checks every loader applies to its input records: JSON objects without repeated keys, and fields of the right
type. Errors name the file and record (``where``), the field and what was found."""

from __future__ import annotations

import json
from typing import Any

from lethebench.schema import DatasetError


class _BadObject(ValueError):
    pass


def _strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _BadObject(f"key '{key}' appears twice in one JSON object; a JSON reader keeps only the last value, "
                             "so the file is ambiguous: remove one")
        for text in (key, value):
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise _BadObject(f"key '{key}' holds {text[exc.start]!r} at character {exc.start} (in "
                                     f"{text[max(0, exc.start - 30):exc.start]!r}...), which UTF-8 cannot encode: a "
                                     "lone surrogate written as an escape; fix or remove it") from None
        seen[key] = value
    return seen


def strict_loads(text: str, where: str) -> Any:
    """``json.loads`` that refuses, with a :class:`DatasetError` naming ``where`` and the key, an object with a
    repeated key (JSON readers keep the last one silently) or a string UTF-8 cannot encode (a lone surrogate such
    as ``\\ud800``, which breaks every later step); a syntax error is raised as ``json.JSONDecodeError``."""
    try:
        return json.loads(text, object_pairs_hook=_strict_object)
    except _BadObject as exc:
        raise DatasetError(f"{where}: {exc}") from None


def type_error(where: str, key: str, expected: str, value: Any) -> DatasetError:
    """The error for field ``key`` of the record at ``where`` holding ``value`` instead of ``expected``."""
    return DatasetError(f"{where}: key '{key}': expected {expected}, got {type(value).__name__} {value!r:.60}")


def checked(value: Any, where: str, key: str, types: type | tuple[type, ...], expected: str) -> Any:
    """``value`` when it is an instance of ``types`` (a bool is never taken for a number), else :func:`type_error`."""
    allowed = types if isinstance(types, tuple) else (types,)
    if isinstance(value, allowed) and (bool in allowed or not isinstance(value, bool)):
        return value
    raise type_error(where, key, expected, value)
