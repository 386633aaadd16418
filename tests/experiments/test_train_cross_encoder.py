"""python -m experiments.train_cross_encoder (conf/train_cross_encoder.yaml): the top config is the run
config with method=cross_encoder on its training dataset and `force`; the tiers' model overrides compose
into it; a dataset that is not the model's training dataset is refused before any work (the training
itself is tested in tests/baselines/test_cross_encoder.py)."""

from __future__ import annotations

import pytest

from experiments import train_cross_encoder
from experiments.config import load_config
from experiments.reference import load_tier


def test_top_config_is_the_cross_encoder_on_its_training_dataset():
    cfg = load_config([], config_name="train_cross_encoder")
    assert cfg.method.name == "cross_encoder" and cfg.force is False
    assert cfg.dataset.name == cfg.method.model.train.dataset == "lethebench"
    assert train_cross_encoder.compose([]) == cfg


def test_the_tiers_model_overrides_compose(tmp_path):
    for tier in ("smoke", "core"):
        t = load_tier(tier)
        cfg = train_cross_encoder.compose([*t.overrides, *t.models.get("cross_encoder", []), f"cache_dir={tmp_path}"])
        assert cfg.dataset.name == "lethebench" and str(cfg.method.model.path).startswith(str(tmp_path))
    smoke = train_cross_encoder.compose(load_tier("smoke").models["cross_encoder"])
    assert smoke.dataset.params.splits == {"test": 10, "train": 10, "dev": 5} and smoke.method.model.train.epochs == 1


def test_another_dataset_must_be_the_models_training_dataset(tmp_path):
    cfg = load_config(["dataset=locomo", f"cache_dir={tmp_path}"], config_name="train_cross_encoder")
    with pytest.raises(ValueError, match="set both"):
        train_cross_encoder.train_default(cfg, force=True)
    assert not (tmp_path / "models").exists()
