"""experiments.reproduce's command line: its own keys set the reproduce config, every other override goes to the
declared runs (keys read by Hydra's parser, lethe.core.overrides)."""

from __future__ import annotations

from experiments import reproduce as R


def test_own_keys_stay_and_every_other_override_goes_to_the_runs():
    given = [
        "tier=smoke",
        "action=verify",
        "select=[locomo/*]",
        "run.k=5",
        "+method.stages.llm_rerank.replay=r.json",
        "llm@method.stages.llm_rerank.llm=smollm2",
        "~answers",
        "keep_going=true",
    ]
    assert R.forwarded(given) == [
        "run.k=5",
        "+method.stages.llm_rerank.replay=r.json",
        "llm@method.stages.llm_rerank.llm=smollm2",
        "~answers",
    ]
    cfg = R.load(given)
    assert (cfg.tier, cfg.action, list(cfg.select), cfg.keep_going) == ("smoke", "verify", ["locomo/*"], True)
    assert list(cfg.overrides)[-4:] == R.forwarded(given)
