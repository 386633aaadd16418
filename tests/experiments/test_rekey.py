"""experiments/rekey.py (action=rekey): after a change of the identity rules every declared run of a tier is filed
under its new config hash (the expected scores, the reference store and its seal, the finished results folders),
and no number moves: the tier still verifies, from the moved folders and from the store. On the smoke tier."""

from __future__ import annotations

import json
import re
import shutil

from experiments import reproduce as R
from experiments import run_identity
from lethe.core.paths import PROJECT_ROOT


def test_a_schema_change_moves_every_hash_and_rekey_files_the_tier_under_them(
    smoke, smoke_store, tmp_path, monkeypatch, capsys
):
    assert smoke["code"] == 0
    results, expected = tmp_path / "results", tmp_path / "expected"
    store = shutil.copytree(smoke_store["store"], tmp_path / "store")  # the smoke tier stored (action=store)
    shutil.copytree(smoke["base"] / "results", results)  # the session's smoke runs stay as they are
    # a run records its processed dataset relative to its own folder: the datasets travel with the results
    (tmp_path / "processed").symlink_to(smoke["base"] / "processed", target_is_directory=True)
    expected.mkdir()
    shutil.copy(PROJECT_ROOT / "results" / "expected" / "smoke.yaml", expected / "smoke.yaml")
    paths = [p for p in smoke["paths"] if not p.startswith(("results_dir=", "out_dir."))]
    args = [
        "tier=smoke",
        *paths,
        f"results_dir={results}",
        f"expected_dir={expected}",
        f"store_dir={store}",
        f"out_dir.smoke={tmp_path / 'out'}",
        f"+committed_dir.smoke={tmp_path / 'committed'}",
    ]
    before = (expected / "smoke.yaml").read_text()
    old = dict(re.findall(r"\n  (\S+):\n    config_hash: '?([0-9a-f]{12})'?\n", before))
    assert len(old) == 34

    monkeypatch.setattr(run_identity, "IDENTITY_SCHEMA", run_identity.IDENTITY_SCHEMA + 1)  # the rules changed
    capsys.readouterr()
    assert R.reproduce(R.load([*args, "action=rekey"])) == 0
    printed = capsys.readouterr().out
    assert "rekey: tier smoke: 34 declared run(s) moved hash, 34 store folder(s) and 34 results folder(s)" in printed
    assert "NOT refiled" not in printed
    after = (expected / "smoke.yaml").read_text()
    new = dict(re.findall(r"\n  (\S+):\n    config_hash: '?([0-9a-f]{12})'?\n", after))
    assert new.keys() == old.keys() and all(new[k] != old[k] for k in old)
    # only the hash lines changed in the expected file
    assert re.sub(r"config_hash: \S+", "", after) == re.sub(r"config_hash: \S+", "", before)
    tier, runs = R.resolve_tiers(R.load([*args, "action=verify"]))[0]
    assert {r.key: r.config_hash for r in runs} == new and all(r.done for r in runs)
    assert not any((r.folder.parent / old[r.key]).exists() for r in runs)
    index = json.loads((store / "index.json").read_text())["smoke"]["runs"]
    for r in runs:
        stored = json.loads((store / index[r.key]["folder"] / "manifest.json").read_text())
        local = json.loads((r.folder / "manifest.json").read_text())
        assert index[r.key]["config_hash"] == stored["config_hash"] == local["config_hash"] == r.config_hash
        assert stored["hashed_config"]["identity_schema"] == run_identity.IDENTITY_SCHEMA
    # nothing moved but the identity: the tier verifies from the moved folders, and the re-sealed store reports whole
    capsys.readouterr()
    assert R.reproduce(R.load([*args, "action=verify"])) == 0
    table = capsys.readouterr().out
    assert "| FAIL |" not in table and "| MISSING |" not in table and "config changed" not in table
    quick = [
        "analysis.bootstrap_resamples=200",
        "analysis.permutation_resamples=200",
    ]  # the report's files, not its CIs
    assert R.reproduce(R.load([*args, "action=report", "source=store", *quick])) == 0  # to committed_dir.smoke
    assert "DAMAGED" not in (tmp_path / "committed" / "report.md").read_text()
    assert R.reproduce(R.load([*args, "action=rekey"])) == 0  # run again: nothing left to move
    assert "0 declared run(s) moved hash" in capsys.readouterr().out
