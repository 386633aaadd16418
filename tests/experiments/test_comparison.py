"""experiments/comparison.py: an experiment() result pasted (plain labels, marks), saved by suffix, and drawn per
query, on a comparison frame built by the API's own wide() from long rows."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from experiments.api import wide
from experiments.comparison import per_query_differences, plain, plot_per_query, save, to_latex, to_markdown


def _long() -> pd.DataFrame:
    rows = []
    for method, mean, diff, lo, hi, p in [
        ("vector", 0.52, 0.07, 0.03, 0.11, 0.001),
        ("window", 0.40, -0.05, -0.2, 0.1, 0.4),
    ]:
        rows.append(
            {
                "dataset": "locomo",
                "measure": "nDCG@10",
                "baseline": "bm25",
                "method": method,
                "baseline_mean": 0.45,
                "method_mean": mean,
                "mean_diff": diff,
                "ci_low": lo,
                "ci_high": hi,
                "p_adjusted": p,
                "n": 302,
            }
        )
    return pd.DataFrame(rows)


def test_the_wide_frame_pastes_with_plain_labels_and_marks(tmp_path):
    runs = {("locomo", m): {"folder": f"/r/{m}", "config_hash": "abc"} for m in ("bm25", "vector", "window")}
    df = wide(_long(), runs)
    table = plain(df)
    assert list(table.columns) == ["dataset", "system", "nDCG@10", "nDCG@10 Δ [CI]", "n"]
    assert table["system"].tolist() == ["bm25", "vector", "window"]
    assert table["nDCG@10"].tolist() == ["0.4500 (base)", "0.5200 +", "0.4000"]
    assert table.loc[1, "nDCG@10 Δ [CI]"] == "+0.0700 [+0.0300, +0.1100]" and table.loc[0, "nDCG@10 Δ [CI]"] == ""
    md = to_markdown(df)
    vector = next(line for line in md.splitlines() if "vector" in line)
    assert "('locomo'" not in md and "locomo" in vector and "0.5200 +" in vector and "(base): the baseline" in md
    tex = to_latex(df)
    assert "\\toprule" in tex and "0.5200 +" in tex and "locomo" in tex
    assert save(df, tmp_path / "t.md").read_text() == md
    assert save(df, tmp_path / "t.tex").read_text() == tex
    back = pd.read_csv(save(df, tmp_path / "t.csv"))
    assert back["system"].tolist() == ["bm25", "vector", "window"] and back["nDCG@10"].iloc[1] == 0.52
    with pytest.raises(ValueError, match=r"suffix must be \.csv, \.md or \.tex"):
        save(df, tmp_path / "t.xlsx")
    with pytest.raises(ValueError, match="wide frame"):
        plain(_long())


def test_per_query_differences_are_sorted_and_drawn_with_their_ci(tmp_path):
    rng = np.random.default_rng(0)
    q = [f"q{i}" for i in range(40)]
    base, mine = rng.random(40), rng.random(40)
    pq = pd.concat(
        [
            pd.DataFrame({"dataset": "locomo", "system": "bm25", "query_id": q, "nDCG@10": base}),
            pd.DataFrame({"dataset": "locomo", "system": "vector", "query_id": q, "nDCG@10": mine}),
        ]
    )
    diff = per_query_differences(pq, "vector", "bm25", "nDCG@10")
    assert len(diff) == 40 and diff.is_monotonic_increasing
    assert diff.sum() == pytest.approx((mine - base).sum())
    fig = plot_per_query(pq, "vector", "bm25", "nDCG@10", resamples=500)
    fig.savefig(tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG" and len(fig.axes[0].containers[0]) == 40
    with pytest.raises(ValueError, match=r"systems \['hybrid'\] are not in the per-query frame"):
        per_query_differences(pq, "hybrid", "bm25", "nDCG@10")
    with pytest.raises(ValueError, match="metric 'R@50' is not a column"):
        per_query_differences(pq, "vector", "bm25", "R@50")
