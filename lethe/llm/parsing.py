"""Strict parsers for model output: validate, never repair, and say why an output was rejected.

Every parser raises ``ParseError(reason)`` with a short machine-readable ``reason`` (counted per
reason in the callers' ``describe()``); callers then fall back and flag the query.

JSON extraction (``extract_json``). The model's text is scanned left to right for top-level
bracketed regions: from an opening ``{`` or ``[`` to its matching closing bracket, with string
literals (double quotes, backslash escapes) respected. The first region that is valid JSON
(``json.loads``, nothing relaxed: no single quotes, no trailing commas, no comments) is the
answer. So surrounding prose and Markdown code fences are tolerated ("Sure! ```json {...} ```"),
and so is a bracketed aside before the JSON ("[note] {...}"), but nothing else: a truncated or
malformed value is ``malformed_json`` and text without any bracket is ``no_json``. If the first
valid value has the wrong type (an object where a list is expected) the output is rejected
(``wrong_type``), it is not searched further.

Parsers and their checks:

- ``parse_rewrite(text, original, history)``: ``{"query": str}``; whitespace is collapsed;
  rejected when empty (``empty``), longer than ``3 * (len(original) + len(context))`` characters
  where context is the history turns shown to the model joined by newlines (``too_long``), or equal
  (case- and whitespace-insensitively, trailing ``?.!`` ignored) to a history turn that is not the
  original query itself (``copies_history``: the model echoed a turn instead of rewriting).
- ``parse_subqueries(text, max_n)``: a JSON array of 1..``max_n`` non-empty strings, each at most
  ``max_chars`` long; duplicates (same normalization) are dropped, order kept.
- ``parse_keywords(text)``: ``{"high_level_keywords": [str], "low_level_keywords": [str]}``; both
  keys required, items stripped, empty strings dropped, duplicates dropped, at most ``max_per_list``
  each (``too_many``), not both empty (``empty``).
  ``keywords_schema(max_per_list)`` is the same contract as a JSON Schema (both lists required, at
  most ``max_per_list`` strings each), for decoding under it (``Decoding.json_schema``); the parser
  still checks every output, constrained or not.
- ``parse_exact_terms(text, query)``: ``{"exact_match_terms": [str], "use_keyword_boost": bool}``;
  a term is kept only if it literally occurs in the query (case-insensitive substring); the others
  are *hallucinated*: dropped and returned in ``ExactTerms.dropped`` so callers count them. The
  effective ``use_boost`` is the model's flag and at least one kept term.
- ``parse_passage(text)``: a plain-text passage (HyDE); a whole-output code fence is removed,
  whitespace collapsed; rejected when empty or when it is bare JSON (``json_not_text``); cut at
  ``max_chars`` characters (the embedder truncates long input anyway).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lethe.text.collapse import collapse, comparison_key

__all__ = [
    "ParseError",
    "Keywords",
    "ExactTerms",
    "extract_json",
    "parse_rewrite",
    "parse_subqueries",
    "parse_keywords",
    "keywords_schema",
    "parse_exact_terms",
    "parse_passage",
    "parse_question",
    "normalize",
]

_OPEN = {"{": "}", "[": "]"}
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.S)


class ParseError(ValueError):
    """Model output rejected; ``reason`` is a short code (``no_json``, ``empty``, ``too_long``...)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Keywords:
    """LightRAG-style keywords: high-level (themes) and low-level (entities, details)."""

    high: tuple[str, ...]
    low: tuple[str, ...]

    def as_record(self) -> dict[str, list[str]]:
        return {"high": list(self.high), "low": list(self.low)}


@dataclass(frozen=True)
class ExactTerms:
    """Exact-match terms found in the query (``terms``), the ones the model made up (``dropped``),
    the model's own flag (``model_flag``) and the effective decision (``use_boost``)."""

    terms: tuple[str, ...]
    dropped: tuple[str, ...]
    model_flag: bool
    use_boost: bool
    importance: str | None = None  # "none" | "low" | "medium" | "high" when the reply gives keyword_importance


