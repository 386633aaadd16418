"""Answer generation from retrieved passages, and an LLM judge of whether an answer is supported by them.

Context block (both classes, ``format_context``): each passage is whitespace-collapsed
(:func:`lethe.text.collapse.collapse`) and cut to its first ``max_doc_chars`` characters (no ellipsis), then
written as ``[i] text`` (i = 1, 2, ... in the given order), one passage per line. With no passages the
block is the line ``(no passages)`` and the model is still called (it should abstain).

``AnswerGenerator.generate(query, contexts)``:

- Uses the first ``context_docs`` passages (``context_doc_count`` = how many were used) and the prompt
  ``answer.<prompt_version>`` (placeholders ``context``, ``query``), decoded deterministically with
  ``Decoding(max_tokens, temperature=0, top_p=1, seed=0)`` and no stop strings.
- **Post-processing** (``postprocess_answer``) of the generated text, in order: (1) take the first line
  that is not blank; (2) drop one leading ``Answer:`` label (any case); (3) strip whitespace and the
  quote characters ``" ' `` and backticks around it. Nothing else is changed (no punctuation removal,
  no case change: answer metrics normalize on their own).
- **Status**: ``"ok"`` with the answer; ``"empty"`` when post-processing leaves nothing (answer None);
  ``"timeout"`` when the backend raises ``LLMTimeout`` (the call gets ``timeout_s``; None = the
  backend's default); ``"error"`` for any other ``LLMError`` (message in ``error``). A failed call is
  reported, never replaced by a guess; other exceptions propagate.
- An answer **abstains** iff ``lethe.text.abstention.abstains`` says so (its lowercased text contains
  ``"not mentioned"`` or ``"no information available"``, LoCoMo's adversarial rule); the prompt asks
  for exactly ``"not mentioned"``.
- ``llm_ms`` is the wall clock of the call (it includes loading the model on a backend's first
  uncached call); ``model_ms`` is the backend's own ``timings_ms["total"]`` (excludes loading; for a
  response-cache hit, ``cached=True``, it is the original generation's time).

``HallucinationJudge.judge(answer, contexts, query)``:

- Sees the first ``context_docs`` passages (None = all it is given; pass it the passages the generator
  used) and the prompt ``judge_support.<prompt_version>`` (placeholders ``context``, ``query``,
  ``answer``, the answer whitespace-collapsed), decoded with ``Decoding(max_tokens=1, temperature=0,
  seed=0)``.
- ``p_supported`` = ``lethe.stages.rerank.p_yes_from_response``: the reply must parse as yes/no
  (``lethe.stages.rerank.parse_yes_no``); with logprobs ``exp(lp)`` for "yes" and ``1 - exp(lp)`` for "no" (lp =
  first generated token's logprob), without logprobs 1.0 / 0.0. ``supported = p_supported >= threshold``
  (so a "yes" whose token probability is below the threshold counts as unsupported). ``verdict`` keeps
  the parsed word (``"yes"``/``"no"``) for status ``ok``, so the threshold's effect can be reported.
- **Abstentions are not hallucinations**: an answer that abstains (rule above) is not sent to the
  model; it gets ``status="abstention"``, ``supported=True``, ``p_supported=None``, ``llm_ms=0``.
- An answer that is None or blank gets ``status="no_answer"``, ``supported=None`` (no call).
- Failures leave ``supported=None`` and ``p_supported=None`` with a status: ``"parse_failure"`` (the reply
  is not yes/no; raw text kept in ``raw_text``), ``"timeout"`` (``LLMTimeout``), ``"error"`` (other
  ``LLMError``). Never a guess.

``hallucination_rate(results)``: ``judged`` = results with status ``"ok"`` (model judgments);
``unsupported`` = judged with ``supported=False``; ``rate = unsupported / judged`` (None when nothing
was judged). Abstentions are counted in ``abstentions`` and are *not* in the denominator;
``unjudged`` = parse failures + timeouts + errors (also per status in ``by_status``); ``no_answer``
counts results for missing answers. ``n`` = all results.

Both classes expose ``describe()`` (LLM name, prompt name/version/sha256, decoding, temperature,
settings) for run manifests.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMResponse, LLMTimeout
from lethe.llm.prompts import Prompt, load_prompt
from lethe.stages.rerank import p_yes_from_response, parse_yes_no
from lethe.text.abstention import abstains
from lethe.text.collapse import collapse

__all__ = [
    "AnswerGenerator",
    "GenerationResult",
    "HallucinationJudge",
    "JudgeResult",
    "hallucination_rate",
    "format_context",
    "postprocess_answer",
    "is_abstention",
    "ANSWER_PROMPT",
    "JUDGE_PROMPT",
    "ABSTENTION",
    "JUDGE_DECODING",
    "GENERATION_STATUSES",
    "JUDGE_STATUSES",
]

ANSWER_PROMPT = "answer"
JUDGE_PROMPT = "judge_support"
ABSTENTION = "not mentioned"
NO_PASSAGES = "(no passages)"
JUDGE_DECODING = Decoding(max_tokens=1, temperature=0.0, top_p=1.0, seed=0)
GENERATION_STATUSES = ("ok", "empty", "timeout", "error")
JUDGE_STATUSES = ("ok", "abstention", "no_answer", "parse_failure", "timeout", "error")
_QUOTES = " \t\r\n\"'`"
_LABEL = "answer:"


@dataclass
class GenerationResult:
    """One generated answer (module docstring): ``answer`` is None unless ``status == "ok"``."""

    answer: str | None
    status: str
    llm_ms: float
    prompt_tokens: int | None
    completion_tokens: int | None
    context_doc_count: int
    raw_text: str | None = None
    cached: bool = False
    finish_reason: str | None = None
    model_ms: float | None = None
    error: str | None = None


@dataclass
class JudgeResult:
    """One support judgment (module docstring): ``supported`` is None unless status is ok/abstention."""

    supported: bool | None
    p_supported: float | None
    status: str
    llm_ms: float
    raw_text: str | None = None
    cached: bool = False
    model_ms: float | None = None
    error: str | None = None
    verdict: str | None = None


def format_context(contexts: Sequence[str], max_doc_chars: int) -> str:
    """Numbered, whitespace-collapsed, cut passages, one per line (module docstring)."""
    lines = [f"[{i}] {collapse(t, max_doc_chars)}" for i, t in enumerate(contexts, 1)]
    return "\n".join(lines) if lines else NO_PASSAGES


def postprocess_answer(text: str | None) -> str | None:
    """First non-blank line, one leading ``Answer:`` dropped, quotes/whitespace stripped; None if empty."""
    line = next((ln for ln in (text or "").splitlines() if ln.strip()), "")
    line = line.strip()
    if line.lower().startswith(_LABEL):
        line = line[len(_LABEL) :]
    line = line.strip(_QUOTES)
    return line or None


def is_abstention(answer: str | None) -> bool:
    """True iff the answer abstains under LoCoMo's rule (``lethe.text.abstention.abstains``)."""
    return answer is not None and abstains(answer)


