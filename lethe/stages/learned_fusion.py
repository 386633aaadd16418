"""Learned fusion (Lethe iteration 3): per-query features -> alpha and the diversification lambda.

Training (``experiments/train_fusion.py``) finds, per labelled query, the oracle (alpha, lambda)
on a grid by real nDCG@10, fits scikit-learn regressors on the features below, picks the model
family on held-out dev queries and saves a ``FusionModel``: one or more *folds*, each with the
query ids (and, when folds are grouped by scope, the scope ids) it was trained and selected on.

At search time a fold is used only for a query it never saw: its query id (and scope) must be
outside the fold's training and dev sets; otherwise ``LeakageError``. Predictions are snapped to
the training grid, so dev selection and test use score exactly the same candidate values.

Features (``FEATURES``, in this order) come from a prepared ``lethe.stages.state.QueryState`` only (the query, its
history, the plan inputs and the first-stage score lists), never from labels.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lethe.core.atomic import atomic_write_bytes, atomic_write_text
from lethe.core.hashing import content_hash, sha256_bytes
from lethe.core.heldout import LeakageError, may_score, pick_fold  # noqa: F401 - LeakageError is part of this module's API

if TYPE_CHECKING:
    from lethe.core.protocol import Query
    from lethe.stages.state import QueryState, StageContext

FEATURE_VERSION = "1"
MODEL_SHA256 = "model_sha256"  # the card's record of model.pkl's bytes, checked before unpickling
FEATURES = (
    "query_terms",
    "n_analyzed",
    "n_entities",
    "overlap",
    "novelty",
    "plan_verify",
    "plan_explore",
    "plan_exploit",
    "n_exact_terms",
    "sig_code",
    "sig_error",
    "sig_version",
    "sig_kebab",
    "log_n_docs",
    "n_subqueries",
    "bm25_match_share",
    "bm25_max",
    "bm25_gap12",
    "bm25_top10_mean",
    "cos_max",
    "cos_gap12",
    "cos_top10_mean",
    "cos_top10_std",
    "agree_at_10",
    "agree_at_50",
)
_CODE = {"camel_case", "snake_case", "file", "url_path"}
_ERROR = {"screaming_case", "code_number"}


@dataclass
class LearnedFusion:
    """Iteration 3: predict alpha (and lambda) per query with the model saved in ``model_dir`` (relative:
    under the cache dir) by ``python -m experiments.train_fusion``; the grids, folds, regressor
    families and seed are its training settings. Values: the method YAML. The pipeline's ``weigh`` step
    (``lethe.stages.state``): off, it leaves planning's alpha and diversification's lambda."""

    phase: ClassVar[str] = "weigh"

    enabled: bool
    model_dir: str | None
    predict_lambda: bool
    alpha_grid: Sequence[float]
    lambda_grid: Sequence[float]
    folds: int
    families: Sequence[str]
    seed: int

    def __post_init__(self) -> None:
        if self.enabled and not self.model_dir:
            raise ValueError("learned_fusion.enabled needs learned_fusion.model_dir")
        self.model: FusionModel | None = None  # loaded by bind_dataset (not a field: asdict leaves it out)
        self.cache_dir: Path | None = None

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        if self.model is not None:
            out["fusion_model"] = self.model.card
        return out

    def training_config(self) -> dict[str, Any]:
        """The training settings (they key the saved model together with the pipeline's base config)."""
        settings = {
            "alpha_grid": self.alpha_grid,
            "lambda_grid": self.lambda_grid,
            "folds": self.folds,
            "families": self.families,
            "seed": self.seed,
        }
        return json.loads(json.dumps(settings))

    def bind(self, ctx: StageContext) -> None:
        self.cache_dir = ctx.cache_dir

    def model_folder(self, build_key: str, pool: str = "") -> Path:
        """Where the models of dataset build ``build_key`` lie, trained on the query pool ``pool`` ("" = every
        query; else the runner's key of a scopes/categories/sample selection): ``model_dir`` (a relative one under the
        cache dir) / build key[-pool]; each model in its configuration key's folder."""
        d = Path(str(self.model_dir))
        return (d if d.is_absolute() or self.cache_dir is None else self.cache_dir / d) / (
            f"{build_key}-{pool}" if pool else build_key
        )

    def bind_dataset(self, info: Mapping[str, Any], base: Mapping[str, Any]) -> None:
        """Loads the model trained on this very dataset build and query pool for the pipeline's ``base``."""
        if self.enabled:
            folder = self.model_folder(str(info["build_key"]), str(info.get("pool") or ""))
            self.model = FusionModel.load(folder, base, self.training_config())
            self.model.check_dataset(info)

    def step(self, s: QueryState) -> None:
        """alpha (and lambda, with ``predict_lambda``) for the query, from the fold that never saw it."""
        if self.model is None:
            return
        t0 = time.perf_counter()
        pred = self.model.predict(s, s.query)
        s.alpha = pred["alpha"]
        if self.predict_lambda and pred.get("lam") is not None:
            s.lam = pred["lam"]
        s.flags["fusion_fold"] = pred["fold"]
        s.timings["features"] = (time.perf_counter() - t0) * 1e3


def features(p: QueryState) -> np.ndarray:
    """Feature vector (len(FEATURES),) of a prepared query."""
    c = p.subs[0]
    lex = np.sort(c.bm25[np.isin(c.idx, c.lex_top)])[::-1]
    cos = np.sort(c.cos)[::-1]
    top = lambda a, n: a[:n] if len(a) else np.zeros(1)  # noqa: E731
    lex1 = float(lex[0]) if len(lex) else 0.0
    lex2 = float(lex[1]) if len(lex) > 1 else 0.0
    cos1 = float(cos[0]) if len(cos) else 0.0
    cos2 = float(cos[1]) if len(cos) > 1 else 0.0
    lt, dt = list(c.lex_top), list(c.dense_top)
    agree = lambda n: len(set(lt[:n]) & set(dt[:n])) / n  # noqa: E731
    kinds = p.first_signals.kinds
    return np.array(
        [
            p.inputs.query_terms,
            p.n_analyzed,
            len(p.query_entities),
            p.inputs.overlap,
            p.inputs.novelty,
            p.plan == "verify",
            p.plan == "explore",
            p.plan == "exploit",
            len(p.first_signals.terms),
            bool(kinds & _CODE),
            bool(kinds & _ERROR),
            "version" in kinds,
            "kebab_case" in kinds,
            np.log1p(p.n_docs),
            len(p.subs),
            len(lt) / max(1, p.n_docs),
            lex1,
            (lex1 - lex2) / lex1 if lex1 > 0 else 0.0,
            float(top(lex, 10).mean()) / lex1 if lex1 > 0 else 0.0,
            cos1,
            cos1 - cos2,
            float(top(cos, 10).mean()),
            float(top(cos, 10).std()),
            agree(10),
            agree(50),
        ],
        dtype=np.float64,
    )


def config_key(base: Mapping[str, Any], training: Mapping[str, Any]) -> str:
    """Folder name of the model trained for a pipeline base config (``LethePipeline.base_config``)
    with given training settings (``LethePipeline.training_config``)."""
    return content_hash(
        {"base": base, "training": training, "features": FEATURES, "feature_version": FEATURE_VERSION}, 16
    )


@dataclass
class Fold:
    """One trained model and the queries it must never score."""

    model: Any  # fitted regressor: X (n, len(FEATURES)) -> (n, 2) [alpha, lambda]
    train_ids: frozenset[str]
    dev_ids: frozenset[str]
    heldout_ids: frozenset[str] | None  # k-fold: the queries this fold is for; None: any unseen query
    scopes: frozenset[str] = frozenset()  # scopes of train+dev when folds are grouped by scope

    def may_score(self, query_id: str, scope_id: str | None) -> bool:
        return may_score(query_id, scope_id, self.train_ids, self.dev_ids, self.heldout_ids, self.scopes)


def snap(x: np.ndarray, grid: Sequence[float]) -> np.ndarray:
    """Each value replaced by the nearest grid value (ties: the lower one)."""
    g = np.asarray(sorted(grid), dtype=np.float64)
    return g[np.abs(np.asarray(x, dtype=np.float64)[..., None] - g).argmin(-1)]


class FusionModel:
    """Folds plus the card; ``predict`` picks the fold allowed to score a query."""

    def __init__(self, folds: list[Fold], card: dict[str, Any]):
        self.folds, self.card = folds, card

    def save(self, folder: str | Path) -> Path:
        """``model.pkl`` (the fitted folds) and ``card.json``, which records the pickle's sha256: :meth:`load` unpickles
        nothing whose bytes differ from what was written here."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        blob = pickle.dumps(self.folds, protocol=4)
        self.card = {**self.card, MODEL_SHA256: sha256_bytes(blob)}
        atomic_write_bytes(folder / "model.pkl", blob)
        atomic_write_text(folder / "card.json", json.dumps(self.card, indent=2, sort_keys=True, default=str))
        return folder

    @staticmethod
    def is_whole(folder: str | Path) -> bool:
        """Whether ``folder`` holds a model this project saved: a card recording ``model.pkl``'s sha256, and those
        bytes (a model written before checksums, or whose pickle was replaced, is made again by its prerequisite)."""
        folder = Path(folder)
        try:
            card = json.loads((folder / "card.json").read_text())
            return isinstance(card, dict) and card.get(MODEL_SHA256) == sha256_bytes(
                (folder / "model.pkl").read_bytes()
            )
        except (OSError, ValueError):
            return False

    @classmethod
    def load(cls, model_dir: str | Path, expected_base: Mapping[str, Any], training: Mapping[str, Any]) -> FusionModel:
        """The model under ``model_dir/<config_key(...)>``; a clear error when absent or stale."""
        folder = Path(model_dir) / config_key(expected_base, training)
        if not (folder / "card.json").is_file() or not (folder / "model.pkl").is_file():
            raise FileNotFoundError(
                f"no learned-fusion model for this pipeline configuration at {folder}. Train it first: "
                "python -m experiments.train_fusion dataset=<dataset> method=<this lethe_iter3 config> "
                "(or make fusion-models)"
            )
        card = json.loads((folder / "card.json").read_text())
        if card.get("feature_version") != FEATURE_VERSION or card.get("base") != json.loads(json.dumps(expected_base)):
            raise ValueError(f"learned-fusion model at {folder} was trained for another configuration; retrain it")
        blob = (folder / "model.pkl").read_bytes()
        recorded, found = card.get(MODEL_SHA256), sha256_bytes(blob)
        if recorded != found:  # never unpickle bytes this project did not write with that card
            raise ValueError(
                f"learned-fusion model {folder / 'model.pkl'}: its sha256 {found[:16]} is not the one its card records "
                f"({str(recorded)[:16] if recorded else 'none: written before checksums'}); it is not loaded. Train it "
                "again: python -m experiments.train_fusion ... force=true (or delete the folder)"
            )
        folds = pickle.loads(blob)  # noqa: S301 - our own artifact, its checksum verified above
        return cls(folds, card)

    def check_dataset(self, info: Mapping[str, Any]) -> None:
        d = self.card.get("dataset", {})
        if d.get("name") != info.get("name") or d.get("build_key") != info.get("build_key"):
            raise ValueError(
                f"learned-fusion model was trained on dataset {d.get('name')} build {d.get('build_key')}, "
                f"not {info.get('name')} build {info.get('build_key')}; retrain it"
            )

    def fold_for(self, query_id: str | None, scope_id: str | None) -> int:
        allowed = [query_id is not None and f.may_score(query_id, scope_id) for f in self.folds]
        return pick_fold(allowed, query_id, scope_id, "learned fusion")

    def predict(self, p: QueryState, query: Query) -> dict[str, Any]:
        """{'alpha', 'lam', 'fold'} for one query, snapped to the training grid."""
        i = self.fold_for(query.query_id, query.scope_id)
        y = np.asarray(self.folds[i].model.predict(features(p)[None, :]), dtype=np.float64).reshape(-1)
        return {
            "alpha": float(snap(y[0], self.card["grid"]["alpha"])),
            "lam": float(snap(y[1], self.card["grid"]["lambda"])) if len(y) > 1 else None,
            "fold": i,
        }
