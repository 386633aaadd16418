"""Lethe's own entity extractor and exact-match term detector (rules only, no gold labels).

Two things are extracted from text:

- **Exact-match terms** (``exact_terms``): the identifier patterns of the keyword-boost study
  (``../shared/seeds/001_*.txt`` section 6), each tagged with its kind:
  ``camel_case`` (parseJWT, getUserById), ``snake_case`` (user_id), ``screaming_case``
  (ECONNREFUSED, API_KEY), ``code_number`` (HTTP 404, error-1234, ERR-8756, X9329),
  ``file`` (.env, config.yaml), ``version`` (v2.1.0, node@18, 0.19.17), ``url_path``
  (/api/users, https://x.org/a), plus ``kebab_case`` (chat-core, data-26.svc), which names
  services and hosts in logs and configs.
- **Entities** (``entities``): the exact-match terms above plus proper-noun phrases: maximal runs of
  capitalized words (``Spark Streaming``, ``Caroline``, ``LGBTQ``). A capitalized word that
  starts a sentence counts only if it is not a function word or a question word
  (``What``, ``The``, ``I``...). Entities are compared lowercased.

Nothing here reads dataset labels; the gold entities of LetheBench are used only by the analysis.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Order matters: earlier patterns claim their span first (a URL is not also a path or a file).
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "url_path",
        re.compile(r"\bhttps?://[^\s<>\"')\]]+|(?<![\w.])(?:/[A-Za-z0-9_.\-{}:]+){2,}/?|(?<![\w.])/[A-Za-z_][\w\-]*\b"),
    ),
    ("version", re.compile(r"\b[A-Za-z][\w\-]*@\d+(?:\.\d+)*\b|\bv\d+(?:\.\d+)+\b|\b\d+\.\d+\.\d+(?:\.\d+)*\b")),
    (
        "file",
        re.compile(
            r"(?<![\w/])\.[A-Za-z][\w\-]*\b|\b[\w\-]+\.(?:ya?ml|json|toml|ini|cfg|conf|env|py|js|ts|tsx|jsx|go|rs|java|kt|c|cc|cpp|h|hpp|rb|php|sh|sql|md|txt|log|xml|html|css|csv|lock|properties|gradle|jar|war|dll|so|exe)\b"
        ),
    ),
    (
        "code_number",
        re.compile(
            r"\b[A-Za-z]{1,10}[-_ ]?\d{2,}\b(?!\.[A-Za-z])|\b(?:HTTP|http|error|Error|ERROR|code|Code)\s+\d{3,}\b"
        ),
    ),
    ("screaming_case", re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{4,}[0-9]*\b")),
    ("snake_case", re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")),
    ("camel_case", re.compile(r"\b[a-z]+(?:[A-Z][a-z0-9]*)+[A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")),
    ("kebab_case", re.compile(r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[a-z][a-z0-9\-]*)*\b")),
]
EXACT_KINDS: tuple[str, ...] = tuple(k for k, _ in _PATTERNS)

# Capitalized words that do not name anything by themselves (sentence starts, pronouns, months are kept).
_FUNCTION_WORDS = frozenset(
    """
a an the and or but if then so yet nor for of in on at by to from with without within into onto over under
about above after again against all am any are as be because been before being below between both can could
did do does doing down during each few further had has have having he her here hers herself him himself his
how i i'd i'll i'm i've is it it's its itself just let me more most my myself no not now off once only other
our ours ourselves out own same she should some such than that that's their theirs them themselves there these
they this those through too until up very was we were what when where which while who whom why will would you
your yours yourself yourselves yes ok okay hi hey hello thanks thank sure well also maybe please great really
wow oh yeah cool nice sounds what's where's who's how's there's here's let's don't can't won't isn't didn't
tell give show list describe explain summarize compare find is are which whose ask see go get call check try look
make take use run set add remove update note keep send
""".split()
)
_CAP_WORD = r"[A-Z][\w'’\-]*"
_CAP_RUN = re.compile(rf"(?<![\w'’\-]){_CAP_WORD}(?:\s+(?:of\s+|the\s+|de\s+)?{_CAP_WORD})*")
_SENT_START = re.compile(r"(?:^|[.!?:;\n\"“]\s*|\s-\s)$")


def exact_terms(text: str) -> list[tuple[str, str]]:
    """(kind, term) for each exact-match term in ``text``, in order of appearance, spans disjoint."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str, str]] = []
    for kind, pat in _PATTERNS:
        for m in pat.finditer(text):
            s, e = m.span()
            term = m.group(0).rstrip(".,;:")
            if not term or any(s < te and ts < e for ts, te in taken):
                continue
            taken.append((s, e))
            found.append((s, kind, term))
    return [(k, t) for _, k, t in sorted(found)]


def _proper_nouns(text: str) -> list[str]:
    """Maximal runs of capitalized words, minus function words at their ends.

    A single capitalized word that starts a sentence is ambiguous ("Thanks", "Caroline"); it is
    kept only when followed by ':' (a speaker label) or when the same word also occurs
    capitalized in mid-sentence elsewhere in ``text``.
    """
    runs = []
    for m in _CAP_RUN.finditer(text):
        words = m.group(0).split()
        while words and words[0].lower().strip("'’") in _FUNCTION_WORDS:
            words = words[1:]
        while words and words[-1].lower() in ("of", "the", "de"):
            words = words[:-1]
        if words:
            at_start = bool(_SENT_START.search(text[: m.start()])) and words[0] == m.group(0).split()[0]
            runs.append((" ".join(words).strip("'’-"), at_start, text[m.end() : m.end() + 1] == ":"))
    mid = {r for r, s, _ in runs if not s}
    return [r for r, s, colon in runs if r and (not s or " " in r or colon or r in mid)]


@lru_cache(maxsize=200_000)
def _entities_cached(text: str) -> frozenset[str]:
    terms = exact_terms(text)
    ents = {t.lower() for _, t in terms}
    rest = text
    for _, t in terms:  # capitalized words inside an exact-match term (HTTP in "HTTP 404") are not names
        rest = rest.replace(t, " ")
    ents.update(p.lower() for p in _proper_nouns(rest))
    return frozenset(e for e in ents if len(e) > 1)


def entities(text: str) -> frozenset[str]:
    """The lowercased entity set of ``text`` (exact-match terms and proper-noun phrases)."""
    return _entities_cached(text)
