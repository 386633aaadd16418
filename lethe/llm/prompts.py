"""Versioned prompt files: prompts are data, identified by name, version and sha256.

A prompt lives in ``lethe/llm/prompts/<name>.<version>.txt`` (``rewrite.v1.txt``...). File format:

- leading lines starting with ``#`` are comments (what the prompt is for, its placeholders and its
  output contract); they are not sent to the model;
- a line ``<<<system>>>`` starts the system message, a line ``<<<user>>>`` the user message; both
  are required, in this order, and each is stripped of surrounding blank lines;
- ``{name}`` (an identifier in braces) is a placeholder. Nothing else is special: JSON in the
  few-shot examples (``{"query": ...}``) is sent verbatim, no brace doubling.

``load_prompt(name, version)`` returns a ``Prompt``; ``Prompt.sha256`` is the sha256 of the file's
bytes (comments included), so a run manifest that records ``{name, version, sha256}`` pins the exact
text used. A prompt file is immutable once a run used it: a change is a new version file (``v2``)
and a config switch, never an edit (the tests pin the hashes of the shipped files).

``Prompt.render(**values)`` returns ``[Message("system", ...), Message("user", ...)]`` with every
placeholder filled in one pass (a value containing ``{x}`` is not expanded again). A missing or
an unknown value raises ``KeyError``, so a prompt and its caller cannot drift apart silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from lethe.core.hashing import sha256_bytes
from lethe.llm.base import Message

__all__ = ["PROMPT_DIR", "Prompt", "load_prompt", "available_prompts"]

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_VERSION = re.compile(r"^v[0-9]+$")
_SYSTEM, _USER = "<<<system>>>", "<<<user>>>"


@dataclass(frozen=True)
class Prompt:
    """One prompt file: ``text`` is the whole file, ``system``/``user`` its two message templates."""

    name: str
    version: str
    text: str
    sha256: str
    system: str
    user: str

    @property
    def placeholders(self) -> frozenset[str]:
        """Names of the ``{placeholders}`` in the system and user templates."""
        return frozenset(_PLACEHOLDER.findall(self.system)) | frozenset(_PLACEHOLDER.findall(self.user))

    def render(self, **values: Any) -> list[Message]:
        """System and user messages with every placeholder replaced by ``str(value)``."""
        need = self.placeholders
        missing, unknown = sorted(need - set(values)), sorted(set(values) - need)
        if missing or unknown:
            raise KeyError(f"prompt {self.id}: missing values {missing}, unknown values {unknown}")
        fill = {k: str(v) for k, v in values.items()}

        def sub(template: str) -> str:
            return _PLACEHOLDER.sub(lambda m: fill[m.group(1)], template)

        return [Message("system", sub(self.system)), Message("user", sub(self.user))]

    @property
    def id(self) -> str:
        """``name.version``."""
        return f"{self.name}.{self.version}"

    def describe(self) -> dict[str, str]:
        """Name, version and sha256, for a run manifest."""
        return {"name": self.name, "version": self.version, "sha256": self.sha256}


def _split(text: str, where: str) -> tuple[str, str]:
    lines = text.splitlines()
    marks = [ln.strip() for ln in lines if ln.strip() in (_SYSTEM, _USER)]
    if marks != [_SYSTEM, _USER]:
        raise ValueError(f"{where}: needs exactly one {_SYSTEM} line followed by one {_USER} line, found {marks}")
    i_sys = next(i for i, ln in enumerate(lines) if ln.strip() == _SYSTEM)
    i_usr = next(i for i, ln in enumerate(lines) if ln.strip() == _USER)
    head = [ln for ln in lines[:i_sys] if ln.strip()]
    if any(not ln.lstrip().startswith("#") for ln in head):
        raise ValueError(f"{where}: only '#' comment lines may precede {_SYSTEM}")
    system = "\n".join(lines[i_sys + 1 : i_usr]).strip("\n")
    user = "\n".join(lines[i_usr + 1 :]).strip("\n")
    if not system.strip() or not user.strip():
        raise ValueError(f"{where}: empty system or user message")
    return system, user


def available_prompts() -> list[tuple[str, str]]:
    """(name, version) of every prompt file shipped in ``PROMPT_DIR``."""
    out = []
    for p in sorted(PROMPT_DIR.glob("*.txt")):
        name, _, version = p.stem.rpartition(".")
        if _NAME.match(name) and _VERSION.match(version):
            out.append((name, version))
    return out


@cache
def load_prompt(name: str, version: str = "v1") -> Prompt:
    """The prompt ``<name>.<version>.txt`` from ``PROMPT_DIR``; unknown ones raise FileNotFoundError."""
    if not _NAME.match(name) or not _VERSION.match(version):
        raise ValueError(f"bad prompt name/version {name!r}/{version!r} (expected e.g. 'rewrite'/'v1')")
    path = PROMPT_DIR / f"{name}.{version}.txt"
    if not path.is_file():
        known = ", ".join(f"{n}.{v}" for n, v in available_prompts())
        raise FileNotFoundError(f"no prompt {name}.{version} in {PROMPT_DIR}; known: {known}")
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    system, user = _split(text, str(path))
    return Prompt(name, version, text, sha256_bytes(raw), system, user)
