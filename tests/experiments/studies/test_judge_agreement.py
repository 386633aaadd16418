"""Judge agreement (experiments/studies/judge_agreement.py): kappa, accuracy, AUC and confusion on hand-computed cases,
the unjudged rule, item loading, and the table writer (with a fake judge, no model); the entry point
(conf/judge_agreement.yaml) end to end with SmolLM2 on two items."""

from __future__ import annotations

import json

import pytest
from omegaconf.errors import MissingMandatoryValue

from experiments.config import load_config
from experiments.studies.judge_agreement import (
    DEFAULT_ITEMS,
    agreement_scores,
    cohen_kappa,
    judge_agreement,
    load_items,
    roc_auc,
    study,
    to_markdown,
)
from lethe.stages.generation import JudgeResult
from lethebench.studies import StudyFolder

S, U = "supported", "unsupported"


def test_kappa_hand_computed():
    # gold S S S U U U, pred S S U U U S: p_o = 4/6; pred S=3/6, gold S=3/6 -> p_e = .25 + .25 = .5
    assert cohen_kappa([S, S, S, U, U, U], [S, S, U, U, U, S]) == pytest.approx((4 / 6 - 0.5) / 0.5)
    # gold S S S U, pred S S S S: p_o = 3/4, p_e = 1 * 3/4 + 0 -> kappa 0 (constant judge)
    assert cohen_kappa([S, S, S, U], [S, S, S, S]) == pytest.approx(0.0)
    # perfect and perfectly wrong
    assert cohen_kappa([S, U, S, U], [S, U, S, U]) == pytest.approx(1.0)
    assert cohen_kappa([S, U, S, U], [U, S, U, S]) == pytest.approx(-1.0)
    # gold S S U U U, pred S U U U U: p_o = 4/5; p_e = (1/5)(2/5) + (4/5)(3/5) = 14/25 -> (20/25-14/25)/(11/25)
    assert cohen_kappa([S, S, U, U, U], [S, U, U, U, U]) == pytest.approx(6 / 11)
    assert cohen_kappa([S, S], [S, S]) is None  # p_e = 1: undefined
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa([S], [S, U])


def test_agreement_scores_leave_unjudged_out():
    out = agreement_scores([S, S, U, U, U], [S, None, U, S, None])
    assert (out["n"], out["judged"], out["unjudged"]) == (5, 3, 2)
    assert out["accuracy"] == pytest.approx(2 / 3)
    assert out["confusion"] == {
        "gold_supported": {"pred_supported": 1, "pred_unsupported": 0},
        "gold_unsupported": {"pred_supported": 1, "pred_unsupported": 1},
    }
    # judged pairs: (S,S) (U,U) (U,S): p_o = 2/3, pred S = 2/3, gold S = 1/3 -> p_e = 2/9 + 2/9 = 4/9
    assert out["cohen_kappa"] == pytest.approx((2 / 3 - 4 / 9) / (5 / 9))
    none = agreement_scores([S, U], [None, None])
    assert none["accuracy"] is None and none["cohen_kappa"] is None and none["judged"] == 0
    with pytest.raises(ValueError):
        agreement_scores([S], ["maybe"])


def test_roc_auc_hand_computed():
    # pos .9 .4, neg .5 .4: pairs (.9>.5)=1 (.9>.4)=1 (.4<.5)=0 (.4=.4)=.5 -> 2.5/4
    assert roc_auc([S, S, U, U], [0.9, 0.4, 0.5, 0.4]) == pytest.approx(0.625)
    assert roc_auc([S, U], [0.2, 0.8]) == 0.0
    assert roc_auc([S, S], [0.2, 0.8]) is None


class TableJudge:
    """Returns a fixed JudgeResult per answer text."""

    def __init__(self, table):
        self.table, self.seen = table, []

    def judge(self, answer, contexts, query):
        self.seen.append((answer, tuple(contexts), query))
        return self.table[answer]


def _items(labels):
    return [
        {"id": f"i{k}", "query": f"q{k}", "contexts": [f"c{k}"], "answer": f"a{k}", "label": lab}
        for k, lab in enumerate(labels)
    ]


def test_judge_agreement_with_fake_judge():
    items = _items([S, S, U, U, U])
    table = {
        "a0": JudgeResult(True, 0.9, "ok", 10.0, model_ms=8.0, verdict="yes"),
        "a1": JudgeResult(False, 0.4, "ok", 10.0, model_ms=8.0, verdict="yes"),  # weak yes below 0.5
        "a2": JudgeResult(False, 0.1, "ok", 10.0, model_ms=8.0, verdict="no"),
        "a3": JudgeResult(None, None, "parse_failure", 10.0, raw_text="maybe", model_ms=8.0),
        "a4": JudgeResult(None, None, "timeout", 30.0),
    }
    j = TableJudge(table)
    out = judge_agreement(j, items)
    assert j.seen[0] == ("a0", ("c0",), "q0") and len(j.seen) == 5
    assert (out["n"], out["judged"], out["unjudged"]) == (5, 3, 2)
    assert out["accuracy"] == pytest.approx(2 / 3)  # a0 right, a1 wrong, a2 right
    assert out["verdict_accuracy"] == pytest.approx(1.0)  # the words alone: yes/S, yes/S, no/U all right
    assert out["by_status"] == {"ok": 3, "parse_failure": 1, "timeout": 1}
    assert out["auc"] == pytest.approx(1.0)  # S: .9 .4 vs U: .1
    assert out["calls"] == 5 and out["llm_ms_mean"] == pytest.approx(14.0)
    assert out["model_ms_mean"] == pytest.approx(8.0) and out["pred_supported_share"] == pytest.approx(1 / 3)
    assert [r["pred"] for r in out["items"]] == [S, U, U, None, None]


