"""Rule-based contradiction detector (Lethe iteration 4, detector ``rules``): facts, conflicts, demotion.

Nothing here reads dataset labels. A *fact* is ``(entity, attribute, value)`` stated by one doc;
two facts about the same ``(entity, attribute, env)`` with different values conflict, and the doc
at the higher ``position`` is the current one.

Extraction (:func:`extract_facts`) is conservative: precision over recall. A fact is kept only
when an explicit pattern names the entity, the attribute (or the value's shape implies it, see
below) and a value that passes the attribute's validator.

**Normalization.**

- Entity: lowercased, stripped of quotes/brackets/trailing punctuation, ``_`` -> ``-``
  (``MAILER_CORE`` and ``mailer-core`` are one entity), a trailing pod hash ``-7d9f`` dropped in
  ``kubectl ... pod`` commands only. Function words and pronouns (``it``, ``this``, ``the``...)
  are never entities.
- Attribute: through :data:`ATTRIBUTE_SYNONYMS` (lowercased, ``_``/``-`` read as spaces):
  owner = owner/owners/owned by/team/maintainer/codeowners; replicas = replicas/replica count/
  copies/instances/pods/desired count; version = version/release/build/image tag; timeout =
  timeout/request timeout/timeout ms; memory = memory/memory limit/mem limit/ram; region;
  database = database/db/datastore/database url; port = port/listen port.
- Value, per attribute (the validator must match at the *start* of the value span, else the
  fact is dropped): timeout -> milliseconds (``2 s`` = ``2000``; a bare number is ms);
  memory -> MiB (``1Gi`` = ``1024``; units Ki/Mi/Gi/Ti, KB/MB/GB, KiB/MiB/GiB); replicas, port ->
  integer; version -> ``1.2.3`` (leading ``v`` dropped, at least two dot-separated numbers);
  region -> cloud region code like ``eu-west-1``; database -> ``engine@host`` from
  ``engine at host`` or ``engine://host/...`` (engine among postgres/mysql/mongodb/redis/
  cassandra/sqlite/... ); owner -> team name lowercased with a leading ``team``/``team-`` and
  ``@org/`` stripped (``@org/team-badger``, ``team Badger`` and ``Badger`` are one value).
- Env qualifier: the environment words (production/prod/live, staging/stage/pre-prod, dev,
  qa) found in the fact's sentence (prose) or whole doc (code, tool output). Facts with different
  qualifiers never conflict (``replicas in production`` vs ``in staging``); ``default`` is no env.

**Patterns** (case-insensitive; E entity, A attribute phrase, V value span):

1. ``E['s] A is|was|=|: [now|currently|set to] V``  - "ledgerd memory limit is now 768Mi".
2. ``[the|new|current] A of|for|behind E [is|was|:|=] [now] V`` - "The timeout for x is 2000 ms",
   "New timeout for x: 500 ms", "The database behind x is postgres at db-1".
3. ``E has a A of V``, ``E is on|runs A V`` ("x is on version 1.2.3"), ``E is configured with a V A``.
4. Change verbs (moved/changed/bumped/set/raised/lowered/increased/decreased/reduced/updated/
   scaled/switched/migrated/upgraded/rolled): ``VERB [the] A of|for E [from X] to V``,
   ``VERB [the] E A [from X] to V``, ``E [A] [was|has been] VERB [from X] to V``,
   ``switched E to V``, ``VERB E [A] to V`` (``scaled x to 5 pods``); ``from X`` is skipped, only
   the new value V is a fact. Without an attribute word the value's shape decides (below).
5. Ownership: ``E belongs to|is owned by|is maintained by [team] V``, ``[team] V owns|maintains|
   takes over E``, ``ask team V, they own|maintain E``.
6. Replicas: ``E runs with V replicas|instances|copies|pods``, ``V replicas|instances|copies|pods
   of E``, ``E ... settled at|moved ... to V replicas``.
7. ``E [is] now in|at|on V`` with the attribute from the value's shape.
8. Location/storage verbs: ``E is deployed|runs|lives|is hosted in [the] V``, ``we run E out of V``
   (V must be a region); ``E stores its data in|talks to|uses|connects to V``, ``[E] connected to V``
   (V must be a database); ``capped E at V [of memory]`` (V must be a memory size); ``E exceeded
   its V limit`` (memory).
9. Version pins: ``pkg==1.2.3``, ``pkg@1.2.3``, ``E v1.2.3``, ``pinned E to V``,
   ``image: registry/E:V``.
10. Structured text: JSON objects (in the doc or its ``{...}`` substrings) with an entity key
    (service/name/app/component/package) and attribute keys; ``key: value`` / ``key = value`` lines,
    where the entity is a trailing ``# E`` comment on that line, else a ``name:``/``service:`` key of
    the same doc, else the nearest YAML parent key that is not a structural word (resources, limits,
    spec...); a parent key that is an attribute with entity children (``owners:\\n  x: team-a``) maps
    each child; SCREAMING_CASE keys split into entity + attribute (``X_CORE_TIMEOUT_MS = 4000``,
    ``DATABASE_URL_X_WORKER = "..."``).
11. Shell tool output: a ``$ command`` line naming the entity (``services/E/``, ``/etc/E/``,
    ``--services E``, ``pod E-<hash>``, ``E --print-config``, ``get deploy E``, ``curl E/...``) and
    the attribute (``grep [-i] A``, ``--query A``, ``/OWNERS``, ``/version``) followed by a single
    output line ``key: value``, ``key = value`` or a bare value.
12. Log lines ``LEVEL [E] body``: the body is matched with patterns 7-8 and the shape rule.

**Shape rule**: with no attribute word, a value implies its attribute only when its shape is
unambiguous: a region code -> region, ``engine at host``/``engine://host`` -> database, a memory
size -> memory, ``N replicas|pods|instances`` -> replicas, ``team X`` -> owner. Durations
(``500 ms``) and bare numbers need an attribute word.

**Detection** (:func:`detect`): facts are grouped by ``(entity, attribute, env)``; every pair of
facts from two docs with different positions and different values is a conflict, the doc with the
higher position is current. Pairs are deduplicated per (stale doc, current doc, entity, attribute)
and returned sorted by (current position, stale position, stale doc id, current doc id, entity,
attribute). Docs at the same position are never paired (their order is unknown).

**Demotion** (:func:`demote`): scores are min-max normalized to [0, 1] over the ranking (all equal
-> 1.0); every doc that is the stale side of some conflict has its normalized score multiplied by
``1 - penalty`` (penalty in [0, 1]; 0 = no change, 1 = score 0). The ranking is re-sorted by the new
score, ties keep their previous order; the returned scores are the new normalized ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from lethe.core.protocol import Doc
from lethe.retrieval.ranking import top_indices

__all__ = [
    "Fact",
    "Conflict",
    "ATTRIBUTE_SYNONYMS",
    "extract_facts",
    "detect",
    "demote",
    "normalize_attribute",
    "normalize_entity",
    "normalize_value",
]


@dataclass(frozen=True, order=True)
class Fact:
    entity: str
    attribute: str
    value: str
    doc_id: str
    position: int
    env: str = ""  # "" = no environment qualifier; else sorted env words joined by "+"


@dataclass(frozen=True, order=True)
class Conflict:
    stale_doc_id: str
    current_doc_id: str
    entity: str
    attribute: str
    stale_value: str
    current_value: str


# ---------------------------------------------------------------- normalization tables
ATTRIBUTE_SYNONYMS: dict[str, str] = {
    "owner": "owner",
    "owners": "owner",
    "owned by": "owner",
    "team": "owner",
    "owning team": "owner",
    "maintainer": "owner",
    "maintainers": "owner",
    "maintained by": "owner",
    "codeowners": "owner",
    "ownership": "owner",
    "replicas": "replicas",
    "replica": "replicas",
    "replica count": "replicas",
    "copies": "replicas",
    "instances": "replicas",
    "pods": "replicas",
    "desired count": "replicas",
    "instance count": "replicas",
    "version": "version",
    "release": "version",
    "build": "version",
    "image tag": "version",
    "timeout": "timeout",
    "request timeout": "timeout",
    "timeout ms": "timeout",
    "request timeout ms": "timeout",
    "memory": "memory",
    "memory limit": "memory",
    "mem limit": "memory",
    "mem": "memory",
    "ram": "memory",
    "region": "region",
    "aws region": "region",
    "database": "database",
    "db": "database",
    "datastore": "database",
    "database url": "database",
    "db url": "database",
    "port": "port",
    "listen port": "port",
}
_ATTR_ALT = "|".join(
    sorted((re.escape(k).replace(r"\ ", r"[\s_-]+") for k in ATTRIBUTE_SYNONYMS), key=len, reverse=True)
)
_ENV_WORDS = {
    "production": "production",
    "prod": "production",
    "live": "production",
    "staging": "staging",
    "stage": "staging",
    "pre-prod": "staging",
    "preprod": "staging",
    "dev": "dev",
    "development": "dev",
    "qa": "qa",
}
_ENV_RE = re.compile(
    r"(?<![\w.-])(pre-prod|preprod|production|prod|live|staging|stage|development|dev|qa)(?![\w-]|\.\w)", re.I
)
_STOP = frozenset(
    """a an the it its this that these those which what who whom whose we you they he she i me us them
