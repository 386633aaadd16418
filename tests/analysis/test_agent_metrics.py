"""Agent-context metrics (analysis/agent_metrics.py) on a hand-built session whose values are known."""

from __future__ import annotations

import mmap

import pandas as pd
import pytest

from analysis import agent_metrics as A

CORPUS = pd.DataFrame(
    {
        "doc_id": ["t0", "t1", "t2", "t3", "t4", "t5"],
        "scope_id": ["s"] * 6,
        "position": [0, 1, 2, 3, 4, 5],
        "kind": ["tool", "prose", "tool", "tool", "prose", "tool"],
        "entities": [["api-gw", "E101"], ["api-gw"], ["billing"], ["search", "X9"], [], ["late-svc"]],
    }
)
QUERIES = pd.DataFrame(
    {
        "query_id": ["q1", "q2", "q3"],
        "scope_id": ["s", "s", "s"],
        "position": [5, 5, 1],
        "category": ["identifier", "temporal", "single_hop"],
    }
)
QRELS = {"q1": {"t0": 2, "t2": 1, "t1": 1}, "q2": {"t1": 2, "t4": 1}, "q3": {"t1": 2}}
RUN = {
    "q1": [("t2", 3.0), ("t4", 2.0), ("t1", 1.0), ("t0", 0.5)],
    "q2": [("t4", 1.0), ("t3", 0.9)],
    "q3": [("t0", 1.0)],
}


def test_tool_result_recall_by_hand():
    got = A.tool_result_recall(RUN, QRELS, CORPUS, k=2)
    # q1: relevant tool outputs t0, t2 (t1 is prose); top 2 = t2, t4 -> 1 of 2. q2, q3: no relevant tool output.
    assert got.to_dict() == {"q1": 0.5}
    assert A.tool_result_recall(RUN, QRELS, CORPUS, k=10).to_dict() == {"q1": 1.0}


def test_action_pair_recall_counts_only_temporal_queries():
    # q2 (temporal): steps t1, t4; top 10 holds t4 only
    assert A.action_pair_recall(RUN, QRELS, QUERIES, k=10).to_dict() == {"q2": 0.5}


def test_tool_diversity_by_hand():
    got = A.tool_diversity(RUN, QUERIES, CORPUS, k=20)
    # q1 (position 5): eligible tool outputs t0, t2, t3 -> sources api-gw, billing, search (3); top holds t2, t0 ->
    # billing, api-gw: 2/3. q2: top holds t3 -> search: 1/3. q3 (position 1): eligible t0 -> api-gw; top t0: 1/1.
    assert got.to_dict() == pytest.approx({"q1": 2 / 3, "q2": 1 / 3, "q3": 1.0})
    # k=2: q1's top 2 = t2 (billing), t4 (prose): 1 source of min(2, 3) possible
    assert A.tool_diversity(RUN, QUERIES, CORPUS, k=2)["q1"] == 0.5


def test_agent_entity_coverage_by_hand():
    from analysis.labels import coverage_at_n

    corpus = CORPUS.assign(
        text=[
            "GET /v1 on API-GW failed: E101",
            "the gateway again",
            "billing ok",
            "search X9 timeout",
            "note",
            "late-svc up",
        ]
    )
    queries = QUERIES.assign(meta=[{"gold_entities": ["api-gw", "E101", "X9"]}, {"gold_entities": ["search"]}, {}])
    got = coverage_at_n(RUN, queries, corpus, n=2)
    # q1: top 2 = t2, t4 -> none of its 3 entities; q2: top 2 = t4, t3 -> "search" (case-insensitive); q3: no gold
    assert got.to_dict() == {"q1": 0.0, "q2": 1.0}
    # q1 at n=10: t2, t4, t1, t0 -> api-gw and E101 (in t0), not X9: 2/3
    assert coverage_at_n(RUN, queries, corpus, n=10)["q1"] == pytest.approx(2 / 3)


def test_peak_memory_is_the_runs_own_rise_and_a_real_run_records_it(tmp_path):
    from lethebench.provenance import end_memory_window, start_memory_window

    assert A.peak_memory_mb({"memory_mb": {"run_added": 312.3}}) == 312.3
    assert A.peak_memory_mb({"peak_rss_mb": {"at_start": 100.0, "at_end": 412.3}}) is None  # process-wide: not per run
    w = start_memory_window()
    # 64 MiB of fresh pages, touched: mapped anew, so that memory an earlier test freed (still resident in this
    # process's heap) cannot serve them without a rise
    block = mmap.mmap(-1, 64 * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    got = end_memory_window(w)
    block.close()
    if w["peak_reset"]:  # Linux
        assert got["run_added"] >= 60 and got["run_peak"] >= got["rss_at_start"] + 60
