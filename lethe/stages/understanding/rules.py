"""Query understanding for Lethe iteration 2: rewriting and decomposition (rule-based backend).

``understand(query, history, backend)`` (``lethe.stages.understanding.base``) returns an
``Understanding``: the query as given, its standalone rewrite, the sub-queries to retrieve with, the
names of the rules that fired and the backend name. A backend is anything with ``name``, ``rewrite``,
``decompose`` and ``describe`` (``QueryUnderstandingBackend``); ``make_backend("rule")``
(``lethe.stages.understanding.stage``) builds the deterministic rule backend below, and the LLM
backend (``lethe.stages.understanding.llm``) plugs in through the same interface.

``understand`` rewrites first (if enabled), then decomposes the rewritten text (if enabled).
``subqueries`` is ``(rewritten,)`` followed by the decomposed parts that differ from it (compared
case- and whitespace-insensitively, ignoring trailing ``?.!``), deduplicated and cut to
``backend.max_subqueries`` in total (default 4). The full rewritten query always stays first: the
caller retrieves with every sub-query and fuses the lists with RRF, so keeping the whole query is
the safe choice when a split is wrong and the standard one in multi-query retrieval.

Terms used below. *Mentions* of a text: its exact-match terms (``lethe.text.entities.exact_terms``,
kinds ``kebab_case``, ``code_number``...) and proper-noun entities (the rest of
``lethe.text.entities.entities``, kind ``proper_noun``), located in the text with their original
casing. *Content words*: word tokens, lowercased, minus a small stopword list (Lucene's English
stopwords, question words, auxiliaries, pronouns, a few function words). The *previous question*
is the most recent history item ending with ``?`` (the oldest item if none does); its *answer*
is the history after it.

Rewriting (``RuleBasedBackend.rewrite``; at most one rule fires; none without history):

1. ``ellipsis:<form>``: an elliptical follow-up naming a new target X, matched on the whole query,
   case-insensitively, trailing ``?.!`` optional: "What about X" (``what_about``), "How about X"
   (``how_about``), "What of X" (``what_of``), "Same [question|thing] for X" (``same_for``), each
   optionally led by "And"; "And for X" (``and_for``); "And X" (``and``). X has at most
   ``max_target_words`` words, at least one content word, no ``?``, and does not start with a
   question word, an auxiliary or I/we/you ("And what is its limit?", "And then?", "How about we
   restart it?" are not elliptical). X is a new target when it contains a mention or does not
   start with an article, possessive, demonstrative or pronoun. When X has a mention, a leading
   article is dropped, and if X has exactly one mention and its other words already surround the
   target in the previous question, only the mention is substituted ("What about the Payments
   team?" after "Who is on call for the Falcon team?" -> "Who is on call for the Payments team?").
   The target of the previous question that X replaces is, in order of preference: its last
   mention of X's kind (when X has a mention); its last exact-match term; its last proper noun;
   its *implicit name* (the last content word of the previous question that its answer repeats,
   as in "Who owns catalogd?" / "catalogd: Pika.", where the extractor finds no entity; on by
   default, ``implicit_names``). Every occurrence of the target (case-insensitive, whole token)
   is replaced by X and the rest of the question is kept: "What about auth-core?" after
   ["Who owns catalogd?", "catalogd: Pika."] gives "Who owns auth-core?". Without any target the
   result is previous question + " " + X.
2. ``ellipsis:attribute``: the same forms with an X that asks for another attribute of the same
   target (no mention, led by an article, possessive, demonstrative or pronoun: "What about its
   memory limit?", "How about the region?"): the previous question's mentions (else its implicit
   name) are appended to the query, as in rule 3.
3. ``anaphora:append_entities``: a query of at most ``max_anaphora_words`` words with a
   third-person pronoun or demonstrative (it, its, they, them, their, that, this, those, he, she,
   his, her) and no mention of its own: the previous question's mentions in order of appearance,
   original casing (else its implicit name), are appended: "When was it last restarted?" after
   ["Who owns catalogd?", "catalogd: Pika."] gives "When was it last restarted? catalogd".
4. Otherwise (no history, no match, nothing to carry over) the query is returned unchanged.

Decomposition (``RuleBasedBackend.decompose``; returns ``[query]`` when nothing fires):

1. ``split:question_marks``: the query is cut after each run of ``?``. A piece that does not end
   with ``?`` or has fewer than ``min_part_terms`` content words is joined to the piece before it
   (to the next one when it comes first), so context sentences stay with their question and
   "Is this a bug? Why?" is not split. The rule fires when at least two pieces remain.
2. Coordination inside one question (applied to each piece of rule 1, or to the whole query, and
   again to the parts it produces). The piece must be a single sentence starting with a question
   word (what, which, who, whom, whose, when, where, why, how) and must not contain a relational
   word (between, both, compare, difference, versus, together, share, ...), since "the difference
   between A and B" is one question.

   a. ``split:entity_coordination``: two or more mentions joined only by ", ", " and ", ", and " or
      " as well as " (at least one "and"/"as well as"), the last not followed by a possessive
      ``'s``: one question per mention, the rest of the question kept verbatim: "What is the memory
      limit of chat-core and auth-core?" -> ["What is the memory limit of chat-core?", "What is the
      memory limit of auth-core?"]. Each part needs ``min_part_terms`` content words.
   b. ``split:clause_coordination``: the first " and ", " as well as " or ";" where both sides have
      at least ``min_part_terms`` content words and the right side either starts with a question
      word or an auxiliary (its own verb-like head; kept as is) or has a mention the left side does
      not have (then the left side's question prefix, a question word plus an auxiliary as in
      "What is" or "How do I", is carried over; without such a prefix there is no split). Parts are
      the bare clauses, without the final ``?``: "Who owns authd and what is its memory limit?" ->
      ["Who owns authd", "what is its memory limit"]. Noun coordination ("salt and pepper") and
      questions without a conjunction ("Where do I post to get help from the team behind
      ingest-worker?") are not split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lethe.stages.understanding.base import DEFAULT_MAX_SUBQUERIES
from lethe.text.analyzer import STOPWORDS as _LUCENE_STOPWORDS
from lethe.text.entities import EXACT_KINDS, entities, exact_terms

__all__ = ["RuleBasedBackend"]


_WH = frozenset("what which who whom whose when where why how".split())
_AUX = frozenset(
    "is are was were am be do does did can could will would shall should may might must has have had".split()
)
_SUBJECTS = frozenset("i we you".split())
_PRONOUNS = frozenset("it its they them their that this those he she his her".split())
_ATTR_LEAD = frozenset("the a an its their his her our your my this that these those it them they he she him".split())
_RELATIONAL = frozenset(
    """between both compare compared comparing comparison difference differences differ differs
