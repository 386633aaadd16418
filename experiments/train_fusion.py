"""Train Lethe iteration 3's learned fusion for one dataset (``make fusion-models``; settings:
``conf/train_fusion.yaml``).

    python -m experiments.train_fusion dataset=lethebench [method=lethe_iter3] [force=true] [overrides]
    python -m experiments.train_fusion -m dataset=lethebench,locomo     # several datasets (a Hydra sweep)

1. Runs the method's base pipeline (the same config with learned fusion off) over the labelled
   queries exactly as the runner would (each query sees only its eligible docs) and, per query,
   computes the features and the ranking for every (alpha, lambda) of the grid
   (``method.stages.learned_fusion.alpha_grid`` x ``lambda_grid``).
2. Oracle labels: per query, the grid cell with the highest nDCG@10 (ranx, real qrels); ties go
   to the cell nearest (L1) the static choice (the plan's alpha, the configured lambda). Queries
   whose nDCG@10 is the same in every cell carry no signal and are left out of fitting (counted).
3. Splits, no leakage:
   - datasets with ``train``/``dev`` splits (LetheBench): fit on train, choose the model family
     on dev by the mean nDCG@10 its (grid-snapped) predictions achieve, refit the chosen family on
     train+dev. Test queries are never prepared and their labels never read.
   - otherwise k-fold (``learned_fusion.folds``): folds group whole scopes when the dataset has at
     least k scopes (LoCoMo), else queries (one-scope collections). For held-out fold f, fold f+1
     is dev, the rest train; each fold's model scores only its held-out queries.
4. Saves ``FusionModel`` + card (features, target, grid, per fold: sizes, dev nDCG@10 of every
   family, of the static choice and of the oracle) to ``learned_fusion.model_dir/<dataset build key>[-<query pool key>]/<config key>``.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from analysis.metrics import evaluate_run
from experiments.config import to_dict
from experiments.cross_fit import labelled_ids, labelled_queries
from experiments.datasets import dataset_build_key, dataset_key, prepare_dataset
from experiments.run_identity import method_params
from experiments.runner import QuerySelection, group_docs, walk_eligible
from lethe.core.arguments import check_arguments
from lethe.core.locking import hold
from lethe.core.paths import Paths
from lethe.core.protocol import Query
from lethe.core.targets import build, target_class
from lethe.stages.learned_fusion import FEATURE_VERSION, FEATURES, Fold, FusionModel, config_key, features, snap
from lethebench.folds import cross_fit_plan
from lethebench.provenance import git_info
from lethebench.schema import Dataset, read_dataset

FAMILIES = ("constant", "ridge", "forest", "gbr")


def make_regressor(family: str, seed: int) -> Any:
    """An unfitted scikit-learn regressor X (n, F) -> y (n, 2) of the named family."""
    from sklearn.dummy import DummyRegressor
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
    from sklearn.linear_model import Ridge
    from sklearn.multioutput import MultiOutputRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if family == "constant":
        return DummyRegressor(strategy="mean")
    if family == "ridge":
        return make_pipeline(StandardScaler(), Ridge(alpha=1.0))
    if family == "forest":
        return RandomForestRegressor(n_estimators=200, min_samples_leaf=5, random_state=seed, n_jobs=1)
    if family == "gbr":
        return MultiOutputRegressor(
            GradientBoostingRegressor(
                n_estimators=150, max_depth=3, learning_rate=0.05, subsample=0.8, random_state=seed
            )
        )
    raise ValueError(f"unknown model family {family!r}; known: {FAMILIES}")


def base_method(cfg: DictConfig, progress: bool = True) -> Any:
    """The configured Lethe method with its weigh stage (learned fusion) switched off (its base pipeline), and
    without the ranking stages that act on the fused ranking (iteration 4's, any added one): they never shape the
    features or the grid's rankings, so training neither loads their LLMs nor runs their detectors."""
    params = method_params(to_dict(cfg.method))
    stages: dict[str, Any] = {}
    for name, section in (params.get("stages") or {}).items():
        kind = target_class(section["_target_"]) if section else None
        if kind is None or hasattr(kind, "apply"):  # off, or a ranking stage (lethe.stages.ranking_stage)
            stages[name] = None
        elif getattr(kind, "phase", None) == "weigh":
            stages[name] = {**section, "enabled": False}
        else:
            stages[name] = section
    params["stages"] = stages
    return build(params, cache_dir=Paths.of(cfg).cache, progress=progress, _convert_="all")


def grid_table(
    cfg: DictConfig, ds_folder: Path, ds: Dataset, query_ids: Sequence[str] | None = None, progress: bool = True
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, list[tuple[float, float]], dict[str, Any]]:
    """Per query: meta (query_id, scope_id, split, static cell), features (n, F) and nDCG@10 (n, cells).

    Only the queries in ``query_ids`` (None: every query with qrels; :func:`train` passes
    :func:`experiments.cross_fit.labelled_ids`) are prepared and only their qrels read.
    """
    build_key = dataset_key(cfg, ds_folder, ds)  # as the runner binds it (a custom folder's includes its content)
    method = base_method(cfg, progress)
    grid = method.training_config()
    alphas = [float(a) for a in grid["alpha_grid"]]
    lams = [float(x) for x in grid["lambda_grid"]] if method.uses_lambda() else [0.0]
    cells = [(a, lam) for a in alphas for lam in lams]
    ds, q = labelled_queries(cfg, ds, query_ids)
    method.bind_dataset({"name": cfg.dataset.name, "build_key": build_key})  # fusion off: nothing loaded
    docs = group_docs(ds)
    method.set_collection([d for v in docs.values() for d in v])
    metas, feats, runs = [], [], [{} for _ in cells]
    bar = tqdm(total=len(q), desc=f"fusion grid {cfg.dataset.name}", disable=not progress, unit="q")
    for scope_id, row, ne, new_docs in walk_eligible(q, docs):
        bar.update()
        if ne == 0:
            continue
        if new_docs is not None:
            method.index(new_docs)
        p = method.prepare(Query(row.text, tuple(row.history), row.query_id, scope_id))
        static = (float(p.alpha), method.default_lambda())
        split = row.split if isinstance(row.split, str) else None
        metas.append(
            {
                "query_id": row.query_id,
                "scope_id": scope_id,
                "split": split,
                "static_alpha": static[0],
                "static_lambda": static[1],
            }
        )
        feats.append(features(p))
        for j, (a, lam) in enumerate(cells):
            runs[j][row.query_id] = method.rank(p, a, lam, 10)
    bar.close()
    method.close()
    meta = pd.DataFrame(metas)
    qrels = {qid: ds.qrels[qid] for qid in meta["query_id"]}
    ndcg = (
        np.column_stack([evaluate_run(qrels, r, ["ndcg@10"]).loc[meta["query_id"], "ndcg@10"].to_numpy() for r in runs])
        if len(meta)
        else np.zeros((0, len(cells)))
    )
    info = {
        "dataset": {"name": cfg.dataset.name, "build_key": build_key},
        "base": method.base_config(),
        "training": method.training_config(),
        "grid": {"alpha": alphas, "lambda": lams},
    }
    return meta, np.array(feats).reshape(len(meta), len(FEATURES)), ndcg, cells, info


def oracle(ndcg: np.ndarray, cells: list[tuple[float, float]], static: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Oracle (alpha, lambda) per query (n, 2) and a mask of informative queries (nDCG not constant)."""
    c = np.asarray(cells)
    best = ndcg >= ndcg.max(axis=1, keepdims=True) - 1e-12
    dist = np.abs(c[None, :, 0] - static[:, None, 0]) + np.abs(c[None, :, 1] - static[:, None, 1])
    pick = np.where(best, dist, np.inf).argmin(axis=1)
    return c[pick], ndcg.max(axis=1) - ndcg.min(axis=1) > 1e-12


def achieved(
    pred: np.ndarray, ndcg: np.ndarray, cells: list[tuple[float, float]], grid: dict[str, list[float]]
) -> float:
    """Mean nDCG@10 of grid-snapped predictions (n, 2), read from the precomputed table."""
    if not len(pred):
        return float("nan")
    a, lam = snap(pred[:, 0], grid["alpha"]), snap(pred[:, 1], grid["lambda"])
    index = {cell: j for j, cell in enumerate(cells)}
    return float(np.mean([ndcg[i, index[(float(x), float(y))]] for i, (x, y) in enumerate(zip(a, lam, strict=True))]))


def fit_fold(
    X: np.ndarray,
    y: np.ndarray,
    informative: np.ndarray,
    train: np.ndarray,
    dev: np.ndarray,
    ndcg: np.ndarray,
    cells: list[tuple[float, float]],
    grid: dict[str, list[float]],
    families: Sequence[str],
    seed: int,
) -> tuple[Any, dict[str, Any]]:
    """Choose a family on ``dev`` (boolean masks), refit it on train+dev; return it and its report."""
    fit_mask = train & informative
    if fit_mask.sum() < 2:
        raise ValueError(f"only {int(fit_mask.sum())} informative training queries; cannot fit learned fusion")
    dev_scores = {}
    for fam in families:
        m = make_regressor(fam, seed).fit(X[fit_mask], y[fit_mask])
        dev_scores[fam] = achieved(np.asarray(m.predict(X[dev])).reshape(-1, 2), ndcg[dev], cells, grid)
    chosen = max(families, key=lambda f: (dev_scores[f], -families.index(f)))
    both = (train | dev) & informative
    model = make_regressor(chosen, seed).fit(X[both], y[both])
    return model, {
        "dev_ndcg@10": {f: round(v, 4) for f, v in dev_scores.items()},
        "chosen": chosen,
        "n_train": int(train.sum()),
        "n_dev": int(dev.sum()),
        "n_fit": int(both.sum()),
        "n_uninformative_train_dev": int(((train | dev) & ~informative).sum()),
    }


def train(cfg: DictConfig, progress: bool = True) -> FusionModel:
    """Build the grid table, fit the folds and return the model (not yet saved)."""
    ds_folder = prepare_dataset(cfg)
    ds = read_dataset(ds_folder, cfg.dataset.name)
    meta, X, ndcg, cells, info = grid_table(cfg, ds_folder, ds, labelled_ids(ds), progress)  # test never prepared
    static = meta[["static_alpha", "static_lambda"]].to_numpy(dtype=np.float64)
    y, informative = oracle(ndcg, cells, static)
    lf = info["training"]
    families, seed = list(lf["families"]), int(lf["seed"])
    plans, scheme = cross_fit_plan(meta, int(lf["folds"]), seed)
    folds, reports = [], []
    for plan in plans:
        tr, dv, held = plan.train, plan.dev, plan.heldout
        model, rep = fit_fold(X, y, informative, tr, dv, ndcg, cells, info["grid"], families, seed)
        rep["static_dev_ndcg@10"] = _round(_static(ndcg, cells, static)[dv].mean())
        rep["oracle_dev_ndcg@10"] = round(float(ndcg[dv].max(axis=1).mean()), 4)
        if held is not None:
            rep["n_heldout"] = int(held.sum())
        folds.append(
            Fold(
                model,
                frozenset(meta.loc[tr, "query_id"]),
                frozenset(meta.loc[dv, "query_id"]),
                None if held is None else frozenset(meta.loc[held, "query_id"]),
                plan.scopes,
            )
        )
        reports.append(rep)
    card = {
        **info,
        "feature_version": FEATURE_VERSION,
        "features": list(FEATURES),
        "target": "per-query oracle (alpha, lambda) on the grid by nDCG@10 (ranx); ties -> nearest the static choice",
        "scheme": scheme,
        "folds": reports,
        "n_queries": int(len(meta)),
        "n_informative": int(informative.sum()),
        "oracle_share_by_alpha": {
            str(a): round(float(np.mean(y[informative, 0] == a)), 4) for a in info["grid"]["alpha"]
        },
        "created": dt.datetime.now(dt.UTC).isoformat(),
        "git": git_info(),
    }
    return FusionModel(folds, card)


def _round(x: float) -> float | None:
    """4 decimals; None for NaN (the static choice lies off the grid)."""
    return None if np.isnan(x) else round(float(x), 4)


def _static(ndcg: np.ndarray, cells: list[tuple[float, float]], static: np.ndarray) -> np.ndarray:
    index = {(round(a, 6), round(lam, 6)): j for j, (a, lam) in enumerate(cells)}
    out = np.full(len(static), np.nan)
    for i, (a, lam) in enumerate(static):
        j = index.get((round(float(a), 6), round(float(lam), 6)))
        if j is not None:
            out[i] = ndcg[i, j]
    return out


def model_folder(cfg: DictConfig) -> Path:
    """Where the learned-fusion model of the run config ``cfg`` is (or will be) saved."""
    if not OmegaConf.select(cfg, "method.stages.learned_fusion.model_dir"):
        raise ValueError(f"method {cfg.method.name} has no learned_fusion.model_dir; use a learned-fusion method")
    method = base_method(cfg, progress=False)
    pool = QuerySelection.from_config(to_dict(cfg.dataset), int(cfg.run.seed)).pool_key()
    return method.fusion_dir(dataset_build_key(cfg), pool) / config_key(method.base_config(), method.training_config())


def ensure_model(cfg: DictConfig, force: bool = False) -> tuple[Path, bool]:
    """(model folder, trained now): train and save the model of ``cfg`` unless it exists (or ``force``)."""
    folder = model_folder(cfg)
    with hold(folder):  # one process trains a model; another one waiting for it finds it made
        if FusionModel.is_whole(folder) and not force:
            print(f"[keep] {folder} exists (force=true retrains)")
            return folder, False
        model = train(cfg, progress=bool(cfg.run.progress))
        if config_key(model.card["base"], model.card["training"]) != folder.name:
            raise RuntimeError("the trained model's configuration key differs from the method's; this is a bug")
        model.save(folder)
        print(
            json.dumps(
                {k: model.card[k] for k in ("dataset", "scheme", "n_queries", "n_informative", "folds")}, indent=1
            )
        )
        print(f"saved: {folder}")
        return folder, True


@hydra.main(config_path="../conf", config_name="train_fusion", version_base="1.3")
def main(cfg: DictConfig) -> None:
    ensure_model(cfg, force=bool(cfg.force))


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