IMPORTANCE_LEVELS = ("none", "low", "medium", "high")


def normalize(text: str) -> str:
    """Comparison key: whitespace collapsed, casefolded, trailing ``?.!`` and spaces removed."""
    return comparison_key(text)


def _region_end(text: str, start: int) -> int | None:
    """Index just past the bracket matching ``text[start]``; None if unbalanced or mismatched."""
    stack = [_OPEN[text[start]]]
    i, in_str = start + 1, False
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in _OPEN:
            stack.append(_OPEN[c])
        elif c in "]}":
            if c != stack.pop():
                return None
            if not stack:
                return i + 1
        i += 1
    return None


def extract_json(text: str, expect: type | tuple[type, ...] = (dict, list)) -> Any:
    """The first top-level JSON object/array in ``text`` (see the module docstring)."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty", "no output")
    i, seen = 0, False
    while i < len(text):
        c = text[i]
        if c not in _OPEN:
            i += 1
            continue
        seen = True
        end = _region_end(text, i)
        if end is None:
            raise ParseError("malformed_json", f"unbalanced or truncated at char {i}")
        try:
            value = json.loads(text[i:end])
        except json.JSONDecodeError:
            i = end
            continue
        if not isinstance(value, expect):
            raise ParseError("wrong_type", f"expected {_names(expect)}, got {type(value).__name__}")
        return value
    raise ParseError("malformed_json" if seen else "no_json", "no valid JSON object or array")


def _names(expect: type | tuple[type, ...]) -> str:
    types = expect if isinstance(expect, tuple) else (expect,)
    return "/".join({dict: "object", list: "array"}.get(t, t.__name__) for t in types)


def _clean(s: str) -> str:
    return collapse(s)


def _string_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ParseError("wrong_type", f"{what} must be a list of strings")
    out: list[str] = []
    seen: set[str] = set()
    for x in value:
        x = _clean(x)
        if x and normalize(x) not in seen:
            seen.add(normalize(x))
            out.append(x)
    return out


def parse_rewrite(text: str, original: str, history: Sequence[str]) -> str:
    """The standalone query from ``{"query": ...}``; checks in the module docstring."""
    obj = extract_json(text, dict)
    q = obj.get("query")
    if not isinstance(q, str):
        raise ParseError("missing_key" if q is None else "wrong_type", "'query' must be a string")
    q = _clean(q)
    if not q:
        raise ParseError("empty", "empty rewrite")
    context = "\n".join(h for h in history if h)
    if len(q) > 3 * (len(original) + len(context)):
        raise ParseError("too_long", f"{len(q)} chars for a {len(original)}-char query and {len(context)} of context")
    key = normalize(q)
    if key != normalize(original) and any(key == normalize(h) for h in history if h):
        raise ParseError("copies_history", "the rewrite repeats a history turn")
    return q


def parse_subqueries(text: str, max_n: int, max_chars: int = 500) -> list[str]:
    """1..``max_n`` distinct non-empty sub-queries from a JSON array of strings."""
    parts = _string_list(extract_json(text, list), "sub-queries")
    if not parts:
        raise ParseError("empty", "no sub-query")
    if len(parts) > max_n:
        raise ParseError("too_many", f"{len(parts)} sub-queries, at most {max_n}")
    if any(len(p) > max_chars for p in parts):
        raise ParseError("too_long", f"a sub-query is longer than {max_chars} chars")
    return parts


def parse_keywords(text: str, max_per_list: int = 10) -> Keywords:
    """High- and low-level keywords from a LightRAG-style JSON object."""
    obj = extract_json(text, dict)
    lists = {}
    for key in ("high_level_keywords", "low_level_keywords"):
        if key not in obj:
            raise ParseError("missing_key", f"no {key!r}")
        lists[key] = _string_list(obj[key], key)
        if len(lists[key]) > max_per_list:
            raise ParseError("too_many", f"{len(lists[key])} {key}, at most {max_per_list}")
    high, low = lists["high_level_keywords"], lists["low_level_keywords"]
    if not high and not low:
        raise ParseError("empty", "no keyword")
    return Keywords(tuple(high), tuple(low))


def keywords_schema(max_per_list: int = 10) -> str:
    """``parse_keywords``' contract as a JSON Schema, JSON text with sorted keys (a cache-key part)."""
    lst = {"type": "array", "items": {"type": "string"}, "maxItems": int(max_per_list)}
    schema = {
        "type": "object",
        "properties": {"high_level_keywords": lst, "low_level_keywords": lst},
        "required": ["high_level_keywords", "low_level_keywords"],
    }
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def parse_exact_terms(text: str, query: str, max_terms: int = 10) -> ExactTerms:
    """Exact-match terms that occur in ``query``; made-up terms are dropped and reported. An optional
    ``keyword_importance`` (exact_terms.v2) must be one of IMPORTANCE_LEVELS; "none" means no boost."""
    obj = extract_json(text, dict)
    if "exact_match_terms" not in obj or "use_keyword_boost" not in obj:
        raise ParseError("missing_key", "needs 'exact_match_terms' and 'use_keyword_boost'")
    flag = obj["use_keyword_boost"]
    if not isinstance(flag, bool):
        raise ParseError("wrong_type", "'use_keyword_boost' must be true or false")
    terms = _string_list(obj["exact_match_terms"], "exact_match_terms")
    if len(terms) > max_terms:
        raise ParseError("too_many", f"{len(terms)} terms, at most {max_terms}")
    importance = obj.get("keyword_importance")
    if importance is not None:
        if not isinstance(importance, str) or importance.strip().lower() not in IMPORTANCE_LEVELS:
            raise ParseError(
                "wrong_type", f"'keyword_importance' must be one of {IMPORTANCE_LEVELS}, got {importance!r}"
            )
        importance = importance.strip().lower()
    q = query.casefold()
    kept = tuple(t for t in terms if t.casefold() in q)
    dropped = tuple(t for t in terms if t.casefold() not in q)
    return ExactTerms(kept, dropped, flag, flag and bool(kept) and importance != "none", importance)


