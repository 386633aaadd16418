"""A damaged run folder is a status, not a crash (issue 36, item 4): a folder with ``DONE`` but a file missing or
unreadable made verification and ``experiments.summary`` raise ``FileNotFoundError`` for the whole table. Now it is
listed as DAMAGED with what is wrong, the report and the Python API leave it out with a console line, and running
it again replaces it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analysis import expected as E
from analysis.declared_runs import load_runs
from experiments.config import load_config
from experiments.runner import run_experiment
from experiments.summary import format_table, load_metrics
from lethebench.runs import RunFolder
from tests.conftest import overrides_for

METRICS = ["ndcg@10", "recall@50"]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGES = {
    # name: (how the folder is damaged, what damage() says)
    "metrics.json deleted": (lambda f: (f / "metrics.json").unlink(), "missing metrics.json"),
    "manifest.json deleted": (lambda f: (f / "manifest.json").unlink(), "missing manifest.json"),
    "run.trec deleted": (lambda f: (f / "run.trec").unlink(), "missing run.trec"),
    "metrics.json garbage": (lambda f: (f / "metrics.json").write_text("{not json"), "unreadable metrics.json"),
    "per_query.parquet truncated": (lambda f: _truncate(f / "per_query.parquet"), "unreadable per_query.parquet"),
    # issue 58: a symlink is never followed (it was read as the run's qrels and uploaded by +tracking=mlflow)
    "qrels.trec symlinked elsewhere": (
        lambda f: _symlink_elsewhere(f / "qrels.trec"),
        "not a regular file: qrels.trec",
    ),
}


def _symlink_elsewhere(path: Path) -> None:
    secret = path.parent.parents[3] / "secret.txt"  # outside the results folder
    secret.write_text("conv-26:q0 0 D1:1 1\n")  # a file outside the run, in qrels format
    path.unlink()
    path.symlink_to(secret)


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> tuple[dict[str, Path], Path]:
    """A finished BM25 run on one LoCoMo conversation, kept as the template every case copies."""
    base = tmp_path_factory.mktemp("damaged")
    work = {"processed": base / "processed", "cache": base / "cache", "results": base / "results"}
    folder = run_experiment(
        load_config(overrides_for(work, "dataset=locomo", "dataset.scopes=[conv-26]", "method=bm25"))
    )
    assert RunFolder(folder).damage is None and RunFolder(folder).is_whole
    return work, folder


@pytest.mark.parametrize("case", list(DAMAGES))
def test_a_damaged_folder_is_listed_left_out_and_made_again(intact, tmp_path, case, capsys):
    work, template = intact
    results = tmp_path / "results"
    folder = results / template.relative_to(work["results"])
    shutil.copytree(template, folder)
    key = "locomo/bm25"
    expected = {"runs": {key: {"metrics": E.measure(folder, METRICS, []), "tolerance": 0.0}}}
    damage, says = DAMAGES[case]
    damage(folder)
    assert RunFolder(folder).damage.startswith(says) and not RunFolder(folder).is_whole

    table = E.verify([(key, folder)], expected, METRICS, [])  # verification: a status, not a crash
    assert set(table["status"]) == {"DAMAGED"} and not E.passed(table)
    assert says in table["note"].iloc[0] and E.summary_line(table).endswith(f"{len(table)} DAMAGED")

    listing = format_table(load_metrics(results))  # experiments.summary lists it
    assert f"DAMAGED ({says}" in listing and "locomo/bm25/" in listing

    assert load_runs(results) == []  # the API and the report leave it out...
    assert f"DAMAGED ({says}" in capsys.readouterr().err  # ...and say so

    again = run_experiment(
        load_config(
            overrides_for({**work, "results": results}, "dataset=locomo", "dataset.scopes=[conv-26]", "method=bm25")
        )
    )
    assert again == folder and RunFolder(folder).is_whole  # the same command makes it again
    assert f"[damaged] locomo/bm25/{folder.name}: {says}" in capsys.readouterr().out
    assert set(E.verify([(key, folder)], expected, METRICS, [])["status"]) == {"OK"}
