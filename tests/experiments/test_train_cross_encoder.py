"""python -m experiments.train_cross_encoder (conf/train_cross_encoder.yaml): the top config is the run
config with method=cross_encoder and `force`; the reproduction tiers train each cross-encoder run's model
set from the run's own config (so its config hash covers the training recipe); an unknown regime is
refused before any work (the training itself is tested in tests/baselines/test_cross_encoder.py)."""

from __future__ import annotations

import pytest

from experiments import train_cross_encoder
from experiments.config import load_config
from experiments.reference import load_tier


def test_top_config_is_the_cross_encoder_on_its_training_dataset():
    cfg = load_config([], config_name="train_cross_encoder")
    assert cfg.method.name == "cross_encoder" and cfg.force is False
    assert cfg.dataset.name == cfg.method.model.train.dataset == "lethebench"
    assert (
        cfg.method.model.train.regime == "in_domain" and cfg.method.interpolation == "dev"
    )  # the defaults (docs/methods.md)
    assert train_cross_encoder.compose([]) == cfg


def test_the_tiers_train_each_model_set_from_the_runs_config(tmp_path):
    from experiments.prerequisites import prepare_steps
    from experiments.reference import resolve

    runs = [resolve(r, [f"cache_dir={tmp_path}"]) for r in load_tier("smoke").runs if r.method == "cross_encoder"]
    assert len(runs) == 2 and all(r.cfg.method.model.train.epochs == 1 for r in runs)
    models = [s for s in prepare_steps(runs) if s.name.startswith("model cross_encoder")]
    # regime in_domain: one set per evaluated dataset, each from that run's own dataset build
    assert len(models) == 2 and not any(m.done for m in models)
    assert sorted(m.name.split()[2].split("/")[0] for m in models) == ["lethebench", "locomo"]


def test_an_unknown_regime_is_refused(tmp_path):
    cfg = load_config(
        ["method.model.train.regime=zero_shot", f"cache_dir={tmp_path}"], config_name="train_cross_encoder"
    )
    with pytest.raises(ValueError, match="regime='zero_shot'"):
        train_cross_encoder.train_model_set(cfg, force=True)
    assert not (tmp_path / "models").exists()
