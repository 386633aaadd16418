"""``python -m experiments.reproduce tier=all action=retier``: after declared runs or studies moved from one tier's
declaration (``conf/reference/<tier>.yaml``) to another's (a tier split in two, so each part can be made cold in one
session), move what was recorded of them along, so the split needs no remake:

- the expected-scores entry, record unchanged (``results/expected/<from>.yaml`` -> ``<to>.yaml``; the prerequisite
  times go with the datasets they name);
- the reference-store folder (``<store>/<from>/<key>`` -> ``<store>/<to>/<key>``, a replayed run's ``reach.json``
  with it), its index entry, and both tiers' seals, written again.

An entry moves when its key is declared by the tier being filed, absent from that tier's expected file, present in
another tier's, and no longer declared there. Nothing is re-run and no score is touched: each moved run's recorded
config hash must be the one its new declaration resolves to, and both tiers are then verified from the store alone
(their committed verification tables written again). A tier left with nothing declared loses its expected file,
index entry, seal and verification table.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from analysis import expected as E
from experiments import reference_store as RS
from experiments.reference import NOT_TIERS, REFERENCE_TIERS, Tier, load_tier
from experiments.store_seal import seal_path, write_seal
from lethe.core.atomic import atomic_write_text
from lethe.core.paths import Paths
from lethebench.runs import MANIFEST


def _declared(reference_dir: str | Path) -> dict[str, set[str]]:
    """Tier name -> the run and study keys it declares now."""
    out = {}
    for path in sorted(Paths.default().resolve(reference_dir).glob("*.yaml")):
        if path.stem not in NOT_TIERS:
            t = load_tier(path.stem, reference_dir)
            out[t.name] = {r.key for r in t.runs} | {st.key for st in t.studies}
    return out


def _classes(doc: Mapping[str, Any]) -> dict[str, E.Tolerance]:
    return {
        name: E.Tolerance(name, float(c["tolerance"]), str(c["why"]))
        for name, c in (doc.get("tolerance_classes") or {}).items()
    }


def _dataset_of(key: str, tier: Tier) -> str | None:
    """The dataset a run key or a study names (a study's ``dataset``, if any)."""
    if not key.startswith("study/"):
        return key.split("/", 1)[0]
    return next((st.dataset for st in tier.studies if st.key == key), None)


def plan(tiers: Sequence[Tier], cfg: DictConfig) -> dict[str, dict[str, str]]:
    """For each of ``tiers``: {key: the tier whose records it moves from}."""
    declared = _declared(cfg.reference_dir)
    expected_dir = Paths.of(cfg).resolve(cfg.expected_dir)
    recorded = {p.stem: set(E.read_expected(p)["runs"]) for p in sorted(expected_dir.glob("*.yaml"))}
    out: dict[str, dict[str, str]] = {}
    for tier in tiers:
        mine = recorded.get(tier.name, set())
        moves = {}
        for key in [r.key for r in tier.runs] + [st.key for st in tier.studies]:
            if key in mine:
                continue
            owners = [u for u, keys in recorded.items() if u != tier.name and key in keys]
            owners = [u for u in owners if key not in declared.get(u, set())]
            if len(owners) == 1:
                moves[key] = owners[0]
        out[tier.name] = moves
    return out


def _move_expected(path_from: Path, path_to: Path, src: str, dest: Tier, keys: Sequence[str]) -> None:
    doc_from, doc_to = E.read_expected(path_from), E.read_expected(path_to)
    runs_from = dict(doc_from["runs"])
    moved = {k: runs_from.pop(k) for k in keys}
    order = [r.key for r in dest.runs] + [st.key for st in dest.studies]
    runs_to = {**doc_to["runs"], **moved}
    runs_to = {k: runs_to[k] for k in sorted(runs_to, key=lambda k: order.index(k) if k in order else len(order))}
    classes = {**_classes(doc_from), **_classes(doc_to)}
    times_from = dict(doc_from.get("prepare_seconds") or {})
    datasets_to = {_dataset_of(k, dest) for k in runs_to}
    times_to = {**(doc_to.get("prepare_seconds") or {})}
    times_to.update({k: v for k, v in times_from.items() if k.split()[1] in datasets_to})
    E.write_expected(path_to, dest.name, runs_to, classes, times_to)
    if runs_from:
        datasets_from = {k.split("/", 1)[0] for k in runs_from if not k.startswith("study/")}
        kept_times = {k: v for k, v in times_from.items() if k.split()[1] in datasets_from}
        E.write_expected(path_from, src, runs_from, classes, kept_times)
    else:
        path_from.unlink()


def _move_store(store: Path, src: str, dest: Tier, keys: Sequence[str]) -> None:
    index = RS.read_index(store)
    entry_from = index.get(src) or {"runs": {}, "studies": []}
    entry_to = index.get(dest.name) or {"runs": {}, "studies": []}
    runs_from, runs_to = dict(entry_from["runs"]), dict(entry_to["runs"])
    studies_from = list(entry_from["studies"])
    for key in keys:
        if key.startswith("study/"):
            name = key.split("/", 1)[1]
            if name in studies_from:
                here, there = RS.study_folder(store, src, name), RS.study_folder(store, dest.name, name)
                there.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(here, there)
                _relocate_records(there, here)
                studies_from.remove(name)
            continue
        if key in runs_from:
            here, there = RS.run_folder(store, src, key), RS.run_folder(store, dest.name, key)
            there.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(here, there)
            _relocate_records(there, here)
            runs_to[key] = {**runs_from.pop(key), "folder": there.relative_to(store).as_posix()}
    order = [r.key for r in dest.runs]
    runs_to = {k: runs_to[k] for k in sorted(runs_to, key=lambda k: order.index(k) if k in order else len(order))}
    studies_to = [st.name for st in dest.studies if RS.study_folder(store, dest.name, st.name).is_dir()]
    RS.write_index(store, dest.name, runs_to, studies_to)
    write_seal(store, dest.name)
    if runs_from or studies_from:
        RS.write_index(store, src, runs_from, studies_from)
        write_seal(store, src)
    else:
        RS.remove_tier(store, src)
        seal_path(store, src).unlink(missing_ok=True)


def _spellings(folder: Path) -> list[str]:
    """How a record may name ``folder``: absolute, and relative to the work root when it lies inside it."""
    out = [folder.as_posix()]
    root = Paths.default().root
    if folder.is_relative_to(root):
        out.append(folder.relative_to(root).as_posix())
    return out


def _replaced(obj: Any, old: Sequence[str], new: Sequence[str]) -> Any:
    if isinstance(obj, str):
        for o, n in zip(old, new, strict=True):
            if obj == o or obj.startswith(o + "/"):
                return n + obj[len(o) :]
        return obj
    if isinstance(obj, list):
        return [_replaced(v, old, new) for v in obj]
    if isinstance(obj, dict):
        return {k: _replaced(v, old, new) for k, v in obj.items()}
    return obj


def _relocate_records(there: Path, here: Path) -> None:
    """A moved folder's manifest names files of its own folder (a replayed run's ``reach.json``) by where they were:
    renamed to where they are (the identity hashes such a file by content, so no hash moves)."""
    path = there / MANIFEST
    if not path.is_file():
        return
    man = json.loads(path.read_text())
    moved = _replaced(man, _spellings(here), _spellings(there))
    if moved != man:
        atomic_write_text(path, json.dumps(moved, indent=2, sort_keys=True, default=str) + "\n")


def retier(tiers: Sequence[Tier], cfg: DictConfig) -> dict[str, dict[str, str]]:
    """Move the records of every key of ``tiers`` that another tier holds and no longer declares (module docstring);
    {tier: {key: from tier}} of what moved."""
    paths = Paths.of(cfg)
    moves = plan(tiers, cfg)
    store, expected_dir = paths.reference_store, paths.resolve(cfg.expected_dir)
    for tier in tiers:
        by_src: dict[str, list[str]] = {}
        for key, src in moves[tier.name].items():
            by_src.setdefault(src, []).append(key)
        for src, keys in by_src.items():
            _move_expected(expected_dir / f"{src}.yaml", expected_dir / f"{tier.name}.yaml", src, tier, keys)
            if src in RS.read_index(store):
                _move_store(store, src, tier, keys)
    return moves


def sources(moves: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The tiers records moved out of, in ``REFERENCE_TIERS`` order (they are verified again too)."""
    names = {src for m in moves.values() for src in m.values()}
    order = {t: i for i, t in enumerate(REFERENCE_TIERS)}
    return sorted(names, key=lambda n: (order.get(n, 99), n))


def print_retiered(moves: Mapping[str, Mapping[str, str]]) -> None:
    for tier, m in moves.items():
        print(f"retier: tier {tier}: {len(m)} declared run(s) or studies moved in", flush=True)
        for key, src in m.items():
            print(f"  {key}: from tier {src}", flush=True)
