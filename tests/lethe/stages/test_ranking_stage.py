"""A new ranking stage is one module plus one YAML block: the worked example of docs/methods.md ("Stages are
built by Hydra"), its two code blocks taken from the page as written, builds into a pipeline and acts."""

from __future__ import annotations

import re
import sys
import types

import yaml

from lethe.core.paths import PROJECT_ROOT
from lethe.core.protocol import Doc, Query
from lethe.stages.ranking_stage import RankingStage
from tests.support.method_yaml import build_pipeline

DOCS = [
    Doc(f"s:{i}", text, i)
    for i, text in enumerate(
        [
            "ledgerd memory limit is 512Mi in the helm values",
            "we discussed lunch plans for friday",
            "ledgerd kept crashing with OOM kills",
            "ledgerd memory limit is now 768Mi",
            "the frontend team owns the style guide",
        ]
    )
]
QUERY = Query("what is the ledgerd memory limit?", (), "q1", "s")


def _blocks(lang: str, first_line: str) -> str:
    page = (PROJECT_ROOT / "docs" / "methods.md").read_text()
    found = [b for b in re.findall(rf"```{lang}\n(.*?)```", page, re.S) if b.startswith(first_line)]
    assert len(found) == 1, f"docs/methods.md: one {lang} block starting {first_line!r}"
    return found[0]


def test_the_documented_stage_example_builds_and_reverses_the_top_three(embedder, monkeypatch):
    module = types.ModuleType("lethe.stages.reverse_top3")
    exec(compile(_blocks("python", "# lethe/stages/reverse_top3.py"), "reverse_top3.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "lethe.stages.reverse_top3", module)
    method = yaml.safe_load(_blocks("yaml", "# conf/method/lethe_iter1_reverse3.yaml"))
    assert method["defaults"] == ["lethe_iter1", "_self_"]

    plain = build_pipeline(embedder, diversify={"enabled": False})
    staged = build_pipeline(embedder, diversify={"enabled": False}, extra_stages=method["extra_stages"])
    assert isinstance(staged.stages["extra_stages.reverse_top3"], RankingStage)
    for p in (plain, staged):
        p.index(DOCS)
    before, after = plain.search(QUERY, 5), staged.search(QUERY, 5)
    ids = [d for d, _ in before.ranking]
    assert [d for d, _ in after.ranking] == [*reversed(ids[:3]), *ids[3:]]
    assert [s for _, s in after.ranking] == [s for _, s in before.ranking]  # each position keeps its score
    assert after.flags["reversed"] == 3
    assert staged.describe()["stages"] == {"extra_stages.reverse_top3": {"n": 3}}