our your their his her my there here and or but if then so of in on at by to from with for as is are was were be been
being has have had do does did not no now new current old someone somebody anyone everyone nobody all any each
every some team update note done""".split()
)
_STRUCTURAL = frozenset(
    """resources limits requests spec metadata services service environment env config configuration
data settings server deploy deployment containers container template labels annotations provider resource values
app apps default defaults common global ports volumes image""".split()
)
_DB_ENGINES = "postgres|postgresql|mysql|mariadb|mongodb|mongo|redis|cassandra|sqlite|dynamodb|elasticsearch|clickhouse|oracle|mssql"

_ENT = r"[A-Za-z][\w.\-]*[A-Za-z0-9]|[A-Za-z]"
_RE_REGION = re.compile(
    r"(?:us|eu|ap|sa|ca|me|af|il|mx|cn)-(?:gov-)?(?:east|west|north|south|central|northeast|southeast|northwest|southwest)-\d\b",
    re.I,
)
_RE_DB = re.compile(rf"^({_DB_ENGINES})(?:\s+at\s+|://(?:[^@/\s]*@)?)([a-z0-9][\w.\-]*[a-z0-9])", re.I)
_RE_MEM = re.compile(r"^(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB|TiB|Ki|Mi|Gi|Ti|KB|MB|GB|TB|K|M|G)\b", re.I)
_RE_DUR = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|milliseconds?|millis|s|sec|secs|seconds?)?(?![\w.])", re.I)
_RE_INT = re.compile(r"^(\d+)(?![\w.])")
_RE_VER = re.compile(r"^v?(\d+(?:\.\d+)+(?:[-+][\w.]+)?)(?![\w])", re.I)
_RE_TEAM = re.compile(r"^(?:@[\w-]+/)?(?:team[\s-]+)?([A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)\b", re.I)


def normalize_entity(name: str) -> str | None:
    """Lowercased entity with ``_`` -> ``-``; None for function words and non-names."""
    e = name.strip().strip("\"'`[](){}<>").rstrip(".,;:!?").lower().replace("_", "-")
    if (
        not e
        or e in _STOP
        or e in _ENV_WORDS
        or e == "default"
        or not re.fullmatch(r"[a-z][a-z0-9.\-]*", e)
        or len(e) < 2
    ):
        return None
    return e


def normalize_attribute(phrase: str) -> str | None:
    """Canonical attribute for a phrase (``owned by`` -> ``owner``), or None."""
    p = re.sub(r"[\s_\-]+", " ", phrase.strip().lower())
    return ATTRIBUTE_SYNONYMS.get(p)


def _num(x: str) -> str:
    f = float(x)
    return str(int(f)) if f == int(f) else repr(f)


def normalize_value(attribute: str, span: str) -> str | None:
    """Canonical value of ``attribute`` read from the start of ``span``, or None if it does not validate."""
    s = span.strip().strip("\"'`").strip()
    if attribute == "timeout":
        m = _RE_DUR.match(s)
        if not m:
            return None
        unit = (m.group(2) or "ms").lower()
        return _num(str(float(m.group(1)) * (1 if unit.startswith("m") else 1000)))
    if attribute == "memory":
        m = _RE_MEM.match(s)
        if not m:
            return None
        u = m.group(2).lower()[0]
        factor = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}[u]
        return _num(str(float(m.group(1)) * factor))
    if attribute in ("replicas", "port"):
        m = _RE_INT.match(s)
        if not m:
            return None
        v = int(m.group(1))
        ok = 0 <= v <= 10_000 if attribute == "replicas" else 1 <= v <= 65535
        return str(v) if ok else None
    if attribute == "version":
        m = _RE_VER.match(s)
        return m.group(1).lower() if m else None
    if attribute == "region":
        m = _RE_REGION.match(s)
        return m.group(0).lower() if m else None
    if attribute == "database":
        m = _RE_DB.match(s)
        if not m:
            return None
        eng = m.group(1).lower()
        eng = {"postgresql": "postgres", "mongo": "mongodb"}.get(eng, eng)
        return f"{eng}@{m.group(2).lower()}"
    if attribute == "owner":
        m = _RE_TEAM.match(s)
        # a bare lowercase word ("unclear", "someone") is not a team: require "team" or a capital
        if not m or not (re.match(r"^(?:@[\w-]+/)?team\b", s, re.I) or s[:1].isupper()):
            return None
        v = m.group(1).lower()
        return None if v in _STOP else v
    return None


def _shape_attribute(span: str) -> str | None:
    """The attribute a value's shape implies on its own (region, database, memory, replicas, owner)."""
    s = span.strip().strip("\"'`")
    if _RE_REGION.match(s):
        return "region"
    if _RE_DB.match(s):
        return "database"
    if _RE_MEM.match(s):
        return "memory"
    if re.match(r"^\d+\s+(?:replicas|pods|instances|copies)\b", s, re.I):
        return "replicas"
    if re.match(r"^team[\s-]+[A-Za-z]", s, re.I):
        return "owner"
    return None


