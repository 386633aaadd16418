"""python -m experiments.difficulty (conf/difficulty.yaml): the card's difficulty table from window, BM25
and vector on two real LoCoMo conversations. Each method runs with exactly the config its own run would
have, so the runs the tests already made are reused (same config hash, same folder), not repeated."""

from __future__ import annotations

import json

from experiments.config import load_config
from experiments.difficulty import difficulty, method_run_config
from experiments.run_identity import run_identity
from lethebench.runs import RunFolder
from tests.conftest import TWO_CONVS, overrides_for


def test_top_config():
    cfg = load_config(["dataset=techqa"], config_name="difficulty")
    assert list(cfg.methods) == ["window", "bm25", "vector"] and cfg.cards_dir == "results/cards"
    assert cfg.dataset.name == "techqa" and cfg.run.print_summary is False


def test_each_method_runs_with_its_own_run_config(work):
    cfg = load_config(overrides_for(work, f"dataset.scopes={TWO_CONVS}"), config_name="difficulty")
    for m in cfg.methods:
        mine = method_run_config(cfg, m)
        theirs = load_config(overrides_for(work, f"method={m}", f"dataset.scopes={TWO_CONVS}"))
        assert "methods" not in mine and "cards_dir" not in mine and mine.method == theirs.method
        assert run_identity(mine, "k").config_hash == run_identity(theirs, "k").config_hash


def test_writes_the_card_table_from_the_existing_runs(work, e2e_runs, tmp_path):
    cfg = load_config(
        overrides_for(work, f"dataset.scopes={TWO_CONVS}", f"cards_dir={tmp_path}"), config_name="difficulty"
    )
    section = difficulty(cfg)
    assert list(section["overall"]) == ["window", "bm25", "vector"]
    assert section["runs"] == {m: "/".join(f.parts[-3:]) for m, f in e2e_runs.items()}  # reused, not run again
    assert section["queries"] > 0 and all(0.0 <= v <= 1.0 for v in section["overall"].values())
    card = (tmp_path / "locomo.md").read_text()
    assert "bm25" in card and "vector" in card
    ds_folder = RunFolder(e2e_runs["bm25"]).dataset_folder
    assert json.loads((ds_folder / "difficulty.json").read_text()) == section
