"""The Lethe pipeline as one list of stages (lethe/methods/pipeline.py, lethe/stages/state.py): the fold, the phases
training splits it at, a stage acting where it stands, refused orders, and the migration of the former shape."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from experiments.config import load_config, to_dict
from experiments.run_identity import config_hash, hashed_config, migrated
from lethe.core.protocol import Doc, Query
from lethe.methods.pipeline import LethePipeline
from lethe.stages.state import QueryState
from tests.support.method_yaml import build_pipeline, built_sections

DOCS = [
    Doc("s:0", "ledgerd memory limit is 512Mi in the helm values", 0),
    Doc("s:1", "we discussed lunch plans for friday with Ana", 1),
    Doc("s:2", "the billing dashboard is slow on mondays", 2),
    Doc("s:3", "ledgerd kept crashing with OOM kills last night", 3),
    Doc("s:4", "ledgerd memory limit is now 768Mi after the incident", 4),
    Doc("s:5", "the frontend team owns the style guide, says Ana", 5),
]
QUERIES = [
    Query("what is the ledgerd memory limit?", (), "q1", "s"),
    Query("who owns the style guide and what about billing?", ("Ana talked about lunch",), "q2", "s"),
]


def test_search_is_the_fold_of_prepare_and_rank(embedder):
    """search = the prepare phase, then the rank phase with planning's alpha and diversification's own lambda."""
    p = build_pipeline(embedder, "lethe_iter2")
    p.index(DOCS)
    for q in QUERIES:
        res = p.search(q, 4)
        s = p.prepare(q)
        assert p.rank(s, s.alpha, None, 4) == res.ranking
        assert res.flags["alpha"] == round(s.alpha, 4) and res.flags["lambda"] == p.default_lambda() == 0.3
    assert [n for n, _ in p.stages] == [
        "query_understanding",
        "planning",
        "retrieve",
        "boost",
        "learned_fusion",
        "fuse",
        "diversify",
    ]


class Alpha1:
    """A query step that makes the fusion lexical only: acting in the weigh phase, after planning set alpha."""

    phase: ClassVar[str] = "weigh"

    def step(self, s: QueryState) -> None:
        s.alpha = 1.0
        s.flags["alpha1"] = True

    def describe(self) -> dict[str, Any]:
        return {}


def test_a_stage_acts_where_it_stands(embedder):
    plain = build_pipeline(embedder, diversify={"enabled": False})
    sections = built_sections(diversify={"enabled": False})
    stages = dict(sections["stages"])
    order = list(stages)
    order.insert(order.index("fuse"), "alpha1")
    stages["alpha1"] = Alpha1()
    lexical = LethePipeline(embedder, stages=stages, order=order, progress=False)
    for p in (plain, lexical):
        p.index(DOCS)
    q = QUERIES[0]
    res = lexical.search(q, 4)
    assert res.flags["alpha1"] and res.flags["alpha"] == 1.0
    assert res.ranking == plain.rank(plain.prepare(q), 1.0, None, 4)  # the step set alpha between planning and fusion


def test_orders_that_go_back_or_miss_a_stage_are_refused(embedder):
    sections = built_sections()
    order = list(sections["order"])
    with pytest.raises(ValueError, match=r"stage planning \(prepare\) cannot follow fuse \(rank\)"):
        moved = [n for n in order if n != "planning"]
        moved.insert(moved.index("fuse") + 1, "planning")
        LethePipeline(embedder, stages=sections["stages"], order=moved, progress=False)
    with pytest.raises(ValueError, match="must name every stage"):
        LethePipeline(embedder, stages=sections["stages"], order=order[:-1], progress=False)


def _former_shape(method: dict[str, Any]) -> dict[str, Any]:
    """A method section as identity schema 3 recorded it before ``stages`` (written out here, not derived from the
    migration under test)."""
    st = method["stages"]
    fusion = {**st["learned_fusion"], "_target_": "lethe.stages.learned_fusion.LearnedFusionConfig"}
    out = {k: v for k, v in method.items() if k not in ("stages", "order")}
    out.update(
        depth=st["retrieve"]["depth"],
        bm25=st["retrieve"]["bm25"],
        planning=st["planning"],
        boost=st["boost"],
        diversify=st["diversify"],
        query_understanding=st["query_understanding"],
        learned_fusion=fusion,
        llm_rerank=st["llm_rerank"],
        contradiction=st["contradiction"],
        generation=st["generation"],
        extra_stages={},
    )
    return out


@pytest.mark.parametrize("method", ["lethe_iter1", "lethe_iter3", "lethe_iter4"])
def test_a_record_of_the_former_shape_hashes_as_its_declaration(method):
    resolved = to_dict(load_config([f"method={method}", "dataset=locomo"]))
    old = {**resolved, "method": _former_shape(resolved["method"])}
    assert migrated(old["method"]) == resolved["method"]
    assert config_hash(hashed_config(old, "k")) == config_hash(hashed_config(resolved, "k"))
    assert migrated(resolved["method"]) == resolved["method"]  # today's shape as it is