def _env_of(text: str) -> str:
    envs = sorted({_ENV_WORDS[m.group(1).lower()] for m in _ENV_RE.finditer(text)})
    return "+".join(envs)


# ---------------------------------------------------------------- prose patterns
_V = r"(?P<v>[^,;()\n]+?)"
_VEND = r"(?=\s*(?:\(|,|;|\.(?:\s|$)|$|\binstead\b|\bbecause\b|\bsince\b|\bthe old\b|\bfor\b|\bbehind\b|\bthis\b|\bnow\b|\bafter\b|\bfrom today\b))"
_E = rf"(?P<e>{_ENT})"
_A = rf"(?P<a>{_ATTR_ALT})"
_FROM = r"(?:from\s+(?:team\s+)?[^\s,;()]+(?:\s+at\s+[^\s,;()]+)?(?:\s+(?:ms|milliseconds|seconds|replicas|pods))?\s+)?"
_VERB = r"(?:moved|changed|bumped|set|raised|lowered|increased|decreased|reduced|updated|scaled|switched|migrated|upgraded|rolled|pinned|capped)"

# (regex, fixed attribute or None). None: attribute from group "a" if present, else from value shape.
_PROSE: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(p, re.I), a)
    for p, a in [
        # 5 ownership
        (
            rf"\b{_E}\s+(?:belongs\s+to|is\s+owned\s+by|is\s+maintained\s+by|is\s+now\s+owned\s+by)\s+{_V}{_VEND}",
            "owner",
        ),
        (rf"\bask\s+team\s+(?P<v>[A-Za-z][\w-]*),?\s+they\s+(?:own|maintain)\s+{_E}", "owner"),
        (rf"\bteam\s+(?P<v>[A-Za-z][\w-]*)\s+(?:owns|maintains|takes\s+over|now\s+owns)\s+{_E}", "owner"),
        (
            rf"\b{_E}\s+(?:was\s+|has\s+been\s+)?(?:moved|transferred|handed\s+over)\s+from\s+team\s+[\w-]+\s+to\s+(?P<v>team\s+[\w-]+)",
            "owner",
        ),
        # 6 replicas
        (
            rf"\b{_E}(?:\s+\([\w\s-]+\)|\s+in\s+[\w-]+)?\s+runs\s+with\s+(?P<v>\d+)\s+(?:replicas|instances|copies|pods)\b",
            "replicas",
        ),
        (rf"\b(?P<v>\d+)\s+(?:replicas|instances|copies|pods)\s+of\s+{_E}", "replicas"),
        (
            rf"\b{_E}(?:\s+\([\w\s-]+\))?\s+(?:settled\s+at|moved\s+from\s+\d+\s+to|scaled\s+from\s+\d+\s+to)\s+(?P<v>\d+)\s+(?:replicas|instances|pods|copies)\b",
            "replicas",
        ),
        # 4 change verbs
        (rf"\b{_VERB}\s+(?:the\s+)?{_A}\s+(?:of|for)\s+{_E}\s+{_FROM}to\s+{_V}{_VEND}", None),
        (rf"\b{_VERB}\s+(?:the\s+)?{_E}\s+{_A}\s+{_FROM}to\s+{_V}{_VEND}", None),
        (rf"\b{_VERB}\s+{_E}(?:\s+in\s+[\w-]+)?\s+{_A}\s+{_FROM}to\s+{_V}{_VEND}", None),
        (
            rf"\b{_E}(?:\s+in\s+[\w-]+)?\s+(?:{_A}\s+)?(?:was\s+|were\s+|has\s+been\s+|is\s+)?{_VERB}\s+(?:forward\s+)?{_FROM}to\s+{_V}{_VEND}",
            None,
        ),
        (rf"\b(?:switched|moved|migrated|scaled|capped)\s+{_E}(?:\s+in\s+[\w-]+)?\s+(?:to|at)\s+{_V}{_VEND}", None),
        # 7 now
        (rf"\b{_E}\s+(?:is\s+)?now\s+(?:in|at|on|runs\s+on)\s+{_V}{_VEND}", None),
        # 1, 2, 3 statements
        (
            rf"\b{_E}(?:'s)?(?:\s+in\s+[\w-]+)?\s+{_A}(?:\s*[:=]|\s+(?:is|was)\b)\s*(?:now\s+|currently\s+|set\s+to\s+)?{_V}{_VEND}",
            None,
        ),
        (
            rf"\b{_A}\s+(?:of|for|behind)\s+{_E}(?:\s+in\s+[\w-]+)?\s*(?:is|was|:|=)\s*(?:now\s+|currently\s+)?{_V}{_VEND}",
            None,
        ),
        (rf"\b{_E}(?:\s+in\s+[\w-]+)?\s+has\s+an?\s+{_A}\s+of\s+{_V}{_VEND}", None),
        (rf"\b{_E}(?:\s+in\s+[\w-]+)?\s+(?:is\s+on|runs|is\s+running)\s+{_A}\s+{_V}{_VEND}", None),
        (
            rf"\b{_E}(?:\s+in\s+[\w-]+)?\s+is\s+configured\s+with\s+an?\s+(?P<v>[\d.]+\s*(?:ms|milliseconds|s|seconds|Mi|Gi|MB|GB))\s+(?:request\s+)?{_A}\b",
            None,
        ),
        # 8 location / storage / memory verbs (value shape must agree)
        (
            rf"\b{_E}\s+(?:is\s+deployed|is\s+hosted|runs|lives|is\s+running|is\s+located)\s+in\s+(?:the\s+)?{_V}{_VEND}",
            "region",
        ),
        (rf"\bwe\s+run\s+{_E}\s+out\s+of\s+{_V}{_VEND}", "region"),
        (
            rf"\b{_E}\s+(?:stores\s+its\s+data\s+in|talks\s+to|uses|connects\s+to|is\s+connected\s+to|persists\s+to)\s+{_V}{_VEND}",
            "database",
        ),
        (rf"\bcapped\s+{_E}\s+at\s+{_V}{_VEND}", "memory"),
        (
            rf"\b{_E}\s+(?:times\s+out|gives\s+up(?:\s+on\s+(?:a|the|each)\s+(?:request|call))?)\s+after\s+(?P<v>[\d.]+\s*(?:ms|milliseconds|s|seconds)\b)",
            "timeout",
        ),
        (rf"\b{_E}\s+exceeded\s+its\s+(?P<v>\S+)\s+(?:memory\s+)?limit", "memory"),
        # 9 versions / pins
        (r"(?<![\w.-])(?P<e>[A-Za-z][\w.\-]*[A-Za-z0-9])==(?P<v>\d+(?:\.\d+)+[\w.+-]*)", "version"),
        (r"(?<![\w.-])(?P<e>[A-Za-z][\w.\-]*[A-Za-z0-9])@(?P<v>\d+(?:\.\d+)+)\b", "version"),
        (rf"\b{_E}\s+(?P<v>v\d+(?:\.\d+)+)\b", "version"),
        (rf"\bpinned\s+{_E}\s+(?:to|at)\s+(?P<v>v?\d+(?:\.\d+)+)", "version"),
        (rf"\bimage:\s*(?:[\w.\-]+/)*{_E}:(?P<v>v?\d+(?:\.\d+)+)", "version"),
    ]
]

