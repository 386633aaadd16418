"""The report: tables from the declared runs only, byte-identical on a second run; a declared run that
is missing shows n/m†."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.declared_runs import RunRef
from analysis.report import ReportContext, build_report, load_cfg, report_section
from analysis.stats import adjust, ci_test_disagreement
from analysis.table import Table
from lethe.core.paths import PROJECT_ROOT


@pytest.fixture(scope="module")
def refs(e2e_runs) -> list[RunRef]:
    """The three end-to-end runs as declared runs, plus a declared hybrid run that was never made."""
    from lethebench.runs import RunFolder

    ds_folder = RunFolder(e2e_runs["bm25"]).dataset_folder
    out = [RunRef("locomo", m, "test", f, ds_folder, "2 conversations") for m, f in e2e_runs.items()]
    missing = e2e_runs["bm25"].parents[1] / "hybrid" / "000000000000"
    return out + [RunRef("locomo", "hybrid", "test", missing, ds_folder, "2 conversations")]


@pytest.fixture(scope="module")
def report_cfg(e2e_runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return load_cfg([f"out_dir={out}", "bootstrap_resamples=2000", "permutation_resamples=2000"])


def test_tables_are_byte_identical_across_runs(report_cfg, refs, tmp_path):
    first = build_report(report_cfg, refs).parent
    snap = {p.name: p.read_bytes() for p in sorted((first / "tables").iterdir())}
    assert {
        "overview_ndcg10.csv",
        "table1_locomo.md",
        "table1_locomo.tex",
        "table3_locomo.csv",
        "table2_significance.csv",
    } <= set(snap)
    build_report(report_cfg, refs)
    assert {p.name: p.read_bytes() for p in sorted((first / "tables").iterdir())} == snap
    assert sorted(p.name for p in (first / "figures").glob("*.png")) == [f"fig{i}.png" for i in range(1, 8)]
    report = (first / "report.md").read_text()
    assert (
        "not measurements" in report
        and "| paper Table 1 | bm25: nDCG@10 = 0.435 | 0.435 | - | - | not comparable |" in report
    )


@report_section("toy_run_counts")
def _toy_run_counts(c: ReportContext) -> list[str]:
    """A toy report table, added in this one file: finished runs per dataset."""
    t = Table(
        "table_toy",
        "Toy: finished runs per dataset",
        pd.DataFrame([{"dataset": ds, "runs": len(v.runs)} for ds, v in sorted(c.views.items())]),
        None,
    )
    t.write(c.tables)
    return ["## Toy", "", t.title, "", t.markdown()]


def test_a_new_report_table_is_one_registered_function_and_its_name(report_cfg, refs, tmp_path):
    """Issue 59: a table is a Table record written by one writer; the report shows the sections `report_sections`
    lists, so the toy section above joins it by name (and an unknown or doubly registered name is refused)."""
    cfg = {**report_cfg, "out_dir": str(tmp_path), "report_sections": ["overview", "toy_run_counts"]}
    report = build_report(cfg, refs).read_text()
    assert report.index("## Overview: nDCG@10") < report.index("## Toy") and "## Findings" not in report
    assert "Toy: finished runs per dataset\n\n| dataset | runs |\n|---|---|\n| locomo | 3 |\n" in report
    assert (tmp_path / "tables" / "table_toy.csv").read_text() == "dataset,runs\nlocomo,3\n"
    assert (tmp_path / "tables" / "table_toy.md").read_text().startswith("**Toy: finished runs per dataset**")
    with pytest.raises(ValueError, match=r"report_sections: unknown section\(s\) \['tabel2'\]"):
        build_report({**cfg, "report_sections": ["tabel2"]}, refs)
    with pytest.raises(ValueError, match="report section 'overview' is registered twice"):
        report_section("overview")(_toy_run_counts)


def test_tables_print_ir_measures_names_whichever_spelling_the_settings_use(report_cfg, refs, tmp_path):
    """Tables show nDCG@10, R@50 (ir_measures' names); the settings may name metrics either way and give the
    same tables, because load_cfg canonicalises them (analysis.metric_names)."""
    first = build_report(report_cfg, refs).parent
    t2 = (first / "tables" / "table2_significance.md").read_text()
    assert "| locomo | nDCG@10 |" in t2 and "| locomo | R@50 |" in t2 and "| locomo | coverage@10 |" not in t2
    assert "ndcg@10" not in t2 and "recall@50" not in t2
    report = (first / "report.md").read_text()
    assert "methods x metrics ['nDCG@10', 'R@50', 'coverage@10']" in report
    # the declared primary test (randomization) is the corrected one; Wilcoxon stays beside it; CI-vs-test flagged.
    # No confirmatory comparison has both runs here, so every row is exploratory: BH over the table
    csv = pd.read_csv(first / "tables" / "table2_significance.csv")
    assert set(csv["family"]) == {"exploratory"} and set(csv["correction"]) == {"bh"}
    np.testing.assert_allclose(csv["p_adj"], adjust(csv["p_randomization"].to_numpy(), "bh"), rtol=1e-5)  # 6 digits
    flags = csv["ci_vs_test"].fillna("")
    assert flags.tolist() == [
        ci_test_disagreement(lo, hi, p, 0.05)
        for lo, hi, p in zip(csv["ci_low"], csv["ci_high"], csv["p_randomization"], strict=True)
    ]
    assert (
        "Primary test: the paired randomization (sign-flip) test of the mean difference (`p_randomization`)" in report
        and f"disagree at 0.05: {int((flags != '').sum())} of {len(csv)} rows." in report
    )
    assert "| method | supervision | n | nDCG@10 | nDCG@10 95% CI | R@50 |" in report
    spelled = load_cfg(
        [
            f"out_dir={tmp_path}",
            "bootstrap_resamples=2000",
            "permutation_resamples=2000",
            "gate_metric=nDCG@10",
            "best_baseline_metric=NDCG@10",
            "family_metrics=[nDCG@10,R@50,coverage@10]",
        ]
    )
    assert (spelled["gate_metric"], spelled["best_baseline_metric"], spelled["family_metrics"]) == (
        "ndcg@10",
        "ndcg@10",
        ["ndcg@10", "recall@50", "coverage@10"],
    )
    second = build_report(spelled, refs).parent
    assert {p.name: p.read_bytes() for p in (second / "tables").iterdir()} == {
        p.name: p.read_bytes() for p in (first / "tables").iterdir()
    }


def test_table1_has_measured_and_unmeasured_cells(report_cfg, refs):
    out = build_report(report_cfg, refs).parent / "tables" / "table1_locomo.csv"
    lines = out.read_text().splitlines()
    assert lines[0].startswith("method,supervision,n,nDCG@10,nDCG@10 95% CI,R@50,")  # ir_measures names in every table
    import csv

    rows = {r["method"]: r for r in csv.DictReader(lines)}
    bm25 = rows["bm25"]
    assert (
        bm25["n"] == "302"
        and float(bm25["nDCG@10"]) > 0.3
        and float(bm25["P95 latency (ms, this machine)"].rstrip("‡")) > 0
    )
    # LoCoMo has no gold entities, contradiction labels or generated answers: not measured, never filled
    assert bm25["Coverage@10"] == bm25["Contradiction@10"] == bm25["Hallucination"] == "n/m"
    # the declared hybrid run was never made: a row of n/m†, and the overview says the same
    assert set(rows["hybrid"].values()) == {"hybrid", "n/m†"}
    overview = (out.parent / "overview_ndcg10.md").read_text()
    assert "| hybrid | none | n/m† |" in overview and "declared in the reproduction contract but not run" in overview


def test_seed_runs_are_left_to_the_seed_report(report_cfg, refs, cfg_for, tmp_path):
    """A declared run labelled as a seed study's (``*+seed0*``) is left out of the reference report's overview,
    Table 1 and families (its setup table still lists it, and a section points to the seed report), and the seed
    report shows it in its seed's section, claims beside, with only the runs the seeds name (seed 001 names
    locomo/vector+seed001 and locomo/vector)."""
    from analysis.seed_report import build_seed_report
    from experiments.runner import run_experiment
    from lethebench.runs import RunFolder
    from tests.conftest import TWO_CONVS

    f = run_experiment(cfg_for("method=vector", "++method.variant=seed001", f"dataset.scopes={TWO_CONVS}"))
    seed_ref = RunRef("locomo", "vector+seed001", "test", f, RunFolder(f).dataset_folder, "seed")
    main_dir, seeds_dir = tmp_path / "main", tmp_path / "seeds"
    report = build_report(
        {**report_cfg, "out_dir": str(main_dir), "seeds_report": "seeds/report.md"}, refs + [seed_ref]
    ).read_text()
    assert "vector+seed001" not in (main_dir / "tables" / "overview_ndcg10.csv").read_text()
    assert "vector+seed001" not in (main_dir / "tables" / "table1_locomo.md").read_text()
    assert "| locomo | vector+seed001 | test |" in report  # the setup table lists every declared run
    assert "## Seed 001" not in report and "`seeds/report.md`" in report
    # the claims table: the paper's claims and those of the seeds whose runs are declared (seeds 001 and 004 name locomo/vector+seed001)
    claims = pd.read_csv(main_dir / "tables" / "table_claims.csv", dtype=str).set_index("claim")
    assert set(claims["source"].str.split(":").str[0]) == {
        "paper Table 1",
        "paper Table 2",
        "paper Table 3",
        "paper Table 4",
        "seed001",
        "seed004",
    }
    # levels from another generator or dataset are not comparable first, measured or not (analysis/verdicts.py)
    hit = claims.loc["Baseline (semantic only): answer F1 = 0.3059"]  # its run is finished, without answers
    assert hit["verdict"] == "not comparable" and "generator it does not name" in hit["reason"]
    assert claims.loc["RRF Fusion: answer F1 = 0.2818", "verdict"] == "not comparable"
    assert claims.loc["bm25: nDCG@10 = 0.435", "verdict"] == "not comparable"  # no LetheBench run here either
    section = report.split("## Claims: verdicts", 1)[1]
    assert "Verdict rule (analysis/verdicts.py" in section and f"{len(claims)} claims: " in section
    seeds = build_seed_report({**report_cfg, "out_dir": str(seeds_dir)}, refs + [seed_ref]).read_text()
    section = seeds.split("## Seed 001")[1].split("\n## ")[0]
    assert "| Baseline (semantic only) | locomo/vector+seed001 |" in section and "0.3059" in section  # claimed beside
    assert "## Seed 002" not in seeds  # no declared run of seed 002 here
    assert "| locomo | vector+seed001 | test |" in seeds and "| locomo | window |" not in seeds  # named runs only
    assert (seeds_dir / "tables" / "table_seed001_1.md").is_file()


def test_the_hardware_line_names_every_machine_the_runs_were_made_on():
    """Runs stored from two machines are not reported as made on one (the setup used to print the first run's)."""
    import copy
    import json

    from analysis.report import hardware_line

    stored = json.loads((PROJECT_ROOT / "results/reference/core/locomo/bm25/manifest.json").read_text())
    cpu = stored["hardware"]["cpu"]
    assert hardware_line([stored, stored]).startswith(f"- Hardware: {cpu}, ")
    other = copy.deepcopy(stored)
    other["hardware"]["cpu"] = "another CPU"
    line = hardware_line([stored, other, stored])
    assert "more than one machine" in line
    assert f"{cpu}, " in line and "(2 runs); another CPU, " in line and line.endswith("(1 run)")
