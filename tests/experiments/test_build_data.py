"""python -m experiments.build_data (conf/build_data.yaml): the top config is the run config plus `force`,
and building real LoCoMo twice gives the same folder (the second time it is reused, not rebuilt); a
dataset name that is a path is refused before anything is written."""

from __future__ import annotations

import json

import pytest

from experiments.build_data import build_data
from experiments.config import load_config
from lethe.core.typed_config import ConfigError
from tests.conftest import overrides_for


def test_top_config_is_the_run_config_with_force():
    cfg = load_config(["dataset=techqa", "data.root=/data", "chunking.size_tokens=256"], config_name="build_data")
    assert cfg.force is False and cfg.dataset.name == "techqa" and cfg.data.root == "/data"
    assert cfg.chunking.size_tokens == 256 and cfg.method.name == "bm25"  # every run key is an override


def test_builds_real_locomo_once(work, locomo_path, capsys):
    cfg = load_config(overrides_for(work, "dataset=locomo"), config_name="build_data")
    folder = build_data(cfg)
    card = json.loads((folder / "card.json").read_text())
    assert folder.parent.name == "locomo" and card["counts"]["scopes"] == 10
    stamp = (folder / "corpus.parquet").stat().st_mtime_ns
    assert build_data(cfg) == folder and (folder / "corpus.parquet").stat().st_mtime_ns == stamp
    out = capsys.readouterr().out
    assert out.count(f"locomo: {folder}") == 2 and '"scopes": 10' in out


def test_a_dataset_name_that_is_a_path_is_refused_before_anything_is_written(tmp_path):
    processed = tmp_path / "deep" / "processed"
    cfg = load_config(
        [f"data.processed={processed}", "dataset=locomo", "dataset.name=../../escaped"], config_name="build_data"
    )
    with pytest.raises(ConfigError, match=r"dataset.name='../../escaped': must be a plain name"):
        build_data(cfg)
    assert not any(tmp_path.rglob("*"))  # neither data.processed nor the escaped folder was made