_LOG = re.compile(
    r"^\s*(?:\S+\s+)?(?:INFO|WARN|WARNING|ERROR|DEBUG|NOTICE)\s+\[(?P<e>[\w.\-]+)\]\s+(?P<body>.*)$", re.I
)
_LOG_BODY: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(p, re.I), a)
    for p, a in [
        (r"\bconnected\s+to\s+(?P<v>.+)$", "database"),
        (r"\b(?:booted|started|running|deployed)\s+in\s+(?P<v>\S+)", "region"),
        (r"\bstarting\s+version\s+(?P<v>\S+)", "version"),
        (r"\b(?:aborted|timed\s+out)\s+after\s+(?P<v>[\d.]+\s*(?:ms|s)?)\s*\(timeout\)", "timeout"),
    ]
]
_SCREAM_KEY = re.compile(r"^(?P<k>[A-Z][A-Z0-9_]*[A-Z0-9])$")
_ATTR_SUFFIXES = [
    ("_TIMEOUT_MS", "timeout"),
    ("_REQUEST_TIMEOUT", "timeout"),
    ("_TIMEOUT", "timeout"),
    ("_MEMORY_LIMIT", "memory"),
    ("_MEM_LIMIT", "memory"),
    ("_MEMORY", "memory"),
    ("_PORT", "port"),
    ("_REPLICAS", "replicas"),
    ("_VERSION", "version"),
    ("_REGION", "region"),
    ("_DATABASE_URL", "database"),
    ("_DB_URL", "database"),
    ("_OWNER", "owner"),
]
_ATTR_PREFIXES = [("DATABASE_URL_", "database"), ("DB_URL_", "database")]


