"""The declared confirmatory family: exactly its comparisons, Holm over them alone, resolvable below 0.001; every
other row exploratory with BH over itself."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import families as FAM
from analysis import stats
from analysis.report import load_cfg
from analysis.tables import corrected
from analysis.views import DatasetView, paired_row


def _view(name: str, means: dict[str, float], n: int = 60, seed: int = 0) -> DatasetView:
    """A dataset whose methods score ``mean + noise`` per query (per-query nDCG@10 and R@50 in [0, 1])."""
    rng = np.random.default_rng(seed)
    ids = [f"q{i:03d}" for i in range(n)]
    base = rng.uniform(0.2, 0.6, n)
    pq = {
        m: pd.DataFrame(
            {
                "ndcg@10": np.clip(base + mu + rng.normal(0, 0.05, n), 0, 1),
                "recall@50": np.clip(base + mu / 2 + rng.normal(0, 0.05, n), 0, 1),
            },
            index=pd.Index(ids, name="query_id"),
        )
        for m, mu in means.items()
    }
    return DatasetView(name, pd.DataFrame({"query_id": ids}), {}, pq)


@pytest.fixture(scope="module")
def cfg():
    c = load_cfg(["bootstrap_resamples=2000", "permutation_resamples=2000", "confirmatory.permutation_resamples=20000"])
    return c


@pytest.fixture(scope="module")
def views():
    big = {"bm25": 0.0, "hybrid": 0.05, "lethe_iter1": 0.06, "lethe_iter2": 0.06, "lethe_iter3": 0.2}
    return {"a": _view("a", big), "b": _view("b", {k: v for k, v in big.items() if k != "lethe_iter3"}, seed=1)}


def test_the_family_is_exactly_the_declared_comparisons(views, cfg):
    conf = FAM.confirmatory_table(views, cfg, {"a": "hybrid", "b": "hybrid"})
    got = sorted(zip(conf["dataset"], conf["method"], conf["baseline"], conf["role"], strict=True))
    # iteration 4 has no run; iteration 3 only on a: every declared comparison whose runs both finished, no other
    assert got == [
        ("a", "lethe_iter2", "lethe_iter1", "step"),
        ("a", "lethe_iter3", "hybrid", "vs best baseline"),
        ("a", "lethe_iter3", "lethe_iter2", "step"),
        ("b", "lethe_iter2", "lethe_iter1", "step"),
    ]
    assert set(conf["metric"]) == {"ndcg@10"}  # no f1 column: answer metrics only where both runs generated answers
    assert (conf["family"] == FAM.CONFIRMATORY).all() and (conf["correction"] == "holm").all()
    np.testing.assert_allclose(conf["p_adj"], stats.adjust(conf["p_randomization"].to_numpy(), "holm"))


def test_the_smallest_adjusted_p_is_resolved_below_one_thousandth(views, cfg):
    conf = FAM.confirmatory_table(views, cfg, {"a": "hybrid", "b": "hybrid"})
    strong = conf[(conf["method"] == "lethe_iter3") & (conf["role"] == "vs best baseline")].iloc[0]
    b = int(cfg["confirmatory"]["permutation_resamples"])
    assert strong["p_randomization"] == pytest.approx(1 / (b + 1))  # no flip reaches a +0.15 mean on 60 queries
    assert strong["p_adj"] == pytest.approx(len(conf) / (b + 1)) and strong["p_adj"] < 0.001
    # with the table's 2,000 flips the same family could not go below len/2001 (> 0.001): the reason for the key
    assert FAM.family_size_bound({"confirmatory": {"permutation_resamples": 2000}}, len(conf)) > 0.001
    assert "smallest adjusted p is" in FAM.note(conf, cfg)


def test_table_rows_outside_the_family_are_exploratory_with_bh_over_themselves(views, cfg):
    best = {"a": "hybrid", "b": "hybrid"}
    conf = FAM.confirmatory_table(views, cfg, best)
    rows = [
        r
        for ds, v in views.items()
        for m in ("bm25", "lethe_iter1", "lethe_iter3")
        for metric in ("ndcg@10", "recall@50")
        if m in v.per_query and (r := paired_row(v, ds, m, best[ds], metric, cfg))
    ]
    t2 = FAM.split(corrected(pd.DataFrame(rows), cfg, "table2"), conf, cfg)
    assert not set(FAM.WHOLE_TABLE) & set(t2.columns)  # no whole-table correction left to misread
    c = t2[t2["family"] == FAM.CONFIRMATORY]
    assert list(zip(c["dataset"], c["method"], c["metric"], strict=True)) == [("a", "lethe_iter3", "ndcg@10")]
    # the confirmatory row carries the family's test (more flips) and its Holm p, not a recomputation
    row = conf[(conf["method"] == "lethe_iter3") & (conf["role"] == "vs best baseline")].iloc[0]
    assert c.iloc[0]["p_adj"] == row["p_adj"] and c.iloc[0]["p_randomization"] == row["p_randomization"]
    e = t2[t2["family"] == FAM.EXPLORATORY]
    assert len(e) == len(t2) - 1 and (e["correction"] == "bh").all()
    np.testing.assert_allclose(e["p_adj"], stats.adjust(e["p_randomization"].to_numpy(), "bh"))
    assert list(t2["family"])[0] == FAM.CONFIRMATORY  # confirmatory rows first


def test_the_steps_table_keeps_its_reference_columns(views, cfg):
    conf = FAM.confirmatory_table(views, cfg, {"a": "hybrid", "b": "hybrid"})
    v = views["a"]
    ta = pd.DataFrame(
        [
            paired_row(v, "a", "lethe_iter3", "lethe_iter2", "ndcg@10", cfg),
            paired_row(v, "a", "lethe_iter1", "bm25", "ndcg@10", cfg),
        ]
    )
    ta = corrected(ta.rename(columns={"baseline": "reference", "baseline_mean": "reference_mean"}), cfg, "ablations")
    out = FAM.split(ta, conf, cfg, reference="reference")
    assert {"reference", "reference_mean"} <= set(out.columns) and "baseline" not in out.columns
    assert list(out["family"]) == [FAM.CONFIRMATORY, FAM.EXPLORATORY]
