"""experiments/studies/pairwise_answers.py: win rates and their intervals by hand, agreement with labels, the labelled file, and
the study end to end on two real runs' answers (BM25 and vector on LoCoMo, answers by SmolLM2) with a scripted judge."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from omegaconf import OmegaConf

from analysis.stats import proportion_ci
from experiments.studies import pairwise_answers as P
from lethe.core.paths import PROJECT_ROOT
from lethe.llm.base import Decoding, Message
from lethe.stages.pairwise_judge import CRITERIA, PairJudgment
from lethebench.studies import StudyFolder
from tests.conftest import TWO_CONVS
from tests.support.fake_llm import FakeLLM

ANSWERS = ["answers.enabled=true", "llm@answers.llm=smollm2", "answers.sample=3", "answers.options.max_tokens=12"]


def test_win_rates_count_outcomes_per_criterion_with_wilson_intervals():
    w = [dict.fromkeys(CRITERIA, x) for x in ("B", "B", "B", "A", "tie", None)]
    rows = {r["criterion"]: r for r in P.win_rates(w)}
    r = rows["Diversity"]
    assert (r["pairs"], r["judged"], r["b_wins"], r["a_wins"], r["ties"], r["unjudged"]) == (6, 5, 3, 1, 1, 1)
    ci = proportion_ci(3, 5)
    assert r["b_win_rate"] == 0.6 and (r["b_win_rate_low"], r["b_win_rate_high"]) == (ci["ci_low"], ci["ci_high"])
    assert r["a_win_rate"] == 0.2 and r["tie_rate"] == 0.2
    assert r["sign_test_p"] == 0.625  # B 3 : A 1, ties left out: 2 * P(X >= 3 | n=4) = 2 * 5/16
    with pytest.raises(ValueError, match="unknown outcome"):
        P.win_rates([dict.fromkeys(CRITERIA, "C")])


def test_agreement_scores_labelled_criteria_only():
    items = [{"label": {"Comprehensiveness": "2", "Overall Winner": "2"}}, {"label": {"Overall Winner": "1"}}]
    js = [
        PairJudgment({"Comprehensiveness": "B", "Overall Winner": "tie", "Diversity": "A", "Empowerment": None}, ()),
        PairJudgment({"Overall Winner": "B"}, ()),
    ]
    a = P.agreement(js, items)
    assert a == {"agree": 1, "disagree": 1, "tie": 1, "unjudged": 0, "labelled": 3, "accuracy": 1 / 3}


def test_the_labelled_file_is_balanced_and_valid():
    items = P.load_labels(PROJECT_ROOT / "tests/data/pairwise_labels.jsonl")
    assert len(items) == 12 and len({it["id"] for it in items}) == 12
    firsts = sum(it["label"]["Overall Winner"] == "1" for it in items)
    assert firsts == 6  # the better answer stands first in half of the pairs
    assert all(len(set(it["label"].values())) == 1 for it in items)  # one answer better on every labelled criterion


def study_cfg(tmp_path, **over: Any):
    """conf/pairwise_answers.yaml's defaults (the one place they live) with a scripted judge and tmp folders."""
    base = OmegaConf.load(PROJECT_ROOT / "conf/pairwise_answers.yaml")
    base.pop("hydra")
    return OmegaConf.merge(
        base,
        {
            "judges": ["scripted"],
            "llm_cache": False,
            "n_threads": 1,
            "cache_dir": str(tmp_path / "c"),
            "out_dir": str(tmp_path / "out"),
        },
        over,
    )


class CopiesTemplate(FakeLLM):
    """A scripted judge that copies v1's reply template for every second call (no winner named), as Qwen 1.5B did."""

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        w = "Answer 1 or Answer 2" if k % 2 else "Answer 2"
        return json.dumps(dict.fromkeys(CRITERIA, w)), None