@dataclass(frozen=True)
class _Raw:
    entity: str
    attribute: str
    value: str
    env_text: str


def _mk(entity: str | None, attribute: str | None, span: str | None, env_text: str) -> _Raw | None:
    if entity is None or attribute is None or span is None:
        return None
    e = normalize_entity(entity)
    if e is None:
        return None
    v = normalize_value(attribute, span)
    return _Raw(e, attribute, v, env_text) if v is not None else None


def _from_match(m: re.Match[str], fixed: str | None, env_text: str) -> _Raw | None:
    span = m.group("v")
    gd = m.groupdict()
    if fixed is not None:
        attr: str | None = fixed
    elif gd.get("a"):
        attr = normalize_attribute(gd["a"])
    else:
        attr = _shape_attribute(span)
    if attr == "owner" and span.strip().lower() in ("team",):
        return None
    return _mk(m.group("e"), attr, span, env_text)


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z$#\[{])", line) if s.strip())
    return out


def _prose_facts(text: str) -> list[_Raw]:
    found: list[_Raw] = []
    for sent in _sentences(text):
        env = sent
        taken: list[tuple[int, int]] = []
        for pat, fixed in _PROSE:
            for m in pat.finditer(sent):
                s, e = m.span()
                if any(s < te and ts < e for ts, te in taken):
                    continue
                r = _from_match(m, fixed, env)
                if r is not None:
                    taken.append((s, e))
                    found.append(r)
    return found


