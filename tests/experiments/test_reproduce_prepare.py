"""Model prerequisites built in worker processes (experiments.prerequisites.build_in_workers): a failure in a
worker reaches the tier's bookkeeping with its message, and the other prerequisites still finish.
(The smoke tier, tests/experiments/test_reproduce_smoke.py, builds its real models this way.)"""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from experiments import prerequisites as P


def test_a_failing_worker_is_reported_and_the_others_finish():
    cfg = OmegaConf.create({"method": {"name": "none"}})
    ended: dict[int, tuple[float, BaseException | None]] = {}
    P.build_in_workers(
        [(3, ("no_such_model", cfg)), (5, ("fusion", cfg))],
        workers=2,
        threads=1,
        finish=lambda i, s, e: ended.__setitem__(i, (s, e)),
    )
    assert sorted(ended) == [3, 5]
    unknown, fusion = ended[3][1], ended[5][1]
    assert isinstance(unknown, ValueError) and "no_such_model" in str(unknown)
    # the fusion build got a config without learned_fusion: its own error, not a hang or a silent skip
    assert fusion is not None and "learned_fusion" in str(fusion)
    assert all(s >= 0 for s, _ in ended.values())


def test_build_model_restores_torch_threads():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        try:  # fails inside the build (no learned_fusion), after the thread count was set to 1
            P.build_model("fusion", OmegaConf.create({"method": {"name": "none"}}), threads=1)
        except Exception as exc:  # noqa: BLE001
            assert "learned_fusion" in str(exc)
        else:
            raise AssertionError("a fusion build without learned_fusion must fail")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_build_model_gives_the_llm_the_same_thread_budget_and_restores_it(monkeypatch):
    """The label-free questions' LLM runs inside a model build: two workers with two llama.cpp threads each on two
    cores spin-wait on each other (generations of 120 s for 22 tokens were measured), so it keeps the worker's budget."""
    from experiments import train_fusion
    from lethe.llm import backends

    seen = []
    monkeypatch.setattr(train_fusion, "ensure_model", lambda cfg: seen.append(backends.default_threads()))
    physical = backends.default_threads()
    P.build_model("fusion", OmegaConf.create({}), threads=1)
    assert seen == [1] and backends.default_threads() == physical
    P.build_model("fusion", OmegaConf.create({}), threads=None)
    assert seen == [1, physical]
    with pytest.raises(ValueError, match="thread budget"):
        backends.set_default_threads(0)


def test_workers_take_the_longest_recorded_prerequisite_first():
    # unknown durations (never measured) first, in declared order, then the longest recorded
    assert P.longest_first([5, 6, 7, 8, 9], [90.0, None, 1900.0, 90.0, None]) == [6, 9, 7, 5, 8]
    assert P.longest_first([], []) == []
