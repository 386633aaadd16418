"""Answer-quality metrics following LoCoMo's QA evaluation protocol.

Reference: snap-research/LoCoMo ``task_eval/evaluation.py`` (functions ``normalize_answer``,
``f1_score``, ``f1``, ``rougel_score``, ``exact_match_score`` and ``eval_question_answering``).
Category names are those pinned in ``lethebench.loaders.locomo.CATEGORY_MAP``
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).

Rules
-----
Normalization (``normalize_answer``), in LoCoMo's order:
  1. delete every ``,`` (LoCoMo does this first, so "1,000" -> "1000");
  2. lowercase (``str.lower``);
  3. delete every character of ``string.punctuation`` (ASCII punctuation only; other
     characters such as curly quotes or en dashes are kept, as in LoCoMo);
  4. replace the whole words ``a``, ``an``, ``the`` and ``and`` by a space (LoCoMo adds "and"
     to the usual SQuAD article list);
  5. collapse whitespace (``" ".join(s.split())``).

Tokens: the normalized string split on whitespace, each token stemmed with
``nltk.stem.PorterStemmer()`` in its default mode (``NLTK_EXTENSIONS``), exactly as LoCoMo's
``f1_score`` and ``rougel_score`` do (``ps = PorterStemmer(); ps.stem(w)``). No NLTK data is needed.
That mode departs from the original Porter algorithm (``lethe.text.analyzer.porter_stem``, Lucene's port,
which the retrieval side uses and which this module used before): NLTK special-cases irregular forms
("dying" -> "die", original "dy"; "lying" -> "lie"; "skies" -> "sky", original "ski"), strips extra
suffixes ("hopefully" -> "hope", original "hopefulli"), keeps a final "y" after a vowel ("says" -> "say",
"friday" -> "friday"; original "sai", "fridai") and leaves some words alone ("news", "one"; original
"new", "on"). On LoCoMo, 100 of the 4,157 distinct words of its answers and their evidence turns stem
differently.
tests/analysis/test_answers.py holds such cases.

What matches LoCoMo's official evaluation, as far as the per-answer score goes: ``normalize_answer``,
the stemmer, ``f1_score`` (``token_f1``), the multi-answer ``f1`` (``multi_answer_f1``), the cut of
category-3 gold answers at ``;`` and the category-5 abstention rule (``score_answer``), so answer F1
can be set beside published LoCoMo F1 numbers computed with that code. What differs: ``rouge_l`` is
true ROUGE-L (LoCoMo's ``rougel_score`` returns ROUGE-1, see below), ``exact_match`` compares strings
(LoCoMo's compares token sets) and a ``None`` prediction or gold is scored as "" (LoCoMo's code
expects strings); none of the three enters LoCoMo's QA scores. LoCoMo's ``normalize_answer`` deletes
articles with the third-party ``regex`` module, this module with ``re``: both give the same result
on every lowercased LoCoMo answer and turn (7,870 texts, checked once with a script; ``regex`` is not
a dependency here).

Token F1 (``token_f1``), as LoCoMo's ``f1_score``: ``common`` = size of the multiset
intersection of prediction and gold tokens; if ``common == 0`` the score is 0.0, otherwise
P = common / |pred|, R = common / |gold|, F1 = 2PR / (P + R).
Edge cases: because LoCoMo returns 0 whenever nothing is shared, an empty prediction, an empty
gold, and *both* empty (after normalization) all score 0.0 (unlike SQuAD, which gives 1.0 when
both are empty).

Multi-answer F1 (``multi_answer_f1``), as LoCoMo's ``f1``: split the raw prediction and the raw
gold on ``,`` (before normalization) and strip each part; for each gold part take the best
``token_f1`` over the prediction parts; return the mean over gold parts.

ROUGE-L (``rouge_l``): on the same stemmed normalized tokens as F1,
P = LCS / |pred|, R = LCS / |gold|, F = (1 + beta^2) P R / (R + beta^2 P) with beta = 1,
i.e. F = 2PR / (P + R), where LCS is the length of the longest common (not necessarily
contiguous) token subsequence; 0.0 when LCS == 0 or either side is empty. Unlike token F1 it
depends on word order. Note: LoCoMo's ``rougel_score`` actually returns the ``rouge`` package's
ROUGE-1 F (a bug upstream, and unused for the QA scores); we compute true ROUGE-L as above.
It equals ``rouge_score.rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)`` (Google's package) on
answers where the two tokenizations agree; they differ where rouge_score keeps articles, splits at
every non-[a-z0-9] character (``don't`` -> ``don t``, ``1,000`` -> ``1 000``, accented letters) or
leaves words of three letters unstemmed ("was": here "wa"). tests/analysis/test_answers.py checks
both on real LoCoMo answers.

Exact match (``exact_match``): 1.0 iff the normalized strings are equal (no stemming), else 0.0;
both empty -> 1.0. LoCoMo's own ``exact_match_score`` is laxer (it compares the *sets* of
normalized tokens, ignoring order and repeats) and is not used in its QA scores; we use the
strict string comparison that LoCoMo leaves commented out.

Per-category scoring (``score_answer``), following ``eval_question_answering``:
  * ``open-domain`` (LoCoMo category 3): the gold is cut to its first ``;``-separated part
    (stripped) before every metric;
  * ``multi-hop`` (category 1): ``f1`` is ``multi_answer_f1``;
  * ``temporal``, ``single-hop``, ``open-domain`` and ``None`` (no category): ``f1`` is
    ``token_f1``;
  * ``adversarial`` (category 5): the prediction abstains iff its lowercased raw text contains
    the substring ``"no information available"`` or ``"not mentioned"`` (exactly LoCoMo's two
    phrases; no normalization, so e.g. "not  mentioned" with two spaces or "no info" do not
    count). ``f1``, ``rouge_l`` and ``em`` are all 1.0 if it abstains, else 0.0; the gold is
    ignored.
  * ``rouge_l`` and ``em`` are computed on the whole (cut) strings for the non-adversarial
    categories. An unknown category name raises ``ValueError``.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from nltk.stem import PorterStemmer

from lethe.text.abstention import abstains
from lethe.text.collapse import collapse

CATEGORIES: tuple[str, ...] = ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial")

_PUNCT = set(string.punctuation)
_ARTICLES_RE = re.compile(r"\b(a|an|the|and)\b")
_STEMMER = PorterStemmer()  # default mode NLTK_EXTENSIONS, as LoCoMo's ``ps = PorterStemmer()``


def normalize_answer(s: str) -> str:
    """LoCoMo normalization: drop ',', lowercase, drop ASCII punctuation, drop a/an/the/and, collapse spaces."""
    s = str(s).replace(",", "")
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES_RE.sub(" ", s)
    return collapse(s)


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """NLTK's Porter stem of one normalized token (LoCoMo's ``ps.stem``), cached per word."""
    return _STEMMER.stem(word)


def _tokens(s: str) -> list[str]:
    return [_stem(w) for w in normalize_answer(s).split()]


def _prf(common: int, n_pred: int, n_gold: int) -> float:
    if common == 0 or n_pred == 0 or n_gold == 0:
        return 0.0
    p = common / n_pred
    r = common / n_gold
    return 2 * p * r / (p + r)


def token_f1(pred: str, gold: str) -> float:
    """Bag-of-stemmed-tokens F1 (LoCoMo ``f1_score``); 0.0 if nothing is shared, including both empty."""
    pt, gt = _tokens(pred), _tokens(gold)
    common = sum((Counter(pt) & Counter(gt)).values())
    return _prf(common, len(pt), len(gt))


def multi_answer_f1(pred: str, gold: str) -> float:
    """Mean over ','-separated gold parts of the best ``token_f1`` against any ','-separated prediction part."""
    preds = [p.strip() for p in str(pred).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def _lcs_len(a: list[str], b: list[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(pred: str, gold: str) -> float:
    """ROUGE-L F (beta=1) on stemmed normalized tokens: 2PR/(P+R), P=LCS/|pred|, R=LCS/|gold|."""
    pt, gt = _tokens(pred), _tokens(gold)
    return _prf(_lcs_len(pt, gt), len(pt), len(gt))


def exact_match(pred: str, gold: str) -> float:
    """1.0 iff ``normalize_answer(pred) == normalize_answer(gold)`` (no stemming), else 0.0."""
    return 1.0 if normalize_answer(pred) == normalize_answer(gold) else 0.0


def score_answer(pred: str, gold: str, category: str | None) -> dict[str, float]:
    """Score one answer under LoCoMo's per-category rules: ``{"f1", "rouge_l", "em"}``."""
    if category is not None and category not in CATEGORIES:
        raise ValueError(f"unknown LoCoMo category {category!r}; expected one of {CATEGORIES} or None")
    pred = "" if pred is None else str(pred)
    gold = "" if gold is None else str(gold)
    if category == "adversarial":
        s = 1.0 if abstains(pred) else 0.0
        return {"f1": s, "rouge_l": s, "em": s}
    if category == "open-domain":
        gold = gold.split(";")[0].strip()
    f1 = multi_answer_f1(pred, gold) if category == "multi-hop" else token_f1(pred, gold)
    return {"f1": f1, "rouge_l": rouge_l(pred, gold), "em": exact_match(pred, gold)}


