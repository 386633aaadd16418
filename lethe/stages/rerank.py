"""Budgeted pointwise LLM reranking: ask a language model "is this passage relevant?" for the
first ``top_n`` candidates of a ranking, within a per-query wall-clock budget.

Rules (``BudgetedReranker.rerank``):

- **Input**: ``candidates`` = ``(doc_id, text, prior_score)``, best first (doc ids unique). Only the
  first ``top_n`` are *considered*; the rest (the *tail*) are never sent to the model.
- **Judgment** (prompt ``rerank_pointwise.<prompt_version>``, placeholders ``query`` and ``passage``,
  the passage whitespace-collapsed, cut to ``max_passage_chars`` characters and then, when
  ``max_passage_tokens`` is set, to the text of its first ``max_passage_tokens`` tokens of the
  reranker model's own tokenizer (the backend's ``tokenize``/``detokenize``; a backend without them
  is refused at construction), decoded with ``Decoding(max_tokens=1, temperature=0)``.
  The answer is the generated text, stripped, lower-cased and stripped of surrounding punctuation
  and quotes; it must be ``yes`` or ``no``. With ``token_logprobs`` (first generated token's
  logprob ``lp``): ``p_yes = exp(lp)`` for "yes" and ``1 - exp(lp)`` for "no"; without logprobs
  ``p_yes`` is 1.0 / 0.0. Any other answer is a **parse failure** (counted, candidate unjudged).
- **Budget**: the clock starts at the first LLM call of the query. Candidates are judged in prior
  order; before each call, if ``elapsed >= budget_ms`` the loop stops (the remaining candidates are
  unjudged). Each call gets ``timeout_s = remaining budget``, so a slow call is cancelled by the
  backend: ``LLMTimeout`` is counted in ``timeouts`` and the candidate is unjudged; then the budget
  is spent and the loop stops. Other ``LLMError`` s are counted in ``errors`` (candidate unjudged,
  the loop goes on). With ``predictive_stop=True`` (off by default) the loop also stops before a
  call when the remaining budget is below the call's *predicted* duration, so a call that would most
  likely time out is not started (``predicted_stops`` = 1). The prediction comes from the last 64
  non-cached calls of this reranker (across queries), each a pair (cost characters, milliseconds); a
  call that timed out counts with its elapsed time, a lower bound of its true cost, so a backend too
  slow to ever finish a call inside the budget is still measured. A call costs a fixed overhead
  (chat template, one decoded token, logprobs) plus a time per evaluated character, so once two
  different costs were measured the prediction is the least-squares line ``a + b * cost`` (``a, b >=
  0``) plus the ``predict_quantile`` (default 0.9) of its residuals (at least 0); with one cost only,
  the ``predict_quantile`` of the measured milliseconds per cost character times the cost. (A
  per-character rate alone fails on a near-empty cost: a prompt identical to the previous one, as
  after the runner's warm-up search of the same query, costs 1 character but a whole call's overhead,
  and made every later call look hundreds of times too slow.) Before any measured call, the mean
  duration of this query's completed calls; before that, none (the call starts). **Probe**: a skipped first call yields no new measurement, so an
  estimate made while the machine was busy could stop every later query; therefore, after
  ``probe_every`` consecutive queries whose first call was predicted not to fit, the next query's
  first call starts anyway (``probes`` = 1; its timeout still applies). This matters for
  backends whose cancellation is late (in-process llama.cpp cannot interrupt prompt evaluation, so
  a cancelled call overruns the budget by up to one prompt evaluation). The rerank stage therefore takes at most ``budget_ms`` plus the backend's
  cancellation latency (for in-process llama.cpp: up to one uninterruptible prompt evaluation, see
  lethe/llm/backends.py) plus the fallback's time (below) plus bookkeeping.
- **Reach and replay**: ``reach`` (in the result and the query's flags) is how many candidates, in prior order,
  got an answer or an error before the loop stopped (the budget, a timeout or a predicted stop; a timed-out
  candidate is not reached). How far a wall-clock budget reaches depends on the CPU and its load; given
  ``reach`` (``rerank(..., reach=n)``, replaying a recorded run), the loop judges exactly the first ``n``
  candidates with no clock, no timeout and no predicted stop, so the same candidates are judged on any machine.
- **Prefix reuse**: a backend that keeps its KV cache between calls (``reuse_prompt_cache`` true,
  lethe/llm/backends.py) evaluates only what follows the prefix a prompt shares with its previous
  call: the instruction and the query are evaluated once per query, each later candidate costs its
  passage and the prompt's closing lines. The reranker reads that flag (``prefix_reuse`` in
  :meth:`BudgetedReranker.describe`) and then counts as a call's *cost characters* only the prompt
  characters after the longest common prefix with the previous call's prompt (system and user
  text joined); otherwise every prompt character (as before).
- **Fallback** (optional ``fallback(query, texts) -> scores``, e.g. a cross-encoder): if any
  considered candidate is unjudged after the LLM loop (budget ran out, timeout, parse failure or
  error), the fallback scores *all* unjudged considered candidates in one call (``fallback_used``
  = True, its time in ``fallback_ms``, outside the LLM budget). Its scores are mapped to [0, 1] by
  the logistic sigmoid (cross-encoder logits; ``fallback_is_probability=True`` clips them to [0, 1]
  instead) and used in place of ``p_yes``. An exception in the fallback propagates.
- **Combination** over the considered set (``w = weight``, ``prior_norm = lethe.retrieval.fusion.minmax`` of
  the considered candidates' prior scores)::

      new = w * p_yes              + (1 - w) * prior_norm   # judged by the LLM
      new = w * sigmoid(fallback)  + (1 - w) * prior_norm   # unjudged, scored by the fallback
      new = w * 0.5                + (1 - w) * prior_norm   # unjudged, no fallback (neutral)

  The considered candidates are sorted by ``new`` descending (ties: prior order), so unjudged ones
  without fallback keep their relative prior order. The tail follows in prior order with scores
  ``min(new) - 1, min(new) - 2, ...`` (0 - 1, ... when nothing was considered), so the output
  scores are non-increasing and the tail always ranks below every considered candidate.
- **Result**: ``judged`` (LLM judgments), ``considered``, ``share_judged = judged / considered``
  (0.0 when nothing was considered), ``llm_ms`` (wall clock from the first call to the end of the
  last), ``timeouts``, ``parse_failures``, ``errors``, ``predicted_stops``, ``probes``, ``fallback_used``/``fallback_ms``,
  ``total_ms``, and ``scores``: per considered doc id ``{"prior", "prior_norm", "p_yes" (None if
  unjudged), "source" ("llm" | "fallback" | "neutral"), "final"}``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lethe.llm.base import Decoding, LLMBackend, LLMError, LLMResponse, LLMTimeout
from lethe.llm.prompts import Prompt, load_prompt
from lethe.retrieval.fusion import minmax
from lethe.retrieval.ranking import top_indices
from lethe.text.collapse import collapse

__all__ = ["BudgetedReranker", "RerankResult", "parse_yes_no", "p_yes_from_response", "PROMPT_NAME", "DECODING"]

PROMPT_NAME = "rerank_pointwise"
DECODING = Decoding(max_tokens=1, temperature=0.0)
NEUTRAL = 0.5
_STRIP = " \t\r\n.,;:!?\"'`*()[]{}<>"

Fallback = Callable[[str, list[str]], Sequence[float]]


@dataclass
class RerankResult:
    """Final ranking (doc_id, score), scores non-increasing, plus per-query counters (module docstring)."""

    ranking: list[tuple[str, float]]
    judged: int
    considered: int
    share_judged: float
    llm_ms: float
    timeouts: int
    parse_failures: int
    fallback_used: bool
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: int = 0
    predicted_stops: int = 0
    probes: int = 0
    fallback_ms: float = 0.0
    total_ms: float = 0.0
    reach: int = 0


def parse_yes_no(text: str) -> str | None:
    """``"yes"`` / ``"no"`` from a generated answer (case, whitespace, punctuation ignored), else None."""
    t = (text or "").strip(_STRIP).lower()
    return t if t in ("yes", "no") else None


def p_yes_from_response(resp: LLMResponse) -> float | None:
    """p(yes) from one response (module docstring), None on a parse failure."""
    answer = parse_yes_no(resp.text)
    if answer is None:
        return None
    lps = resp.token_logprobs
    if lps and lps[0] is not None and math.isfinite(lps[0]):
        p = min(1.0, max(0.0, math.exp(min(0.0, float(lps[0])))))
        return p if answer == "yes" else 1.0 - p
    return 1.0 if answer == "yes" else 0.0


def _chars(messages: Sequence[Any]) -> int:
    return sum(len(m.content) for m in messages)


def _prompt_text(messages: Sequence[Any]) -> str:
    return "".join(m.content for m in messages)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # numerically stable logistic


class BudgetedReranker:
    """Pointwise yes/no LLM reranker of the first ``top_n`` candidates under ``budget_ms`` per query."""

    def __init__(
        self,
        llm: LLMBackend,
        budget_ms: float = 1200,
        top_n: int = 20,
        weight: float = 0.5,
        prompt_version: str = "v1",
        max_passage_chars: int = 1200,
        fallback: Fallback | None = None,
        *,
        fallback_is_probability: bool = False,
        predictive_stop: bool = False,
        predict_quantile: float = 0.9,
        probe_every: int = 25,
        max_passage_tokens: int | None = None,
    ):
        if budget_ms <= 0:
            raise ValueError(f"budget_ms must be > 0, got {budget_ms}")
        if top_n < 0:
            raise ValueError(f"top_n must be >= 0, got {top_n}")
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"weight must be in [0, 1], got {weight}")
        if max_passage_chars <= 0:
            raise ValueError(f"max_passage_chars must be > 0, got {max_passage_chars}")
        if max_passage_tokens is not None:
            if int(max_passage_tokens) <= 0:
                raise ValueError(f"max_passage_tokens must be > 0 or None, got {max_passage_tokens}")
            if not (callable(getattr(llm, "tokenize", None)) and callable(getattr(llm, "detokenize", None))):
                raise ValueError(
                    f"max_passage_tokens={max_passage_tokens} needs the reranker model's tokenizer, "
                    f"which backend {getattr(llm, 'name', type(llm).__name__)!r} does not expose "
                    "(tokenize/detokenize); set max_passage_tokens to null for it"
                )
        self.max_passage_tokens = int(max_passage_tokens) if max_passage_tokens is not None else None
        self.prefix_reuse = bool(getattr(llm, "reuse_prompt_cache", False))  # module docstring
        self._last_prompt = ""  # the previous call's prompt text (prefix reuse: what the backend holds)
        self.llm = llm
        self.budget_ms = float(budget_ms)
        self.top_n = int(top_n)
        self.weight = float(weight)
        self.max_passage_chars = int(max_passage_chars)
        self.fallback = fallback
        self.fallback_is_probability = fallback_is_probability
        self.predictive_stop = predictive_stop
        if not 0.0 < predict_quantile <= 1.0:
            raise ValueError(f"predict_quantile must be in (0, 1], got {predict_quantile}")
        self.predict_quantile = float(predict_quantile)
        self._measured: deque[tuple[int, float]] = deque(
            maxlen=64
        )  # (cost chars, ms) of non-cached calls, across queries
        if probe_every < 1:
            raise ValueError(f"probe_every must be >= 1, got {probe_every}")
        self.probe_every = int(probe_every)
        self._skipped_first = 0  # consecutive queries whose first call was predicted not to fit
        self.prompt: Prompt = load_prompt(PROMPT_NAME, prompt_version)

    def describe(self) -> dict[str, Any]:
        """Settings, prompt (name, version, sha256) and decoding, for a run manifest."""
        return {
            "budget_ms": self.budget_ms,
            "top_n": self.top_n,
            "weight": self.weight,
            "max_passage_chars": self.max_passage_chars,
            "max_passage_tokens": self.max_passage_tokens,
            "prefix_reuse": self.prefix_reuse,
            "fallback": self.fallback is not None,
            "fallback_is_probability": self.fallback_is_probability,
            "predictive_stop": self.predictive_stop,
            "predict_quantile": self.predict_quantile,
            "probe_every": self.probe_every,
            "prompt": self.prompt.describe(),
            "decoding": DECODING.as_dict(),
            "llm": getattr(self.llm, "name", type(self.llm).__name__),
        }

    def cost_chars(self, messages: Sequence[Any]) -> int:
        """Characters of ``messages`` a call pays for: all, or with prefix reuse those after the prefix
        shared with the previous call's prompt (module docstring); at least 1."""
        if not self.prefix_reuse:
            return max(1, _chars(messages))
        text = _prompt_text(messages)
        return max(1, len(text) - _common_prefix(text, self._last_prompt))

    def predict_s(self, messages: Sequence[Any], durations: Sequence[float] = ()) -> float | None:
        """Predicted duration (s) of one call with ``messages`` (module docstring), None if unknown."""
        if self._measured:
            return self.predict_ms(self.cost_chars(messages)) / 1000.0
        if durations:
            return sum(durations) / len(durations)
        return None

    def predict_ms(self, cost: int) -> float:
        """Predicted duration (ms) of a call of ``cost`` characters from the measured calls (module docstring)."""
        c = np.array([x for x, _ in self._measured], dtype=np.float64)
        d = np.array([y for _, y in self._measured], dtype=np.float64)
        q = self.predict_quantile
        if np.ptp(c) == 0:
            return float(np.quantile(d / c, q)) * cost
        b, a = np.polyfit(c, d, 1)
        if b < 0:  # durations fall with cost: no usable slope, a constant
            a, b = float(d.mean()), 0.0
        elif a < 0:  # no usable overhead: a line through the origin
            a, b = 0.0, float(c @ d / (c @ c))
        return a + b * cost + max(0.0, float(np.quantile(d - (a + b * c), q)))

    def passage(self, text: str) -> str:
        """The passage as sent: whitespace-collapsed, cut to ``max_passage_chars``, then to
        ``max_passage_tokens`` tokens of the model's tokenizer (module docstring)."""
        text = collapse(text, self.max_passage_chars)
        if self.max_passage_tokens is not None:
            tokens = self.llm.tokenize(text)  # type: ignore[attr-defined]
            if len(tokens) > self.max_passage_tokens:
                text = self.llm.detokenize(tokens[: self.max_passage_tokens])  # type: ignore[attr-defined]
        return text

    def rerank(
        self, query: str, candidates: Sequence[tuple[str, str, float]], reach: int | None = None
    ) -> RerankResult:
        """Rerank ``candidates`` (doc_id, text, prior score; best first) by the rules of the module docstring;
        ``reach``: replay a recorded reach (judge exactly the first ``reach`` considered candidates, no clock)."""
        t_start = time.perf_counter()
        ids = [c[0] for c in candidates]
        if len(set(ids)) != len(ids):
            raise ValueError("candidate doc ids must be unique")
        head, tail = list(candidates[: self.top_n]), list(candidates[self.top_n :])
        n = len(head)
        if reach is not None and not 0 <= int(reach) <= n:
            raise ValueError(f"reach={reach} is outside the {n} considered candidates")

        # ---- LLM judgments under the wall-clock budget
        p_yes: list[float | None] = [None] * n
        timeouts = parse_failures = errors = predicted_stops = probes = 0
        durations: list[float] = []  # seconds, completed calls of this query
        budget_s = self.budget_ms / 1000.0
        t0: float | None = None
        t_last = t_start
        reached = 0
        for i, (_, text, _) in enumerate(head):
            if reach is not None and i >= reach:
                break
            messages = self.prompt.render(query=query, passage=self.passage(text))
            cost = self.cost_chars(messages)
            now = time.perf_counter()
            if t0 is None:
                t0 = t_last = now
            remaining = budget_s - (now - t0) if reach is None else None
            if remaining is not None and remaining <= 0:
                break
            if self.predictive_stop and remaining is not None:
                predicted = self.predict_s(messages, durations)
                if predicted is not None and remaining < predicted:
                    if i > 0 or self._skipped_first < self.probe_every:
                        predicted_stops += 1
                        self._skipped_first += i == 0
                        break
                    probes += 1
                if i == 0:
                    self._skipped_first = 0
            if self.prefix_reuse:
                self._last_prompt = _prompt_text(messages)  # (after a timeout the backend holds part of it)
            try:
                resp = self.llm.chat(messages, DECODING, timeout_s=remaining)
            except LLMTimeout:
                timeouts += 1
                t_last = time.perf_counter()
                self._measured.append((cost, (t_last - now) * 1000.0))  # a lower bound
                break  # the budget is spent
            except LLMError:
                errors += 1
                reached += 1
                t_last = time.perf_counter()
                continue
            reached += 1
            t_last = time.perf_counter()
            durations.append(t_last - now)
            if not resp.cached:
                self._measured.append((cost, (t_last - now) * 1000.0))
            p = p_yes_from_response(resp)
            if p is None:
                parse_failures += 1
            p_yes[i] = p
        llm_ms = (t_last - t0) * 1000.0 if t0 is not None else 0.0
        judged = sum(p is not None for p in p_yes)

        # ---- fallback for the unjudged considered candidates
        rel = np.full(n, NEUTRAL, dtype=np.float64)
        source = ["neutral"] * n
        for i, p in enumerate(p_yes):
            if p is not None:
                rel[i], source[i] = p, "llm"
        unjudged = [i for i, p in enumerate(p_yes) if p is None]
        fallback_used, fallback_ms = False, 0.0
        if self.fallback is not None and unjudged:
            tf = time.perf_counter()
            raw = np.asarray(list(self.fallback(query, [head[i][1] for i in unjudged])), dtype=np.float64).reshape(-1)
            if raw.size != len(unjudged):
                raise ValueError(f"fallback returned {raw.size} scores for {len(unjudged)} texts")
            mapped = np.clip(raw, 0.0, 1.0) if self.fallback_is_probability else _sigmoid(raw)
            for i, s in zip(unjudged, mapped, strict=True):
                rel[i], source[i] = float(s), "fallback"
            fallback_used, fallback_ms = True, (time.perf_counter() - tf) * 1000.0

        # ---- combination and final order
        prior_norm = minmax(np.array([float(c[2]) for c in head], dtype=np.float64))
        new = self.weight * rel + (1.0 - self.weight) * prior_norm
        order = top_indices(new, n)  # ties keep the prior order
        ranking = [(head[i][0], float(new[i])) for i in order]
        lo = float(new.min()) if n else 0.0
        ranking += [(d, lo - (j + 1)) for j, (d, _, _) in enumerate(tail)]
        scores = {
            head[i][0]: {
                "prior": float(head[i][2]),
                "prior_norm": float(prior_norm[i]),
                "p_yes": p_yes[i],
                "source": source[i],
                "final": float(new[i]),
            }
            for i in range(n)
        }
        return RerankResult(
            ranking=ranking,
            judged=judged,
            considered=n,
            share_judged=judged / n if n else 0.0,
            llm_ms=llm_ms,
            timeouts=timeouts,
            parse_failures=parse_failures,
            fallback_used=fallback_used,
            scores=scores,
            errors=errors,
            predicted_stops=predicted_stops,
            probes=probes,
            fallback_ms=fallback_ms,
            total_ms=(time.perf_counter() - t_start) * 1000.0,
            reach=reached,
        )
