"""python -m experiments.train_fusion (conf/train_fusion.yaml): the top config is the run config with
method=lethe_iter3 and `force`, and the model it trains is the one the run config of the same method and
dataset loads (the training itself is tested in test_lethe.py)."""

from __future__ import annotations

from experiments import train_fusion
from experiments.config import load_config


def test_top_config_defaults_to_iteration_3():
    cfg = load_config(["dataset=lethebench"], config_name="train_fusion")
    assert cfg.method.name == "lethe_iter3" and cfg.force is False and cfg.dataset.name == "lethebench"
    assert cfg.method.stages.learned_fusion.enabled
    assert load_config(["method=lethe_iter4"], config_name="train_fusion").method.name == "lethe_iter4"


def test_the_model_folder_is_the_runs_model_folder(tmp_path):
    over = ["dataset=locomo", f"cache_dir={tmp_path}", "method.stages.learned_fusion.alpha_grid=[0.0,1.0]"]
    top = load_config([*over, "force=true"], config_name="train_fusion")
    run = load_config([*over, "method=lethe_iter3"])
    assert train_fusion.model_folder(top) == train_fusion.model_folder(run)
    assert train_fusion.model_folder(top).is_relative_to(tmp_path)


def test_each_dataset_build_and_query_pool_has_its_own_model_folder(tmp_path):
    # a model trained on two conversations must never be loaded by a run over all ten (or the reverse), nor a
    # model of another build of the dataset
    def folder(*extra: str):
        return train_fusion.model_folder(load_config([f"cache_dir={tmp_path}", "method=lethe_iter3", *extra]))

    full, scopes, sample, split = (
        folder("dataset=locomo", *x)
        for x in ([], ["dataset.scopes=[conv-26,conv-30]"], ["dataset.sample=5"], ["dataset.split=test"])
    )
    assert len({full, scopes, sample}) == 3 and split == full  # the split is the model's own business
    assert full.name == scopes.name == sample.name  # one pipeline configuration
    assert scopes.parent.name.startswith(full.parent.name + "-") and scopes.parent.parent == full.parent.parent
    small, big = (folder("dataset=lethebench", *x) for x in ([], ["dataset.params.splits={test:2,train:3,dev:2}"]))
    assert small.parent != big.parent and small.parent.parent == big.parent.parent
