"""No credential in a config: keys that name one and URLs that carry one are refused, never stored or hashed.

A config is written into manifests, hashed into config hashes, kept in Hydra's records and in the LLM response
cache, so a credential never belongs in one: an API key goes in the environment variable that ``llm.api_key_env``
names (read at call time, never stored), and a server that wants a user and password is reached through a URL
without them (a proxy, or the key variable). The messages here name the key, never the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from lethe.core.typed_config import ConfigError

# A key names a credential when one of its words (split at _ . - and camelCase) is one of these: api_key, hf_key,
# access_token, password, client_secret, credentials, authorization, auth_header, bearer... A key ending in ``_env``
# holds the name of a variable, not its value (``api_key_env``); ``max_tokens``, ``keywords`` and ``row_key`` lists are
# not credentials (a plural word, another word, or a value that is not a string).
SECRET_WORDS = frozenset(
    "key apikey token secret password passwd pwd pass credential credentials auth authorization bearer cookie".split()
)
_WORD_SPLIT = re.compile(r"[_.\-\s]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def is_secret_key(name: str) -> bool:
    """Whether a key (a config key, a URL query parameter, a ``describe()`` key) names a credential."""
    words = [w for w in _WORD_SPLIT.split(_CAMEL.sub(r"\1_\2", str(name)).lower()) if w]
    if not words or words[-1] == "env" or words == ["key"]:  # a bare `key` is an identifier (a run's, a pool's)
        return False
    return any(w in SECRET_WORDS for w in words)


def _secret_value(value: Any) -> bool:
    """A value a credential key may hold: a non-empty string (or a number, for a password or PIN)."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return value.strip() not in ("", "null", "None")
    return isinstance(value, (int, float))


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# A command-line override kept as a string (reproduce's ``overrides``, a tier's, Hydra's ``overrides.task``).
_OVERRIDE = re.compile(r"^[+~]{0,2}(?P<key>[A-Za-z_][\w.@/-]*)=(?P<value>.*)$", re.DOTALL)


def url_has_userinfo(value: str) -> bool:
    """True when ``value`` is a URL carrying a credential: a user name or password before its host
    (``http://user:pw@host``) or a query parameter named like one (``?access_token=...``, ``&api_key=...``)."""
    if not _URL.match(value):
        return False
    try:
        parts = urlsplit(value)
        params = parse_qsl(parts.query, keep_blank_values=False)
    except ValueError:
        return False
    return "@" in parts.netloc or any(is_secret_key(k) for k, _ in params)


def _override_sets_secret(text: str) -> bool:
    """True when ``text`` is an override (``key=value``) that sets a credential key or a URL with userinfo."""
    override = _OVERRIDE.match(text)
    if not override:
        return False
    value = override["value"].strip().strip("'\"")
    return bool(is_secret_key(override["key"].rsplit(".", 1)[-1]) and _secret_value(value)) or url_has_userinfo(value)


def secret_keys(tree: Any, prefix: str = "") -> list[str]:
    """The dotted paths in ``tree`` (nested mappings and sequences) that hold a credential: a key named like one
    (:func:`is_secret_key`) holding a string or number, a string that is a URL with userinfo, or a string that is an override
    (``key=value``) setting such a key or such a URL. Values are never returned."""
    found: list[str] = []
    if isinstance(tree, Mapping):
        for k, v in tree.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if is_secret_key(str(k)) and _secret_value(v):
                found.append(path)
            else:
                found.extend(secret_keys(v, path))
    elif isinstance(tree, Sequence) and not isinstance(tree, (str, bytes)):
        for i, v in enumerate(tree):
            found.extend(secret_keys(v, f"{prefix}[{i}]"))
    elif isinstance(tree, str) and (url_has_userinfo(tree) or _override_sets_secret(tree)):
        found.append(prefix)
    return found


def refuse_secrets(tree: Any, where: str = "the config") -> None:
    """Raise :class:`ConfigError` naming every key of ``tree`` that holds a credential (see :func:`secret_keys`),
    the run's own keys before Hydra's."""
    found = sorted(secret_keys(tree), key=lambda path: path.startswith("hydra."))
    if found:
        raise ConfigError(
            f"{', '.join(found)}: a credential in {where} (it would be written to manifests, Hydra's records, config "
            "hashes and the LLM cache). Put an API key in the environment variable named by llm.api_key_env, and "
            "give URLs without user or password."
        )


def refuse_secret_arguments(argv: Sequence[str]) -> None:
    """Exit (status 1, a message on stderr naming the keys) when a command-line argument sets a credential key or a
    URL with userinfo. Entry points call it before Hydra parses ``argv``: Hydra's own errors quote the override."""
    keys = [
        a.split("=", 1)[0].lstrip("+~") if _OVERRIDE.match(a) else f"argument {i + 1}"
        for i, a in enumerate(argv)
        if url_has_userinfo(a) or _override_sets_secret(a)
    ]
    if keys:
        raise SystemExit(
            f"Error: {', '.join(keys)}: a credential on the command line (Hydra would write it to its "
            "records and the run to its manifest). Put an API key in the environment variable named by "
            "llm.api_key_env, and give URLs without user or password."
        )


REDACTED = "<redacted>"


def redact(tree: Any) -> Any:
    """``tree`` (nested mappings and sequences) with every credential replaced by ``<redacted>``: the value of a key
    named like one (:func:`is_secret_key`), and in a URL its user and password and the values of query parameters
    named like one. For what a config never holds but an outside object may report (a bring-your-own ``describe()``)."""
    if isinstance(tree, Mapping):
        return {k: REDACTED if is_secret_key(str(k)) and _secret_value(v) else redact(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(redact(v) for v in tree)
    if isinstance(tree, str) and url_has_userinfo(tree):
        parts = urlsplit(tree)
        host = parts.netloc.rpartition("@")[2]
        netloc = f"{REDACTED}@{host}" if "@" in parts.netloc else host
        query = "&".join(
            f"{k}={REDACTED if is_secret_key(k) else v}" for k, v in parse_qsl(parts.query, keep_blank_values=True)
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return tree