def test_study_fails_past_max_unjudged_share_and_keeps_the_replies(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "study_llm", lambda name, cfg: CopiesTemplate())
    (tmp_path / "out").mkdir()
    (tmp_path / "out/pairwise_answers.md").write_text("an earlier run's table")
    (tmp_path / "out/DONE").write_text("complete\n")  # an earlier, finished run
    with pytest.raises(
        SystemExit, match=r"judge scripted: unjudged share above max_unjudged_share=0.1 for labels 100%"
    ):
        P.study(study_cfg(tmp_path))  # every pair has one copied order, so every criterion is unjudged
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["judgments.jsonl"]
    assert not StudyFolder(tmp_path / "out").is_done
    recs = [json.loads(line) for line in (tmp_path / "out/judgments.jsonl").read_text().splitlines()]
    assert len(recs) == 12 and all(set(r["winners"].values()) == {None} for r in recs)
    doc = P.study(study_cfg(tmp_path, max_unjudged_share=1.0))  # the measurement itself, when asked for
    assert doc["judges"][0]["unjudged_share"] == {"labels": 1.0}
    with pytest.raises(SystemExit, match="max_unjudged_share=1.5: must be a number in"):
        P.study(study_cfg(tmp_path, max_unjudged_share=1.5))


class LongerWins(FakeLLM):
    """A scripted judge: the longer answer wins every criterion (a pure length preference, no position preference)."""

    def reply(self, messages: Sequence[Message], decoding: Decoding, k: int) -> Any:
        text = messages[-1].content
        a1 = text.split("**Answer 1:**")[1].split("**Answer 2:**")[0]
        a2 = text.split("**Answer 2:**")[1].split("Evaluate both")[0]
        w = "Answer 1" if len(a1) >= len(a2) else "Answer 2"
        return json.dumps(dict.fromkeys(CRITERIA, w)), None


def test_study_judges_two_real_runs_answers(cfg_for, tmp_path, monkeypatch):
    from experiments.runner import run_experiment

    folders = {
        m: run_experiment(cfg_for(f"method={m}", f"dataset.scopes={TWO_CONVS}", "dataset.sample=5", *ANSWERS))
        for m in ("bm25", "vector")
    }
    monkeypatch.setattr(P, "study_llm", lambda name, cfg: LongerWins())
    cfg = study_cfg(
        tmp_path, run_folders={k: str(v) for k, v in folders.items()}, pairs=[["bm25_vs_vector", "bm25", "vector"]]
    )
    doc = P.study(cfg)
    both = P.answered_pairs(folders["bm25"], folders["vector"])
    assert doc["pairs"][0]["questions"] == len(both) >= 1  # the same seeded sample: both runs answered it
    rows = [r for r in doc["rows"] if r["criterion"] == "Overall Winner"]
    longer_b = sum(len(b) > len(a) for a, b in zip(both["answer_a"], both["answer_b"], strict=True))
    equal = sum(len(b) == len(a) for a, b in zip(both["answer_a"], both["answer_b"], strict=True))
    assert rows[0]["b_wins"] == longer_b and rows[0]["ties"] == equal  # equal length: each order picks position 1
    judge = doc["judges"][0]
    # a length judge agrees with a label exactly where the labelled answer is the longer one (hand count from the file)
    items = P.load_labels(PROJECT_ROOT / "tests/data/pairwise_labels.jsonl")
    agree = sum((len(it["answer1"]) >= len(it["answer2"])) == (v == "1") for it in items for v in it["label"].values())
    labelled = sum(len(it["label"]) for it in items)
    assert judge["agreement"] == {
        "agree": agree,
        "disagree": labelled - agree,
        "tie": 0,
        "unjudged": 0,
        "labelled": labelled,
        "accuracy": agree / labelled,
    }
    assert agree < labelled  # the off-topic long answers catch the length preference
    assert judge["position_bias"]["share_first"] is not None
    folder = StudyFolder(tmp_path / "out")
    assert folder.is_done and {p.name for p in folder.path.iterdir()} == {
        "pairwise_answers.json",
        "pairwise_answers.md",
        "judgments.jsonl",
        "manifest.json",
        "DONE",
    }
    assert "| scripted | bm25_vs_vector (bm25 vs vector) | Overall Winner |" in folder.table
