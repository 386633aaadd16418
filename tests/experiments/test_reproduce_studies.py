"""The LLM studies of a tier (conf/reference/llm_studies.yaml `studies:`) as experiments.reproduce runs them: each
is a Hydra entry point whose declared overrides, plus the output folder, cache dir and processed dataset
reproduce adds, compose in its own top config to exactly the settings the verified tables were made with;
and a study run (rules only, real processed LetheBench, a real subprocess) leaves a self-describing folder
that is published with its manifest."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import yaml

from analysis import expected as E
from experiments import expected_scores as X
from experiments import reproduce as R
from experiments import study_jobs as S
from experiments.config import load_config
from experiments.datasets import dataset_build_key
from experiments.reference import load_tier
from lethe.core.paths import PROJECT_ROOT
from lethebench.studies import StudyFolder
from tests.conftest import DATA_ROOT, overrides_for

# the settings of the verified tables (the argparse flags they were made with, as config values)
CONTRADICTION = {
    "backends": ["rules", "llm"],
    "scopes": 20,
    "split": "test",
    "seed": 0,
    "rules_all": True,
    "threshold": 0.8,
    "max_pairs": 30,
    "max_doc_chars": 600,
    "budget_ms": None,
    "prompt_version": "v1",
    "n_threads": 1,
    "llm_cache": False,
    "blocking_only": False,
    "llms": ["qwen_coder_0_5b", "smollm2"],
}
SETTINGS = {
    "contradiction_detection": CONTRADICTION,
    "contradiction_detection_qwen1_5b": {
        **CONTRADICTION,
        "llms": ["qwen_coder_1_5b"],
        "scopes": 6,
        "rules_all": False,
        "n_threads": 2,
    },
    "judge_agreement": {
        "llms": ["qwen_coder_0_5b", "qwen_coder_1_5b", "smollm2"],
        "items_file": "tests/data/judge_labels.jsonl",
        "threshold": 0.5,
        "timeout_s": None,
        "n_threads": 1,
        "llm_cache": False,
    },
    "seed003_pairwise": {
        "judges": ["qwen_coder_1_5b"],
        "prompt_version": "v2",
        "constrained": False,
        "max_unjudged_share": 0.1,
        "n_threads": 2,
        "llm_cache": True,
        "labels_file": "tests/data/pairwise_labels.jsonl",
        "pairs": [[f"{d}_{m}", f"{d}_{m}_std", f"{d}_{m}_hyde"] for d in ("cs", "mix") for m in ("local", "hybrid")],
    },
    **{
        f"pairwise_decoding_dev_{v}_{mode}": {
            "judges": ["qwen_coder_1_5b"],
            "prompt_version": v,
            "constrained": mode == "schema",
            "max_unjudged_share": 1.0,
            "n_threads": 2,
            "labels_file": "tests/data/pairwise_labels.jsonl",
            "pairs": [["techqa_dev", "vector", "boost_llm"]],
        }
        for v in ("v1", "v2")
        for mode in ("free", "schema")
    },
}


def test_llm_and_seed_tier_studies_compose_to_the_verified_settings(tmp_path):
    paths = [
        f"data.root={DATA_ROOT}",
        f"data.processed={tmp_path / 'p'}",
        f"cache_dir={tmp_path / 'c'}",
        f"results_dir={tmp_path / 'r'}",
    ]
    studies = [st for name in ("llm_studies", "seeds", "seed003") for st in load_tier(name).studies]
    assert {st.name for st in studies} == set(SETTINGS)
    key = dataset_build_key(load_config(["dataset=lethebench", *paths]))
    for st in studies:
        cfg = R.load([f"tier={st.tier}", *paths])
        cmd = S.study_command(st, cfg)
        assert cmd[1:3] == ["-m", st.module]
        top = load_config(cmd[3:], config_name=st.module.rsplit(".", 1)[-1])
        got = {k: (list(v) if hasattr(v, "__len__") and not isinstance(v, str) else v) for k, v in top.items()}
        assert {k: got[k] for k in SETTINGS[st.name]} == SETTINGS[st.name], st.name
        assert top.out_dir == str(tmp_path / "r" / "studies" / st.name) and top.cache_dir == str(tmp_path / "c")
        if st.dataset:
            assert top.dataset_folder == str(tmp_path / "p" / "lethebench" / key)
        for name, run_key in st.runs:  # each named run's results folder, found by config hash like the report's
            ds, label = run_key.split("/")
            folder = Path(top.run_folders[name])
            assert folder.parent == tmp_path / "r" / ds / label and len(folder.name) == 12


SMALL_LB = [
    "dataset=lethebench",
    "dataset.params.splits={test: 3, train: 6, dev: 3}",
    "dataset.params.session_turns=[20,30]",
]


def test_a_study_run_is_self_describing_and_published(work, tmp_path):
    from experiments.datasets import prepare_dataset

    lb = prepare_dataset(load_config(overrides_for(work, *SMALL_LB)))
    ref = tmp_path / "reference"
    ref.mkdir()
    (ref / "tolerances.yaml").write_text((PROJECT_ROOT / "conf" / "reference" / "tolerances.yaml").read_text())
    (ref / "mini.yaml").write_text(
        yaml.safe_dump(
            {
                "description": "one study",
                "report": "smoke",
                "runs": [],
                "studies": {
                    "rules_only": {
                        "module": "experiments.studies.contradiction_detection",
                        "overrides": [
                            "backends=[rules]",
                            "split=test",
                            "scopes=2",
                            f"dataset_folder={lb}",
                            f"hydra.run.dir={tmp_path / 'hydra'}",
                        ],
                        "verify": {"row_key": ["backend", "model", "scopes"], "metrics": ["tp", "fp", "fn"]},
                    }
                },
            }
        )
    )
    cfg = R.load(
        [
            "tier=mini",
            f"reference_dir={ref}",
            f"out_dir.smoke={tmp_path / 'out'}",
            f"expected_dir={tmp_path / 'expected'}",
            "select=[study/rules_only]",
            *overrides_for(work),
        ]
    )
    st = load_tier("mini", ref).studies[0]
    assert not S.study_done(st, cfg)
    [(tier, runs)] = R.resolve_tiers(cfg)  # `select` names the study alone
    assert runs == [] and R.run_tier(tier, runs, cfg) == []
    folder = S.study_folder(st, cfg)
    assert folder == Path(work["results"]) / "studies" / "rules_only" and S.study_done(st, cfg)
    E.write_expected(tmp_path / "expected" / "mini.yaml", "mini", {}, {}, {"data other 0123": 5.0})
    X.write_expected_tier(tier, runs, cfg)  # a selection updates its entries and keeps the rest
    written = E.read_expected(tmp_path / "expected" / "mini.yaml")
    assert list(written["runs"]) == ["study/rules_only"] and written["prepare_seconds"] == {"data other 0123": 5.0}
    names = {p.name for p in folder.iterdir()}
    assert names == {"contradiction_detection.md", "contradiction_detection.json", "manifest.json", "DONE"}
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(".")] == [".rules_only.lock"], (
        "temporary folder left behind"
    )
    study = StudyFolder(folder)
    man, command = study.manifest, study.command
    assert man["config"]["out_dir"] == str(folder) and man["config"]["backends"] == ["rules"]
    assert man["config"]["cache_dir"] == str(work["cache"]) and man["config"]["dataset_folder"] == str(lb)
    assert command.startswith("python -m experiments.studies.contradiction_detection backends=[rules]")
    assert f"out_dir={folder}" in command and "hydra.run.dir" not in command  # Hydra's log folder changes no result
    assert study.seconds == man["seconds"] >= 0
    rows = study.document["rows"]
    assert [r["scopes"] for r in rows] == [f"all ({rows[0]['n_scopes']})", "test n=2 seed=0"]
    assert E.measure_study(folder, st.row_key, st.metrics)
    assert S.study_drift(st, cfg) == []  # paths aside, its manifest holds exactly what the command composes now
    man_file = folder / "manifest.json"
    changed = {**man, "config": {**man["config"], "scopes": 3, "cache_dir": "/elsewhere"}}
    man_file.write_text(json.dumps(changed))
    assert S.study_drift(st, cfg) == ["scopes"] and not S.study_done(st, cfg)  # made with other settings: made again
    man_file.write_text(json.dumps(man))
    assert (tmp_path / "hydra" / ".hydra" / "config.yaml").is_file() and not (PROJECT_ROOT / "outputs").exists()
    lines = S.publish_studies("smoke", cfg, tmp_path / "out")
    published = {p.name for p in (tmp_path / "out" / "tables").iterdir()}
    assert published == {"contradiction_detection.md", "contradiction_detection.json", "rules_only.manifest.json"}
    # published with the folders of this machine as tokens (the committed report names none)
    [line] = lines
    assert line.startswith(
        "- [`rules_only`](tables/contradiction_detection.md) (tier mini): `python -m experiments.studies.contradiction_detection "
    )
    assert "out_dir=<results_dir>/studies/rules_only" in line and "cache_dir=<cache_dir>" in line
    assert str(work["results"]) not in line and str(work["cache"]) not in line
    for f in published:
        assert str(work["results"]) not in (tmp_path / "out" / "tables" / f).read_text(), f


def test_a_selective_write_keeps_the_entries_of_runs_only_a_selected_study_reads():
    runs = [
        SimpleNamespace(key="techqa/vector+seed001", config_hash="aaa"),
        SimpleNamespace(key="techqa/boost+seed001", config_hash="bbb"),
        SimpleNamespace(key="techqa/named", config_hash="ccc"),
    ]
    old = {
        "techqa/vector+seed001": {"config_hash": "aaa", "seconds": 241.7},
        "techqa/boost+seed001": {"config_hash": "old"},
        "techqa/named": {"config_hash": "ccc"},
    }
    # read by the study with an unchanged hash: kept; changed hash: rewritten; named by select: rewritten
    assert X.kept_entries(runs, old, ["study/dev", "techqa/named"]) == {"techqa/vector+seed001"}
    assert X.kept_entries(runs, old, []) == set()  # a whole-tier write rewrites everything
