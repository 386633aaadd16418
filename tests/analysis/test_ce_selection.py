"""The report's cross-encoder selection table (analysis/ce_selection.py) on a real tiny model set and a
real run over it: the dev columns are the training card's numbers, the evaluated column the run's mean."""

from __future__ import annotations

import json

import pytest

from analysis import views as V
from analysis.ce_selection import selection_table
from analysis.declared_runs import RunRef
from analysis.report import load_cfg
from lethebench.runs import RunFolder
from tests.baselines.test_cross_encoder import TINY


@pytest.mark.parametrize("mode", ["none", "dev"])
def test_selection_row_is_the_cards_dev_numbers_and_the_runs_mean(cfg_for, tmp_path, mode):
    from experiments.runner import run_experiment
    from experiments.train_cross_encoder import train_model_set

    folder_set = train_model_set(cfg_for("method=cross_encoder", *TINY))
    card = json.loads((folder_set / "fold0" / "model_card.json").read_text())
    run = run_experiment(
        cfg_for("method=cross_encoder", *TINY, f"method.interpolation={mode}", f"results_dir={tmp_path}")
    )
    ref = RunRef("lethebench", "cross_encoder", "test", run, RunFolder(run).dataset_folder, "tiny")
    views = V.collect(load_cfg([f"out_dir={tmp_path / 'report'}"]), [ref])
    table = selection_table(views)
    assert len(table) == 1
    row = table.iloc[0].to_dict()
    sel = card["selection"]
    assert row["regime"] == "lethebench" and row["folds"] == 1 and row["mode"] == mode
    assert row["dev queries"] == card["data"]["dev"]["queries"] == 3 and row["depth"] == 20
    assert row["dev BM25"] == f"{sel['bm25_order']:.4f}" and row["dev CE"] == f"{sel['chosen_score']:.4f}"
    assert row["weights"] == f"{sel['interpolation']['weight']:g}"
    assert row["dev CE+first stage"] == f"{sel['interpolation']['score']:.4f}"
    mean = RunFolder(run).metrics["means"]["ndcg@10"]
    assert row["evaluated ndcg@10"] == f"{mean:.4f}"
