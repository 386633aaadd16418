"""The reference store's seals: each stored tier's files, checksummed when the tier is stored, checked before a report.

    <store_dir>/seals/<tier>.json   # {"tier", "index_sha256": its entry of index.json, "files": {path: sha256}}

``files`` holds every file under ``<store_dir>/<tier>/`` and under each stored dataset build the tier's runs read
(paths relative to the store). ``action=store`` writes a tier's seal after the tier; ``action=seal`` seals a tier
as the store holds it now (a store from before seals; after a deliberate edit). :func:`store_damage` says which
declared runs and studies differ from their seal (an edited, missing, truncated or added file, a symlink): the
report and the site show them as DAMAGED and read nothing of them; an index entry that differs, or no seal at all,
makes every run of the tier DAMAGED.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import reference_store as RS
from lethe.core.atomic import atomic_write_text
from lethe.core.checksums import tree_damage, tree_sha256
from lethe.core.hashing import content_hash

SEALS = "seals"


def seal_path(store: Path, tier: str) -> Path:
    return store / SEALS / f"{tier}.json"


def _entry(store: Path, tier: str) -> dict[str, Any]:
    return RS.read_index(store).get(tier) or {}


def _dataset_folders(entry: dict[str, Any]) -> list[str]:
    return sorted({str(e["dataset"]) for e in (entry.get("runs") or {}).values() if e.get("dataset")})


def _sealed_roots(store: Path, tier: str, entry: dict[str, Any]) -> list[str]:
    """The folders (relative to ``store``) a tier's seal covers: the tier's own and its dataset builds'."""
    return [tier, *_dataset_folders(entry)]


def write_seal(store: Path, tier: str) -> Path:
    """Seal ``tier`` as ``store`` holds it now: the seal file (every file's sha256, the index entry's)."""
    entry = _entry(store, tier)
    if not entry:
        raise SystemExit(
            f"tier {tier}: the store {store} holds no part of it (index.json has no entry); nothing to seal"
        )
    files = {
        f"{root}/{rel}": sha
        for root in _sealed_roots(store, tier, entry)
        if (store / root).is_dir()
        for rel, sha in tree_sha256(store / root).items()
    }
    doc = {"tier": tier, "index_sha256": content_hash(entry), "files": files}
    path = seal_path(store, tier)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


@dataclass
class Damage:
    """What differs from a tier's seal: a reason for the whole tier, or per declared run key / study name."""

    tier: str | None = None
    runs: dict[str, str] = field(default_factory=dict)
    studies: dict[str, str] = field(default_factory=dict)

    def of_run(self, key: str) -> str | None:
        return self.tier or self.runs.get(key)

    def of_study(self, name: str) -> str | None:
        return self.tier or self.studies.get(name)


def _add(found: dict[str, list[str]], key: str, problem: str) -> None:
    found.setdefault(key, []).append(problem)


def _reason(problems: list[str]) -> str:
    return "; ".join(problems[:3]) + (f" and {len(problems) - 3} more" if len(problems) > 3 else "")


def store_damage(store: Path, tier: str) -> Damage:
    """:class:`Damage` of ``tier`` in ``store`` against its seal (nothing when the store holds no part of the tier)."""
    entry = _entry(store, tier)
    if not entry:
        return Damage()
    try:
        seal = json.loads(seal_path(store, tier).read_text())
        recorded, index_sha = dict(seal["files"]), seal["index_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Damage(tier=f"no readable seal {SEALS}/{tier}.json ({type(exc).__name__}); the tier cannot be trusted")
    if index_sha != content_hash(entry):
        return Damage(tier=f"its entry in index.json differs from the one {SEALS}/{tier}.json sealed")
    roots = _sealed_roots(store, tier, entry)
    problems = _problems(store, roots, recorded)
    runs: dict[str, list[str]] = {}
    studies: dict[str, list[str]] = {}
    by_dataset: dict[str, list[str]] = {}
    for key, e in (entry.get("runs") or {}).items():
        by_dataset.setdefault(str(e.get("dataset")), []).append(key)
    loose: list[str] = []
    for problem in problems:
        path = problem.rsplit(" ", 1)[-1]
        parts = path.split("/")
        if parts[0] == tier and len(parts) > 3 and parts[1] == RS.STUDIES:
            _add(studies, parts[2], problem)
        elif parts[0] == tier and len(parts) > 3:
            _add(runs, f"{parts[1]}/{parts[2]}", problem)
        elif parts[0] == RS.DATASETS and len(parts) > 3:
            for key in by_dataset.get("/".join(parts[:3]), []):
                _add(runs, key, f"{problem} (its dataset build)")
        else:
            loose.append(problem)
    if loose:
        return Damage(tier=f"files of the tier outside any run differ from its seal: {_reason(loose)}")
    return Damage(runs={k: _reason(v) for k, v in runs.items()}, studies={k: _reason(v) for k, v in studies.items()})


def _problems(store: Path, roots: list[str], recorded: dict[str, str]) -> list[str]:
    """:func:`lethe.core.checksums.tree_damage` over the sealed folders, with paths relative to ``store``."""
    out = []
    for root in roots:
        prefix = f"{root}/"
        mine = {k[len(prefix) :]: v for k, v in recorded.items() if k.startswith(prefix)}
        folder = store / root
        if not folder.is_dir():
            out += [f"missing {root}/{rel}" for rel in sorted(mine)] or [f"missing {root}"]
            continue
        for problem in tree_damage(folder, mine):
            what, rel = problem.rsplit(" ", 1)
            out.append(f"{what} {root}/{rel}")
    known = tuple(f"{r}/" for r in roots)
    out += [f"missing {k}" for k in sorted(recorded) if not k.startswith(known)]
    return out


_NAMED: dict[tuple[str, str], set[str]] = {}  # (store, tier) -> what sealed_damage named on the console already


def sealed_damage(store: Path, tier: str) -> Damage:
    """:func:`store_damage`, each damaged run and study (or the tier) named on the console once per process."""
    damage = store_damage(store, tier)
    said = _NAMED.setdefault((str(store), tier), set())
    for what, why in [("tier", damage.tier)] if damage.tier else [*damage.runs.items(), *damage.studies.items()]:
        if what not in said:
            said.add(what)
            where = f"tier {tier}" if what == "tier" else f"{tier}/{what}"
            print(f"DAMAGED in the reference store: {where}: {why}; left out of the report", file=sys.stderr)
    return damage
