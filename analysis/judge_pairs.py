"""Answer pairs whose better side is known from the data, not from us: the labelled set an LLM judge is validated
on (issue 35, item 5).

From a dataset's gold answers (``queries.answer``), each pair sets the gold answer of a question against one of:

- ``other_answer``: the gold answer of another question, from another scope (conversation, technote);
- ``number``: the gold answer with one number changed (another value, same format);
- ``date``: the gold answer with one month name or one year changed;
- ``entity``: the gold answer with one capitalised name (not the first word, not a month or weekday) replaced by a
  name from another gold answer of the dataset that the answer does not hold;
- ``truncation``: the first third of the gold answer's words (answers of at least 9 words).

The gold answer is the better answer on correctness by construction. Its position (1 or 2) is drawn per pair from
the seed, so a judge that always prefers one position scores one half. Pairs are split dev/test by group (by
default the scope: every pair of one conversation in one split; where one scope holds the whole collection, as in
TechQA, pass the gold document as the group), so that nothing about a judge (its prompt, its decoding) is chosen on
the pairs that report its accuracy; another question's answer comes from another group. Deterministic from
(dataset, seed), whatever PYTHONHASHSEED is (``experiments.studies.judge_validation`` passes the processed folder's name, the
dataset's build key, so a rebuilt dataset draws its pairs afresh).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from lethe.core.hashing import seed_of

PERTURBATIONS = ("other_answer", "number", "date", "entity", "truncation")
COLUMNS = [
    "pair_id",
    "dataset",
    "query_id",
    "group",
    "split",
    "perturbation",
    "question",
    "answer_1",
    "answer_2",
    "better",
    "gold",
    "other",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?:\.(\d+))?(?![\w.]*\d)")
_YEAR = re.compile(r"\b(19|20)\d\d\b")
_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
_NAME = re.compile(r"(?<=\s)([A-Z][a-z]{2,})(?![\w-])")
MIN_TRUNCATION_WORDS = 9


def _rng(*parts: Any) -> random.Random:
    return random.Random(seed_of(*parts))


def change_number(text: str, rng: random.Random) -> str | None:
    """``text`` with one number (not part of a year) replaced by another of the same format; None without one."""
    spans = [m for m in _NUMBER.finditer(text) if not _YEAR.fullmatch(m.group(0))]
    if not spans:
        return None
    m = rng.choice(spans)
    whole = int(m.group(1))
    new = whole + rng.randint(1, 9) if whole < 10 or rng.random() < 0.5 else max(0, whole - rng.randint(1, 9))
    digits = str(new) + (f".{m.group(2)}" if m.group(2) is not None else "")
    return text[: m.start()] + digits + text[m.end() :]


def change_date(text: str, rng: random.Random) -> str | None:
    """``text`` with one month name or one year changed; None without either."""
    spans = [("month", m) for m in _MONTH.finditer(text)] + [("year", m) for m in _YEAR.finditer(text)]
    if not spans:
        return None
    kind, m = rng.choice(spans)
    if kind == "month":
        new = rng.choice([x for x in MONTHS if x != m.group(0)])
    else:
        new = str(int(m.group(0)) + rng.choice([-3, -2, -1, 1, 2, 3]))
    return text[: m.start()] + new + text[m.end() :]


def _name_spans(text: str) -> list[re.Match]:
    # a capitalised word after whitespace: never the first word of the answer
    return [m for m in _NAME.finditer(text) if m.group(1) not in MONTHS and m.group(1) not in WEEKDAYS]


def names(text: str) -> list[str]:
    """The capitalised names of ``text`` an entity change may replace (not its first word, months or weekdays)."""
    return [m.group(1) for m in _name_spans(text)]


def change_entity(text: str, pool: list[str], rng: random.Random) -> str | None:
    """``text`` with one of its :func:`names` replaced by a name of ``pool`` that ``text`` does not hold."""
    own = _name_spans(text)
    others = [p for p in pool if p not in text]
    if not own or not others:
        return None
    m = rng.choice(own)
    return text[: m.start()] + rng.choice(others) + text[m.end() :]


def truncate(text: str) -> str | None:
    """The first third of ``text``'s words (at least 3), for answers of at least MIN_TRUNCATION_WORDS words."""
    words = text.split()
    if len(words) < MIN_TRUNCATION_WORDS:
        return None
    return " ".join(words[: max(3, len(words) // 3)])


def build_pairs(
    queries: pd.DataFrame, dataset: str, seed: int = 0, dev_share: float = 0.3, groups: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Every pair (module docstring) the gold answers of ``queries`` (columns query_id, scope_id, text, answer) allow,
    one per (question, perturbation) that applies; :data:`COLUMNS` (``group``: the split's unit, ``groups[query_id]``
    or the scope), in query order."""
    if not 0.0 < dev_share < 1.0:
        raise ValueError(f"dev_share must be in (0, 1), got {dev_share}")
    missing = {"query_id", "scope_id", "text", "answer"} - set(queries.columns)
    if missing:
        raise ValueError(f"queries of {dataset} lack the column(s) {sorted(missing)}")
    q = queries[queries["answer"].notna() & queries["answer"].astype(str).str.strip().ne("")]
    golds = dict(zip(q["query_id"], q["answer"].astype(str).str.strip(), strict=True))
    scope_of = dict(zip(q["query_id"], q["scope_id"], strict=True))
    group_of = {qid: str(groups[qid]) if groups is not None else str(scope_of[qid]) for qid in golds}
    pool = sorted({n for a in golds.values() for n in names(a)})
    rows = []
    for qid, question in zip(q["query_id"], q["text"], strict=True):
        gold, group = golds[qid], group_of[qid]
        split = "dev" if _rng(dataset, seed, "split", group).random() < dev_share else "test"
        for kind in PERTURBATIONS:
            rng = _rng(dataset, seed, kind, qid)
            if kind == "other_answer":
                others = [o for o in golds if group_of[o] != group and golds[o].lower() != gold.lower()]
                other = golds[rng.choice(others)] if others else None
            elif kind == "number":
                other = change_number(gold, rng)
            elif kind == "date":
                other = change_date(gold, rng)
            elif kind == "entity":
                other = change_entity(gold, pool, rng)
            else:
                other = truncate(gold)
            if other is None or other == gold:
                continue
            first = rng.random() < 0.5
            rows.append(
                {
                    "pair_id": f"{qid}:{kind}",
                    "dataset": dataset,
                    "query_id": qid,
                    "group": group,
                    "split": split,
                    "perturbation": kind,
                    "question": question,
                    "answer_1": gold if first else other,
                    "answer_2": other if first else gold,
                    "better": "1" if first else "2",
                    "gold": gold,
                    "other": other,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Pairs per perturbation and split, and the share with the gold answer first (one half in expectation)."""
    g = pairs.groupby(["perturbation", "split"])
    return pd.DataFrame(
        {"pairs": g.size(), "gold_first": g["better"].apply(lambda s: float((s == "1").mean()))}
    ).reset_index()
