"""python -m experiments.train_fusion (conf/train_fusion.yaml): the top config is the run config with
method=lethe_iter3 and `force`, and the model it trains is the one the run config of the same method and
dataset loads (the training itself is tested in test_lethe.py)."""

from __future__ import annotations

from experiments import train_fusion
from experiments.config import load_config


def test_top_config_defaults_to_iteration_3():
    cfg = load_config(["dataset=lethebench"], config_name="train_fusion")
    assert cfg.method.name == "lethe_iter3" and cfg.force is False and cfg.dataset.name == "lethebench"
    assert cfg.method.learned_fusion.enabled
    assert load_config(["method=lethe_iter4"], config_name="train_fusion").method.name == "lethe_iter4"


def test_the_model_folder_is_the_runs_model_folder(tmp_path):
    over = ["dataset=locomo", f"cache_dir={tmp_path}", "method.learned_fusion.alpha_grid=[0.0,1.0]"]
    top = load_config([*over, "force=true"], config_name="train_fusion")
    run = load_config([*over, "method=lethe_iter3"])
    assert train_fusion.model_folder(top) == train_fusion.model_folder(run)
    assert train_fusion.model_folder(top).is_relative_to(tmp_path)
