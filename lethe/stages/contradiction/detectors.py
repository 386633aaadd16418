"""Contradiction detectors behind one interface: ``rules`` (lethe.stages.contradiction.rules) and ``llm`` (pairwise judgments).

Both detectors take the docs of one scope and return a :class:`DetectionResult`; ``make_detector``
builds one by name. Nothing here reads dataset labels.

**``rules``** (:class:`RulesDetector`): :func:`lethe.stages.contradiction.rules.detect` unchanged; the LLM counters
of the result stay 0.

**``llm``** (:class:`LLMContradictionDetector`): three steps.

1. *Blocking* (:func:`candidate_pairs`) proposes pairs of docs that are plausible fact updates, so the
   model is asked about a few dozen pairs per scope instead of all ~2,700 pairs of a 74-doc scope.
   For each doc:

   - *subject keys*: the scope's entity vocabulary is built from :func:`lethe.text.entities.entities` of
     every doc of the scope: each entity lowercased, ``_`` -> ``-``, split on ``/``, whitespace,
     ``:``, ``@``, ``=``, ``,`` into segments, and each segment expanded to its hyphen prefixes
     (``mailer-core-timeout-ms`` -> ``mailer``, ``mailer-core``, ``mailer-core-timeout``, ...);
     parts shorter than 3 characters, without a letter, or in a small stop list (function words,
     ``etc``, ``config``, ``services``, ``team``...) are dropped. A doc's subject keys are its own
     tokens (same normalization and prefix expansion) that are in this vocabulary, minus keys that
     occur in more than ``max(2, max_df_share * n_docs)`` docs (too common to name one thing). So a
     service named only in plain words in one doc (``Team Otter owns ledgerd``) is still keyed when
     another doc of the scope names it as an identifier (``/services/ledgerd/``).
   - *value tokens*: versions (``1.2.3``), sizes (``512Mi``, ``2GB``), durations (``800 ms``,
     ``2s``), cloud region codes (``eu-west-1``), ``team X`` names, host names with a digit
     (``db-8.internal``) and numbers of 2+ digits, lowercased with spaces, ``_`` and ``-`` removed
     (``team Otter`` = ``team-otter``).
   - *value kinds* (what kind of property the doc carries a value for): ``version``, ``size``,
     ``duration``, ``region``, ``store``, ``owner``, ``count``, ``port``; each is recognized by the
     value's shape (``512Mi`` -> size) or by the property word (``memory``, ``timeout``,
     ``region``, ``database``, ``owns``/``team X``, ``replicas``, ``port``...).

   A pair (two docs at *different* positions) is a candidate when the two docs share at least one
   value kind AND (share a subject key OR share a value token). Candidates are ordered by: more
   shared value tokens first, then the rarest shared subject key (highest ``log(n_docs / df)``),
   (ties: the longer key) then more shared kinds, then the smaller position gap, then later position, then doc ids; the
   first ``max_pairs`` are *considered*. ``blocking="all"`` skips the filter (every pair at
   different positions, ordered by gap then position; for tests and small inputs).
   How many labelled (stale, current) pairs the blocking keeps, per cap, is measured by
   ``python -m experiments.studies.contradiction_detection blocking_only=true`` (numbers in the report, not here).
2. *Judgment*: for each considered pair, earlier doc (lower position) and later doc, prompt
   ``contradiction_pairwise.<prompt_version>`` with placeholders ``earlier`` and ``later`` (each doc's
   text stripped and cut to ``max_doc_chars``), decoded with ``Decoding(max_tokens=1, temperature=0)``.
   The answer and p(yes) are read by :func:`lethe.stages.rerank.parse_yes_no` /
   :func:`lethe.stages.rerank.p_yes_from_response` (p(yes) from the first token's logprob; 1.0/0.0 without
   logprobs). **Conservative rule**: a conflict is declared only when the answer is ``yes`` AND
   ``p_yes >= threshold``; the earlier doc is the stale one, the later doc the current one. Any other
   answer is a parse failure (counted, no conflict, never guessed).
3. *Budget* (optional ``budget_ms``): the clock starts at the first LLM call of ``detect``. Before
   each call, if the budget is spent the loop stops (``budget_exhausted``; the remaining considered
   pairs are counted in ``not_judged``). Each call gets ``timeout_s`` = the remaining budget (and at
   most ``call_timeout_s`` when set). ``LLMTimeout`` is counted in ``timeouts``; with a budget it
   ends the loop (the budget is spent), without one the loop goes on. Other ``LLMError`` s are
   counted in ``errors`` and the loop goes on.

**Result** (:class:`DetectionResult`): ``conflicts`` (a :class:`lethe.stages.contradiction.rules.Conflict` per
declared pair, sorted like ``detect``'s; for ``llm`` the ``entity`` is the pair's rarest shared subject
key (else its first shared value token, else ""), ``attribute`` its shared kinds joined by ``+``, and
the values are "" (the model names none)), ``candidates`` (pairs after blocking, before the cap),
``pairs_considered``, ``judged`` (yes/no answers), ``parse_failures``, ``timeouts``, ``errors``,
``not_judged``; always ``judged + parse_failures + timeouts + errors + not_judged ==
pairs_considered``. ``cached`` = responses served from the backend's response cache; ``llm_ms`` = wall
clock from the first call to the end of the last; ``total_ms`` = the whole ``detect`` call; ``log`` = one
entry per considered pair ``{"stale", "current", "p_yes", "decision"}`` with decision one of
``conflict``, ``yes_below_threshold``, ``no``, ``parse_failure``, ``timeout``, ``error``,
``not_judged``.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from lethe.core.protocol import Doc
from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMTimeout
from lethe.llm.prompts import Prompt, load_prompt
from lethe.stages.contradiction.rules import Conflict, detect
from lethe.stages.rerank import p_yes_from_response, parse_yes_no
from lethe.text.entities import _FUNCTION_WORDS, entities

__all__ = [
    "DetectionResult",
    "CandidatePair",
    "RulesDetector",
    "LLMContradictionDetector",
    "make_detector",
    "candidate_pairs",
    "subject_keys",
    "value_tokens",
    "value_kinds",
    "BACKENDS",
    "BLOCKINGS",
    "PROMPT_NAME",
    "DECODING",
]

BACKENDS = ("rules", "llm")
BLOCKINGS = ("entity_value", "all")
PROMPT_NAME = "contradiction_pairwise"
DECODING = Decoding(max_tokens=1, temperature=0.0)
DECISIONS = ("conflict", "yes_below_threshold", "no", "parse_failure", "timeout", "error", "not_judged")


@dataclass
class DetectionResult:
    """Conflicts of one ``detect`` call plus counters (module docstring)."""

    conflicts: list[Conflict]
    backend: str
    candidates: int = 0
    pairs_considered: int = 0
    judged: int = 0
    parse_failures: int = 0
    timeouts: int = 0
    errors: int = 0
    not_judged: int = 0
    cached: int = 0
    llm_ms: float = 0.0
    total_ms: float = 0.0
    budget_exhausted: bool = False
    log: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------- blocking features
_STOP = frozenset(_FUNCTION_WORDS) | frozenset(
    "etc services service config configs yaml yml json team teams owners codeowners var opt usr src lib".split()
)
_TOKEN = re.compile(r"[a-z0-9][a-z0-9\-]*[a-z0-9]|[a-z]")
_SEG_SPLIT = re.compile(r"[/\s:@=,]+")
_VALUE = re.compile(
    r"\b\d+\.\d+(?:\.\d+)+\b"  # version 1.2.3
    r"|\b\d+(?:\.\d+)?\s?(?:[KMGT]i|[KMGT]B|[KMGT]iB|ms|s)\b"  # size or duration
    r"|\b(?:us|eu|ap|sa|ca|me|af|il|mx|cn)-(?:gov-)?[a-z]+-\d\b"  # cloud region code
    r"|\bteam[\s_-]+[a-z]+"  # team name
    r"|\b[a-z][a-z0-9-]*\d[a-z0-9-]*(?:\.[a-z0-9-]+)+\b"  # host name with a digit
    r"|\b\d{2,}\b",  # number of 2+ digits
    re.I,
)
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("version", re.compile(r"\b\d+\.\d+(?:\.\d+)+\b|\bversion\b|\brelease\b", re.I)),
    ("size", re.compile(r"\b\d+(?:\.\d+)?\s?(?:[KMGT]i|[KMGT]B|[KMGT]iB)\b|\bmemory\b|\bmem\b|\bram\b", re.I)),
    ("duration", re.compile(r"\b\d+\s?(?:ms|s|sec|secs|seconds|minutes|min)\b|timeout", re.I)),
    ("region", re.compile(r"\b(?:us|eu|ap|sa|ca|me|af|il|mx|cn)-(?:gov-)?[a-z]+-\d\b|\bregion\b", re.I)),
    (
        "store",
        re.compile(
            r"\b(?:postgres|postgresql|mysql|mariadb|mongodb|mongo|redis|cassandra|sqlite|dynamodb|"
            r"elasticsearch|clickhouse)\b|\bdatabase\b|\bdatastore\b",
            re.I,
        ),
    ),
    ("owner", re.compile(r"\bteam[\s_-]+[a-z]+|\bown(?:s|ed|er|ers|ership)?\b|\bmaintain", re.I)),
    ("count", re.compile(r"\b\d+\s?(?:replicas?|pods?|instances?|copies|nodes)\b|\b\d+/\d+\b|replica", re.I)),
    ("port", re.compile(r"\bport\b|:\d{2,5}\b", re.I)),
)


def _prefixes(token: str) -> set[str]:
    parts = token.split("-")
    return {"-".join(parts[:i]) for i in range(1, len(parts) + 1)}


def _keyable(part: str) -> bool:
    return len(part) >= 3 and any(ch.isalpha() for ch in part) and part not in _STOP


def _doc_terms(text: str) -> set[str]:
    out: set[str] = set()
    for tok in _TOKEN.findall(text.lower().replace("_", "-")):
        out |= _prefixes(tok)
    return out


def _vocab_parts(text: str) -> set[str]:
    out: set[str] = set()
    for e in entities(text):
        for seg in _SEG_SPLIT.split(e.lower().replace("_", "-")):
            seg = seg.strip(".-")
            if seg:
                out |= {p for p in _prefixes(seg) if _keyable(p)}
    return out


def value_tokens(text: str) -> frozenset[str]:
    """Normalized value-like tokens of ``text`` (module docstring)."""
    return frozenset(re.sub(r"[\s_-]+", "", m.lower()) for m in _VALUE.findall(text))


def value_kinds(text: str) -> frozenset[str]:
    """The value kinds ``text`` carries (module docstring)."""
    return frozenset(k for k, pat in _KINDS if pat.search(text))


def subject_keys(docs: Sequence[Doc], max_df_share: float = 0.5) -> dict[str, frozenset[str]]:
    """Per doc id, its subject keys within the scope ``docs`` (module docstring)."""
    vocab: set[str] = set()
    for d in docs:
        vocab |= _vocab_parts(d.text)
    keys = {d.doc_id: _doc_terms(d.text) & vocab for d in docs}
    df = Counter(k for ks in keys.values() for k in ks)
    limit = max(2.0, max_df_share * len(docs))  # a key of two docs always counts (a pair needs two)
    return {i: frozenset(k for k in ks if df[k] <= limit) for i, ks in keys.items()}


@dataclass(frozen=True)
class CandidatePair:
    """A considered pair: ``earlier`` has the lower position (the stale side if it is a conflict)."""

    earlier: Doc
    later: Doc
    shared_keys: tuple[str, ...]  # rarest first (ties: longest first)
    shared_values: tuple[str, ...]
    shared_kinds: tuple[str, ...]

    @property
    def entity(self) -> str:
        return self.shared_keys[0] if self.shared_keys else (self.shared_values[0] if self.shared_values else "")

    @property
    def attribute(self) -> str:
        return "+".join(self.shared_kinds)


def candidate_pairs(
    docs: Sequence[Doc], blocking: str = "entity_value", max_df_share: float = 0.5
) -> list[CandidatePair]:
    """All candidate pairs of ``docs`` in consideration order (module docstring), uncapped."""
    if blocking not in BLOCKINGS:
        raise ValueError(f"unknown blocking {blocking!r}; known: {', '.join(BLOCKINGS)}")
    ids = [d.doc_id for d in docs]
    if len(set(ids)) != len(ids):
        raise ValueError("doc ids must be unique")
    n = len(docs)
    ordered = sorted(docs, key=lambda d: (d.position, d.doc_id))
    if blocking == "all":
        pairs = [CandidatePair(a, b, (), (), ()) for a, b in combinations(ordered, 2) if a.position != b.position]
        return sorted(
            pairs,
            key=lambda p: (
                p.later.position - p.earlier.position,
                p.later.position,
                p.earlier.position,
                p.earlier.doc_id,
                p.later.doc_id,
            ),
        )
    keys = subject_keys(docs, max_df_share)
    df = Counter(k for ks in keys.values() for k in ks)
    vals = {d.doc_id: value_tokens(d.text) for d in docs}
    kinds = {d.doc_id: value_kinds(d.text) for d in docs}
    scored = []
    for a, b in combinations(ordered, 2):
        if a.position == b.position:
            continue
        sk = kinds[a.doc_id] & kinds[b.doc_id]
        if not sk:
            continue
        sv = vals[a.doc_id] & vals[b.doc_id]
        sh = keys[a.doc_id] & keys[b.doc_id]
        if not (sh or sv):
            continue
        shared_keys = tuple(sorted(sh, key=lambda k: (df[k], -len(k), k)))
        idf = math.log(n / df[shared_keys[0]]) if shared_keys else 0.0
        pair = CandidatePair(a, b, shared_keys, tuple(sorted(sv)), tuple(sorted(sk)))
        scored.append(
            ((-len(sv), -idf, -len(sk), b.position - a.position, b.position, a.position, a.doc_id, b.doc_id), pair)
        )
    scored.sort(key=lambda t: t[0])
    return [p for _, p in scored]


def _sort_conflicts(conflicts: list[Conflict], pos: dict[str, int]) -> list[Conflict]:
    return sorted(
        conflicts,
        key=lambda c: (
            pos[c.current_doc_id],
            pos[c.stale_doc_id],
            c.stale_doc_id,
            c.current_doc_id,
            c.entity,
            c.attribute,
        ),
    )


# ---------------------------------------------------------------- detectors
class RulesDetector:
    """``lethe.stages.contradiction.rules.detect`` behind the common interface."""

    backend = "rules"

    def detect(self, docs: Sequence[Doc]) -> DetectionResult:
        t0 = time.perf_counter()
        conflicts = detect(docs)
        return DetectionResult(
            conflicts=list(conflicts), backend=self.backend, total_ms=(time.perf_counter() - t0) * 1000.0
        )

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "detector": "lethe.stages.contradiction.rules.detect"}


class LLMContradictionDetector:
    """Pairwise yes/no LLM judgments on blocked candidate pairs (module docstring)."""

    backend = "llm"

    def __init__(
        self,
        llm: LLMBackend,
        prompt_version: str = "v1",
        threshold: float = 0.8,
        max_pairs: int = 40,
        max_doc_chars: int = 600,
        budget_ms: float | None = None,
        blocking: str = "entity_value",
        max_df_share: float = 0.5,
        call_timeout_s: float | None = None,
    ):
        if llm is None:
            raise ValueError("LLMContradictionDetector needs an llm backend (lethe.llm.backends.make_llm)")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        if max_pairs < 0:
            raise ValueError(f"max_pairs must be >= 0, got {max_pairs}")
        if max_doc_chars <= 0:
            raise ValueError(f"max_doc_chars must be > 0, got {max_doc_chars}")
        if budget_ms is not None and budget_ms <= 0:
            raise ValueError(f"budget_ms must be > 0 or None, got {budget_ms}")
        if blocking not in BLOCKINGS:
            raise ValueError(f"unknown blocking {blocking!r}; known: {', '.join(BLOCKINGS)}")
        if not 0.0 < max_df_share <= 1.0:
            raise ValueError(f"max_df_share must be in (0, 1], got {max_df_share}")
        if call_timeout_s is not None and call_timeout_s <= 0:
            raise ValueError(f"call_timeout_s must be > 0 or None, got {call_timeout_s}")
        self.llm = llm
        self.threshold = float(threshold)
        self.max_pairs = int(max_pairs)
        self.max_doc_chars = int(max_doc_chars)
        self.budget_ms = None if budget_ms is None else float(budget_ms)
        self.blocking = blocking
        self.max_df_share = float(max_df_share)
        self.call_timeout_s = call_timeout_s
        self.prompt: Prompt = load_prompt(PROMPT_NAME, prompt_version)

    def describe(self) -> dict[str, Any]:
        """Settings, prompt (name, version, sha256), decoding and model, for a run manifest."""
        llm_desc = self.llm.describe() if callable(getattr(self.llm, "describe", None)) else {}
        return {
            "backend": self.backend,
            "threshold": self.threshold,
            "max_pairs": self.max_pairs,
            "max_doc_chars": self.max_doc_chars,
            "budget_ms": self.budget_ms,
            "blocking": self.blocking,
            "max_df_share": self.max_df_share,
            "call_timeout_s": self.call_timeout_s,
            "prompt": self.prompt.describe(),
            "decoding": DECODING.as_dict(),
            "llm": getattr(self.llm, "name", type(self.llm).__name__),
            "llm_describe": llm_desc,
        }

    def _text(self, doc: Doc) -> str:
        return (doc.text or "").strip()[: self.max_doc_chars]

    def detect(self, docs: Sequence[Doc]) -> DetectionResult:
        """Judge the considered candidate pairs of ``docs`` (one scope) under the rules of the module docstring."""
        t_start = time.perf_counter()
        cands = candidate_pairs(docs, self.blocking, self.max_df_share)
        considered = cands[: self.max_pairs]
        res = DetectionResult(
            conflicts=[], backend=self.backend, candidates=len(cands), pairs_considered=len(considered)
        )
        budget_s = None if self.budget_ms is None else self.budget_ms / 1000.0
        t0: float | None = None
        t_last = t_start
        stopped_at = len(considered)
        for i, pair in enumerate(considered):
            entry: dict[str, Any] = {"stale": pair.earlier.doc_id, "current": pair.later.doc_id, "p_yes": None}
            messages = self.prompt.render(earlier=self._text(pair.earlier), later=self._text(pair.later))
            now = time.perf_counter()
            if t0 is None:
                t0 = now
            timeout = self.call_timeout_s
            if budget_s is not None:
                remaining = budget_s - (now - t0)
                if remaining <= 0:
                    res.budget_exhausted = True
                    stopped_at = i
                    break
                timeout = remaining if timeout is None else min(timeout, remaining)
            try:
                resp = self.llm.chat(messages, DECODING, timeout_s=timeout)
            except LLMTimeout:
                t_last = time.perf_counter()
                res.timeouts += 1
                res.log.append({**entry, "decision": "timeout"})
                if budget_s is not None:
                    res.budget_exhausted = True
                    stopped_at = i + 1
                    break
                continue
            except LLMError:
                t_last = time.perf_counter()
                res.errors += 1
                res.log.append({**entry, "decision": "error"})
                continue
            t_last = time.perf_counter()
            res.cached += bool(getattr(resp, "cached", False))
            p = p_yes_from_response(resp)
            if p is None:
                res.parse_failures += 1
                res.log.append({**entry, "decision": "parse_failure"})
                continue
            res.judged += 1
            answer = parse_yes_no(resp.text)
            if answer == "yes" and p >= self.threshold:
                decision = "conflict"
                res.conflicts.append(
                    Conflict(pair.earlier.doc_id, pair.later.doc_id, pair.entity, pair.attribute, "", "")
                )
            elif answer == "yes":
                decision = "yes_below_threshold"
            else:
                decision = "no"
            res.log.append({**entry, "p_yes": p, "decision": decision})
        for pair in considered[stopped_at:]:
            res.not_judged += 1
            res.log.append(
                {"stale": pair.earlier.doc_id, "current": pair.later.doc_id, "p_yes": None, "decision": "not_judged"}
            )
        res.llm_ms = (t_last - t0) * 1000.0 if t0 is not None else 0.0
        res.conflicts = _sort_conflicts(res.conflicts, {d.doc_id: d.position for d in docs})
        res.total_ms = (time.perf_counter() - t_start) * 1000.0
        return res


def make_detector(
    backend: str, llm: LLMBackend | None = None, **options: Any
) -> RulesDetector | LLMContradictionDetector:
    """A detector by name: ``rules`` (no llm, no options) or ``llm`` (needs ``llm``; options go to
    :class:`LLMContradictionDetector`). Anything else raises ValueError."""
    if backend == "rules":
        if llm is not None:
            raise ValueError("contradiction backend 'rules' takes no llm")
        if options:
            raise ValueError(f"contradiction backend 'rules' takes no options, got {sorted(options)}")
        return RulesDetector()
    if backend == "llm":
        if llm is None:
            raise ValueError(
                "contradiction backend 'llm' needs a model: pass llm=make_llm(conf/llm/<name>.yaml, cache_dir)"
            )
        return LLMContradictionDetector(llm, **options)
    raise ValueError(f"unknown contradiction backend {backend!r}; known: {', '.join(BACKENDS)}")
