"""A new ranking stage is one module plus one YAML block: the worked example of the README ("Adding a stage"), its
two code blocks taken from the page as written, builds into a pipeline and acts."""

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


README = (PROJECT_ROOT / "README.md").read_text()


def _blocks(lang: str, first_line: str) -> str:
    found = [b for b in re.findall(rf"```{lang}\n(.*?)```", README, re.S) if b.startswith(first_line)]
    assert len(found) == 1, f"README.md: one {lang} block starting {first_line!r}"
    return found[0]


def test_the_documented_stage_example_builds_and_reverses_the_top_three(embedder, monkeypatch):
    module = types.ModuleType("lethe.stages.reverse_top3")
    exec(compile(_blocks("python", "# lethe/stages/reverse_top3.py"), "reverse_top3.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "lethe.stages.reverse_top3", module)
    method = yaml.safe_load(_blocks("yaml", "# conf/method/lethe_iter1_reverse3.yaml"))
    assert method["defaults"] == ["lethe_iter1", "_self_"]

    plain = build_pipeline(embedder, diversify={"enabled": False})
    staged = build_pipeline(embedder, diversify={"enabled": False}, **method["stages"])
    assert isinstance(staged.stage("reverse_top3"), RankingStage) and staged.stages[-1][0] == "reverse_top3"
    for p in (plain, staged):
        p.index(DOCS)
    before, after = plain.search(QUERY, 5), staged.search(QUERY, 5)
    ids = [d for d, _ in before.ranking]
    assert [d for d, _ in after.ranking] == [*reversed(ids[:3]), *ids[3:]]
    assert [s for _, s in after.ranking] == [s for _, s in before.ranking]  # each position keeps its score
    assert after.flags["reversed"] == 3
    assert staged.describe()["stages"]["reverse_top3"] == {"n": 3}


def test_the_documented_run_command_runs_the_new_method(work, tmp_path, monkeypatch):
    """``python -m experiments.run method=lethe_iter1_reverse3 dataset=locomo`` as the README shows it, with the two
    blocks as files (the YAML in a config folder on Hydra's search path), on one LoCoMo conversation."""
    from experiments.config import load_config
    from experiments.runner import run_experiment
    from lethebench.runs import RunFolder
    from tests.conftest import overrides_for

    module = types.ModuleType("lethe.stages.reverse_top3")
    exec(compile(_blocks("python", "# lethe/stages/reverse_top3.py"), "reverse_top3.py", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "lethe.stages.reverse_top3", module)
    (tmp_path / "conf" / "method").mkdir(parents=True)
    (tmp_path / "conf" / "method" / "lethe_iter1_reverse3.yaml").write_text(
        _blocks("yaml", "# conf/method/lethe_iter1_reverse3.yaml")
    )
    command = re.search(r"`python -m experiments\.run (method=lethe_iter1_reverse3 dataset=locomo)`", README)
    assert command, "README.md: the run command of the stage example"
    cfg = load_config(
        overrides_for(
            work,
            *command.group(1).split(),
            "dataset.scopes=[conv-26]",
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
        )
    )
    run = RunFolder(run_experiment(cfg))
    assert run.is_done and run.method == "lethe_iter1_reverse3"
    assert run.manifest["method"]["stages"]["reverse_top3"] == {"n": 3}
    assert run.manifest["method"]["order"][-1] == "reverse_top3"
    assert (run.flags()["reversed"] == 3).all()
