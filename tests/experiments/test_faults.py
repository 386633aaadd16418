"""Fault injection: ``kill -9`` at six points of a small reproduction, rerun, compare with a clean run.

A tier of five runs (window, BM25, vector on LoCoMo conv-26, the embedding cache written in chunks of
128 texts so that a kill can fall between chunks; Lethe iteration 3 on a small LetheBench build with two
learned-fusion models, a quick one and a slower one, built as model prerequisites in two worker processes) is
reproduced once cleanly, then in a second set of folders by a chain of processes, each killed with SIGKILL at a
named point (:mod:`lethe.core.faults`): while building a dataset, after the first model was built while the
other still trains in its worker, after a chunk of document vectors reached the cache, after the third query's
search, while writing a results folder, and while writing the report. After each kill no process of the killed
reproduction (worker or resource tracker) lives on, nothing half-written is visible and nothing finished (run,
model or cache shard) is made again; the last process, killed nowhere, completes. The chain's rankings, qrels,
dataset files and quality tables then equal the clean run's byte for byte, its scores verify exactly against the
expected scores written from the clean run, and no debris (temporary or moved-aside files and folders) is left.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import reproduce as R
from lethe.core.faults import POINTS, parse
from lethe.core.hashing import sha256_file
from lethebench.runs import FILES, QRELS_TREC, RUN_PARQUET, RUN_TREC, RunFolder, finished_runs
from tests.conftest import DATA_ROOT
from tests.support.processes import with_environment
from tests.support.reproduce_process import reproduce_process, write_reference

FUSION = [
    "dataset.params.session_turns=[20,30]",
    "method.stages.learned_fusion.lambda_grid=[0.0,0.3]",
    "method.stages.learned_fusion.families=[constant,ridge]",
]
TIER = {
    "description": "fault injection (tests/experiments/test_faults.py)",
    "report": "smoke",
    "runs": [
        {
            "datasets": ["locomo"],
            "overrides": ["dataset.scopes=[conv-26]", "embedder.persist_every=128"],
            "methods": ["window", "bm25", "vector"],
        },
        # two learned-fusion models, trained in two workers at once: the quick one (15 training queries) is
        # built while the slow one (50 training queries, about three times the embedding work) still trains
        {
            "datasets": ["lethebench"],
            "methods": ["lethe_iter3"],
            "variant": "quick",
            "overrides": [
                "dataset.params.splits={test:10,train:10,dev:5}",
                *FUSION,
                "method.stages.learned_fusion.alpha_grid=[0.0,1.0]",
            ],
        },
        {
            "datasets": ["lethebench"],
            "methods": ["lethe_iter3"],
            "variant": "slow",
            "overrides": [
                "dataset.params.splits={test:10,train:40,dev:10}",
                *FUSION,
                "method.stages.learned_fusion.alpha_grid=[0.0,0.5,1.0]",
            ],
        },
    ],
}
CHAIN = ["build_data", "model_built", "embedding", "searching:3", "writing_folder", "writing_report"]
MARK = "LETHE_FAULTS_MARK"  # set in the chain's processes, inherited by their workers: finds what outlives a kill
# per-query and metrics fields that hold this machine's timings or load, never compared
VOLATILE = ("latency", "seconds", "timings", "_ms", "qps", "load", "rss", "wall")


def _args(base: Path, ref: Path) -> list[str]:
    return [
        f"reference_dir={ref}",
        f"expected_dir={ref / 'expected'}",
        f"data.root={DATA_ROOT}",
        f"data.processed={base / 'processed'}",
        f"cache_dir={base / 'cache'}",
        f"results_dir={base / 'results'}",
        f"out_dir.smoke={base / 'out'}",
        "run.progress=false",
        "analysis.bootstrap_resamples=200",
        "analysis.permutation_resamples=200",
        "tier=faults",
    ]


def _reproduce(base: Path, ref: Path, kill_at: str | None, mark: str) -> subprocess.CompletedProcess:
    return reproduce_process([*_args(base, ref), f"hydra.run.dir={base / 'hydra'}"], kill_at, env={MARK: mark})


def _orphans(mark: str, wait_s: float = 20.0) -> list[int]:
    """The processes of a killed reproduction still alive ``wait_s`` seconds after it died (workers get SIGTERM
    when it dies and need a moment to end)."""
    deadline = time.monotonic() + wait_s
    while (alive := with_environment(f"{MARK}={mark}")) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def _debris(base: Path) -> list[str]:
    """Temporary or moved-aside files and folders anywhere under ``base`` (locks are not debris)."""
    return sorted(
        str(p.relative_to(base)) for p in base.rglob(".*") if p.name.endswith((".tmp", ".old")) or ".tmp" in p.name
    )


def _check_visible_state(base: Path) -> None:
    """Everything a reader can see is complete: results folders, datasets, cache shards, report files."""
    for folder in (p for p in (base / "results").glob("*/*/*") if not p.name.startswith(".")):
        assert sorted(f.name for f in folder.iterdir()) == sorted(FILES), f"incomplete results folder {folder}"
    for card in (base / "processed").rglob("card.json"):
        if any(part.startswith(".") for part in card.relative_to(base).parts):
            continue
        for name, digest in json.loads(card.read_text())["outputs_sha256"].items():
            assert sha256_file(card.parent / name) == digest, f"{card.parent / name} does not match its card"
    for folder in (p for p in (base / "processed").glob("*/*") if p.is_dir() and not p.name.startswith(".")):
        assert (folder / "card.json").is_file(), f"dataset folder without its card: {folder}"
    for shard in (base / "cache").glob("embeddings/*/*.npz"):
        with np.load(shard) as z:
            assert len(z["keys"]) == len(z["vecs"]) > 0
    for csv in (base / "out" / "tables").glob("*.csv") if (base / "out" / "tables").is_dir() else []:
        pd.read_csv(csv)
    for png in (base / "out" / "figures").glob("*.png") if (base / "out" / "figures").is_dir() else []:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.read_bytes()[-8:-4] == b"IEND", png


def _done_stamps(base: Path) -> dict[str, tuple[int, int]]:
    """Finished run key -> (inode, mtime_ns) of its DONE file: changes if the run is written again."""
    out = {}
    for r in finished_runs(base / "results"):
        st = (r.path / "DONE").stat()
        out[f"{r.dataset}/{r.method}"] = (st.st_ino, st.st_mtime_ns)
    return out


def _shards(base: Path) -> dict[str, int]:
    return {str(p.relative_to(base)): p.stat().st_ino for p in (base / "cache").glob("embeddings/*/*.npz")}


def _models(base: Path) -> dict[str, tuple[int, int]]:
    """Built learned-fusion model folder -> (inode, mtime_ns) of its card: changes if the model is built again."""
    return {
        str(p.parent.relative_to(base)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in (base / "cache").glob("fusion/*/*/*/card.json")
    }


def _stable(obj):
    """``obj`` without the fields that hold timings or load (compared across runs)."""
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if not any(v_ in k for v_ in VOLATILE)}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _unmarked(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the timing-validity mark ``‡``: whether a run's timings are valid depends on the machine's
    load while it ran, which differs between the clean run and the chain."""
    return table.replace("‡", "", regex=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    return write_reference(tmp_path_factory.mktemp("faults_reference"), "faults", TIER)


def test_kill_points_are_named_and_checked():
    assert {parse(s)[0] for s in CHAIN} == set(POINTS)
    with pytest.raises(ValueError, match="LETHE_KILL_AT='searching:0'"):
        parse("searching:0")
    with pytest.raises(ValueError, match="point one of"):
        parse("serching")


@pytest.mark.long
def test_kill_nine_at_six_points_then_rerun_equals_a_clean_run(tmp_path, reference):
    clean, chained = tmp_path / "clean", tmp_path / "chained"
    # the clean run, in this process: run, expected scores from it, report
    for action in ("run", "write_expected", "report"):
        assert R.reproduce(R.load([*_args(clean, reference), f"action={action}"])) == 0, action
    assert len(finished_runs(clean / "results")) == 5 and len(_models(clean)) == 2

    log: list[str] = []
    finished: dict[str, tuple[int, int]] = {}
    shards: dict[str, int] = {}
    models: dict[str, tuple[int, int]] = {}
    mark = uuid.uuid4().hex
    for kill_at in [*CHAIN, None]:
        proc = _reproduce(chained, reference, kill_at, mark)
        out = proc.stdout + proc.stderr
        if kill_at is None:
            assert proc.returncode == 0, out
        else:
            assert proc.returncode == -signal.SIGKILL, f"not killed at {kill_at} (exit {proc.returncode}):\n{out}"
        assert _orphans(mark) == [], f"after kill at {kill_at}: processes of the killed reproduction live on"
        _check_visible_state(chained)
        now = _done_stamps(chained)
        redone = [k for k, stamp in finished.items() if now.get(k) != stamp]
        assert not redone, f"after kill at {kill_at}: finished runs written again: {redone}"
        now_shards = _shards(chained)
        lost = [s for s, ino in shards.items() if now_shards.get(s) != ino]
        assert not lost, f"after kill at {kill_at}: cache shards rewritten or lost: {lost}"
        now_models = _models(chained)
        rebuilt = [m for m, stamp in models.items() if now_models.get(m) != stamp]
        assert not rebuilt, f"after kill at {kill_at}: models built again: {rebuilt}"
        log.append(
            f"{kill_at}: exit {proc.returncode}, finished {sorted(now)}, shards {len(now_shards)}, "
            f"models {len(now_models)}, debris {len(_debris(chained))}"
        )
        finished, shards, models = now, now_shards, now_models
    print("\n".join(log))
    assert len(shards) > 1, "the corpus fit in one cache chunk: the embedding kill proves nothing"
    # the chain got where each kill says: dataset unbuilt at the first kill, the slower model still in training
    # (its worker ended with the parent) at the second, vector unfinished until the report
    assert "finished []" in log[0] and "models 1," in log[1] and "models 2," in log[2]
    assert "vector" not in log[4] and "locomo/vector" in log[5]

    assert _debris(chained) == [], "debris left after the rerun"
    vector = next(r for r in finished_runs(chained / "results") if r.method == "vector")
    assert vector.manifest["method"]["embedder"]["cache"]["doc"]["misses"] == 0, "documents embedded twice"
    assert "5 runs, 20 values: 20 OK" in (chained / "out" / "verification" / "faults.md").read_text()

    for a in finished_runs(clean / "results"):
        b = RunFolder(chained / a.path.relative_to(clean))
        for name in (RUN_TREC, RUN_PARQUET, QRELS_TREC):
            assert (a.path / name).read_bytes() == (b.path / name).read_bytes(), f"{a.method}: {name} differs"
        keep = [c for c in a.per_query.columns if not any(v in c for v in VOLATILE)]
        pd.testing.assert_frame_equal(a.per_query[keep], b.per_query[keep])
        assert _stable(a.metrics) == _stable(b.metrics)
    for a in sorted((clean / "processed").rglob("*.parquet")):
        assert a.read_bytes() == (chained / a.relative_to(clean)).read_bytes(), a.name
    compared = 0
    for a in sorted((clean / "out" / "tables").glob("*.csv")):
        ta, tb = (_unmarked(pd.read_csv(f, dtype=str)) for f in (a, chained / a.relative_to(clean)))
        keep = [c for c in ta.columns if "latency" not in c and "(ms" not in c]
        pd.testing.assert_frame_equal(ta[keep], tb[keep], obj=a.name)  # the quality columns, as printed
        compared += 1
    # overview, tables 1 and 3 of each dataset (quality columns), table 2, table 4 (LetheBench), the plans, the
    # findings and the claims (whose latency rows say "-": the paper's methods are not declared here under their plain
    # names)
    names = sorted(a.stem for a in (clean / "out" / "tables").glob("*.csv"))
    assert compared == 10 and "table_findings" in names, names
