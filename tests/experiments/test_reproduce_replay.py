"""Budget runs through the reproduction contract (issue 34): a `replay: true` run is made on the wall clock only with
budget=wallclock, its reach is recorded into the reference store, and budget=replay (the default) then judges exactly
that reach; nothing CPU-dependent is ever stored or written as expected scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments import reproduce as R
from experiments.reference import load_tier, resolve
from lethe.core.paths import CONF_DIR
from lethebench.runs import RunFolder, flag_frame
from tests.conftest import overrides_for
from tests.experiments.test_iteration4_run import SMALL_LB, SMOL

TIER = {
    "description": "one budget run",
    "report": "reference",
    "overrides": [
        *SMALL_LB,
        *SMOL,
        "method.stages.learned_fusion.enabled=false",
        "method.stages.generation.enabled=false",
        "method.stages.llm_rerank.top_n=3",
        "method.stages.llm_rerank.budget_ms=2500",
    ],
    "runs": [{"datasets": ["lethebench"], "methods": ["lethe_iter4"], "sample": 3, "replay": True}],
}


def _args(work: dict, tmp_path: Path, *extra: str) -> list[str]:
    ref = tmp_path / "reference"
    if not ref.is_dir():
        ref.mkdir()
        (ref / "tolerances.yaml").write_text((CONF_DIR / "reference" / "tolerances.yaml").read_text())
        (ref / "budget.yaml").write_text(yaml.safe_dump(TIER))
    return [
        "tier=budget",
        f"reference_dir={ref}",
        f"store_dir={tmp_path / 'store'}",
        f"expected_dir={tmp_path / 'expected'}",
        "prepare.workers=1",
        *overrides_for(work),
        *extra,
    ]


def test_a_budget_run_is_replayed_from_the_reach_the_store_recorded(work, tmp_path, capsys):
    args = _args(work, tmp_path)
    # no reach recorded yet: the replay run is refused (named, with the way out), never run on the wall clock
    assert R.reproduce(R.load([*args, "action=run"])) == 1
    err = capsys.readouterr().err
    assert "the reference store holds no recorded reach" in err and "budget=wallclock action=run" in err
    # the store and the expected scores hold replays only
    for action in ("store", "write_expected"):
        with pytest.raises(SystemExit, match="declares replay runs"):
            R.reproduce(R.load([*args, f"action={action}", "budget=wallclock"]))
    with pytest.raises(SystemExit, match="add budget=wallclock"):
        R.reproduce(R.load([*args, "action=record_reach"]))
    # the wall-clock run (the latency study), then its reach into the store
    assert R.reproduce(R.load([*args, "action=run", "budget=wallclock"])) == 0
    assert R.reproduce(R.load([*args, "action=record_reach", "budget=wallclock"])) == 0
    reach_file = tmp_path / "store" / "budget" / "lethebench" / "lethe_iter4" / "reach.json"
    reach = json.loads(reach_file.read_text())
    assert len(reach) == 3 and sum(reach.values()) > 0
    # budget=replay: another run (the reach file's content is part of its identity) that judges exactly that reach
    assert R.reproduce(R.load([*args, "action=run"])) == 0
    [(_, [wall])] = R.resolve_tiers(R.load([*args, "budget=wallclock"]))
    [(_, [rep])] = R.resolve_tiers(R.load(args))
    assert rep.done and rep.blocked is None and rep.config_hash != wall.config_hash
    assert rep.cfg.method.stages.llm_rerank.replay == str(reach_file)  # outside the project: as given
    got = flag_frame(RunFolder(rep.folder).per_query.set_index("query_id"), "rerank")
    assert got["reach"].to_dict() == reach and got["replayed"].all()
    # the same candidates judged by the same model: the same rankings as the wall-clock run that recorded the reach
    assert RunFolder(rep.folder).run == RunFolder(wall.folder).run


def test_replay_declarations_are_checked(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text(yaml.safe_dump({"runs": [{"datasets": ["locomo"], "methods": ["bm25"], "replay": "yes"}]}))
    with pytest.raises(ValueError, match=r"runs\[0\]: replay must be true or false"):
        load_tier("t", tmp_path)
    run = load_tier("llm").runs[0]
    with pytest.raises(ValueError, match="budget='fast' is not one of"):
        resolve(run, budget="fast")
    replays = [r for r in load_tier("llm").runs if r.replay]
    assert replays and all(r.method == "lethe_iter4" for r in replays)
    assert not any(r.replay for name in ("core", "ablations", "seeds", "smoke") for r in load_tier(name).runs)
