"""Optional MLflow tracking (experiments/tracking.py): a real finished run logged to a temporary file store and read
back; the +tracking=mlflow config registers the callback; and a whole job through Hydra logs itself."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from experiments.tracking import MLflowCallback, flatten, log_run, metric_name
from lethe.core.paths import PROJECT_ROOT
from lethebench.runs import RunFolder

mlflow = pytest.importorskip("mlflow")  # an optional dependency; the dev extra (make install) has it


def test_flatten_and_metric_names():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": "1", "a.c": "[1, 2]", "d": "None"}
    assert metric_name("ndcg@10") == "ndcg_at_10"


def test_a_finished_run_is_logged_with_params_metrics_and_manifest(e2e_runs, tmp_path):
    folder = e2e_runs["bm25"]
    uri = (tmp_path / "mlruns").as_uri()
    run_id = log_run(folder, uri, "test")
    run = mlflow.MlflowClient(uri).get_run(run_id)
    metrics, manifest = RunFolder(folder).metrics, RunFolder(folder).manifest
    assert run.data.metrics["ndcg_at_10"] == pytest.approx(metrics["means"]["ndcg@10"])
    assert run.data.params["config_hash"] == manifest["config_hash"] and run.data.params["method.k1"] == "1.2"
    assert run.info.run_name == f"locomo/bm25/{manifest['config_hash']}"
    arts = {a.path for a in mlflow.MlflowClient(uri).list_artifacts(run_id)}
    assert arts == {"manifest.json", "metrics.json"}


def test_tracking_config_registers_the_callback():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", ["+tracking=mlflow"], return_hydra_config=True)
    cb = cfg.hydra.callbacks.mlflow
    assert cb._target_ == "experiments.tracking.MLflowCallback" and cb.experiment == "lethe" and cb.tracking_uri is None
    assert MLflowCallback().tracking_uri == (PROJECT_ROOT / "results" / "mlruns").resolve().as_uri()


def test_a_job_logs_itself_through_hydra(work, tmp_path):
    from tests.conftest import overrides_for

    uri = (tmp_path / "store").as_uri()
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        *overrides_for(work, "method=window", "dataset.scopes=[conv-26]"),
        "+tracking=mlflow",
        f"tracking.tracking_uri={uri}",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    done = subprocess.run(
        cmd,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    runs = mlflow.MlflowClient(uri).search_runs(
        [mlflow.MlflowClient(uri).get_experiment_by_name("lethe").experiment_id]
    )
    assert len(runs) == 1 and runs[0].info.run_name.startswith("locomo/window/")
