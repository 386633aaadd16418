"""Prefix reuse in the in-process llama.cpp backend (``reuse_prompt_cache=True``, lethe/llm/backends.py)
on the real SmolLM2-135M-Instruct and real LetheBench / LoCoMo passages: the reranker's prompts give
the answer and the score of a fresh evaluation (within ``TOL``) while llama.cpp evaluates only what
follows the shared instruction + query; a call stopped at its deadline leaves a usable cache; the
response cache keeps reused and fresh answers apart."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import lethe.llm.backends as backends
from lethe.llm.backends import LlamaCppBackend
from lethe.llm.base import Decoding, LLMTimeout, Message
from lethe.llm.cache import response_key
from lethe.stages.rerank import DECODING, BudgetedReranker, p_yes_from_response
from tests.lethe.llm.real_passages import real_cases

# Stated tolerance on the answer token's logprob and on p(yes) between a reused and a fresh evaluation
# of the same prompt. Reused cells were computed in other batches, so rounding differs (measured max
# |p(yes) difference| on 100 LetheBench queries: SmolLM2 0.010, Qwen2.5-Coder-0.5B 0.033; `make bench`
# sections=[rerank_reuse] reports it per run on the candidates both paths judged).
TOL = 0.05
SUFFIX_TOKENS = 40  # the prompt's closing question and the chat template's tail, SmolLM2 tokens (generous)


@pytest.fixture(scope="module")
def fresh(model):
    b = LlamaCppBackend(model, n_ctx=2048, n_threads=1)
    yield b
    b.close()


@pytest.fixture(scope="module")
def reused(model):
    b = LlamaCppBackend(model, n_ctx=2048, n_threads=1, reuse_prompt_cache=True)
    yield b
    b.close()


@pytest.fixture(scope="module")
def cases(cfg_for):
    return real_cases(cfg_for, lethebench=2, locomo=1, per_query=3)


def _evaluated(b: LlamaCppBackend) -> int:
    return b.prompt_tokens_evaluated


def test_reused_prefix_gives_the_fresh_answers_and_scores(fresh, reused, cases):
    rr = BudgetedReranker(fresh, max_passage_chars=400, max_passage_tokens=96)
    assert len(cases) == 3 and all(len(c) == 3 for _, c in cases)
    worst = 0.0
    for qi, (query, cands) in enumerate(cases):
        for k, (_, text, _) in enumerate(cands):
            passage = rr.passage(text)
            messages = rr.prompt.render(query=query, passage=passage)
            a = fresh.chat(messages, DECODING, timeout_s=600)  # a deadline, as the reranker calls: chunked prompt
            before = _evaluated(reused)
            b = reused.chat(messages, DECODING, timeout_s=600)
            evaluated = _evaluated(reused) - before
            assert not a.cached and not b.cached and a.prompt_tokens == b.prompt_tokens
            assert b.text == a.text  # the same answer token
            d_lp = abs(a.token_logprobs[0] - b.token_logprobs[0])
            d_p = abs(p_yes_from_response(a) - p_yes_from_response(b))
            assert d_lp <= TOL and d_p <= TOL, (query, passage, a.token_logprobs, b.token_logprobs)
            worst = max(worst, d_lp, d_p)
            if qi == 0 and k == 0:
                assert evaluated == b.prompt_tokens  # nothing to reuse yet: the whole prompt
            elif k > 0:  # the instruction and the query came from the cache: the passage and the tail remain
                assert evaluated <= len(reused.tokenize(passage)) + SUFFIX_TOKENS, (evaluated, b.prompt_tokens)
            else:  # a new query: the instruction (system message) came from the cache
                assert evaluated < b.prompt_tokens
    assert fresh.prompt_tokens_evaluated == fresh.prompt_tokens_seen  # no reuse without the flag
    assert reused.prompt_tokens_evaluated < 0.7 * reused.prompt_tokens_seen
    print(
        f"\nprefix reuse on SmolLM2: max |d logprob|, |d p_yes| = {worst:.5f} (tolerance {TOL}); "
        f"tokens evaluated {reused.prompt_tokens_evaluated} of {reused.prompt_tokens_seen} (fresh: all {fresh.prompt_tokens_seen})"
    )


def test_exact_repeat_and_a_deadline_leave_a_consistent_cache(fresh, reused, cases, monkeypatch):
    """A call stopped between prompt chunks keeps the chunks it evaluated; the next call goes on from
    there and still gives the fresh answer. The clock is a fake that advances 1 s per reading, so the
    deadline falls after exactly two 8-token chunks (no timing in this test)."""
    query, cands = cases[1]
    rr = BudgetedReranker(fresh, max_passage_chars=400)
    m_prev = rr.prompt.render(query=query, passage=rr.passage(cands[0][1]))
    m = rr.prompt.render(query=query, passage=rr.passage(cands[2][1]))
    ref = fresh.chat(m, DECODING, timeout_s=600)
    reused.chat(m_prev, DECODING, timeout_s=600)  # the cache holds the instruction + query (+ another passage)
    before = reused.prompt_tokens_evaluated
    first = reused.chat(m, DECODING, timeout_s=600)
    tail = reused.prompt_tokens_evaluated - before
    assert tail < first.prompt_tokens and tail > 2 * 8
    again = reused.chat(m, DECODING, timeout_s=600)  # the same prompt: nothing (or one token) re-evaluated
    assert reused.prompt_tokens_evaluated - before - tail <= 1 and again.text == first.text

    reused.chat(m_prev, DECODING, timeout_s=600)
    clock = iter(range(10_000))
    monkeypatch.setattr(
        backends, "time", SimpleNamespace(monotonic=lambda: float(next(clock)), perf_counter=backends.time.perf_counter)
    )
    monkeypatch.setattr(reused, "interrupt_tokens", 8)
    with pytest.raises(LLMTimeout, match="prompt evaluation"):
        reused.chat(m, DECODING, timeout_s=2.5)  # checks at t=1, 2 evaluate a chunk each; t=3 stops
    monkeypatch.undo()
    before = reused.prompt_tokens_evaluated
    after = reused.chat(m, DECODING, timeout_s=600)
    assert reused.prompt_tokens_evaluated - before == tail - 2 * 8  # went on after the two chunks
    assert after.text == ref.text
    assert abs(after.token_logprobs[0] - ref.token_logprobs[0]) <= TOL


def test_response_cache_keeps_reused_and_fresh_answers_apart(model, tmp_path):
    msgs = [Message("user", "Is Paris in France? Answer yes or no.")]
    d = Decoding(max_tokens=1)
    plain = LlamaCppBackend(model, n_ctx=512, n_threads=1, cache_dir=tmp_path)
    reuse = LlamaCppBackend(model, n_ctx=512, n_threads=1, cache_dir=tmp_path, reuse_prompt_cache=True)
    try:
        assert reuse._key_extra() == {"reuse_prompt_cache": True} and plain._key_extra() is None
        assert response_key(model.sha256, msgs, d, "llamacpp", reuse._key_extra()) != response_key(
            model.sha256, msgs, d, "llamacpp", plain._key_extra()
        )
        assert not plain.chat(msgs, d).cached and plain.chat(msgs, d).cached
        r = reuse.chat(msgs, d)
        assert not r.cached and reuse.model_calls == 1  # the fresh entry is not served to the reusing backend
        assert reuse.chat(msgs, d).cached
        assert reuse.describe()["reuse_prompt_cache"] is True
        assert math.isfinite(r.token_logprobs[0])
    finally:
        plain.close()
        reuse.close()
