"""experiments/retier.py (action=retier): when declared runs move to another tier (a tier split in two), their
expected entries and stored folders move along, records unchanged, and both tiers verify from the store. On the
smoke tier, split in two in a reference folder of the test's own."""

from __future__ import annotations

import json
import shutil

import yaml

from analysis import expected as E
from experiments import reproduce as R
from lethe.core.paths import PROJECT_ROOT

MOVED = "random_rerank"  # its entries (both datasets, both methods) form the new tier


def _split(reference, tmp_path) -> None:
    """smoke.yaml without its random-rerank entries, and smoke_b.yaml with only them."""
    doc = yaml.safe_load((PROJECT_ROOT / "conf" / "reference" / "smoke.yaml").read_text())
    keep = [e for e in doc["runs"] if MOVED not in e["methods"]]
    moved = [e for e in doc["runs"] if MOVED in e["methods"]]
    assert len(moved) == 2 and len(keep) == len(doc["runs"]) - 2
    (reference / "smoke.yaml").write_text(yaml.safe_dump({**doc, "runs": keep}, sort_keys=False))
    b = {k: v for k, v in doc.items() if k != "difficulty"}
    (reference / "smoke_b.yaml").write_text(yaml.safe_dump({**b, "runs": moved}, sort_keys=False))


def test_a_tier_split_moves_the_records_and_both_parts_verify_from_the_store(smoke, smoke_store, tmp_path, capsys):
    assert smoke["code"] == 0
    expected, reference = tmp_path / "expected", tmp_path / "reference"
    store = shutil.copytree(smoke_store["store"], tmp_path / "store")  # the smoke tier stored (action=store)
    expected.mkdir()
    reference.mkdir()
    shutil.copy(PROJECT_ROOT / "results" / "expected" / "smoke.yaml", expected / "smoke.yaml")
    shutil.copy(PROJECT_ROOT / "conf" / "reference" / "smoke.yaml", reference / "smoke.yaml")
    shutil.copy(PROJECT_ROOT / "conf" / "reference" / "tolerances.yaml", reference / "tolerances.yaml")
    args = [
        *[p for p in smoke["paths"] if not p.startswith("out_dir.")],
        f"expected_dir={expected}",
        f"store_dir={store}",
        f"reference_dir={reference}",
        f"out_dir.smoke={tmp_path / 'out'}",
        f"+committed_dir.smoke={tmp_path / 'committed'}",
    ]
    before = E.read_expected(expected / "smoke.yaml")["runs"]
    stored_before = json.loads((store / "index.json").read_text())["smoke"]["runs"]
    keys = [k for k in before if k.split("/")[1].startswith(MOVED)]
    assert len(keys) == 4

    # a record naming a file of its own folder (as a replayed run names its reach.json) follows the folder
    own = store / "smoke" / keys[0]
    man = json.loads((own / "manifest.json").read_text())
    (own / "manifest.json").write_text(json.dumps({**man, "own_file": str(own / "reach.json")}))

    _split(reference, tmp_path)
    capsys.readouterr()
    assert R.reproduce(R.load([*args, "tier=smoke_b", "action=retier"])) == 0
    printed = capsys.readouterr().out
    assert "retier: tier smoke_b: 4 declared run(s) or studies moved in" in printed
    assert all(f"{k}: from tier smoke" in printed for k in keys)
    assert "| FAIL |" not in printed and "| MISSING |" not in printed  # both tiers, from the store alone
    # the records moved whole: expected entries, store folders (with every file), index entries
    after_a = E.read_expected(expected / "smoke.yaml")["runs"]
    after_b = E.read_expected(expected / "smoke_b.yaml")["runs"]
    assert list(after_b) == keys and {**after_a, **after_b} == before
    index = json.loads((store / "index.json").read_text())
    assert set(index["smoke_b"]["runs"]) == set(keys) and not set(keys) & set(index["smoke"]["runs"])
    for k in keys:
        assert index["smoke_b"]["runs"][k] == {**stored_before[k], "folder": f"smoke_b/{k}"}
        assert (store / "smoke_b" / k / "DONE").is_file() and not (store / "smoke" / k).exists()
    assert (tmp_path / "committed" / "verification" / "smoke_b.md").is_file()
    moved = json.loads((store / "smoke_b" / keys[0] / "manifest.json").read_text())
    assert moved["own_file"] == str(store / "smoke_b" / keys[0] / "reach.json")
    # both seals hold: a report from the store marks nothing damaged
    quick = ["analysis.bootstrap_resamples=200", "analysis.permutation_resamples=200"]
    for tier in ("smoke", "smoke_b"):
        capsys.readouterr()
        assert R.reproduce(R.load([*args, f"tier={tier}", "action=verify"])) == 0
    assert R.reproduce(R.load([*args, "tier=smoke", "action=report", "source=store", *quick])) == 0
    assert "DAMAGED" not in (tmp_path / "committed" / "report.md").read_text()
    capsys.readouterr()
    assert R.reproduce(R.load([*args, "tier=smoke_b", "action=retier"])) == 0  # again: nothing left to move
    assert "retier: tier smoke_b: 0 declared run(s) or studies moved in" in capsys.readouterr().out