def _comment_entity(line: str) -> str | None:
    """The first word of a trailing ``# word`` / ``// word`` comment, if it can be an entity."""
    m = re.search(r"(?:^|\s)(?:#|//)\s*([A-Za-z][\w.\-]*[A-Za-z0-9])", line)
    return m.group(1) if m and normalize_entity(m.group(1)) is not None else None


def _strip_comment(line: str) -> str:
    return re.split(r"\s+(?:#|//)\s", line, maxsplit=1)[0]


def _json_facts(text: str, env: str, cmd_entity: str | None) -> list[_Raw]:
    found: list[_Raw] = []
    for m in re.finditer(r"\{[^{}]*\}", text):
        try:
            obj = json.loads(m.group(0))
        except (json.JSONDecodeError, ValueError):
            continue
        if not isinstance(obj, dict):
            continue
        ent = next(
            (obj[k] for k in ("service", "name", "app", "component", "package") if isinstance(obj.get(k), str)), None
        )
        ent = ent or cmd_entity
        for k, v in obj.items():
            attr = normalize_attribute(str(k))
            if attr is None or isinstance(v, (dict, list, bool)) or v is None:
                continue
            r = _mk(ent, attr, str(v), env)
            if r is not None:
                found.append(r)
    return found


def _split_scream(key: str) -> tuple[str, str] | None:
    for suf, attr in _ATTR_SUFFIXES:
        if key.endswith(suf) and len(key) > len(suf):
            return key[: -len(suf)], attr
    for pre, attr in _ATTR_PREFIXES:
        if key.startswith(pre) and len(key) > len(pre):
            return key[len(pre) :], attr
    return None


_KV = re.compile(r"^(?P<ind>\s*)(?:-\s+)?(?P<k>[\"']?[A-Za-z_][\w.\-]*[\"']?)\s*(?::|=)\s*(?P<v>.*?)\s*$")


