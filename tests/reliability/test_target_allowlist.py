"""No code runs from a config (issue 58, item 1): any importable callable could be named as a ``_target_``, so
``pandas.read_pickle`` ran a pickle's payload from the API, ``builtins.open`` emptied a file, and a Hydra callback
ran ``pandas.read_pickle`` at start-up. Every ``_target_`` is now checked against the project's packages before
anything is imported, on the command line, in the Python API and in every config section built."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.config import load_config
from experiments.runner import run_experiment
from lethe.core.paths import CONF_DIR, PROJECT_ROOT
from lethe.core.targets import allowed, build, check_targets, refuse_target_arguments
from lethe.core.typed_config import ConfigError
from tests.conftest import overrides_for


class Payload:
    """A pickle that writes a marker file when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "ran"))


@pytest.fixture
def planted(tmp_path) -> tuple[Path, Path]:
    marker, evil = tmp_path / "ran", tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(Payload(marker)))
    return evil, marker


@pytest.mark.parametrize(
    "target, args",
    [
        ("pandas.read_pickle", "filepath_or_buffer={evil}"),
        ("joblib.load", "filename={evil}"),
        ("builtins.open", "file={victim}"),
        ("numpy.load", "file={evil}"),
    ],
)
def test_a_target_outside_the_project_is_refused_before_the_run(target, args, planted, tmp_path, work):
    evil, marker = planted
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    arg = args.format(evil=evil, victim=victim)
    cfg = load_config(
        overrides_for(
            work,
            "dataset=locomo",
            "dataset.scopes=[conv-26]",
            "method=vector",
            f"+embedder.evil._target_={target}",
            f"+embedder.evil.{arg}",
            f"results_dir={tmp_path / 'results'}",
        )
    )
    with pytest.raises(ConfigError, match=rf"embedder.evil._target_={target}.*outside the project"):
        run_experiment(cfg)
    assert not marker.exists() and victim.read_text() == "keep me"
    assert not list((tmp_path / "results").rglob("DONE"))


def test_the_python_api_refuses_it_too(planted, work):
    from experiments.api import experiment

    evil, marker = planted
    overrides = ["+embedder.evil._target_=pandas.read_pickle", f"+embedder.evil.filepath_or_buffer={evil}"]
    with pytest.raises(Exception, match="outside the project"):
        experiment({"vector": overrides}, "locomo", overrides=[*overrides_for(work), "dataset.scopes=[conv-26]"])
    assert not marker.exists()


def test_a_hydra_callback_target_is_refused_at_the_command_line(planted, tmp_path):
    evil, marker = planted
    with pytest.raises(SystemExit, match="outside the project"):
        refuse_target_arguments(["+hydra.callbacks.evil._target_=pandas.read_pickle"])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "+hydra.callbacks.evil._target_=pandas.read_pickle",
            f"+hydra.callbacks.evil.filepath_or_buffer={evil}",
            f"results_dir={tmp_path / 'results'}",
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "outside the project" in proc.stderr and not marker.exists()


def test_build_checks_every_section_and_every_project_config_passes():
    with pytest.raises(ConfigError, match=r"a\.b\._target_=os\.system"):
        build({"_target_": "baselines.window.Window", "a": {"b": {"_target_": "os.system", "_args_": ["true"]}}})
    assert allowed("baselines.hybrid.HybridSearch") and not allowed("builtins.eval") and not allowed(None)
    for method in sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml")):
        check_targets(load_config([f"method={method}"]), f"method={method}")


def test_the_embedder_section_refuses_unknown_keys(tmp_path):
    from lethe.retrieval.dense import make_embedder

    cfg = load_config(["method=vector"])
    with pytest.raises(ConfigError, match=r"embedder: unknown key\(s\) \['typo_batch'\]"):
        make_embedder({**dict(cfg.embedder), "typo_batch": 8}, tmp_path, False)
