"""A pairwise LLM judge of two answers to one question (seed 003's criteria, LightRAG's evaluation).

``PairwiseJudge.judge(query, answer_a, answer_b)`` asks the prompt ``judge_pairwise.<prompt_version>`` twice:
once with A as "Answer 1" and B as "Answer 2", once with the order swapped. Each reply names a winner ("Answer 1"
or "Answer 2") per criterion of :data:`CRITERIA` (:func:`parse_verdicts`). Per criterion:

- both orders name the same answer (A in the first order and A again after the swap): that answer wins;
- the orders disagree (each picked the answer in the same position, or each picked the other): ``"tie"``;
- an order failed for it (the call timed out or failed, the reply did not parse, or it named no winner for that
  criterion): ``None``, unjudged, counted apart and never guessed.

Position bias (:func:`position_bias`): over every parsed per-criterion verdict of both orders, the share that
named the answer in the first position (0.5 = no preference for a position).

Answers are whitespace-collapsed and cut to ``max_answer_chars`` characters; decoding is deterministic
(temperature 0, seed 0, ``max_tokens``). With ``constrained`` the reply is decoded under :func:`verdicts_schema`:
every criterion present, each value exactly "Answer 1" or "Answer 2". The defaults (prompt v2, free decoding) are
conf/pairwise_answers.yaml's, where the choice is explained; the parser checks the reply either way.
``describe()`` gives the model, the prompt's name, version and sha256, and the decoding, for manifests.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMTimeout
from lethe.llm.parsing import ParseError, extract_json
from lethe.llm.prompts import Prompt, load_prompt
from lethe.text.collapse import collapse

__all__ = [
    "CRITERIA",
    "OrderVerdict",
    "PairJudgment",
    "PairwiseJudge",
    "parse_verdicts",
    "position_bias",
    "verdicts_schema",
]

PAIRWISE_PROMPT = "judge_pairwise"
CRITERIA = ("Comprehensiveness", "Diversity", "Empowerment", "Overall Winner")
_POSITION = re.compile(r"\b(?:answer\s*)?([12])\b", re.IGNORECASE)


def _position(value: Any) -> int | None:
    """1 or 2 from "Answer 1" / "2" / {"Winner": "Answer 2", ...}; None when it names neither or both."""
    if isinstance(value, Mapping):
        value = next((v for k, v in value.items() if str(k).strip().lower() == "winner"), None)
    if isinstance(value, bool) or value is None:
        return None
    found = {int(m) for m in _POSITION.findall(str(value))}
    return found.pop() if len(found) == 1 else None


def verdicts_schema() -> str:
    """``parse_verdicts``' contract as a JSON Schema, JSON text with sorted keys (a cache-key part): every criterion
    required, each "Answer 1" or "Answer 2", nothing else."""
    choice = {"type": "string", "enum": ["Answer 1", "Answer 2"]}
    schema = {
        "type": "object",
        "properties": {c: choice for c in CRITERIA},
        "required": list(CRITERIA),
        "additionalProperties": False,
    }
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def parse_verdicts(text: str) -> dict[str, int | None]:
    """Criterion -> 1 or 2 (the position of the winner) or None (not named), from the reply's first JSON object.
    Keys match the criteria case-insensitively ("Overall" alone counts as "Overall Winner"). Raises
    lethe.llm.parsing.ParseError when the reply holds no JSON object."""
    obj = extract_json(text, dict)
    keys = {str(k).strip().lower(): v for k, v in obj.items()}
    out: dict[str, int | None] = {}
    for c in CRITERIA:
        v = keys.get(c.lower())
        if v is None and c == "Overall Winner":
            v = keys.get("overall")
        out[c] = _position(v)
    return out


@dataclass
class OrderVerdict:
    """One call: ``first`` = which answer ("A" or "B") stood in position 1; ``verdicts`` = criterion -> 1, 2 or None."""

    first: str
    status: str  # ok | parse_failure | timeout | error
    verdicts: dict[str, int | None] = field(default_factory=dict)
    llm_ms: float = 0.0
    raw_text: str | None = None
    cached: bool = False
    error: str | None = None


@dataclass
class PairJudgment:
    """Both orders of one pair and the per-criterion outcome: "A", "B", "tie" or None (unjudged)."""

    winners: dict[str, str | None]
    orders: tuple[OrderVerdict, OrderVerdict]

    @property
    def llm_ms(self) -> float:
        return sum(o.llm_ms for o in self.orders)


class PairwiseJudge:
    """Judge two answers in both orders (module docstring)."""

    def __init__(
        self,
        llm: LLMBackend,
        prompt_version: str = "v2",
        max_answer_chars: int = 1500,
        max_tokens: int = 64,
        timeout_s: float | None = None,
        constrained: bool = False,
    ):
        if int(max_answer_chars) < 1 or int(max_tokens) < 1:
            raise ValueError(f"max_answer_chars and max_tokens must be >= 1, got {max_answer_chars}, {max_tokens}")
        self.llm = llm
        self.max_answer_chars = int(max_answer_chars)
        self.timeout_s = timeout_s
        self.constrained = bool(constrained)
        free = Decoding(max_tokens=int(max_tokens), temperature=0.0, top_p=1.0, seed=0)
        self.decoding = replace(free, json_schema=verdicts_schema()) if self.constrained else free
        self.prompt: Prompt = load_prompt(PAIRWISE_PROMPT, prompt_version)

    def describe(self) -> dict[str, Any]:
        """Model, prompt (name, version, sha256), decoding and settings."""
        return {
            "llm": getattr(self.llm, "name", type(self.llm).__name__),
            "prompt": self.prompt.describe(),
            "decoding": self.decoding.as_dict(),
            "criteria": list(CRITERIA),
            "max_answer_chars": self.max_answer_chars,
            "timeout_s": self.timeout_s,
            "constrained": self.constrained,
            "rule": "both orders; a criterion's winner counts when both agree, else tie; failures unjudged",
        }

    def _cut(self, answer: str | None) -> str:
        return collapse(answer, self.max_answer_chars)

    def _ask(self, query: str, first: str, answer1: str, answer2: str) -> OrderVerdict:
        messages = self.prompt.render(query=collapse(query), answer1=self._cut(answer1), answer2=self._cut(answer2))
        t0 = time.perf_counter()
        try:
            resp = self.llm.chat(messages, self.decoding, timeout_s=self.timeout_s)
        except LLMTimeout as exc:
            return OrderVerdict(first, "timeout", llm_ms=(time.perf_counter() - t0) * 1e3, error=str(exc))
        except LLMError as exc:
            return OrderVerdict(first, "error", llm_ms=(time.perf_counter() - t0) * 1e3, error=str(exc))
        ms = (time.perf_counter() - t0) * 1e3
        try:
            verdicts = parse_verdicts(resp.text)
        except ParseError:
            return OrderVerdict(first, "parse_failure", llm_ms=ms, raw_text=resp.text, cached=resp.cached)
        return OrderVerdict(first, "ok", verdicts, ms, resp.text, resp.cached)

    def judge(self, query: str, answer_a: str | None, answer_b: str | None) -> PairJudgment:
        """Both orders and the per-criterion winners (module docstring)."""
        ab = self._ask(query, "A", answer_a, answer_b)
        ba = self._ask(query, "B", answer_b, answer_a)
        winners: dict[str, str | None] = {}
        for c in CRITERIA:
            x, y = ab.verdicts.get(c), ba.verdicts.get(c)
            if x is None or y is None:
                winners[c] = None
                continue
            w1 = "A" if x == 1 else "B"
            w2 = "B" if y == 1 else "A"
            winners[c] = w1 if w1 == w2 else "tie"
        return PairJudgment(winners, (ab, ba))


def position_bias(judgments: Iterable[PairJudgment], criteria: Iterable[str] | None = None) -> dict[str, Any]:
    """Over every parsed verdict of both orders on ``criteria`` (default: all): how many named position 1, and their
    share."""
    keep = None if criteria is None else set(criteria)
    first = total = 0
    for j in judgments:
        for o in j.orders:
            for c, v in o.verdicts.items():
                if v is not None and (keep is None or c in keep):
                    total += 1
                    first += v == 1
    return {"verdicts": total, "first_position": first, "share_first": first / total if total else None}
