"""Precision/recall of any contradiction detector on a processed dataset (experiments/studies/contradiction_detection.py):
seeded scope samples, gold restricted to the evaluated scopes, counters summed over scopes, the threshold
sweep from the per-pair log, blocking statistics, the tables and the entry point (conf/contradiction_detection.yaml:
rules, and the llm backend with the real SmolLM2; the detector's counters with a fake backend through
evaluate_detector)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from experiments.config import load_config
from experiments.studies.contradiction_detection import (
    blocking_stats,
    detection_scores,
    evaluate_detector,
    evaluate_rules_on_dataset,
    load_scopes,
    sample_scopes,
    study,
    table_row,
    tables,
    threshold_sweep,
)
from lethe.stages.contradiction.detectors import LLMContradictionDetector, RulesDetector
from lethebench.schema import write_dataset
from lethebench.studies import StudyFolder
from tests.lethe.stages.contradiction.test_detectors import FakeLLM
from tests.support.toy import toy_dataset

TEXTS = {
    "chat:3": "The port of daemon-svc is 8080.",
    "chat:4": "daemon-svc port is now 9090 (was 8080).",
    "notes:0": "cache-api replicas: 2",
    "notes:1": "cache-api replicas: 4",
}


@pytest.fixture()
def toy_folder(tmp_path):
    ds = toy_dataset()
    text = dict(zip(ds.corpus["doc_id"], ds.corpus["text"], strict=True))
    text.update(TEXTS)
    ds.corpus["text"] = [text[d] for d in ds.corpus["doc_id"]]
    ds.contradictions = pd.DataFrame(
        [
            {"query_id": "q_late", "stale_doc_id": "chat:3", "current_doc_id": "chat:4"},
            {"query_id": "q_notes", "stale_doc_id": "notes:0", "current_doc_id": "notes:1"},
        ]
    )
    return write_dataset(ds, tmp_path / "toy")


def test_sample_scopes_is_seeded_sorted_and_split_aware():
    ids = [f"{s}-x-{i:03d}" for s in ("train", "dev", "test") for i in range(30)]
    a = sample_scopes(ids, 5, "test", seed=0)
    assert a == sample_scopes(reversed(ids), 5, "test", seed=0) and a == sorted(a) and len(set(a)) == 5
    assert all(s.startswith("test-") for s in a)
    assert any(sample_scopes(ids, 5, "test", seed=s) != a for s in (1, 2, 3))
    assert sample_scopes(ids, None, "dev") == sorted(i for i in ids if i.startswith("dev-"))
    assert sample_scopes(ids) == sorted(ids)
    with pytest.raises(ValueError):
        sample_scopes(ids, 31, "test")
    with pytest.raises(ValueError):
        sample_scopes(ids, 3, "validation")


def test_rules_via_evaluate_detector_matches_evaluate_rules(toy_folder):
    old = evaluate_rules_on_dataset(toy_folder)
    new = evaluate_detector(RulesDetector(), toy_folder)
    for k in ("precision", "recall", "f1", "tp", "fp", "fn", "n_gold", "n_predicted", "n_scopes", "n_docs", "by_split"):
        assert old[k] == new[k], k
    assert (new["tp"], new["n_gold"], new["pairs_considered"], new["judged"], new["llm_ms"]) == (2, 2, 0, 0, 0.0)
    assert new["detector"]["backend"] == "rules" and "pair_log_summary" not in new


def test_gold_is_restricted_to_the_evaluated_scopes(toy_folder):
    only_notes = evaluate_detector(RulesDetector(), toy_folder, ["notes"])
    assert (only_notes["n_gold"], only_notes["tp"], only_notes["n_scopes"], only_notes["n_docs"]) == (1, 1, 1, 2)
    assert set(only_notes["by_split"]) == {"notes"}
    with pytest.raises(ValueError, match="unknown scope"):
        evaluate_detector(RulesDetector(), toy_folder, ["nope"])


def test_llm_detector_counters_and_sweep(toy_folder):
    # "yes" (p = 0.9) for the daemon-svc pair, "yes" (p = 0.6) for the notes pair, "no" otherwise
    def respond(earlier, later, k):
        if "daemon-svc" in earlier and "9090" in later:
            return ("yes", [math.log(0.9)])
        if earlier == TEXTS["notes:0"]:
            return ("yes", [math.log(0.6)])
        return ("no", [math.log(0.8)])

    llm = FakeLLM(respond)
    det = LLMContradictionDetector(llm, threshold=0.8, blocking="all", max_pairs=100)
    out = evaluate_detector(det, toy_folder)
    # blocking "all": chat has 6 docs (15 pairs), notes 2 (1 pair)
    assert out["candidates"] == out["pairs_considered"] == out["judged"] == len(llm.calls) == 16
    assert (out["tp"], out["fp"], out["fn"], out["n_predicted"]) == (1, 0, 1, 1)
    assert out["precision"] == 1.0 and out["recall"] == 0.5 and out["llm_ms"] >= 0.0
    s = out["pair_log_summary"]
    assert s["gold_pairs_considered"] == 2 and s["answers"] == {"conflict": 1, "no": 14, "yes_below_threshold": 1}
    assert math.isclose(s["mean_p_yes_gold"], 0.75) and math.isclose(s["mean_p_yes_other"], 0.2)
    assert s["auc_p_yes_gold_vs_other"] == 1.0
    sweep = {r["threshold"]: r for r in s["threshold_sweep"]}
    assert (sweep[0.5]["tp"], sweep[0.5]["recall"]) == (2, 1.0)
    assert (sweep[0.8]["tp"], sweep[0.8]["n_predicted"]) == (out["tp"], out["n_predicted"])  # same rule as the detector
    assert sweep[0.9]["n_predicted"] == 1 and sweep[0.9]["precision"] == 1.0  # p = 0.9 counts at t = 0.9 (>=)


def test_threshold_sweep_hand_computed():
    log = [
        {"stale": "a", "current": "b", "p_yes": 0.95, "decision": "conflict"},
        {"stale": "c", "current": "d", "p_yes": 0.65, "decision": "yes_below_threshold"},
        {"stale": "e", "current": "f", "p_yes": 0.99, "decision": "no"},  # "no" never counts
        {"stale": "g", "current": "h", "p_yes": None, "decision": "parse_failure"},
    ]
    gold = [("c", "d"), ("x", "y")]
    sw = {r["threshold"]: r for r in threshold_sweep(log, gold, (0.6, 0.9))}
    assert sw[0.6] == {"threshold": 0.6, **detection_scores([("a", "b"), ("c", "d")], gold), "n_predicted": 2}
    assert (sw[0.9]["tp"], sw[0.9]["fp"], sw[0.9]["fn"]) == (0, 1, 2)


def test_blocking_stats_on_toy(toy_folder):
    scopes, gold, _ = load_scopes(toy_folder)
    st = blocking_stats(scopes, gold)
    assert st["n_gold"] == 2 and st["gold_recall_uncapped"] == 1.0 and st["n_scopes"] == 2
    capped = blocking_stats(scopes, gold, max_pairs=0)
    assert capped["gold_recall_capped"] == 0.0 and capped["mean_considered_per_scope"] == 0.0
    assert blocking_stats(scopes, gold, ["notes"])["n_gold"] == 1


def test_tables_and_the_entry_point(toy_folder, tmp_path):
    row = table_row("rules", None, "all", evaluate_detector(RulesDetector(), toy_folder))
    files = tables([row], {"dataset": {"build_key": "k"}})
    assert list(files) == ["contradiction_detection.md", "contradiction_detection.json"]
    text = files["contradiction_detection.md"]
    assert "| rules | - | all | 2 | 2 | 2 | 0 | 0 | 1.000 | 1.000 | 1.000 |" in text and "lower bound" in text
    data = json.loads(files["contradiction_detection.json"])
    assert data["rows"][0]["tp"] == 2 and "lower bound" in data["meta"]["precision_note"]
    cfg = load_config(
        [
            f"dataset_folder={toy_folder}",
            "backends=[rules]",
            "scopes=1",
            "split=notes",
            f"out_dir={tmp_path / 'cli'}",
            f"cache_dir={tmp_path / 'cache'}",
        ],
        config_name="contradiction_detection",
    )
    out = study(cfg, command="python -m experiments.studies.contradiction_detection backends=[rules]")
    assert [r["scopes"] for r in out["rows"]] == ["all (2)", "notes n=1 seed=0"]
    assert [r["n_gold"] for r in out["rows"]] == [2, 1]
    folder = StudyFolder(tmp_path / "cli")
    saved = folder.document
    assert folder.is_done and saved["meta"]["sample"]["scope_ids"] == ["notes"] and len(saved["rows"]) == 2
    assert [p.name for p in folder.tables] == ["contradiction_detection.md"]
    # the folder describes itself: the resolved config, the command, code and package versions
    man = folder.manifest
    assert man["config"]["backends"] == ["rules"] and man["config"]["scopes"] == 1 and man["config"]["max_pairs"] == 40
    assert man["config"]["out_dir"] == str(tmp_path / "cli") and man["command"].endswith("backends=[rules]")
    assert (
        {"commit", "dirty"} <= set(man["git"])
        and man["packages"]["hydra-core"]
        and "llama-cpp-python" in man["packages"]
    )
    assert man["dataset"]["folder"] == str(toy_folder)
    no_rules_all = study(
        load_config(
            [f"dataset_folder={toy_folder}", f"out_dir={tmp_path / 'b'}", "scopes=1", "split=notes", "rules_all=false"],
            config_name="contradiction_detection",
        )
    )
    assert [r["scopes"] for r in no_rules_all["rows"]] == ["notes n=1 seed=0"]
    with pytest.raises(SystemExit):
        study(
            load_config(
                [f"dataset_folder={toy_folder}", "backends=[rules,nli]", f"out_dir={tmp_path / 'x'}"],
                config_name="contradiction_detection",
            )
        )


@pytest.mark.slow
def test_the_entry_point_with_a_real_llm_writes_its_row(toy_folder, tmp_path):
    """The llm backend through study(), as the llm tier runs it: every considered pair judged by SmolLM2, the row
    named by the model's label and its config name, the manifest beside the tables."""
    out = tmp_path / "llm"
    cfg = load_config(
        [
            f"dataset_folder={toy_folder}",
            "backends=[llm]",
            "llms=[smollm2]",
            "max_pairs=3",
            "llm_cache=false",
            f"out_dir={out}",
            f"cache_dir={tmp_path / 'cache'}",
        ],
        config_name="contradiction_detection",
    )
    rows = study(cfg, command="python -m experiments.studies.contradiction_detection backends=[llm] llms=[smollm2]")[
        "rows"
    ]
    assert len(rows) == 1
    row = rows[0]
    assert row["backend"] == "llm" and row["model"] == "smollm2-135m-instruct-q4_1" and row["llm_config"] == "smollm2"
    assert (
        row["n_gold"] == 2 and row["tp"] + row["fn"] == 2 and row["n_threads"] == 1 and row["response_cache"] is False
    )
    folder = StudyFolder(out)
    assert folder.document["rows"][0]["model"] == row["model"] and folder.manifest["config"]["llms"] == ["smollm2"]


def test_the_default_dataset_is_the_only_build(toy_folder, tmp_path):
    """dataset_folder=null takes the one processed build under processed_dir, and says so when there are several."""
    base = toy_folder.parent
    cfg = load_config(
        [f"processed_dir={base}", f"out_dir={tmp_path / 'o'}", "blocking_only=true"],
        config_name="contradiction_detection",
    )
    assert study(cfg)["meta"]["dataset"]["folder"] == str(toy_folder) and not (tmp_path / "o").exists()
    (base / "another").mkdir()
    (base / "another" / "card.json").write_text("{}")
    with pytest.raises(SystemExit, match="dataset_folder"):
        study(cfg)
