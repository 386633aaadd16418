"""analysis.metric_names: both spellings of a retrieval metric map to one canonical (ranx) name, tables
print the ir_measures form, and anything else is refused with the key named."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.formatting import printed, to_markdown
from analysis.metric_names import (
    UnknownMetric,
    canonical_metric,
    canonical_metrics,
    canonical_or_other,
    deeper_than,
    display_metric,
    display_text,
    metric_cutoff,
)

# (ranx, ir_measures): every family, two cutoffs each, and the ones without a cutoff
PAIRS = [
    ("ndcg@10", "nDCG@10"),
    ("recall@50", "R@50"),
    ("mrr@10", "RR@10"),
    ("precision@10", "P@10"),
    ("ndcg@3", "nDCG@3"),
    ("recall@100", "R@100"),
    ("mrr@1", "RR@1"),
    ("precision@5", "P@5"),
    ("map@100", "AP@100"),
    ("map@10", "AP@10"),
    ("hit_rate@5", "Success@5"),
    ("hit_rate@1", "Success@1"),
    ("ndcg", "nDCG"),
    ("map", "AP"),
    ("mrr", "RR"),
    ("r-precision", "Rprec"),
]


@pytest.mark.parametrize("ranx, irm", PAIRS)
def test_both_spellings_have_one_canonical_and_one_printed_name(ranx, irm):
    assert canonical_metric(ranx) == canonical_metric(irm) == ranx
    assert display_metric(ranx) == display_metric(irm) == irm


@pytest.mark.parametrize(
    "alias, canon",
    [("NDCG@10", "ndcg@10"), ("Recall@50", "recall@50"), ("MRR@10", "mrr@10"), ("Precision@10", "precision@10")],
)
def test_ir_measures_aliases_are_read_by_ir_measures(alias, canon):
    assert canonical_metric(alias) == canon


@pytest.mark.parametrize(
    "bad",
    [
        "ndcg_burges@10",
        "ERR@10",  # ir_measures knows it, but none of its offline providers here computes it
        "ndcg@0",
        "nDCG@0",
        "nDCG@2.5",
        "P@True",
        "recall",
        "R",
        "precision",
        "Success",
        "hit_rate",
        "r-precision@10",
        "Ndcg@10",
        "ndcg@10 ",
        "",
        "foo",
    ],
)
def test_other_names_are_refused_with_the_key_and_the_accepted_forms(bad):
    with pytest.raises(UnknownMetric) as err:
        canonical_metric(bad, "run.metrics")
    msg = str(err.value)
    assert msg.startswith(f"run.metrics: unknown retrieval metric {bad!r}")
    assert "ndcg[@k], recall@k, mrr[@k], precision@k, map[@k], hit_rate@k, r-precision" in msg
    assert "nDCG[@k], R@k, RR[@k], P@k, AP[@k], Success@k, Rprec" in msg
    assert "any measure ir_measures computes through pytrec_eval or judged (e.g. Judged@10, P(rel=2)@5" in msg
    assert "\n" not in msg  # one line


@pytest.mark.parametrize(
    "name, canon, cutoff",
    [
        ("Judged@10", "Judged@10", 10),
        ("P(rel=2)@5", "P(rel=2)@5", 5),
        ("nDCG(judged_only=True)@10", "nDCG(judged_only=True)@10", 10),
        ("AP(rel=2)", "AP(rel=2)", None),
        ("Bpref", "Bpref", None),
        ("infAP", "infAP", None),
    ],
)
def test_measures_ranx_lacks_are_taken_in_ir_measures_spelling(name, canon, cutoff):
    """Computed through ir_measures (analysis.metrics.evaluate_run); printed and stored as ir_measures spells them."""
    assert canonical_metric(name) == display_metric(name) == canon and metric_cutoff(name) == cutoff


def test_a_list_keeps_its_order_and_refuses_one_metric_twice():
    assert canonical_metrics(["nDCG@10", "recall@50", "RR@10"], "run.metrics") == ("ndcg@10", "recall@50", "mrr@10")
    with pytest.raises(UnknownMetric, match=r"run.metrics: \['ndcg@10'\] named more than once"):
        canonical_metrics(["ndcg@10", "nDCG@10"], "run.metrics")
    with pytest.raises(UnknownMetric, match="expected a list"):
        canonical_metrics("ndcg@10", "run.metrics")


def test_other_metrics_pass_through_display_and_lenient_canonicalisation():
    for name in ("coverage@10", "contradiction@10", "f1", "rouge_l"):
        assert display_metric(name) == canonical_or_other(name) == name
    assert canonical_or_other("R@50") == "recall@50"
    assert display_text("vs first stage (ndcg@10)") == "vs first stage (nDCG@10)"
    assert (
        display_text("reranker mrr@10, recall@50; coverage@10; xndcg@10")
        == "reranker RR@10, R@50; coverage@10; xndcg@10"
    )


def test_a_rendered_table_prints_ir_measures_names_and_keeps_the_frame():
    df = pd.DataFrame(
        [
            {"dataset": "locomo", "metric": "ndcg@10", "reranker ndcg@10": 0.5},
            {"dataset": "locomo", "metric": "recall@50", "reranker ndcg@10": 0.7},
            {"dataset": "locomo", "metric": "coverage@10", "reranker ndcg@10": 0.1},
        ]
    )
    md = to_markdown(df)
    assert md.splitlines()[0] == "| dataset | metric | reranker nDCG@10 |"
    assert (
        "| locomo | nDCG@10 | 0.5 |" in md
        and "| locomo | R@50 | 0.7 |" in md
        and "| locomo | coverage@10 | 0.1 |" in md
    )
    assert list(printed(df)["metric"]) == ["nDCG@10", "R@50", "coverage@10"]
    assert list(df["metric"]) == ["ndcg@10", "recall@50", "coverage@10"]  # the computed frame is not changed


def test_a_cutoff_is_read_in_either_spelling_and_compared_with_a_run_depth():
    names = ("R@50", "recall@50", "nDCG@10", "ndcg", "Rprec", "coverage@10")
    assert [metric_cutoff(n) for n in names] == [50, 50, 10, None, None, None]
    # only a cutoff deeper than the ranked list is flagged; no cutoff means the whole list, which is what it holds
    assert deeper_than(["nDCG@10", "R@50", "map", "r-precision", "P@20"], 20) == ["R@50"]
    assert deeper_than(["ndcg@10", "recall@50"], 100) == []
