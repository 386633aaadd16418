"""python -m experiments.bench (conf/bench.yaml): every setting is a key of its top config, an unknown
section is refused, and the cheap `jobs` section runs on the smoke tier into a folder of one's own."""

from __future__ import annotations

import json

import pytest

from experiments.bench import SECTIONS, bench
from experiments.config import load_config
from experiments.reference import REFERENCE_TIERS
from tests.conftest import DATA_ROOT


def test_top_config_lists_every_section():
    cfg = load_config([], config_name="bench")
    assert tuple(cfg.sections) == SECTIONS and cfg.reps == 3 and cfg.out_dir == "results/bench"
    assert list(cfg.tiers) == list(REFERENCE_TIERS) and list(cfg.run_overrides) == []  # every tier's jobs listed


def test_an_unknown_section_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="unknown bench sections"):
        bench(load_config(["sections=[jobs,warp]", f"out_dir={tmp_path}"], config_name="bench"))
    assert not (tmp_path / "bench.json").exists()


def test_jobs_section_on_the_smoke_tier(tmp_path):
    runs = [f"data.root={DATA_ROOT}", f"data.processed={tmp_path / 'processed'}", f"results_dir={tmp_path / 'runs'}"]
    cfg = load_config(
        [
            "sections=[jobs]",
            "tiers=[smoke]",
            f"out_dir={tmp_path / 'bench'}",
            "run_overrides=[" + ",".join(f"'{o}'" for o in runs) + "]",
        ],
        config_name="bench",
    )
    report = bench(cfg)
    assert set(report) == {"jobs"} and len(report["jobs"]["smoke"]["missing"]) == 34  # nothing run in these folders
    (tmp_path / "bench" / "bench.json").write_text(json.dumps({**report, "encode": {"kept": True}}))
    assert bench(cfg)["encode"] == {"kept": True}  # sections not run keep their figures


def test_llm_threads_are_compared_on_the_same_calls():
    """The thread-count lever (issue 34, item 3): each count makes the same seeded calls, interleaved; SmolLM2's greedy
    texts do not depend on the thread count, so the speed-up is the only difference."""
    from experiments.bench.llm import bench_llm_threads

    r = bench_llm_threads(["smollm2"], [1, 2], reps=2)["smollm2"]
    assert set(r["threads"]) == {"1", "2"} and r["speedup_over_first"]["1"] == 1.0
    assert all(t["median_call_ms"] > 0 and t["generation_tokens_per_s"] > 0 for t in r["threads"].values())
    assert r["identical_texts"] is True