def _kv_facts(text: str, env: str) -> list[_Raw]:
    """``key: value`` / ``key = value`` lines (YAML, env files, HCL, Python assignments and kwargs)."""
    found: list[_Raw] = []
    lines = text.split("\n")
    doc_name = None
    for ln in lines:
        m = re.match(
            r"^\s*(?:name|service|app)\s*:\s*[\"']?([A-Za-z][\w.\-]*)[\"']?\s*$", _strip_comment(ln)
        ) or re.match(r'^\s*resource\s+"[^"]+"\s+"([A-Za-z][\w.\-]*)"\s*\{', ln)
        if m:
            doc_name = m.group(1)
            break
    stack: list[tuple[int, str]] = []  # (indent, key) of open YAML parents
    for ln in lines:
        if not ln.strip() or ln.lstrip().startswith(("$", "#", "//")):
            continue
        comment_ent = _comment_entity(ln) if re.search(r"\s(?:#|//)\s", ln) else None
        body = _strip_comment(ln)
        # kwargs / HCL inline assignments: timeout_ms=750, region = "eu-west-1"
        inline = list(re.finditer(r"\b(?P<k>[a-z_][a-z0-9_]*)\s*=\s*(?P<v>\"[^\"]*\"|'[^']*'|[^\s,)}]+)", body))
        m = _KV.match(body)
        if m is None and not inline:
            continue
        if m is not None:
            ind, key, val = len(m.group("ind")), m.group("k").strip("\"'"), m.group("v").strip().strip(",").strip("\"'")
            while stack and stack[-1][0] >= ind:
                stack.pop()
            parents = [k for _, k in stack]
            if val == "" or val in ("|", ">"):
                stack.append((ind, key))
                continue
            sk = _SCREAM_KEY.match(key)
            if sk:
                split = _split_scream(key)
                if split:
                    r = _mk(comment_ent or split[0], split[1], val, env)
                    if r:
                        found.append(r)
                continue
            attr = normalize_attribute(key)
            if attr is not None and key not in ("name",):
                ent = comment_ent or doc_name
                if ent is None:
                    ent = next(
                        (
                            p
                            for p in reversed(parents)
                            if p.lower() not in _STRUCTURAL and normalize_attribute(p) is None
                        ),
                        None,
                    )
                r = _mk(ent, attr, val, env)
                if r:
                    found.append(r)
                continue
            if parents and normalize_attribute(parents[-1]) is not None and len(parents) == 1:
                # owners:\n  svc: team-x  (attribute parent, entity children)
                r = _mk(key, normalize_attribute(parents[-1]), val, env)
                if r:
                    found.append(r)
                continue
        if comment_ent and inline:
            for im in inline:
                attr = normalize_attribute(im.group("k"))
                if attr is None:
                    continue
                r = _mk(comment_ent, attr, im.group("v").strip("\"'"), env)
                if r:
                    found.append(r)
    return found


_CMD_ENTITY = [
    re.compile(p)
    for p in [
        r"\bservices/(?P<e>[A-Za-z][\w.\-]*)/",
        r"/etc/(?P<e>[A-Za-z][\w.\-]*)/",
        r"--services?\s+(?P<e>[A-Za-z][\w.\-]*)",
        r"\bpods?\s+(?P<e>[A-Za-z][\w.\-]*?)(?:-[0-9a-f]{4,10})?(?=\s|$)",
        r"^\$\s+(?P<e>[A-Za-z][\w.\-]*)\s+--print-config",
        r"\bget\s+(?:deploy|deployment)\s+(?P<e>[A-Za-z][\w.\-]*)",
        r"\bcurl\s+(?:-\w+\s+)*(?:https?://)?(?P<e>[A-Za-z][\w.\-]*)/",
    ]
]


def _codeowners_facts(text: str) -> list[_Raw]:
    """CODEOWNERS files: ``/path/to/E/  @org/team-x`` -> (E, owner, x); E is the last path segment."""
    if "codeowners" not in text.lower():
        return []
    found: list[_Raw] = []
    for ln in text.split("\n"):
        m = re.match(r"^\s*(?P<p>/?[\w.\-/*]+?)/?\s+(?P<v>@[\w.\-/]+)\s*$", ln)
        if m and not ln.lstrip().startswith("#"):
            seg = [x for x in m.group("p").split("/") if x and x != "*"]
            r = _mk(seg[-1] if seg else None, "owner", m.group("v"), text)
            if r:
                found.append(r)
    return found


