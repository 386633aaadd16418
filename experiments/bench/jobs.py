"""``make bench`` section ``jobs``: time per job of the reproduction tiers (``tiers``), from the declared runs'
manifests (wall, method start-up and index build seconds) and the measured prerequisite times (datasets, models)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from lethebench.runs import RunFolder


def bench_jobs(tiers: list[str], overrides: list[str]) -> dict[str, Any]:
    """Per tier: each finished declared run's wall / start-up / index-build seconds (from its manifest)
    and the measured prerequisite times (results dir's .reproduce/prepare_seconds.json)."""
    from experiments import reproduce as R
    from experiments.prerequisites import prepare_file, read_json

    out: dict[str, Any] = {}
    for name in tiers:
        rows = {}
        for _tier, runs in R.resolve_tiers(R.load([f"tier={name}", *overrides])):
            for r in runs:
                if not r.done:
                    rows[r.key] = None
                    continue
                man = RunFolder(r.folder).manifest
                rows[r.key] = {
                    "wall_s": man.get("wall_seconds"),
                    "init_s": man.get("method_init_seconds"),
                    "index_s": man.get("index_build_seconds"),
                    "queries": man.get("dataset", {}).get("card_counts", {}).get("queries"),
                    "load_average": man.get("load_average", {}).get("at_start"),
                }
            prep = read_json(prepare_file(runs))
            out[name] = {
                "runs": rows,
                "prepare_s": prep,
                "total_run_s": sum(v["wall_s"] for v in rows.values() if v),
                "missing": [k for k, v in rows.items() if v is None],
            }
    return out


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_jobs(list(cfg.tiers), [str(o) for o in cfg.run_overrides])


def show(jobs: dict[str, Any]) -> None:
    for tier, j in jobs.items():
        print(
            f"tier {tier}: {len(j['runs']) - len(j['missing'])} finished runs, {j['total_run_s'] / 60:.1f} min of "
            f"runs; prerequisites: "
            + (", ".join(f"{k} {v:.0f} s" for k, v in j["prepare_s"].items()) or "none measured")
        )
        for key, r in sorted(j["runs"].items(), key=lambda kv: -(kv[1] or {}).get("wall_s", 0)):
            if r:
                print(
                    f"  {key:45} {r['wall_s']:9.1f} s  (start-up {r['init_s']:.1f} s, index {r['index_s']:.1f} s, "
                    f"load {r['load_average']})"
                )
        if j["missing"]:
            print(f"  not run: {j['missing']}")
