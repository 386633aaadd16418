"""analysis/seeds.py on two real runs with answers (BM25 and vector on LoCoMo, SmolLM2 answers): the measured
cells against the per-question values, the paired comparison and its power line by hand, claims copied as claims,
and a declared run that has not run shown as n/m†."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from analysis import seeds as S
from analysis import stats
from analysis import views as V
from analysis.declared_runs import RunRef
from analysis.formatting import fmt_p
from lethe.core.paths import CONF_DIR
from lethebench.runs import RunFolder
from tests.conftest import TWO_CONVS

ANSWERS = ["answers.enabled=true", "llm@answers.llm=smollm2", "answers.sample=3", "answers.options.max_tokens=12"]
CFG = {
    "bootstrap_resamples": 2000,
    "permutation_resamples": 2000,
    "confidence": 0.95,
    "seed": 0,
    "coverage_n": 10,
    "contradiction_k": 10,
    "answer_recall_chars": 3000,
    "primary_test": {"seeds": "randomization"},
    # the verdict rule's declared margins and small-n limits (the claims table, tests/analysis/test_claims.py)
    "verdicts": yaml.safe_load((CONF_DIR / "analysis" / "default.yaml").read_text())["verdicts"],
}
TABLE = {
    "name": "t",
    "source": "s",
    "rows": [
        {"row": "semantic", "run": "locomo/vector", "full": "locomo/window", "claimed": {"f1": 0.30, "rouge_l": 0.29}},
        {"row": "lexical", "run": "locomo/bm25", "versus": "semantic", "claimed": {"f1": 0.25}},
    ],
}


@pytest.fixture(scope="module")
def views(cfg_for):
    from experiments.runner import run_experiment

    refs = []
    for m in ("bm25", "vector"):
        f = run_experiment(cfg_for(f"method={m}", f"dataset.scopes={TWO_CONVS}", "dataset.sample=5", *ANSWERS))
        refs.append(RunRef("locomo", m, "test", f, RunFolder(f).dataset_folder, "sample 5"))
    refs.append(
        RunRef(
            "locomo",
            "window",
            "test",
            refs[0].folder.parent.parent / "window" / "000000000000",
            refs[0].dataset_folder,
            "not run",
        )
    )
    return V.collect(CFG, refs)


def test_measured_cells_come_from_the_per_question_answers(views):
    t = S.seed_table(views, TABLE, CFG).set_index("row")
    pq = views["locomo"].per_query["vector"]
    ok = pq[pq["answer_status"] == "ok"]
    assert t.loc["semantic", "n"] == int(ok["answer_f1"].notna().sum()) >= 1
    assert t.loc["semantic", "f1 measured"].startswith(f"{ok['answer_f1'].mean():.4f}")
    assert t.loc["semantic", "f1 claimed"] == "0.3000" and t.loc["lexical", "rouge_l claimed"] == "-"
    assert t.loc["semantic", "nDCG@10 sample"] == f"{pq['ndcg@10'].mean():.4f}"
    gen = views["locomo"].runs["vector"].flag("generation").loc[ok.index]
    assert (gen["model_ms"] > 0).all() and set(gen["cached"]) <= {True, False}
    assert t.loc["semantic", "s per answer"] == f"{gen['model_ms'].mean() / 1e3:.1f}"
    llm = views["locomo"].runs["vector"].metrics["llm"]  # the answers' calls: 3 questions, none failed
    assert llm["queries"] == 3 and t.loc["semantic", "LLM no answer / fallback"] == "0.0% / 0.0%"
    assert t.loc["semantic", "nDCG@10 full"] == "n/m†"  # declared, not run
    assert t.loc["lexical", "nDCG@10 full"] == "-"  # none declared


def test_paired_difference_and_power_line_by_hand(views):
    cmp = S.comparison_table(views, TABLE, CFG)
    r = cmp.iloc[0]
    a = views["locomo"].per_query["bm25"]["answer_f1"].dropna()
    b = views["locomo"].per_query["vector"]["answer_f1"].dropna()
    common = a.index.intersection(b.index)
    assert r["n"] == len(common) == 3  # the same seeded answer sample in both runs
    d = a.loc[common].to_numpy() - b.loc[common].to_numpy()
    assert r["seed's difference"] == "-0.0500"
    assert r["measured difference [95% CI]"].startswith(f"{d.mean():+.4f}")
    t = stats.paired_test(a.loc[common].to_numpy(), b.loc[common].to_numpy(), 2000, 0, 0.95)
    cells = [c for c in cmp.columns if c.startswith("p (")]  # the primary test first, both uncorrected
    assert cells == ["p (randomization)", "p (Wilcoxon)"]
    assert (r["p (randomization)"], r["p (Wilcoxon)"]) == (fmt_p(t["p_randomization"]), fmt_p(t["p_wilcoxon"]))
    sd = np.std(d, ddof=1)
    if sd > 0:
        mde = (sps.t.ppf(0.975, 2) + sps.t.ppf(0.8, 2)) * sd / np.sqrt(3)
        assert r["smallest detectable difference (80% power)"] == f"{mde:.4f}"
        assert r["could n show the seed's difference?"] == ("yes" if mde <= 0.05 else f"no: 0.0500 < {mde:.4f}")
        assert "n = 3 paired questions" in S.power_line(cmp)


def test_sections_skip_seeds_this_report_does_not_declare(views):
    spec = {"s1": {"title": "Seed 1", "source": "x", "tables": [TABLE]}}
    title, md, _ = S.seed_sections(views, spec, CFG, declared={"locomo/bm25"})[0]
    assert title == "Seed 1" and f"answered ({S.EXPLORATORY}):" in md  # uncorrected p-values say so in the header
    assert S.seed_sections(views, spec, CFG, declared={"techqa/vector"}) == []
    assert S.is_study_label("vector+seed001", ["*+seed0*"]) and not S.is_study_label("vector", ["*+seed0*"])


def test_retrieval_table_pairs_ndcg_on_common_queries(views):
    table = {
        "name": "r",
        "source": "s",
        "kind": "retrieval",
        "rows": [
            {"row": "lexical", "run": "locomo/bm25"},
            {"row": "dense", "run": "locomo/vector", "versus": "lexical", "claimed": {"improvement": "10-15%"}},
            {"row": "absent", "run": "locomo/window", "versus": "lexical"},
        ],
    }
    t = S.retrieval_table(views, table, CFG).set_index("row")
    a, b = views["locomo"].per_query["vector"]["ndcg@10"], views["locomo"].per_query["bm25"]["ndcg@10"]
    common = a.dropna().index.intersection(b.dropna().index)
    d = (a.loc[common] - b.loc[common]).mean()
    cell = t.loc["dense", "vs reference: nDCG@10 difference [95% CI]"]
    assert cell.startswith(f"{d:+.4f}") and cell.endswith(f"(n={len(common)})")
    assert t.loc["dense", "relative"] == f"{d / b.loc[common].mean():+.1%}"
    assert t.loc["dense", "claimed improvement"] == "10-15%" and t.loc["lexical", "claimed improvement"] == "-"
    llm = views["locomo"].runs["vector"].metrics["llm"]  # runs with LLM calls state their failure shares here too
    assert llm["queries"] == 3 and t.loc["dense", "LLM no answer / fallback"] == "0.0% / 0.0%"
    run = views["locomo"].runs["vector"]
    assert t.loc["dense", "docs"] == run.manifest["dataset"]["card_counts"]["docs"]
    card = json.loads((run.dataset_folder / "card.json").read_text())
    assert t.loc["dense", "doc tokens p50"] == card["chunking"]["tokens_p50"]
    assert t.loc["dense", "index s (this machine)"] == f"{run.manifest['index_build_seconds']:.1f}"
    assert t.loc["absent", "n"] == "n/m†"


SMALL_LB = [
    "dataset=lethebench",
    "dataset.params.splits={test: 3, train: 6, dev: 3}",
    "dataset.params.session_turns=[20,30]",
]


def test_agent_tables_on_a_small_real_lethebench(cfg_for):
    from analysis import agent_metrics as A
    from experiments.runner import run_experiment

    refs = []
    for m in ("bm25", "lethe_iter1"):
        f = run_experiment(cfg_for(f"method={m}", *SMALL_LB))
        refs.append(RunRef("lethebench", m, "test", f, RunFolder(f).dataset_folder, "small"))
    views = V.collect(CFG, refs)
    spec = {
        "rows": [
            {"row": "BM25-only", "run": "lethebench/bm25", "claimed": {"tool_result_recall": 0.098}},
            {"row": "LETHE", "run": "lethebench/lethe_iter1", "lethe": True},
        ]
    }
    t1, t2, t3, tests = (df for _, df in S.agent_tables(views, spec, CFG))
    run = views["lethebench"].runs["bm25"]
    import pandas as pd

    corpus = pd.read_parquet(run.dataset_folder / "corpus.parquet")
    want = A.tool_result_recall(run.run, run.qrels, corpus, 10)
    cell = t1.set_index("method (seed)").loc["BM25-only", "tool-result recall@10 measured"]
    assert cell.startswith(f"{want.mean():.4f}") and "[" in cell and cell.endswith(f" n={len(want)}")
    assert (
        t1.loc[0, "tool-result recall@10 claimed"] == "0.098"
        and t1.loc[0, "planning coherence measured"] == S.UNDEFINED
    )
    assert set(tests["method"]) == {"LETHE"} and set(tests["best baseline"]) == {"BM25-only"}
    assert t2.loc[0, "peak memory MB measured"] != "-"  # measured per run by the runner


def test_sections_print_the_judgment_study_after_the_dev_studies_that_chose_its_decoding(views):
    spec = {
        "s1": {
            "title": "Seed 1",
            "source": "x",
            "tables": [TABLE],
            "study": "judged",
            "decision_studies": {"note": "Chosen on dev.", "studies": ["dev_a", "dev_b"]},
        }
    }
    md = S.seed_sections(views, spec, CFG, studies={"judged": "| judged table |", "dev_a": "| dev a table |"})[0][1]
    want = [
        "Chosen on dev.",
        "Study `dev_a`:",
        "| dev a table |",
        "Study `dev_b`:",
        "`dev_b` not run (n/m†).",
        "Pairwise judgments (study `judged`):",
        "| judged table |",
    ]
    assert [md.index(w) for w in want] == sorted(md.index(w) for w in want)


def test_run_keys_name_the_runs_of_claims_that_set_one_run_against_another():
    """Seed 002's components and plan shares and the paper text's claims name runs (``run`` and ``versus``), which the
    report must declare for their rows; a table row's ``versus`` is a row name, not a run."""
    spec = {
        "s1": {"tables": [{"rows": [{"row": "a", "run": "locomo/bm25", "versus": "b", "full": "locomo/x"}]}]},
        "s2": {
            "rows": [{"row": "w", "run": "d/window"}],
            "components": [{"run": "d/lethe_iter1", "versus": "d/lethe_iter1+corpus_idf"}],
            "plan_shares": [{"run": "d/lethe_iter3"}],
        },
        "s0": {"kind": "paper_text", "claims": [{"run": "d/lethe_iter2", "versus": "d/lethe_iter1"}]},
    }
    assert S.run_keys(spec) == {
        "locomo/bm25",
        "locomo/x",
        "d/window",
        "d/lethe_iter1",
        "d/lethe_iter1+corpus_idf",
        "d/lethe_iter3",
        "d/lethe_iter2",
    }
    assert S.run_keys({"s0": spec["s0"]}) == {"d/lethe_iter2", "d/lethe_iter1"}


def test_the_paper_text_is_claims_only_never_a_seed_section(views):
    spec = {"s0": {"kind": "paper_text", "claims": [{"run": "locomo/bm25", "versus": "locomo/vector"}]}}
    assert S.seed_sections(views, spec, CFG) == []
    assert S.seed_sections(views, spec, CFG, declared={"locomo/bm25"}) == []