def test_verdict_accuracy_differs_from_thresholded_accuracy():
    items = _items([S, U])
    table = {
        "a0": JudgeResult(False, 0.3, "ok", 1.0, verdict="yes"),
        "a1": JudgeResult(False, 0.2, "ok", 1.0, verdict="no"),
    }
    out = judge_agreement(TableJudge(table), items)
    assert out["accuracy"] == pytest.approx(0.5) and out["verdict_accuracy"] == pytest.approx(1.0)


def test_load_items_validates(tmp_path):
    good = tmp_path / "a.jsonl"
    good.write_text(json.dumps(_items([S])[0]) + "\n\n")
    assert load_items(good)[0]["id"] == "i0"
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps({**_items([S])[0], "label": "maybe"}) + "\n")
    with pytest.raises(ValueError):
        load_items(bad)
    dup = tmp_path / "c.jsonl"
    dup.write_text(json.dumps(_items([S])[0]) + "\n" + json.dumps(_items([U])[0]) + "\n")
    with pytest.raises(ValueError):
        load_items(dup)
    miss = tmp_path / "d.jsonl"
    miss.write_text(json.dumps({"id": "x", "query": "q", "contexts": [], "label": S}) + "\n")
    with pytest.raises(ValueError):
        load_items(miss)


def test_markdown_has_one_row_per_model():
    row = {
        "config": "m",
        "llm": "model-x",
        "model_sha256": "ab" * 32,
        "prompt": {"name": "judge_support", "version": "v1", "sha256": "cd" * 32},
        "temperature": 0.0,
        "threshold": 0.5,
        "n": 4,
        "judged": 3,
        "unjudged": 1,
        "accuracy": 2 / 3,
        "verdict_accuracy": 1.0,
        "cohen_kappa": None,
        "auc": 0.5,
        "confusion": {
            "gold_supported": {"pred_supported": 1, "pred_unsupported": 0},
            "gold_unsupported": {"pred_supported": 1, "pred_unsupported": 1},
        },
        "pred_supported_share": 2 / 3,
        "model_ms_mean": 812.4,
        "model_ms_median": 800.0,
        "wall_s": 12.34,
    }
    md = to_markdown(
        {"items_file": "x.jsonl", "items_sha256": "ef" * 32, "n_items": 4, "rows": [row, {**row, "llm": "model-y"}]}
    )
    lines = [ln for ln in md.splitlines() if ln.startswith("| model-")]
    assert len(lines) == 2
    assert (
        "| 0.667 | 1.000 | n/a | 0.500 | 1/0, 1/1 |" in lines[0]
        and "cdcdcdcdcdcd" in lines[0]
        and "| 812, 800 |" in lines[0]
    )


def test_the_entry_point_requires_an_llm():
    with pytest.raises(MissingMandatoryValue):
        study(load_config([], config_name="judge_agreement"))
    with pytest.raises(SystemExit, match="llms"):
        study(load_config(["llms=[]"], config_name="judge_agreement"))


@pytest.mark.slow
def test_the_entry_point_with_smollm2_writes_a_self_describing_folder(tmp_path):
    items = tmp_path / "items.jsonl"
    items.write_text(
        "".join(json.dumps(it) + "\n" for it in load_items(DEFAULT_ITEMS) if it["id"] in ("svc-01", "svc-02"))
    )
    out = tmp_path / "out"
    cfg = load_config(
        ["llms=[smollm2]", f"items_file={items}", f"out_dir={out}", f"cache_dir={tmp_path / 'cache'}"],
        config_name="judge_agreement",
    )
    doc = study(cfg, command="python -m experiments.studies.judge_agreement llms=[smollm2]")
    assert doc["n_items"] == 2 and [r["config"] for r in doc["rows"]] == ["smollm2"]
    row = doc["rows"][0]
    assert row["n"] == 2 and row["judged"] + row["unjudged"] == 2 and row["n_threads"] == 1 and row["threshold"] == 0.5
    folder = StudyFolder(out)
    assert folder.is_done and folder.document == doc and [p.name for p in folder.tables] == ["judge_agreement.md"]
    man = folder.manifest
    assert (
        man["config"]["llms"] == ["smollm2"]
        and man["config"]["items_file"] == str(items)
        and man["config"]["llm_cache"]
    )
    assert (
        man["command"] == "python -m experiments.studies.judge_agreement llms=[smollm2]"
        and man["items"]["sha256"] == doc["items_sha256"]
    )
    assert {"commit", "dirty"} <= set(man["git"]) and man["packages"]["llama-cpp-python"] and man["seconds"] >= 0
