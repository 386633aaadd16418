"""Content-addressed cache of language-model responses that survives crashes.

Layout: ``<root>/llm_responses/<key[:2]>/<key>.json``, one JSON file per response, written to a
temporary sibling and renamed (a reader sees a whole entry or none). The key
(:func:`response_key`) is the sha256 of a canonical JSON of everything that determines the output:
the model file's sha256, the messages (role, content), the decoding parameters
(:meth:`Decoding.as_dict`: max_tokens, temperature, top_p, seed, stop), the backend kind, and any
backend settings that change the output (``extra``, e.g. a non-default chat format). Timeouts are
not part of the key: a timed-out call is never stored. An entry also records the request it
answers (for audits) and the response's original timings; a hit is returned with ``cached=True``.
An unreadable entry counts as a miss (and is overwritten by the next ``put``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lethe.core.atomic import atomic_write_text
from lethe.core.hashing import canonical_json, sha256_text
from lethe.llm.base import Decoding, LLMResponse, Message

FORMAT_VERSION = 1


def messages_as_dicts(messages: Sequence[Message | Mapping[str, Any]]) -> list[dict[str, str]]:
    """Messages as plain ``{"role", "content"}`` dicts (accepts :class:`Message` or mappings)."""
    out = []
    for m in messages:
        if isinstance(m, Message):
            out.append({"role": m.role, "content": m.content})
        else:
            out.append({"role": str(m["role"]), "content": str(m["content"])})
    return out


def response_key(
    model_sha256: str,
    messages: Sequence[Message | Mapping[str, Any]],
    decoding: Decoding | Mapping[str, Any],
    backend_kind: str,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """sha256 hex identifying one request (see module docstring)."""
    dec = decoding.as_dict() if isinstance(decoding, Decoding) else dict(decoding)
    payload = {
        "v": FORMAT_VERSION,
        "model_sha256": model_sha256,
        "messages": messages_as_dicts(messages),
        "decoding": dec,
        "backend_kind": backend_kind,
    }
    if extra:
        payload["extra"] = dict(extra)
    return sha256_text(canonical_json(payload, compact=True))


class ResponseCache:
    """Responses by key; ``hits``/``misses``/``puts`` count this process's lookups and writes."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.dir = self.root / "llm_responses"
        self.hits = 0
        self.misses = 0
        self.puts = 0

    key = staticmethod(response_key)

    def path(self, key: str) -> Path:
        """File of an entry."""
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMResponse | None:
        """The cached response (``cached=True``) or None; counts a hit or a miss."""
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
            resp = LLMResponse(**entry["response"])
        except (OSError, ValueError, KeyError, TypeError):
            self.misses += 1
            return None
        resp.cached = True
        self.hits += 1
        return resp

    def put(self, key: str, resp: LLMResponse, request: Mapping[str, Any] | None = None) -> None:
        """Store ``resp`` under ``key`` atomically (``request``: what was asked, kept for audits)."""
        body = asdict(resp)
        body["cached"] = False
        entry = {"v": FORMAT_VERSION, "key": key, "response": body}
        if request is not None:
            entry["request"] = dict(request)
        atomic_write_text(self.path(key), json.dumps(entry, ensure_ascii=False, indent=1) + "\n")
        self.puts += 1

    def stats(self) -> dict[str, Any]:
        """Counters and location, for a run manifest."""
        total = self.hits + self.misses
        return {
            "dir": str(self.dir),
            "hits": self.hits,
            "misses": self.misses,
            "puts": self.puts,
            "hit_rate": (self.hits / total) if total else None,
        }
