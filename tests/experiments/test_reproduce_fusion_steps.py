"""Every learned-fusion model a tier's runs load is built by one of its prerequisite steps.

The trap: a fusion model is filed by dataset build, query pool (the run's sample, scopes or categories:
a model never learns from another subset's queries) and configuration; the step was named by dataset and
configuration only, so in the llm tier iteration 4 on 150 LetheBench queries and the budget sweep on 100
shared one step name, one model was built, and the runs of the other pool failed with "no learned-fusion
model" in a cold ``make reproduce-all``.
"""

from __future__ import annotations

import pytest

from experiments import train_fusion
from experiments.reference import load_tier, resolve
from experiments.reproduce import prepare_steps


@pytest.mark.parametrize("tier", ["smoke", "core", "llm"])
def test_each_fusion_model_the_runs_load_has_its_own_step(tier, tmp_path):
    runs = [resolve(r, [f"cache_dir={tmp_path}"]) for r in load_tier(tier).runs]
    needed = {train_fusion.model_folder(r.cfg) for r in runs if r.cfg.method.get("learned_fusion", {}).get("enabled")}
    steps = [s for s in prepare_steps(runs) if s.name.startswith("fusion ")]
    built = [train_fusion.model_folder(s.model[1]) for s in steps]
    assert len(built) == len(set(built)), "two steps build the same model"
    assert set(built) == needed, f"models no step builds: {sorted(map(str, needed - set(built)))}"
    assert all(not s.done for s in steps)   # an empty cache: every model is to be built


def test_the_llm_tier_builds_two_lethebench_pools():
    runs = [resolve(r, []) for r in load_tier("llm").runs if r.dataset == "lethebench"]
    names = [s.name for s in prepare_steps(runs) if s.name.startswith("fusion lethebench")]
    assert len(names) == 2 and all(" pool " in n for n in names), names
