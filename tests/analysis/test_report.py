"""The report: tables from results folders only, byte-identical on a second run; the notebook runs headless."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from analysis.report import build_report, load_cfg
from experiments.config import PROJECT_ROOT


@pytest.fixture(scope="module")
def report_cfg(e2e_runs, work, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return load_cfg([f"results_dir={work['results']}", f"out_dir={out}", "bootstrap_resamples=2000",
                     "permutation_resamples=2000"])


def test_tables_are_byte_identical_across_runs(report_cfg, tmp_path):
    first = build_report(report_cfg).parent
    snap = {p.name: p.read_bytes() for p in sorted((first / "tables").iterdir())}
    assert {"overview_ndcg10.csv", "table1_locomo.md", "table1_locomo.tex", "table3_locomo.csv",
            "table2_significance.csv"} <= set(snap)
    build_report(report_cfg)
    assert {p.name: p.read_bytes() for p in sorted((first / "tables").iterdir())} == snap
    assert sorted(p.name for p in (first / "figures").glob("*.png")) == [f"fig{i}.png" for i in range(1, 7)]
    report = (first / "report.md").read_text()
    assert "not measurements" in report and "| bm25 | nDCG@10 | 0.435 | n/m |" in report


def test_table1_has_measured_and_unmeasured_cells(report_cfg):
    out = build_report(report_cfg).parent / "tables" / "table1_locomo.csv"
    lines = out.read_text().splitlines()
    assert lines[0].startswith("method,n,nDCG@10,nDCG@10 95% CI,Recall@50")
    import csv

    rows = {r["method"]: r for r in csv.DictReader(lines)}
    bm25 = rows["bm25"]
    assert bm25["n"] == "302" and float(bm25["nDCG@10"]) > 0.3 and float(bm25["P95 latency (ms)"]) > 0
    # LoCoMo has no gold entities, contradiction labels or generated answers: not measured, never filled
    assert bm25["Coverage@10"] == bm25["Contradiction@10"] == bm25["Hallucination"] == "n/m"


def test_notebook_executes_headless(report_cfg, work, tmp_path):
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    os.environ["LETHE_RESULTS"], old = str(work["results"]), os.environ.get("LETHE_RESULTS")
    os.environ["LETHE_ANALYSIS_OUT"] = str(tmp_path)
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(PROJECT_ROOT)}}).execute()
    finally:
        os.environ.pop("LETHE_ANALYSIS_OUT")
        if old is None:
            os.environ.pop("LETHE_RESULTS")
        else:
            os.environ["LETHE_RESULTS"] = old
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert (tmp_path / "figures" / "fig1.png").is_file()
