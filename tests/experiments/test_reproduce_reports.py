"""Which reports experiments.reproduce writes for a set of tiers: each tier's report group once, in tier order,
and the seed studies' report right after the reference report it draws its runs from."""

from __future__ import annotations

import pytest
from omegaconf import open_dict

from experiments import reproduce as R
from experiments.reference import load_tier


def test_the_seed_report_follows_the_reference_report():
    cfg = R.load()
    core, llm, smoke = (load_tier(n) for n in ("core", "llm", "smoke"))
    assert R.report_groups([core, llm, smoke], cfg) == ["reference", "seeds", "smoke"]
    assert R.report_groups([smoke], cfg) == ["smoke"]
    with open_dict(cfg):
        cfg.reports = ["seeds"]
    assert R.report_groups([core, llm], cfg) == ["seeds"]
    with pytest.raises(SystemExit, match="not a report"):
        R.report_groups([smoke], cfg)
    cfg.reports = None
    with open_dict(cfg):
        del cfg.out_dir["seeds"]
    assert R.report_groups([core], cfg) == ["reference"]
