"""``python -m experiments.reproduce tier=all action=rekey``: file a tier under the config hashes the current identity
rules give (:mod:`experiments.run_identity`, ``IDENTITY_SCHEMA``), after a change of the rules moved them.

For every declared run whose hash moved (its expected entry's hash against the hash its declaration resolves to):

- the expected-scores file's ``config_hash`` line of the run (nothing else of the file changes);
- the reference store's run folder (``manifest.json``: ``config_hash`` and ``hashed_config``; ``metrics.json``:
  ``config_hash``), its index entry, and the tier's seal, written again;
- a finished results folder of the run under ``results_dir``: renamed from the old hash to the new one, its manifest,
  metrics and ``run.trec`` tag rewritten, so a warm ``make reproduce`` finds it done.

A folder's own config must give the new hash under the current rules (checked: a folder whose recorded config does
not is left as it is and named, and the command fails). Scores are never touched, so no number moves: the command
then verifies each stored tier from the store alone (experiments.reproduce).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig

from analysis import expected as E
from experiments import reference_store as RS
from experiments.reference import ResolvedRun, Tier
from experiments.run_identity import config_hash, hashed_config, migrated
from experiments.store_seal import write_seal
from lethe.core.atomic import atomic_write_text
from lethe.core.paths import Paths, machine_roots, portable
from lethebench.runs import MANIFEST, METRICS, RUN_TREC


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def recomputed(folder: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(config hash, hashed config, recorded config in today's shape) a run folder's recorded config gives under the
    current rules (its method section migrated: experiments.run_identity.migrated)."""
    man = json.loads((folder / MANIFEST).read_text())
    config = {**man["config"], "method": migrated(man["config"]["method"])}
    hashed = hashed_config(config, man["dataset"]["build_key"])
    return config_hash(hashed), hashed, config


def refile(folder: Path, label: str, old: str, new: str, hashed: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """Rewrite the identity a run folder records (manifest: its hash, hashed config and config, in today's shape;
    metrics; the run.trec tag) from ``old`` to ``new``."""
    man = json.loads((folder / MANIFEST).read_text())
    atomic_write_text(
        folder / MANIFEST, _json({**man, "config_hash": new, "hashed_config": dict(hashed), "config": dict(config)})
    )
    metrics = json.loads((folder / METRICS).read_text())
    atomic_write_text(folder / METRICS, _json({**metrics, "config_hash": new}))
    trec = folder / RUN_TREC
    if trec.is_file():
        atomic_write_text(trec, trec.read_text().replace(f" {label}-{old}\n", f" {label}-{new}\n"))


def rekey_tier(tier: Tier, runs: Sequence[ResolvedRun], cfg: DictConfig) -> dict[str, Any]:
    """Re-key ``tier`` (see the module docstring); what moved: ``{"runs": {key: [old, new]}, "store": n,
    "results": n, "refused": {key: why}}``."""
    paths = Paths.of(cfg)
    path = paths.resolve(cfg.expected_dir) / f"{tier.name}.yaml"
    expected = E.read_expected(path)["runs"]
    moved = {
        r.key: (str(expected[r.key]["config_hash"]), r.config_hash)
        for r in runs
        if (expected.get(r.key) or {}).get("config_hash") not in (None, r.config_hash)
    }
    out: dict[str, Any] = {"runs": {k: list(v) for k, v in moved.items()}, "store": 0, "results": 0, "refused": {}}
    if not moved:
        return out
    by_key = {r.key: r for r in runs}
    text = path.read_text()
    for key, (old, new) in moved.items():
        line = re.compile(rf"config_hash: (['\"]?){re.escape(old)}\1\n")  # quoted when YAML would read a number
        if len(line.findall(text)) != 1:
            raise SystemExit(f"{path}: the hash {old} of {key} occurs {len(line.findall(text))} times; re-key by hand")
        text = line.sub(f"config_hash: {yaml.safe_dump(new).splitlines()[0]}\n", text)
    store = paths.reference_store
    index = RS.read_index(store).get(tier.name)
    entries = dict((index or {}).get("runs") or {})
    for key, (old, new) in moved.items():
        entry = entries.get(key)
        if entry is None or entry.get("config_hash") != old:
            continue
        folder = store / entry["folder"]
        got, hashed, config = recomputed(folder)
        if got != new:
            out["refused"][f"store:{key}"] = f"its stored config gives {got}, its declaration {new}"
            continue
        roots = machine_roots(None)
        refile(folder, by_key[key].declared.label, old, new, portable(hashed, roots), portable(config, roots))
        entries[key] = {**entry, "config_hash": new}
        out["store"] += 1
    for key, (old, new) in moved.items():
        r = by_key[key]
        src = r.folder.parent / old
        if not (src / MANIFEST).is_file() or r.folder.exists():
            continue
        got, hashed, config = recomputed(src)
        if got != new:
            out["refused"][f"results:{key}"] = f"{src}: its recorded config gives {got}, its declaration {new}"
            continue
        refile(src, r.declared.label, old, new, hashed, config)
        src.rename(r.folder)
        out["results"] += 1
    atomic_write_text(path, text)
    if index is not None:
        RS.write_index(store, tier.name, entries, index.get("studies") or [])
        write_seal(store, tier.name)
    return out


def print_rekeyed(tier: str, out: Mapping[str, Any]) -> None:
    print(
        f"rekey: tier {tier}: {len(out['runs'])} declared run(s) moved hash, {out['store']} store folder(s) and "
        f"{out['results']} results folder(s) refiled"
        + "".join(f"\n  {k}: {old} -> {new}" for k, (old, new) in sorted(out["runs"].items())),
        flush=True,
    )
    for where, why in out["refused"].items():
        print(f"  NOT refiled: {where}: {why}", flush=True)
