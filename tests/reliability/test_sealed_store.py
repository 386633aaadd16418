"""A sealed store (issue 58, item 4): ``ndcg@10 = 1.0`` set in a stored per-query table went into every table with
"OK"; an edited ``metrics.json`` mean showed on the site with a green OK; a deleted ``metrics.json`` crashed the
report; a truncated per-query table crashed the site. Each stored tier now has a seal (every file's sha256, written
by ``action=store`` or ``action=seal``): a file that differs makes its run DAMAGED, named and never read. The whole
report path on a damaged store: tests/experiments/test_reproduce_reports.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from experiments import reference_store as RS
from experiments.store_seal import seal_path, store_damage, write_seal
from lethe.core.paths import PROJECT_ROOT

STORE = PROJECT_ROOT / "results" / "reference"


def test_the_committed_store_matches_its_seals():
    tiers = sorted(RS.read_index(STORE))
    assert tiers and all(seal_path(STORE, t).is_file() for t in tiers), "python -m experiments.reproduce action=seal"
    damaged = {t: d for t in tiers if (d := store_damage(STORE, t)).tier or d.runs or d.studies}
    assert damaged == {}


@pytest.fixture
def store(tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(STORE, copy, symlinks=True)
    return copy


def _set_value(path: Path) -> None:
    pq = pd.read_parquet(path)
    pq["ndcg@10"] = 1.0
    pq.to_parquet(path, index=False)


def _edit_mean(path: Path) -> None:
    doc = json.loads(path.read_text())
    doc["means"]["ndcg@10"] = 0.9999
    path.write_text(json.dumps(doc, indent=2))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _symlink(path: Path) -> None:
    path.unlink()
    os.symlink("/etc/hostname", path)


CASES = {
    "a value set in a per-query table": ("per_query.parquet", _set_value, "edited"),
    "a metrics.json mean edited": ("metrics.json", _edit_mean, "edited"),
    "metrics.json deleted": ("metrics.json", Path.unlink, "missing"),
    "a truncated per-query table": ("per_query.parquet", _truncate, "edited"),
    "a file replaced by a symlink": ("manifest.json", _symlink, "not a regular file"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_edit_to_a_stored_run_names_that_run_and_no_other(store, case):
    name, edit, phrase = CASES[case]
    edit(store / "core" / "locomo" / "vector" / name)
    damage = store_damage(store, "core")
    assert damage.tier is None and damage.studies == {}
    assert damage.runs == {"locomo/vector": f"{phrase} core/locomo/vector/{name}"}


def test_an_added_file_and_an_edited_study_are_named(store):
    (store / "core" / "locomo" / "bm25" / "extra.json").write_text("{}")
    study = next((store / "core" / RS.STUDIES).iterdir())
    md = next(study.glob("*.md"))
    md.write_text(md.read_text().replace("0.", "9.", 1))
    damage = store_damage(store, "core")
    assert damage.runs == {"locomo/bm25": "unexpected core/locomo/bm25/extra.json"}
    assert damage.studies == {study.name: f"edited core/studies/{study.name}/{md.name}"}


def test_an_edited_dataset_build_damages_every_run_that_reads_it(store):
    entry = RS.read_index(store)["core"]["runs"]
    build = entry["techqa/bm25"]["dataset"]
    readers = {k for k, e in entry.items() if e["dataset"] == build}
    queries = store / build / "queries.parquet"
    queries.write_bytes(queries.read_bytes() + b"\0")
    damage = store_damage(store, "core")
    assert set(damage.runs) == readers and len(readers) > 10
    assert all("(its dataset build)" in why for why in damage.runs.values())


def test_an_edited_index_entry_or_a_missing_seal_damages_the_whole_tier(store):
    index = json.loads((store / RS.INDEX).read_text())
    index["core"]["runs"]["locomo/bm25"]["config_hash"] = "000000000000"
    (store / RS.INDEX).write_text(json.dumps(index))
    assert "index.json differs" in store_damage(store, "core").tier
    assert store_damage(store, "llm").tier is None  # another tier's entry is as sealed
    seal_path(store, "llm").unlink()
    assert "no readable seal seals/llm.json" in store_damage(store, "llm").tier


def test_action_store_and_seal_write_the_seal_a_report_checks(store):
    """A deliberate change is sealed again by command (action=seal), never by hand."""
    _set_value(store / "core" / "locomo" / "vector" / "per_query.parquet")
    assert store_damage(store, "core").runs
    write_seal(store, "core")
    assert store_damage(store, "core").runs == {}
