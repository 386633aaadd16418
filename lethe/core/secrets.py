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
from urllib.parse import urlsplit

from lethe.core.typed_config import ConfigError

# A key whose last word names a credential: api_key, apikey, password, passwd, secret, token, access_token,
# credentials, authorization... (api_key_env, max_tokens and tokenizer are not: they hold a name or a number).
SECRET_KEY = re.compile(
    r"(^|[_.-])(api[_-]?key|apikey|pass(word|wd)?|secret|token|credentials?|authorization|"
    r"bearer|auth)$",
    re.IGNORECASE,
)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# A command-line override kept as a string (reproduce's ``overrides``, a tier's, Hydra's ``overrides.task``).
_OVERRIDE = re.compile(r"^[+~]{0,2}(?P<key>[A-Za-z_][\w.@/-]*)=(?P<value>.*)$", re.DOTALL)


def url_has_userinfo(value: str) -> bool:
    """True when ``value`` is a URL with a user name or password before its host (``http://user:pw@host``)."""
    if not _URL.match(value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return "@" in parts.netloc


def _override_sets_secret(text: str) -> bool:
    """True when ``text`` is an override (``key=value``) that sets a credential key or a URL with userinfo."""
    override = _OVERRIDE.match(text)
    if not override:
        return False
    value = override["value"].strip().strip("'\"")
    return bool(SECRET_KEY.search(override["key"]) and value not in ("", "null")) or url_has_userinfo(value)


def secret_keys(tree: Any, prefix: str = "") -> list[str]:
    """The dotted paths in ``tree`` (nested mappings and sequences) that hold a credential: a key named like one
    (:data:`SECRET_KEY`) with a value set, a string that is a URL with userinfo, or a string that is an override
    (``key=value``) setting such a key or such a URL. Values are never returned."""
    found: list[str] = []
    if isinstance(tree, Mapping):
        for k, v in tree.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if SECRET_KEY.search(str(k)) and v not in (None, "", [], {}):
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