AnswerRules = Callable[[str, Any, Any], dict[str, float] | None]
"""A dataset's answer rules: ``(answer, gold, category) -> {"f1", "rouge_l", "em"}``, or None when the question is
not scored (no gold answer the rules can use). ``gold`` and ``category`` are the query row's cells (any type)."""


def plain_rules(pred: str, gold: Any, category: Any) -> dict[str, float] | None:
    """Token F1, ROUGE-L and exact match against a non-empty gold answer (``category`` is not used); None without
    one."""
    return score_answer(pred, gold, None) if isinstance(gold, str) and gold.strip() else None


def locomo_rules(pred: str, gold: Any, category: Any) -> dict[str, float] | None:
    """LoCoMo's per-category rules (:func:`score_answer`); its adversarial questions, which have no gold answer,
    score 1 when the answer abstains, else 0; None for any other question without a gold answer."""
    category = category if isinstance(category, str) else None
    has_gold = isinstance(gold, str) and bool(gold.strip())
    if not has_gold and category != "adversarial":
        return None
    return score_answer(pred, gold if has_gold else None, category)


# dataset.answer_rules -> the rules its generated answers are scored by
ANSWER_RULES: dict[str | None, AnswerRules] = {None: plain_rules, "locomo": locomo_rules}


def answer_rules(name: str | None) -> AnswerRules:
    """The answer rules ``dataset.answer_rules`` names (null: :func:`plain_rules`); a ValueError names the key."""
    if name not in ANSWER_RULES:
        known = ", ".join("null" if k is None else repr(k) for k in ANSWER_RULES)
        raise ValueError(f"dataset.answer_rules must be one of {known}, got {name!r}")
    return ANSWER_RULES[name]


def embedding_similarity(
    preds: Sequence[str], golds: Sequence[str], encode: Callable[[list[str]], np.ndarray]
) -> list[float]:
    """Cosine similarity of each prediction's embedding with its gold answer's (seed 001's "SBERT similarity").

    ``encode(texts)`` returns L2-normalized vectors of shape (len(texts), dim) (the run's embedder, MiniLM by
    default); texts are embedded as given, without normalize_answer. One value per pair, in [-1, 1].
    """
    if len(preds) != len(golds):
        raise ValueError(f"{len(preds)} predictions for {len(golds)} gold answers")
    if not preds:
        return []
    vecs = np.asarray(encode([str(p) for p in preds] + [str(g) for g in golds]), dtype=np.float64)
    n = len(preds)
    a, b = vecs[:n], vecs[n:]
    return [float(x) for x in np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))]