versus vs either neither together combined jointly ratio relationship relation share shared common""".split()
)
_STOP = frozenset(
    _LUCENE_STOPWORDS
    | _WH
    | _AUX
    | _PRONOUNS
    | frozenset(
        """
i me my we us our you your him hers theirs ours yours been being done doing having
don doesn didn isn aren wasn weren won couldn shouldn wouldn haven hasn
so than too very just also much many some any all each from up out about over off again now else
still yet next later more
please here there
""".split()
    )
)

_TOKEN = re.compile(r"[A-Za-z0-9][\w'’\-.@/]*")
_ELLIPSIS = [
    (name, re.compile(rf"^\s*{lead}\s+(?P<x>[^?]+?)\s*[?.!]*\s*$", re.I))
    for name, lead in [
        ("what_about", r"(?:and\s+)?what\s+about"),
        ("how_about", r"(?:and\s+)?how\s+about"),
        ("what_of", r"(?:and\s+)?what\s+of"),
        ("same_for", r"(?:and\s+)?(?:the\s+)?same\s+(?:question\s+|thing\s+)?for"),
        ("and_for", r"and\s+for"),
        ("and", r"and"),
    ]
]
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)
_CONNECTOR = re.compile(r"^(?:\s*,\s*(?:and\s+)?|\s+and\s+|\s+as\s+well\s+as\s+)$", re.I)
_CONJUNCTION = re.compile(r"\s+and\s+|\s+as\s+well\s+as\s+|\s*;\s*", re.I)
_WH_PREFIX = re.compile(
    r"^\s*(?:what|which|who|whom|whose|when|where|why|how)"
    r"(?:['’]s\b|\s+(?:is|are|was|were|do|does|did|can|could|will|would|should|has|have|had)\b)"
    r"(?:\s+(?:i|we|you|they)\b)?",
    re.I,
)
_SENTENCE_BREAK = re.compile(r"[.!?]\s+\S|\n")


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    kind: str
    text: str


def _word(tok: str) -> str:
    """Lowercased token without trailing punctuation or a possessive/contraction tail."""
    w = tok.lower().rstrip(".-/@")
    for apo in ("'", "’"):
        if apo in w:
            w = w.split(apo, 1)[0]
    return w


def _tokens(text: str) -> list[tuple[int, str, str]]:
    """(start, original token, normalized word) for each word token."""
    out = []
    for m in _TOKEN.finditer(text):
        tok = m.group(0).rstrip(".-/@'’")
        if tok:
            out.append((m.start(), tok, _word(tok)))
    return out


def _content_words(text: str) -> list[str]:
    """Normalized word tokens that are not stopwords."""
    return [w for _, _, w in _tokens(text) if w and w not in _STOP]


def _first_word(text: str) -> str:
    toks = _tokens(text)
    return toks[0][2] if toks else ""


def _token_pattern(term: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w\-])" + re.escape(term) + r"(?![\w\-])", re.I)


def _mentions(text: str) -> list[_Mention]:
    """Exact-match terms and proper-noun entities of ``text`` with spans, in order, disjoint."""
    found: list[_Mention] = []
    cursor = 0
    for kind, term in exact_terms(text):
        m = _token_pattern(term).search(text, cursor)
        s = m.start() if m else text.find(term, cursor)
        if s < 0:
            continue
        found.append(_Mention(s, s + len(term), kind, text[s : s + len(term)]))
        cursor = s + len(term)
    exact = {m.text.lower() for m in found}
    for ent in sorted(entities(text) - exact):
        for m in _token_pattern(ent).finditer(text):
            if not any(m.start() < f.end and f.start < m.end() for f in found):
                found.append(_Mention(m.start(), m.end(), "proper_noun", m.group(0)))
    return sorted(found, key=lambda m: m.start)


def _previous_question(history: Sequence[str]) -> tuple[str, list[str]]:
    """The most recent question in ``history`` (else its oldest item) and the items after it."""
    items = [h for h in history if h and h.strip()]
    for i in range(len(items) - 1, -1, -1):
        if items[i].rstrip().endswith("?"):
            return items[i].strip(), items[i + 1 :]
    return items[0].strip(), items[1:]


def _implicit_name(question: str, answer: Sequence[str]) -> str | None:
    """The last content word of ``question`` that ``answer`` repeats (its subject, restated)."""
    said = set(_content_words(" ".join(answer)))
    names = [tok for _, tok, w in _tokens(question) if w and w not in _STOP and w in said]
    return names[-1] if names else None


class RuleBasedBackend:
    """Deterministic rewriting and decomposition rules (see the module docstring).

    Options (keyword-only):

    - ``max_subqueries`` (4): the most sub-queries ``understand`` keeps, the full query included.
    - ``min_part_terms`` (2): content words each part of a split needs.
    - ``max_anaphora_words`` (12): the longest query (in words) the anaphora rule rewrites.
    - ``max_target_words`` (6): the longest X (in words) of an elliptical "What about X?".
    - ``implicit_names`` (True): when the previous question has no mention, use the last content
      word of it that the answer repeats as its target.
    """

    name = "rule"

    def __init__(
        self,
        *,
        max_subqueries: int = DEFAULT_MAX_SUBQUERIES,
        min_part_terms: int = 2,
        max_anaphora_words: int = 12,
        max_target_words: int = 6,
        implicit_names: bool = True,
    ) -> None:
        if max_subqueries < 1:
            raise ValueError(f"max_subqueries must be >= 1, got {max_subqueries}")
        if min_part_terms < 1:
            raise ValueError(f"min_part_terms must be >= 1, got {min_part_terms}")
        self.max_subqueries = int(max_subqueries)
        self.min_part_terms = int(min_part_terms)
        self.max_anaphora_words = int(max_anaphora_words)
        self.max_target_words = int(max_target_words)
        self.implicit_names = bool(implicit_names)

    def describe(self) -> dict:
        """Backend name and options."""
        return {
            "name": self.name,
            "max_subqueries": self.max_subqueries,
            "min_part_terms": self.min_part_terms,
            "max_anaphora_words": self.max_anaphora_words,
            "max_target_words": self.max_target_words,
            "implicit_names": self.implicit_names,
        }

    # ----- rewriting -----

    def rewrite(self, query: str, history: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        """Standalone form of an elliptical or anaphoric follow-up, and the rule that fired."""
        if not query.strip() or not any(h and h.strip() for h in history):
            return query, ()
        prev, answer = _previous_question(history)
        implicit = _implicit_name(prev, answer) if self.implicit_names else None
        for name, pat in _ELLIPSIS:
            m = pat.match(query)
            if m and self._is_target(m.group("x")):
                x = m.group("x").strip()
                x_mentions = [t for t in _mentions(query) if t.start >= m.start("x") and t.end <= m.end("x")]
                if x_mentions or _first_word(x) not in _ATTR_LEAD:
                    return self._replace_target(prev, x, x_mentions, implicit), (f"ellipsis:{name}",)
                carried = self._carry(prev, implicit)
                return (f"{query.rstrip()} {carried}", ("ellipsis:attribute",)) if carried else (query, ())
        words = [w for _, _, w in _tokens(query)]
        if len(query.split()) <= self.max_anaphora_words and any(w in _PRONOUNS for w in words) and not entities(query):
            carried = self._carry(prev, implicit)
            if carried:
                return f"{query.rstrip()} {carried}", ("anaphora:append_entities",)
        return query, ()

    def _is_target(self, x: str) -> bool:
        return (
            len(x.split()) <= self.max_target_words
            and "?" not in x
            and bool(_content_words(x))
            and _first_word(x) not in _WH | _AUX | _SUBJECTS
        )

    @staticmethod
    def _carry(prev: str, implicit: str | None) -> str:
        """The previous question's mentions (else its implicit name), space-separated."""
        names: dict[str, str] = {}
        for m in _mentions(prev):
            names.setdefault(m.text.lower(), m.text)
        return " ".join(names.values()) if names else (implicit or "")

    @staticmethod
    def _replace_target(prev: str, x: str, x_mentions: list[_Mention], implicit: str | None) -> str:
        if x_mentions:
            x = _ARTICLE.sub("", x)
        cands = _mentions(prev)
        kind = x_mentions[0].kind if x_mentions else None
        same = [c for c in cands if c.kind == kind]
        exact = [c for c in cands if c.kind in EXACT_KINDS]
        proper = [c for c in cands if c.kind == "proper_noun"]
        target = (same or exact or proper or [None])[-1]
        term = target.text if target else implicit
        if term is None:
            return f"{prev} {x}"
        at = x.find(x_mentions[0].text) if target is not None and len(x_mentions) == 1 else -1
        if at >= 0:
            head, tail = x[:at], x[at + len(x_mentions[0].text) :]
            before, after = prev[: target.start].lower(), prev[target.end :].lower()
            if before.endswith(head.lower()) and after.startswith(tail.lower()):
                x = x_mentions[0].text
        return _token_pattern(term).sub(lambda _: x, prev)

    # ----- decomposition -----

    def decompose(self, query: str) -> tuple[list[str], tuple[str, ...]]:
        """Sub-questions of a multi-part query, and the rules that fired."""
        rules: list[str] = []
        pieces = self._question_pieces(query)
        if len(pieces) >= 2:
            rules.append("split:question_marks")
        else:
            pieces = [query]
        parts: list[str] = []
        budget = 4 * self.max_subqueries
        stack = list(reversed(pieces))
        while stack:
            piece = stack.pop()
            split = self._coordination(piece) if len(parts) + len(stack) < budget else None
            if split is None:
                parts.append(piece)
            else:
                rule, sub = split
                rules.append(rule)
                stack.extend(reversed(sub))
        if not rules:
            return [query], ()
        return parts, tuple(dict.fromkeys(rules))

    def _enough(self, text: str) -> bool:
        return len(_content_words(text)) >= self.min_part_terms

    def _question_pieces(self, text: str) -> list[str]:
        """Rule 1: the pieces of ``text`` cut after each '?', short or non-question pieces merged."""
        spans, start = [], 0
        for m in re.finditer(r"\?+", text):
            spans.append((start, m.end()))
            start = m.end()
        if text[start:].strip():
            spans.append((start, len(text)))
        merged: list[list[int]] = []
        pending: int | None = None
        for s, e in spans:
            own = text[s:e].strip()
            if own.endswith("?") and self._enough(own):
                merged.append([s if pending is None else pending, e])
                pending = None
            elif merged:
                merged[-1][1] = e
            elif pending is None:
                pending = s
        return [text[s:e].strip() for s, e in merged]

    def _coordination(self, question: str) -> tuple[str, list[str]] | None:
        """Rule 2: (rule name, parts) for a coordinated single-sentence wh-question, else None."""
        q = question.strip()
        if _first_word(q) not in _WH or _SENTENCE_BREAK.search(q):
            return None
        if any(w in _RELATIONAL for _, _, w in _tokens(q)):
            return None
        return self._entity_coordination(q) or self._clause_coordination(q)

    def _entity_coordination(self, q: str) -> tuple[str, list[str]] | None:
        ms = _mentions(q)
        i = 0
        while i < len(ms):
            run, has_and = [ms[i]], False
            for nxt in ms[i + 1 :]:
                gap = q[run[-1].end : nxt.start]
                if not _CONNECTOR.match(gap):
                    break
                has_and = has_and or "," not in gap or bool(re.search(r"\band\b", gap, re.I))
                run.append(nxt)
            if len(run) >= 2 and has_and and not q[run[-1].end :].startswith(("'s", "’s")):
                prefix, suffix = q[: run[0].start], q[run[-1].end :]
                parts = [f"{prefix}{m.text}{suffix}" for m in run]
                if all(self._enough(p) for p in parts):
                    return "split:entity_coordination", parts
            i += len(run)
        return None

    def _clause_coordination(self, q: str) -> tuple[str, list[str]] | None:
        for m in _CONJUNCTION.finditer(q):
            left = q[: m.start()].strip().rstrip(",;:").strip()
            right = q[m.end() :].strip().rstrip("?.! ").strip()
            if not (self._enough(left) and self._enough(right)):
                continue
            if _first_word(right) in _WH | _AUX:
                return "split:clause_coordination", [left, right]
            if entities(right) - entities(left):
                prefix = _WH_PREFIX.match(left)
                if prefix:
                    return "split:clause_coordination", [left, f"{prefix.group(0).strip()} {right}"]
        return None
