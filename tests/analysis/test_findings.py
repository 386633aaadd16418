"""The Findings section: every number is a row of the tables it reads, a loss is said first, the held-out family
comes first; the committed report's findings equal its Table 2 and confirmatory rows, and the README's summary is
the one its findings make."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis import findings as FI
from analysis.families import CONFIRMATORY, EXPLORATORY
from analysis.report import load_cfg
from lethe.core.paths import PROJECT_ROOT

RESULTS = PROJECT_ROOT / "results"


def _row(ds, method, base, diff, p, family=CONFIRMATORY, metric="ndcg@10"):
    return {
        "dataset": ds,
        "method": method,
        "baseline": base,
        "metric": metric,
        "n": 100,
        "mean_diff": diff,
        "ci_low": diff - 0.01,
        "ci_high": diff + 0.01,
        "p_adj": p,
        "family": family,
        "correction": "holm" if family == CONFIRMATORY else "bh",
    }


@pytest.fixture(scope="module")
def cfg():
    return load_cfg()


@pytest.fixture(scope="module")
def table(cfg):
    conf = pd.DataFrame(
        [
            _row("lethebench", "lethe_iter3", "hybrid", 0.05, 1e-4),
            _row("lethebench_heldout", "lethe_iter3", "hybrid", 0.04, 2e-4),
            _row("lethebench_heldout", "lethe_iter3", "lethe_iter2", 0.01, 0.2),
            _row("locomo", "lethe_iter3", "bm25", 0.005, 0.6),
            _row("ultradomain_mix", "lethe_iter3", "hybrid", -0.035, 0.01),
        ]
    )
    t2 = pd.DataFrame([_row("locomo", "lethe_iter1", "bm25", -0.02, 0.03, EXPLORATORY)])
    best = {"lethebench": "hybrid", "lethebench_heldout": "hybrid", "locomo": "bm25", "ultradomain_mix": "hybrid"}
    return FI.findings_table(conf, t2, best, cfg)


def test_rows_are_the_rows_they_read_and_the_held_out_family_comes_first(table):
    assert list(table["dataset"].drop_duplicates()) == ["lethebench_heldout", "lethebench", "locomo", "ultradomain_mix"]
    r = table[(table["dataset"] == "ultradomain_mix")].iloc[0]
    assert (r["difference"], r["ci_low"], r["p_adj"], r["finding"]) == (-0.035, pytest.approx(-0.045), 0.01, FI.WORSE)
    step = table[(table["dataset"] == "lethebench_heldout") & (table["role"] == "step")].iloc[0]
    assert step["compared with"] == "lethe_iter2" and step["finding"] == FI.NO_DIFF
    explo = table[(table["dataset"] == "locomo") & (table["method"] == "lethe_iter1")].iloc[0]
    assert explo["family"] == EXPLORATORY and explo["finding"] == FI.WORSE  # BH p 0.03 < 0.05, said exploratory


def test_where_lethe_does_not_win_is_said_first(table, cfg):
    head = FI.headline(table, cfg)
    assert head.startswith(
        "lethe_iter3 does not beat the best baseline on 2 of 4 datasets: it is significantly worse on ultradomain_mix"
    )
    assert (
        "not significantly different on locomo" in head
        and "significantly better on lethebench_heldout, lethebench" in head
    )
    assert "Not run on any dataset of this report: lethe_iter4." in head
    text = FI.section(table, cfg, {"lethebench_heldout": "The detector finds 0 of 152."})
    lines = [x for x in text.splitlines() if x.startswith("- ")]
    assert lines[0].startswith("- **lethebench_heldout (LetheBench, held-out family: the LetheBench result)**")
    assert "lethe_iter4 was not run here" in lines[0] and "The detector finds 0 of 152." in lines[0]
    assert "no step between iterations is significant after Holm (1 tested)" in lines[0]
    assert "(rules written against it)" not in lines[0] and "rules written against it" in lines[1]


def test_readme_block_is_replaced_and_refused_without_markers(table, cfg):
    summary = FI.readme_summary(table, cfg)
    readme = f"# x\n\n{FI.README_START}\nold\n{FI.README_END}\n\nrest\n"
    out = FI.with_readme_summary(readme, summary)
    assert out.startswith("# x\n\n" + summary) and out.endswith("\n\nrest\n") and "old" not in out
    with pytest.raises(ValueError, match="findings:start"):
        FI.with_readme_summary("# no block\n", summary)


# ------------------------------------------------------------------ the committed report (make report wrote these)


def _committed():
    path = RESULTS / "tables" / "findings.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: make report writes it with the committed report")
    return pd.DataFrame(json.loads(path.read_text()))


def test_committed_findings_equal_the_tables_they_came_from():
    """Every number of the committed findings is the same comparison's row in Table 2 or the confirmatory table."""
    found = _committed()
    assert len(found) and set(found["family"]) <= {CONFIRMATORY, EXPLORATORY}
    conf = pd.read_csv(RESULTS / "tables" / "table_confirmatory.csv")
    t2 = pd.read_csv(RESULTS / "tables" / "table2_significance.csv")
    metric = {"ndcg@10": "nDCG@10", "f1": "f1"}
    for r in found.to_dict("records"):
        src = conf if r["family"] == CONFIRMATORY else t2
        key = (r["dataset"], r["method"], r["compared with"], r["metric"])
        hit = src[
            (src["dataset"] == key[0])
            & (src["method"] == key[1])
            & (src["baseline"] == key[2])
            & (src["metric"] == metric.get(key[3], key[3]))
        ]
        assert len(hit) == 1, key
        for col, mine in (
            ("mean_diff", "difference"),
            ("ci_low", "ci_low"),
            ("ci_high", "ci_high"),
            ("p_adj", "p_adj"),
        ):
            assert np.isclose(float(hit.iloc[0][col]), float(r[mine]), rtol=1e-5, atol=1e-6), (*key, col)


def test_the_readme_summary_is_the_committed_findings(cfg):
    expected = FI.readme_summary(_committed(), cfg)
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert expected in readme, "README's findings block is stale: make report rewrites it from the committed store"
    report = (RESULTS / "report.md").read_text()
    # findings first, provenance last
    assert report.index("## Findings") < report.index("## Overview") < report.index(FI.SETUP_HEADING)


def test_a_less_supervised_best_baseline_gets_the_matched_comparison_beside_it(cfg):
    """Issue 57: where the best of all baselines saw less label supervision than an iteration, the findings add its
    comparison with the best baseline that saw as much (Table 2's `versus` row), after the best of all."""
    from analysis.tables import MATCHED, OVERALL

    conf = pd.DataFrame([_row("techqa", "lethe_iter3", "hybrid", 0.014, 0.1)])
    t2 = pd.DataFrame(
        [
            {**_row("techqa", "lethe_iter3", "hybrid", 0.014, 0.1, EXPLORATORY), "versus": OVERALL},
            {**_row("techqa", "lethe_iter3", "hybrid_tuned", 0.004, 0.6, EXPLORATORY), "versus": MATCHED},
        ]
    )
    table = FI.findings_table(conf, t2, {"techqa": "hybrid"}, cfg)
    got = list(zip(table["compared with"], table["role"], table["family"], strict=True))
    assert got == [
        ("hybrid", "vs best baseline", CONFIRMATORY),
        ("hybrid_tuned", "vs best with as much supervision", EXPLORATORY),
    ]