def parse_passage(text: str, max_chars: int = 2000) -> str:
    """A plain-text passage (HyDE's hypothetical answer)."""
    if not isinstance(text, str):
        raise ParseError("wrong_type", "not text")
    m = _FENCE.match(text)
    passage = _clean(m.group(1) if m else text)
    if not passage:
        raise ParseError("empty", "empty passage")
    if passage[0] in _OPEN:
        try:
            json.loads(passage)
        except json.JSONDecodeError:
            pass
        else:
            raise ParseError("json_not_text", "expected a plain-text passage")
    return passage[:max_chars]


_QUESTION_PREFIX = re.compile(r"^(?:question|q)\s*[:.)-]\s*", re.I)


def parse_question(text: str, min_words: int = 3, max_chars: int = 300) -> str:
    """One search question (the label-free regime's generated query): the first non-empty line, without a
    ``Question:`` prefix or surrounding quotes, with at least ``min_words`` words."""
    if not isinstance(text, str):
        raise ParseError("wrong_type", "not text")
    m = _FENCE.match(text)
    lines = [ln for ln in (m.group(1) if m else text).splitlines() if ln.strip()]
    if not lines:
        raise ParseError("empty", "no question")
    q = _QUESTION_PREFIX.sub("", _clean(lines[0])).strip().strip("\"'“”`").strip()
    if len(q.split()) < min_words:
        raise ParseError("too_short", f"{len(q.split())} words: {q[:80]!r}")
    if len(q) > max_chars:
        raise ParseError("too_long", f"{len(q)} characters")
    return q
