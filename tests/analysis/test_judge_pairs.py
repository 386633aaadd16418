"""analysis/judge_pairs.py: each perturbation on constructed answers, and the pairs of real LoCoMo gold answers (the
two conversations of the end-to-end runs): the gold answer where ``better`` says, the other answer wrong by the
stated change only, splits grouped by conversation, deterministic, positions balanced."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from analysis import judge_pairs as J
from lethebench.runs import RunFolder


def test_each_change_on_constructed_answers():
    rng = random.Random(0)
    assert J.change_number("7 May 2023", rng) not in (None, "7 May 2023")
    assert J.change_number("7 May 2023", rng).endswith(" May 2023")  # a year is never the number changed
    assert J.change_number("version 9.0.1 of PI04872", rng) is None  # nor a version or an identifier
    assert J.change_number("wait 2.5 s", random.Random(1)) in {f"wait {k}.5 s" for k in range(0, 12) if k != 2}
    new = J.change_date("7 May 2023", random.Random(3))
    assert new != "7 May 2023" and new.split()[0] == "7"
    assert J.change_date("no date here", rng) is None
    assert J.names("Melanie went to Paris with Caroline on Friday in May") == ["Paris", "Caroline"]
    assert J.names("a map of Middle-earth from LOTR") == []
    got = J.change_entity("Melanie went to Paris", ["Paris", "Tokyo"], rng)
    assert got == "Melanie went to Tokyo"  # the first word is never changed, nor a name into one it holds
    assert J.change_entity("Melanie went home", ["Tokyo"], rng) is None
    assert J.truncate("one two three four five six seven eight nine") == "one two three"
    assert J.truncate("too short to cut") is None


@pytest.fixture(scope="module")
def queries(e2e_runs) -> pd.DataFrame:
    return pd.read_parquet(RunFolder(e2e_runs["bm25"]).dataset_folder / "queries.parquet")


def test_pairs_of_real_gold_answers(queries):
    pairs = J.build_pairs(queries, "locomo", seed=0)
    answered = queries[queries["answer"].notna() & queries["answer"].astype(str).str.strip().ne("")]
    assert set(pairs["query_id"]) <= set(answered["query_id"])
    assert set(pairs["perturbation"]) == set(J.PERTURBATIONS)
    for r in pairs.itertuples():
        gold, other = (r.answer_1, r.answer_2) if r.better == "1" else (r.answer_2, r.answer_1)
        assert gold == r.gold != other == r.other
    scope = dict(zip(queries["query_id"], queries["scope_id"], strict=True))
    gold = dict(zip(queries["query_id"], queries["answer"], strict=True))
    other = pairs[pairs["perturbation"] == "other_answer"]
    by_answer = {}
    for q, a in gold.items():
        by_answer.setdefault(str(a).strip(), set()).add(scope[q])
    assert all(by_answer[r.other] - {r.group} for r in other.itertuples())  # from another conversation
    for kind in ("number", "date", "entity"):  # one token changed, the rest as it was
        for r in pairs[pairs["perturbation"] == kind].itertuples():
            a, b = r.gold.split(), r.other.split()
            assert len(a) == len(b) and sum(x != y for x, y in zip(a, b, strict=True)) == 1, (kind, r.gold, r.other)
    for r in pairs[pairs["perturbation"] == "truncation"].itertuples():
        assert r.gold.startswith(r.other) and len(r.other.split()) < len(r.gold.split())
    splits = pairs.groupby("group")["split"].nunique()
    assert (splits == 1).all() and set(pairs["split"]) <= {"dev", "test"}
    share = (pairs["better"] == "1").mean()
    assert 0.4 < share < 0.6, share
    again = J.build_pairs(queries, "locomo", seed=0)
    pd.testing.assert_frame_equal(pairs, again)
    assert not J.build_pairs(queries, "locomo", seed=1)["better"].equals(pairs["better"])
    s = J.summary(pairs)
    assert int(s["pairs"].sum()) == len(pairs)


def test_groups_decide_the_split_and_the_other_answer(queries):
    """One scope for the whole collection (as TechQA): every question its own group, as a gold document would be."""
    one = queries.assign(scope_id="all")
    assert "other_answer" not in set(J.build_pairs(one, "x")["perturbation"])  # no other scope to draw from
    assert set(J.build_pairs(one, "x")["split"]) == {J.build_pairs(one, "x")["split"].iloc[0]}
    own = J.build_pairs(one, "x", groups=dict(zip(one["query_id"], one["query_id"], strict=True)))
    assert "other_answer" in set(own["perturbation"]) and set(own["split"]) == {"dev", "test"}
    assert (own["group"] == own["query_id"]).all()


def test_bad_settings_are_refused(queries):
    with pytest.raises(ValueError, match="dev_share"):
        J.build_pairs(queries, "locomo", dev_share=1.0)
    with pytest.raises(ValueError, match=r"lack the column\(s\) \['answer'\]"):
        J.build_pairs(queries.drop(columns="answer"), "locomo")
