"""Optional experiment tracking: every finished job of ``python -m experiments.run`` logged to MLflow.

Switched on with ``+tracking=mlflow`` (conf/tracking/mlflow.yaml registers :class:`MLflowCallback` as a Hydra
callback); nothing here is imported otherwise, and MLflow is an optional dependency (``pip install -e
".[tracking]"``). Per job, one MLflow run named ``<dataset>/<method label>/<config hash>`` in ``experiment``:

- params: the run's hashed config flattened to dotted keys (values cut to MLflow's 6,000 characters), plus
  ``config_hash``, ``results_folder`` and ``git_commit``;
- metrics: the metric means of ``metrics.json`` and its latency summary, with ``@`` written ``_at_`` (MLflow does
  not accept ``@`` in a metric name): ``ndcg_at_10``, ``latency_p95_ms``;
- artifacts: ``manifest.json`` and ``metrics.json`` of the results folder.

A job that was skipped (already done) is logged too, once per callback call, so a resumed sweep's tracking
shows every job. A local ``file:`` store needs ``MLFLOW_ALLOW_FILE_STORE=true`` with MLflow 3.17, which the callback
sets for file stores only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from hydra.experimental.callback import Callback

MAX_PARAM = 6000


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mappings to {"a.b.c": str(value)}; lists stay one value (JSON)."""
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = (json.dumps(v, default=str) if isinstance(v, (list, tuple)) else str(v))[:MAX_PARAM]
    return out


def metric_name(name: str) -> str:
    """An MLflow-safe metric name: ``ndcg@10`` -> ``ndcg_at_10``."""
    return name.replace("@", "_at_")


def log_run(folder: str | Path, tracking_uri: str, experiment: str) -> str:
    """Log one finished results folder to MLflow; returns the MLflow run id."""
    import mlflow

    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    metrics = json.loads((folder / "metrics.json").read_text())
    if tracking_uri.startswith("file:") or "://" not in tracking_uri:
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    name = f"{metrics['dataset']}/{metrics['method']}/{manifest['config_hash']}"
    with mlflow.start_run(run_name=name) as run:
        params = flatten(manifest["hashed_config"])
        params.update(
            config_hash=manifest["config_hash"],
            results_folder=str(folder),
            git_commit=str((manifest.get("git") or {}).get("commit")),
        )
        mlflow.log_params(params)
        values = {metric_name(k): float(v) for k, v in (metrics.get("means") or {}).items() if v is not None}
        lat = metrics.get("latency_ms") or {}
        values.update({f"latency_{k}_ms": float(lat[k]) for k in ("mean", "p50", "p95") if lat.get(k) is not None})
        mlflow.log_metrics(values)
        mlflow.log_artifact(str(folder / "manifest.json"))
        mlflow.log_artifact(str(folder / "metrics.json"))
        return run.info.run_id


class MLflowCallback(Callback):  # type: ignore[misc]
    """Hydra callback: log each finished job's results folder to MLflow (module docstring)."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "lethe") -> None:
        """``tracking_uri`` None: the local file store ``<project>/results/mlruns``."""
        from lethe.core.paths import project_path

        self.tracking_uri = str(tracking_uri) if tracking_uri else project_path("results/mlruns").resolve().as_uri()
        self.experiment = str(experiment)

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        value = getattr(job_return, "_return_value", None)
        if isinstance(value, dict) and value.get("folder"):
            log_run(value["folder"], self.tracking_uri, self.experiment)