def _shell_facts(text: str, env: str) -> list[_Raw]:
    """``$ command`` naming entity and attribute, followed by exactly one output line."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if len(lines) != 2 or not lines[0].lstrip().startswith("$"):
        return []
    cmd, out = _strip_comment(lines[0].strip()), lines[1].strip()
    ent = next((m.group("e") for p in _CMD_ENTITY if (m := p.search(cmd))), None)
    if ent is None:
        return []
    cattr = None
    if re.search(r"/OWNERS\b|/CODEOWNERS\b", cmd):
        cattr = "owner"
    elif (
        (m := re.search(r"\bgrep\s+(?:-\w+\s+)*([\w-]+)\s*$", cmd))
        or (m := re.search(r"--query\s+([\w.-]+)", cmd))
        or (m := re.search(r"/([a-z]+)\s*$", cmd))
    ):
        cattr = normalize_attribute(m.group(1))
    m = re.match(r"^(?P<k>[A-Za-z_][\w\-]*)\s*(?::|=)\s*(?P<v>.+)$", out)
    if m:
        attr = normalize_attribute(m.group("k"))
        if attr is None or (cattr is not None and attr != cattr):
            return []
        r = _mk(ent, attr, m.group("v").strip("\"'"), env)
    elif cattr is not None and not out.startswith("{"):
        r = _mk(ent, cattr, out.strip("\"'"), env)
    else:
        r = None
    return [r] if r else []


def _log_facts(text: str) -> list[_Raw]:
    found: list[_Raw] = []
    for ln in text.split("\n"):
        m = _LOG.match(ln)
        if not m:
            continue
        for pat, fixed in _LOG_BODY:
            bm = pat.search(m.group("body"))
            if bm:
                r = _mk(m.group("e"), fixed, bm.group("v"), ln)
                if r:
                    found.append(r)
                break
    return found


def extract_facts(doc: Doc) -> list[Fact]:
    """The facts ``doc`` states (see the module docstring for the rules), deduplicated, sorted."""
    text = doc.text
    doc_env = _env_of(text)
    cmd_entity = None
    first = text.lstrip().split("\n", 1)[0]
    if first.startswith("$"):
        cmd_entity = next((m.group("e") for p in _CMD_ENTITY if (m := p.search(_strip_comment(first)))), None)
    raws: list[_Raw] = []
    raws += _shell_facts(text, doc_env)
    raws += _json_facts(text, doc_env, cmd_entity)
    raws += _kv_facts(text, doc_env)
    raws += _log_facts(text)
    raws += _codeowners_facts(text)
    raws += _prose_facts(text)
    out: set[Fact] = set()
    for r in raws:
        env = doc_env if r.env_text is text or doc.kind in ("code", "tool") else _env_of(r.env_text)
        out.add(Fact(r.entity, r.attribute, r.value, doc.doc_id, doc.position, env))
    # a doc stating two values for one key (e.g. old and new in one line we misread) is unreliable: drop the key
    by_key: dict[tuple[str, str, str], set[str]] = {}
    for f in out:
        by_key.setdefault((f.entity, f.attribute, f.env), set()).add(f.value)
    return sorted(f for f in out if len(by_key[(f.entity, f.attribute, f.env)]) == 1)


@lru_cache(maxsize=200_000)
def _facts(doc: Doc) -> tuple[Fact, ...]:
    return tuple(extract_facts(doc))  # docs are immutable; a conversation prefix is re-detected per query


def detect(docs: Sequence[Doc]) -> list[Conflict]:
    """Conflicts among ``docs``: same (entity, attribute, env), different values, different positions."""
    groups: dict[tuple[str, str, str], list[Fact]] = {}
    for d in docs:
        for f in _facts(d):
            groups.setdefault((f.entity, f.attribute, f.env), []).append(f)
    found: dict[tuple[str, str, str, str], tuple[tuple, Conflict]] = {}
    for (ent, attr, _env), facts in sorted(groups.items()):
        facts = sorted(facts, key=lambda f: (f.position, f.doc_id))
        for i, old in enumerate(facts):
            for new in facts[i + 1 :]:
                if new.position == old.position or new.value == old.value or new.doc_id == old.doc_id:
                    continue
                key = (old.doc_id, new.doc_id, ent, attr)
                if key not in found:
                    c = Conflict(old.doc_id, new.doc_id, ent, attr, old.value, new.value)
                    found[key] = ((new.position, old.position, old.doc_id, new.doc_id, ent, attr), c)
    return [c for _, c in sorted(found.values(), key=lambda t: t[0])]


def demote(
    ranking: list[tuple[str, float]], conflicts: Iterable[Conflict], penalty: float, on: str = "score"
) -> list[tuple[str, float]]:
    """Min-max normalize scores to [0, 1], multiply stale docs' scores by ``1 - penalty``, re-sort (stable).

    ``on="rank"`` first replaces the scores by ranks (n, n-1, ..., 1 for n docs), so the demotion does
    not depend on the scale of the incoming scores (with ``1/rank`` scores a penalty of 0.5 moves a doc
    at rank 2 only to rank 4; on ranks it moves it to about rank n/2)."""
    if not 0.0 <= penalty <= 1.0:
        raise ValueError(f"penalty must lie in [0, 1], got {penalty}")
    if on not in ("score", "rank"):
        raise ValueError(f"demote on must be 'score' or 'rank', got {on!r}")
    if not ranking:
        return []
    stale = {c.stale_doc_id for c in conflicts}
    scores = [float(s) for _, s in ranking] if on == "score" else [float(len(ranking) - i) for i in range(len(ranking))]
    lo, hi = min(scores), max(scores)
    norm = [(s - lo) / (hi - lo) if hi > lo else 1.0 for s in scores]
    new = [(d, n * (1.0 - penalty) if d in stale else n) for (d, _), n in zip(ranking, norm, strict=True)]
    order = top_indices(np.array([s for _, s in new], dtype=np.float64), len(new))  # ties keep the incoming order
    return [new[i] for i in order]