def _model_ms(resp: LLMResponse) -> float | None:
    v = (resp.timings_ms or {}).get("total")
    return float(v) if v is not None else None


def _check(name: str, value: int | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or int(value) <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")


class AnswerGenerator:
    """Short answers from the first ``context_docs`` passages (module docstring)."""

    def __init__(
        self,
        llm: LLMBackend,
        prompt_version: str = "v1",
        context_docs: int = 5,
        max_doc_chars: int = 600,
        max_tokens: int = 48,
        timeout_s: float | None = None,
    ):
        _check("context_docs", context_docs)
        _check("max_doc_chars", max_doc_chars)
        _check("max_tokens", max_tokens)
        self.llm = llm
        self.context_docs = int(context_docs)
        self.max_doc_chars = int(max_doc_chars)
        self.timeout_s = timeout_s
        self.decoding = Decoding(max_tokens=int(max_tokens), temperature=0.0, top_p=1.0, seed=0)
        self.prompt: Prompt = load_prompt(ANSWER_PROMPT, prompt_version)

    def describe(self) -> dict[str, Any]:
        """LLM name, prompt (name, version, sha256), decoding and settings, for a run manifest."""
        return {
            "llm": getattr(self.llm, "name", type(self.llm).__name__),
            "prompt": self.prompt.describe(),
            "decoding": self.decoding.as_dict(),
            "temperature": self.decoding.temperature,
            "context_docs": self.context_docs,
            "max_doc_chars": self.max_doc_chars,
            "timeout_s": self.timeout_s,
            "abstention": ABSTENTION,
        }

    def messages(self, query: str, contexts: Sequence[str]):
        """The rendered prompt for ``query`` and the first ``context_docs`` of ``contexts``."""
        return self.prompt.render(
            context=format_context(list(contexts)[: self.context_docs], self.max_doc_chars), query=collapse(query)
        )

    def generate(self, query: str, contexts: Sequence[str]) -> GenerationResult:
        """One answer by the rules of the module docstring."""
        used = min(len(contexts), self.context_docs)
        messages = self.messages(query, contexts)
        t0 = time.perf_counter()
        try:
            resp = self.llm.chat(messages, self.decoding, timeout_s=self.timeout_s)
        except LLMTimeout as exc:
            return GenerationResult(
                None, "timeout", (time.perf_counter() - t0) * 1000.0, None, None, used, error=str(exc)
            )
        except LLMError as exc:
            return GenerationResult(
                None, "error", (time.perf_counter() - t0) * 1000.0, None, None, used, error=str(exc)
            )
        llm_ms = (time.perf_counter() - t0) * 1000.0
        answer = postprocess_answer(resp.text)
        return GenerationResult(
            answer,
            "ok" if answer is not None else "empty",
            llm_ms,
            resp.prompt_tokens,
            resp.completion_tokens,
            used,
            raw_text=resp.text,
            cached=resp.cached,
            finish_reason=resp.finish_reason,
            model_ms=_model_ms(resp),
        )


class HallucinationJudge:
    """Yes/no LLM judgment: is every claim of an answer supported by the passages? (module docstring)."""

    def __init__(
        self,
        llm: LLMBackend,
        prompt_version: str = "v1",
        max_doc_chars: int = 600,
        threshold: float = 0.5,
        timeout_s: float | None = None,
        *,
        context_docs: int | None = None,
    ):
        _check("max_doc_chars", max_doc_chars)
        _check("context_docs", context_docs, allow_none=True)
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.llm = llm
        self.max_doc_chars = int(max_doc_chars)
        self.threshold = float(threshold)
        self.timeout_s = timeout_s
        self.context_docs = None if context_docs is None else int(context_docs)
        self.decoding = JUDGE_DECODING
        self.prompt: Prompt = load_prompt(JUDGE_PROMPT, prompt_version)

    def describe(self) -> dict[str, Any]:
        """LLM name, prompt (name, version, sha256), decoding and settings, for a run manifest."""
        return {
            "llm": getattr(self.llm, "name", type(self.llm).__name__),
            "prompt": self.prompt.describe(),
            "decoding": self.decoding.as_dict(),
            "temperature": self.decoding.temperature,
            "threshold": self.threshold,
            "max_doc_chars": self.max_doc_chars,
            "context_docs": self.context_docs,
            "timeout_s": self.timeout_s,
            "abstention_rule": "lethe.text.abstention.abstains -> supported, no LLM call",
        }

    def messages(self, answer: str, contexts: Sequence[str], query: str):
        """The rendered prompt for one (answer, passages, query)."""
        ctx = list(contexts) if self.context_docs is None else list(contexts)[: self.context_docs]
        return self.prompt.render(
            context=format_context(ctx, self.max_doc_chars), query=collapse(query), answer=collapse(answer)
        )

    def judge(self, answer: str | None, contexts: Sequence[str], query: str) -> JudgeResult:
        """One judgment by the rules of the module docstring."""
        if answer is None or not answer.strip():
            return JudgeResult(None, None, "no_answer", 0.0)
        if is_abstention(answer):
            return JudgeResult(True, None, "abstention", 0.0)
        messages = self.messages(answer, contexts, query)
        t0 = time.perf_counter()
        try:
            resp = self.llm.chat(messages, self.decoding, timeout_s=self.timeout_s)
        except LLMTimeout as exc:
            return JudgeResult(None, None, "timeout", (time.perf_counter() - t0) * 1000.0, error=str(exc))
        except LLMError as exc:
            return JudgeResult(None, None, "error", (time.perf_counter() - t0) * 1000.0, error=str(exc))
        llm_ms = (time.perf_counter() - t0) * 1000.0
        p = p_yes_from_response(resp)
        if p is None:
            return JudgeResult(
                None, None, "parse_failure", llm_ms, raw_text=resp.text, cached=resp.cached, model_ms=_model_ms(resp)
            )
        return JudgeResult(
            p >= self.threshold,
            p,
            "ok",
            llm_ms,
            raw_text=resp.text,
            cached=resp.cached,
            model_ms=_model_ms(resp),
            verdict=parse_yes_no(resp.text),
        )


def hallucination_rate(results: Iterable[JudgeResult]) -> dict[str, Any]:
    """``rate = unsupported / judged`` over model judgments, with every other outcome counted beside it."""
    results = list(results)
    by_status = {s: 0 for s in JUDGE_STATUSES}
    for r in results:
        if r.status not in by_status:
            raise ValueError(f"unknown judge status {r.status!r}; known: {JUDGE_STATUSES}")
        by_status[r.status] += 1
    judged = [r for r in results if r.status == "ok"]
    unsupported = sum(r.supported is False for r in judged)
    return {
        "rate": unsupported / len(judged) if judged else None,
        "n": len(results),
        "judged": len(judged),
        "supported": len(judged) - unsupported,
        "unsupported": unsupported,
        "abstentions": by_status["abstention"],
        "no_answer": by_status["no_answer"],
        "unjudged": by_status["parse_failure"] + by_status["timeout"] + by_status["error"],
        "by_status": by_status,
    }
