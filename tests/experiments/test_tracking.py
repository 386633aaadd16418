"""Optional MLflow tracking (experiments/tracking.py): a real finished run logged to a temporary file store and read
back; rescored from the store alone; no userinfo of a git remote reaches the store; the +tracking=mlflow config
registers the callback; and a whole job through Hydra logs itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.metrics import rescore
from experiments.tracking import (
    TABLE,
    MLflowCallback,
    flatten,
    log_run,
    metric_name,
    relative_path,
    strip_userinfo,
)
from lethe.core.paths import PROJECT_ROOT
from lethebench.runs import QRELS_TREC, RunFolder

mlflow = pytest.importorskip("mlflow")  # an optional dependency; the dev extra (make install) has it


META = ("manifest.json", "metrics.json")


@pytest.fixture(autouse=True)
def _file_store_allowed(monkeypatch):
    """MLflow 3.17 reads a file store only with this set; log_run sets it in the process, but a test reading a store
    another process wrote must not depend on an earlier test having logged."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


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
    # the folder lives in pytest's temporary folder, outside the project: recorded as <dataset>/<label>/<hash>
    assert run.data.params["results_folder"] == f"locomo/bm25/{manifest['config_hash']}"
    arts = {a.path for a in mlflow.MlflowClient(uri).list_artifacts(run_id)}
    assert arts == {"run.trec", "qrels.trec", "per_query.parquet", *META, TABLE}
    assert not any(os.path.isabs(v) for v in [*run.data.params.values(), *run.data.tags.values()])


@pytest.mark.parametrize(
    "url, clean",
    [
        ("https://user:SECRET@example.com/x.git", "https://example.com/x.git"),
        ("https://SECRET@example.com:8443/x.git?a=b#c", "https://example.com:8443/x.git?a=b#c"),
        ("ssh://git:p@ss@example.com/x.git", "ssh://example.com/x.git"),  # a raw "@" in the password
        ("user:SECRET@example.com:org/x.git", "example.com:org/x.git"),  # scp-like git remote
        ("git@github.com:org/x.git", "github.com:org/x.git"),
        ("see https://u:t@h/x and http://h2/y", "see https://h/x and http://h2/y"),
        ("https://example.com/x.git", "https://example.com/x.git"),
        ("/home/me/lethe", "/home/me/lethe"),
        ("mail me@example.com", "mail me@example.com"),
        ("", ""),
    ],
)
def test_strip_userinfo(url, clean):
    assert strip_userinfo(url) == clean


def test_relative_path():
    assert relative_path(PROJECT_ROOT / "results" / "x") == "results/x"
    assert relative_path("/elsewhere/results/locomo/bm25/abc", keep=3) == "locomo/bm25/abc"
    assert relative_path("results/x") == "results/x"


def _copy(folder: Path, base: Path) -> Path:
    """A copy of a results folder under ``base`` in the results layout (<dataset>/<label>/<hash>)."""
    dst = base.joinpath(*folder.parts[-3:])
    shutil.copytree(folder, dst)
    return dst


@pytest.mark.parametrize("method", ["window", "bm25", "vector"])
def test_a_tracked_run_is_rescored_from_the_store_alone(e2e_runs, tmp_path, method):
    folder = _copy(e2e_runs[method], tmp_path / "results")
    means = RunFolder(folder).metrics["means"]
    stored_per_query = RunFolder(folder).per_query.set_index("query_id")
    uri = (tmp_path / "mlruns").as_uri()
    run_id = log_run(folder, uri, "test")
    shutil.rmtree(tmp_path / "results")  # from here on only the tracking store holds the run

    got = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(tmp_path / "dl"), tracking_uri=uri))
    assert {p.name for p in got.iterdir()} == {"run.trec", "qrels.trec", "per_query.parquet", *META, TABLE}
    logged = mlflow.MlflowClient(uri).get_run(run_id).data.metrics
    scores = rescore(RunFolder(got), list(means))  # the project's evaluation, on the downloaded run.trec + qrels.trec
    assert len(scores) == RunFolder(got).metrics["queries"]["evaluated"] > 0
    for m, mean in means.items():
        assert float(scores[m].mean()) == logged[metric_name(m)] == mean, m
    per_query = RunFolder(got).per_query.set_index("query_id")  # the logged per_query.parquet: exact
    table = pd.DataFrame(**json.loads((got / TABLE).read_text())).set_index("query_id")  # the MLflow table
    assert list(per_query.index) == list(table.index) == list(stored_per_query.index)
    for m in means:
        assert per_query[m].tolist() == scores[m].reindex(per_query.index).tolist() == stored_per_query[m].tolist(), m
        # log_table writes JSON through pandas' to_json: 10 decimal places
        assert table[m].tolist() == pytest.approx(per_query[m].tolist(), rel=0, abs=1e-10), m


def test_a_folder_missing_an_artifact_is_refused_before_logging(e2e_runs, tmp_path):
    folder = _copy(e2e_runs["bm25"], tmp_path / "results")
    (folder / QRELS_TREC).unlink()
    uri = (tmp_path / "mlruns").as_uri()
    with pytest.raises(FileNotFoundError, match="missing qrels.trec"):
        log_run(folder, uri, "test")
    experiment = mlflow.MlflowClient(uri).get_experiment_by_name("test")
    assert experiment is None or mlflow.MlflowClient(uri).search_runs([experiment.experiment_id]) == []


LOG_SCRIPT = """\
import sys
from experiments.tracking import log_run
print(log_run(sys.argv[1], sys.argv[2], "test"))
"""


@pytest.mark.parametrize(
    "remote, recorded",
    [
        ("https://user:SECRET@example.com/x.git", "https://example.com/x.git"),
        ("user:SECRET@example.com:x.git", "example.com:x.git"),  # MLflow 3.17 itself strips only scheme URLs
    ],
)
def test_no_userinfo_of_the_git_remote_reaches_the_store(e2e_runs, tmp_path, remote, recorded):
    """MLflow reads the git remote of the main file's repository (sys.argv[0]): a script in a repository whose
    remote carries a token logs a real run; the token is in no file of the store."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "log_it.py").write_text(LOG_SCRIPT)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["remote", "add", "origin", remote], ["add", "log_it.py"], ["commit", "-qm", "x"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    folder = _copy(e2e_runs["bm25"], tmp_path / "results")
    store = tmp_path / "mlruns"
    done = subprocess.run(
        [sys.executable, str(repo / "log_it.py"), str(folder), store.as_uri()],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "MLFLOW_ALLOW_FILE_STORE": "true"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    leaked = [p for p in store.rglob("*") if p.is_file() and b"SECRET" in p.read_bytes()]
    assert leaked == []
    tags = mlflow.MlflowClient(store.as_uri()).get_run(done.stdout.split()[-1]).data.tags
    assert tags["mlflow.source.git.repoURL"] == recorded  # MLflow did read the remote
    assert tags["mlflow.source.name"] == "log_it.py"  # not the absolute path of the script


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
    assert runs[0].data.tags["mlflow.source.name"] == "experiments/run.py"  # sys.argv[0], relative to the project
    assert not any(os.path.isabs(v) for v in [*runs[0].data.params.values(), *runs[0].data.tags.values()])
