"""The reranker's cheaper judgments (lethe/stages/rerank.py): passages cut to ``max_passage_tokens`` of the
model's own tokenizer, cost accounting with a prefix-reusing backend, the iteration-4 YAML wiring, and
the scores of a prefix-reusing reranker against a fresh one on the real SmolLM2 and real LetheBench /
LoCoMo passages (tolerance: tests/lethe/llm/test_prefix_reuse.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from omegaconf import OmegaConf

from lethe.core.paths import PROJECT_ROOT
from lethe.llm.backends import make_llm
from lethe.llm.base import Decoding, Message
from lethe.stages.rerank import BudgetedReranker
from tests.lethe.llm.real_passages import real_cases
from tests.lethe.llm.test_prefix_reuse import TOL
from tests.support.fake_llm import FakeLLM
from tests.support.method_yaml import build_stage

Q = "Who maintains the billing-api service?"
N_TOKENS = 12


class YesLLM(FakeLLM):
    """Says yes; ``reuse_prompt_cache`` as a backend that keeps its KV cache would set it."""

    def __init__(self, reuse: bool = False):
        super().__init__(0.0)
        self.reuse_prompt_cache = reuse

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        return "yes", [-0.1]


def _smollm2(tmp_path, reuse: bool):
    cfg = OmegaConf.load(PROJECT_ROOT / "conf" / "llm" / "smollm2.yaml")
    cfg.n_threads, cfg.reuse_prompt_cache, cfg.cache = 1, reuse, False
    return make_llm(cfg, cache_dir=tmp_path)


@pytest.fixture(scope="module")
def cases(cfg_for):
    return real_cases(cfg_for, lethebench=1, locomo=1, per_query=3)


def test_passage_cut_to_model_tokens(tmp_path, cases):
    llm = _smollm2(tmp_path, reuse=False)
    try:
        rr = BudgetedReranker(llm, max_passage_chars=400, max_passage_tokens=N_TOKENS)
        texts = [t for _, c in cases for _, t, _ in c]
        long_ = [t for t in texts if len(llm.tokenize(" ".join(t.split())[:400])) > N_TOKENS]
        short = [t for t in texts if len(llm.tokenize(" ".join(t.split())[:400])) <= N_TOKENS]
        assert long_, "the real passages should include some longer than the cut"
        for t in long_:
            full = " ".join(t.split())[:400]
            cut = rr.passage(t)
            assert cut == llm.detokenize(llm.tokenize(full)[:N_TOKENS]) and full.startswith(cut) and cut != full
            assert len(llm.tokenize(cut)) <= N_TOKENS
        for t in short:
            assert rr.passage(t) == " ".join(t.split())[:400]  # nothing to cut
        d = rr.describe()
        assert d["max_passage_tokens"] == N_TOKENS and d["max_passage_chars"] == 400 and d["prefix_reuse"] is False
        assert BudgetedReranker(llm).passage("a  b\n c") == "a b c"  # no token cut by default
    finally:
        llm.close()


def test_token_cut_needs_a_tokenizer_and_a_positive_limit():
    with pytest.raises(ValueError, match="tokenizer"):
        BudgetedReranker(YesLLM(), max_passage_tokens=64)
    with pytest.raises(ValueError, match="max_passage_tokens"):
        BudgetedReranker(YesLLM(), max_passage_tokens=0)


def test_cost_characters_follow_the_prefix_the_backend_reuses():
    cands = [(f"d{i}", f"passage number {i}", 3.0 - i) for i in range(3)]
    plain, reuse = BudgetedReranker(YesLLM(False)), BudgetedReranker(YesLLM(True))
    assert reuse.describe()["prefix_reuse"] is True and plain.describe()["prefix_reuse"] is False
    m = reuse.prompt.render(query=Q, passage="passage number 7")
    total = sum(len(x.content) for x in m)
    assert plain.cost_chars(m) == reuse.cost_chars(m) == total  # nothing evaluated before
    for rr in (plain, reuse):
        assert rr.rerank(Q, cands).judged == 3
    assert plain.cost_chars(m) == total
    user_tail = m[1].content[m[1].content.index("passage number 7") + len("passage number ") :]
    assert reuse.cost_chars(m) == len(user_tail)  # the previous prompt differed only from the passage's last word
    other = reuse.prompt.render(query="Which team owns the ledger?", passage="passage number 7")
    assert len(user_tail) < reuse.cost_chars(other) < total  # a new query: everything after the instruction


def test_iteration4_yaml_turns_prefix_reuse_and_the_token_cut_on(tmp_path):
    from lethe.llm.pool import LLMPool

    yaml = build_stage("llm_rerank", "lethe_iter4")
    assert yaml.describe()["max_passage_tokens"] == 96 and yaml.llm_cfg["reuse_prompt_cache"] is True
    assert yaml.llm_cfg["cache"] is False  # the YAML's reranker runs without the response cache
    # The YAML's reranker is Qwen 0.5B, which CI does not install; the same section on SmolLM2.
    small = OmegaConf.to_container(OmegaConf.load(PROJECT_ROOT / "conf" / "llm" / "smollm2.yaml"))
    stage = build_stage(
        "llm_rerank",
        "lethe_iter4",
        llm={**small, "reuse_prompt_cache": yaml.llm_cfg["reuse_prompt_cache"], "cache": False},
    )
    llms = LLMPool(tmp_path)
    try:
        stage.bind_llms(llms)
        assert stage.reranker.prefix_reuse and stage.reranker.max_passage_tokens == 96
        assert stage.reranker.llm.reuse_prompt_cache is True
        d = stage.describe()
        assert d["max_passage_tokens"] == 96 and d["reranker"]["prefix_reuse"] is True
        assert llms.backends()[0].describe()["reuse_prompt_cache"] is True
    finally:
        llms.close()


def test_prefix_reusing_reranker_scores_like_a_fresh_one_on_real_passages(tmp_path, cases):
    fresh, reused = _smollm2(tmp_path, reuse=False), _smollm2(tmp_path, reuse=True)
    try:
        a_rr = BudgetedReranker(fresh, budget_ms=600_000, top_n=10, max_passage_chars=400, max_passage_tokens=96)
        b_rr = BudgetedReranker(reused, budget_ms=600_000, top_n=10, max_passage_chars=400, max_passage_tokens=96)
        for query, cands in cases:
            a, b = a_rr.rerank(query, cands), b_rr.rerank(query, cands)
            assert a.judged == b.judged == len(cands) and a.parse_failures == b.parse_failures == 0
            for d in a.scores:
                assert abs(a.scores[d]["p_yes"] - b.scores[d]["p_yes"]) <= TOL
                assert abs(a.scores[d]["final"] - b.scores[d]["final"]) <= TOL * a_rr.weight
        assert reused.prompt_tokens_evaluated < fresh.prompt_tokens_evaluated == fresh.prompt_tokens_seen
    finally:
        fresh.close()
        reused.close()
