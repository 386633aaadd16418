"""Optional experiment tracking: every finished job of ``python -m experiments.run`` logged to MLflow.

Switched on with ``+tracking=mlflow`` (conf/tracking/mlflow.yaml registers :class:`MLflowCallback` as a Hydra
callback); nothing here is imported otherwise, and MLflow is an optional dependency (``pip install -e
".[tracking]"``). Per job, one MLflow run named ``<dataset>/<method label>/<config hash>`` in ``experiment``:

- params: the run's hashed config flattened to dotted keys (values cut to MLflow's 6,000 characters), plus
  ``config_hash``, ``results_folder`` (relative to the work or project root when under it, else
  ``<dataset>/<label>/<config_hash>``: never an absolute path) and ``git_commit``;
- metrics: the metric means of ``metrics.json`` and its latency summary, with ``@`` written ``_at_`` (MLflow does
  not accept ``@`` in a metric name): ``ndcg_at_10``, ``latency_p95_ms``;
- artifacts: ``run.trec``, ``qrels.trec``, ``per_query.parquet``, ``manifest.json`` and ``metrics.json`` of the
  results folder, unchanged (:data:`ARTIFACTS`), so the run can be rescored from the tracking store alone
  (``analysis.metrics.rescore`` on the downloaded artifacts gives the logged means exactly); and the per-query
  table once more as an MLflow table, ``per_query.json`` (``mlflow.log_table``, for MLflow's table view; it
  writes floats to 10 decimal places, so ``per_query.parquet`` is the exact copy);
- tags: MLflow's automatic ones (user, source name and type, git commit, branch and remote URL), set explicitly
  with every value cleaned (:func:`clean_tags`): userinfo stripped from URLs (:func:`strip_userinfo`, so a token
  in an ``https://user:TOKEN@host/...`` or scp-like ``user:TOKEN@host:path`` remote is never stored; MLflow 3.17
  itself strips only the first form) and the source file (the script that started the run) relative to the project.

Param values and the run name go through :func:`strip_userinfo` too. The artifacts are the folder's files as
written: ``manifest.json`` records the git commit and dirty flag (no remote) and the resolved config, whose paths
are the machine's. A folder missing one of :data:`ARTIFACTS` is refused before anything is logged.

A job that was skipped (already done) is logged too, once per callback call, so a resumed sweep's tracking
shows every job. A local ``file:`` store needs ``MLFLOW_ALLOW_FILE_STORE=true`` with MLflow 3.17, which the callback
sets for file stores only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from lethebench.runs import MANIFEST, METRICS, PER_QUERY, QRELS_TREC, RUN_TREC, RunFolder

MAX_PARAM = 6000
ARTIFACTS = (RUN_TREC, QRELS_TREC, PER_QUERY, MANIFEST, METRICS)  # logged as they are; enough to rescore the run
TABLE = "per_query.json"  # the per-query table as an MLflow table (JSON, 10 decimals; per_query.parquet is exact)

# userinfo is everything between "scheme://" and the last "@" before the host; a raw "@" in a password included
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#\"'<>]*@")
# scp-like git remote "[user[:password]@]host:path" (no scheme), as the whole value
_SCP_USERINFO = re.compile(r"^[^\s/@]+(?:@[^\s/@]*)*@(?=[^\s/:@]+:)")


def strip_userinfo(url: str) -> str:
    """``url`` without userinfo: ``https://user:TOKEN@host/x.git`` -> ``https://host/x.git``, and the scp-like
    remote ``user:TOKEN@host:x.git`` -> ``host:x.git``. URLs inside a longer text are cleaned too; anything else is
    returned unchanged."""
    return _SCP_USERINFO.sub("", _URL_USERINFO.sub(r"\1", url))


def relative_path(path: str | os.PathLike, keep: int = 1) -> str:
    """``path`` relative to the work root or the project root when under one of them, else its last ``keep`` parts:
    what is recorded instead of an absolute path of this machine. A relative path is returned as given."""
    from lethe.core.paths import PROJECT_ROOT, Paths

    p = Path(path)
    if not p.is_absolute():
        return str(path)
    p = p.resolve()
    for root in (Paths.default().root, PROJECT_ROOT):
        if p.is_relative_to(root):
            return p.relative_to(root).as_posix()
    return Path(*p.parts[-keep:]).as_posix()


def clean_tags() -> dict[str, str]:
    """The tags MLflow's context providers would set on a new run (``mlflow.user``, ``mlflow.source.name``,
    ``mlflow.source.git.repoURL``, ...) with userinfo stripped from every value and absolute paths made relative
    (:func:`relative_path`). Passed to ``start_run``, which applies given tags after its own, so these replace them."""
    from mlflow.tracking.context.registry import resolve_tags

    out: dict[str, str] = {}
    for key, value in resolve_tags().items():
        value = strip_userinfo(str(value))
        out[key] = relative_path(value) if os.path.isabs(value) else value
    return out


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
    """Log one finished results folder to MLflow (module docstring); returns the MLflow run id. Raises
    FileNotFoundError naming the files when the folder lacks one of :data:`ARTIFACTS`."""
    import mlflow

    run_folder = RunFolder(folder)
    folder = run_folder.path
    missing = [name for name in ARTIFACTS if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: missing {', '.join(missing)}; not logging an incomplete results folder")
    manifest, metrics = run_folder.manifest, run_folder.metrics
    if tracking_uri.startswith("file:") or "://" not in tracking_uri:
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    name = strip_userinfo(f"{metrics['dataset']}/{metrics['method']}/{manifest['config_hash']}")
    with mlflow.start_run(run_name=name, tags=clean_tags()) as run:
        params = flatten(manifest["hashed_config"])
        params.update(
            config_hash=manifest["config_hash"],
            results_folder=relative_path(folder, keep=3),
            git_commit=str((manifest.get("git") or {}).get("commit")),
        )
        mlflow.log_params({k: strip_userinfo(v) for k, v in params.items()})
        values = {metric_name(k): float(v) for k, v in (metrics.get("means") or {}).items() if v is not None}
        lat = metrics.get("latency_ms") or {}
        values.update({f"latency_{k}_ms": float(lat[k]) for k in ("mean", "p50", "p95") if lat.get(k) is not None})
        mlflow.log_metrics(values)
        for file in ARTIFACTS:
            mlflow.log_artifact(str(folder / file))
        mlflow.log_table(run_folder.per_query, artifact_file=TABLE)
        return run.info.run_id


class MLflowCallback(Callback):  # type: ignore[misc]
    """Hydra callback: log each finished job's results folder to MLflow (module docstring)."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "lethe") -> None:
        """``tracking_uri`` None: the local file store ``<project>/results/mlruns``."""
        from lethe.core.paths import Paths

        self.tracking_uri = str(tracking_uri) if tracking_uri else Paths.default().tracking.as_uri()
        self.experiment = str(experiment)

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        value = getattr(job_return, "_return_value", None)
        if isinstance(value, dict) and value.get("folder"):
            log_run(value["folder"], self.tracking_uri, self.experiment)
