"""experiments/studies/judge_validation.py on the real LoCoMo gold answers of the end-to-end runs' build: the pair sample, the
hallucination items and their gold passages, the scoring of constructed judgments, and the study's files with
scripted judges (one that always names position 1, one that says "supported" exactly when the answer is written in
the passages), each checked against counts made here by hand."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from experiments.studies import judge_validation as JV
from lethe.core.paths import CONF_DIR
from lethe.stages.pairwise_judge import CRITERIA, OrderVerdict, PairJudgment
from lethebench.runs import RunFolder
from lethebench.schema import read_dataset
from lethebench.studies import StudyFolder
from tests.support.fake_llm import FakeLLM


@pytest.fixture(scope="module")
def ds(e2e_runs):
    return read_dataset(RunFolder(e2e_runs["bm25"]).dataset_folder)


def test_the_sample_holds_each_perturbation_of_the_split_at_most_n_times(ds):
    everything = JV.select_pairs(ds, "test", None, 0)
    assert set(everything["split"]) == {"test"} and len(everything) > 20
    sample = JV.select_pairs(ds, "test", 3, 0)
    counts = sample["perturbation"].value_counts()
    assert counts.max() <= 3 and set(counts.index) == set(everything["perturbation"])
    assert set(sample["pair_id"]) <= set(everything["pair_id"])
    assert JV.select_pairs(ds, "test", 3, 0).equals(sample)  # seeded
    assert JV.groups_of(ds) is None  # two conversations: pairs split by scope


def test_items_label_gold_supported_and_changed_answers_unsupported(ds):
    pairs = JV.select_pairs(ds, "test", 4, 0)
    items = JV.hallucination_items(ds, pairs, 5)
    golds = [it for it in items if it["label"] == "supported"]
    assert {it["perturbation"] for it in golds} == {"gold"} and len(golds) == len({it["id"] for it in golds})
    assert len(items) - len(golds) == int((pairs["perturbation"] != "truncation").sum())
    text = dict(zip(ds.corpus["doc_id"], ds.corpus["text"], strict=True))
    for it in items[:10]:
        qid = it["id"].split(":gold")[0] if it["perturbation"] == "gold" else it["id"].rsplit(":", 1)[0]
        want = sorted(ds.qrels[qid].items(), key=lambda x: (-x[1], x[0]))
        assert it["contexts"] == [text[d] for d, _ in want][:5]


def _judgment(v_ab: int | None, v_ba: int | None) -> PairJudgment:
    c = "Overall Winner"
    ab = OrderVerdict("A", "ok" if v_ab else "parse_failure", {c: v_ab} if v_ab else {})
    ba = OrderVerdict("B", "ok" if v_ba else "parse_failure", {c: v_ba} if v_ba else {})
    w = None if not (v_ab and v_ba) else ("A" if v_ab == 1 else "B") if (v_ab == 1) != (v_ba == 1) else "tie"
    return PairJudgment({c: w}, (ab, ba))


def test_pairwise_scoring_on_constructed_judgments(ds):
    pairs = JV.select_pairs(ds, "test", 2, 0).head(4).assign(better=["1", "2", "1", "2"])
    # pair 1: A wins both orders (correct); pair 2: A wins (wrong, B is gold); pair 3: position 1 twice (tie);
    # pair 4: unjudged
    got = [_judgment(1, 2), _judgment(1, 2), _judgment(1, 1), _judgment(None, 2)]
    row = next(r for r in JV.pairwise_rows("m", pairs, got, "Overall Winner") if r["perturbation"] == JV.ALL)
    assert (row["n"], row["correct"], row["wrong"], row["ties"], row["unjudged"], row["judged"]) == (4, 1, 1, 1, 1, 3)
    assert row["accuracy"] == pytest.approx(1 / 3) and row["tie_rate"] == pytest.approx(1 / 3)
    assert row["verdicts"] == 7 and row["first_position"] == pytest.approx(4 / 7)  # 1,2 / 1,2 / 1,1 / -,2
    assert row["accuracy_low"] < 1 / 3 < row["accuracy_high"]
    with pytest.raises(ValueError, match="not one of"):
        JV.pairwise_rows("m", pairs, got, "Correctness")


class _Judges(FakeLLM):
    """Pairwise: always "Answer 1". Hallucination: "yes" exactly when the answer is written in the passages."""

    def reply(self, messages, decoding, k):
        prompt = "".join(m.content for m in messages)
        if "Answer 1" in prompt and "Answer 2" in prompt:
            return json.dumps({c: "Answer 1" for c in CRITERIA}), None
        answer = prompt.rsplit("Answer:", 1)[-1].strip().split("\n")[0].strip()
        return ("yes" if answer and answer.lower() in prompt.rsplit("Answer:", 1)[0].lower() else "no"), None


def test_the_study_writes_its_tables_from_the_judges_replies(ds, e2e_runs, tmp_path, monkeypatch):
    fake = _Judges()
    monkeypatch.setattr(JV, "study_llm", lambda name, cfg: fake)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="judge_validation")  # as its entry point composes it (paths.* included)
    cfg.merge_with(
        {
            "dataset_folder": str(RunFolder(e2e_runs["bm25"]).dataset_folder),
            "per_perturbation": 3,
            "out_dir": str(tmp_path / "out"),
            "pairwise": {"judges": ["fake"]},
            "hallucination": {"judges": ["fake"]},
        }
    )
    doc = JV.study(cfg)
    folder = StudyFolder(tmp_path / "out")
    assert folder.is_done and folder.document == json.loads(json.dumps(doc, default=str))
    assert {p.name for p in folder.path.iterdir()} == {
        "judge_validation.json",
        "judge_validation.md",
        "judgments.jsonl",
        "manifest.json",
        "DONE",
    }
    pw = next(r for r in doc["rows"] if r["judge"] == "pairwise" and r["perturbation"] == JV.ALL)
    n = doc["meta"]["pairs"]
    assert (pw["n"], pw["ties"], pw["correct"], pw["wrong"]) == (n, n, 0, 0)  # position 1 in both orders: ties
    assert pw["first_position"] == 1.0 and pw["position_p"] < 0.05
    items = JV.hallucination_items(ds, JV.select_pairs(ds, "test", 3, 0), 5)
    hj = next(r for r in doc["rows"] if r["judge"] == "hallucination" and r["perturbation"] == JV.ALL)
    assert hj["n"] == len(items) == doc["meta"]["hallucination_items"] and len(items) > 5 and n > 5
    assert 0 < hj["correct"] < hj["n"]  # the string-match judge is right on some items, wrong on others
    assert hj["correct"] + hj["wrong"] + hj["unjudged"] == hj["n"]
    lines = [json.loads(x) for x in (folder.path / "judgments.jsonl").read_text().splitlines()]
    assert sum(x["judge"] == "pairwise" for x in lines) == n and sum(
        x["judge"] == "hallucination" for x in lines
    ) == len(items)
    assert "| fake | all |" in folder.table
