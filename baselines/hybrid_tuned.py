"""The hybrid baseline with its fusion parameter tuned on the evaluated dataset's labels, cross-fitted: ``alpha`` of
the convex fusion (``hybrid_tuned``) or RRF's ``k`` (``hybrid_rrf_tuned``).

The value is chosen per fold by ``python -m experiments.tune_hybrid`` (a prerequisite of the run) on the same folds and
queries as iteration 3's learned fusion (:func:`lethebench.folds.cross_fit_plan` over
:func:`experiments.cross_fit.labelled_queries`): the grid value with the best mean nDCG@10 over the fold's train and
dev queries (ties: the value nearest the untuned hybrid's). At search time a query is ranked with the value of the
fold that never saw it (:mod:`lethe.core.heldout`; else ``LeakageError``). The choice is saved as JSON
(``tuning.json``), never as a pickle.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from baselines.hybrid import HybridSearch
from lethe.core.atomic import atomic_write_text
from lethe.core.hashing import content_hash
from lethe.core.heldout import may_score, pick_fold
from lethe.core.model_types import ModelNotFoundError
from lethe.core.protocol import Query, SearchResult

TUNING_FILE = "tuning.json"
PARAMETER_OF_FUSION = {"convex": "alpha", "rrf": "rrf_k"}


@dataclass(frozen=True)
class Tuning:
    """What is tuned and how: ``parameter`` (alpha for convex fusion, rrf_k for RRF) over ``grid``, in ``folds`` folds
    with ``seed`` where the dataset has no train/dev splits (iteration 3's values), saved under ``dir`` (relative:
    under the cache dir)."""

    parameter: str
    grid: Sequence[float]
    folds: int
    seed: int
    dir: str

    def settings(self) -> dict[str, Any]:
        """The settings that key a saved tuning (everything but where it is saved)."""
        return {
            "parameter": self.parameter,
            "grid": [float(g) for g in self.grid],
            "folds": int(self.folds),
            "seed": int(self.seed),
            "metric": "ndcg@10",
        }


@dataclass(frozen=True)
class TunedFold:
    """One fold's chosen value and the queries (and, for folds over scopes, scopes) it must never rank."""

    value: float
    train_ids: frozenset[str]
    dev_ids: frozenset[str]
    heldout_ids: frozenset[str] | None
    scopes: frozenset[str]

    def may_score(self, query_id: str, scope_id: str | None) -> bool:
        return may_score(query_id, scope_id, self.train_ids, self.dev_ids, self.heldout_ids, self.scopes)


class TunedHybrid(HybridSearch):
    """:class:`HybridSearch` whose ``alpha`` (convex) or ``rrf_k`` (RRF) comes per query from the tuning fold that
    never saw the query."""

    def __init__(
        self,
        embedder: Mapping[str, Any] | Any,
        tuning: Mapping[str, Any],
        alpha: float = 0.5,
        fusion: str = "convex",
        depth: int = 100,
        rrf_k: int = 60,
        k1: float = 1.2,
        b: float = 0.75,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ):
        """``tuning``: :class:`Tuning`'s fields; ``alpha``/``rrf_k``: the untuned values (tie-break); the rest as
        :class:`HybridSearch`."""
        super().__init__(embedder, alpha, fusion, depth, rrf_k, k1, b, cache_dir, progress)
        self.tuning = Tuning(**dict(tuning))
        expected = PARAMETER_OF_FUSION[self.fusion]
        if self.tuning.parameter != expected:
            raise ValueError(
                f"tuning.parameter={self.tuning.parameter!r} does not fit fusion={self.fusion!r}; tune {expected!r}"
            )
        if not self.tuning.grid:
            raise ValueError("tuning.grid is empty")
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.folds: list[TunedFold] = []
        self.card: dict[str, Any] | None = None

    def default_value(self) -> float:
        """The untuned hybrid's value of the tuned parameter (ties in the tuning go to the value nearest it)."""
        return float(self.alpha if self.tuning.parameter == "alpha" else self.rrf_k)

    def base_config(self) -> dict[str, Any]:
        """Everything that shapes the candidates, the fused scores and the tuning's tie-break (the untuned value)."""
        base = {
            "fusion": self.fusion,
            "depth": self.depth,
            "k1": self.k1,
            "b": self.b,
            "alpha": self.alpha,
            "rrf_k": self.rrf_k,
        }
        model = self.dense.embedder.model
        return {**base, "embedder": {"name": model.name, "sha256": model.sha256}}

    def tuning_dir(self, build_key: str, pool: str = "") -> Path:
        """``tuning.dir`` (a relative one under the cache dir) / build key[-pool] / the configuration key."""
        d = Path(self.tuning.dir)
        d = d if d.is_absolute() or self.cache_dir is None else self.cache_dir / d
        key = content_hash({"base": self.base_config(), "tuning": self.tuning.settings()}, 16)
        return d / (f"{build_key}-{pool}" if pool else build_key) / key

    def save(self, folder: Path, card: Mapping[str, Any]) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / TUNING_FILE, json.dumps(card, indent=1, sort_keys=True))
        return folder / TUNING_FILE

    def bind_dataset(self, info: Mapping[str, Any]) -> None:
        """Load the tuning made on this very dataset build and query pool (``info``: name, build_key, pool)."""
        folder = self.tuning_dir(str(info["build_key"]), str(info.get("pool") or ""))
        path = folder / TUNING_FILE
        if not path.is_file():
            raise ModelNotFoundError(
                f"no tuning of {self.tuning.parameter} at {path}. Make it first: python -m experiments.tune_hybrid "
                f"dataset={info['name']} method=<this method> (make reproduce makes it as a prerequisite)"
            )
        card = json.loads(path.read_text())
        d = card.get("dataset") or {}
        if d.get("name") != info.get("name") or d.get("build_key") != info.get("build_key"):
            raise ValueError(
                f"{path} was tuned on dataset {d.get('name')} build {d.get('build_key')}, not "
                f"{info.get('name')} build {info.get('build_key')}; tune again"
            )
        if card.get("base") != self.base_config() or card.get("tuning") != self.tuning.settings():
            raise ValueError(f"{path} was tuned for another configuration; tune again")
        self.folds = [
            TunedFold(
                float(f["value"]),
                frozenset(f["train_ids"]),
                frozenset(f["dev_ids"]),
                None if f["heldout_ids"] is None else frozenset(f["heldout_ids"]),
                frozenset(f["scopes"]),
            )
            for f in card["folds"]
        ]
        self.card = card

    def value_for(self, query: Query) -> tuple[float, int]:
        """(the tuned value, its fold) for ``query``; LeakageError when every fold saw it."""
        if not self.folds:
            raise RuntimeError("the tuned hybrid has no tuning: the runner binds the dataset first (bind_dataset)")
        allowed = [query.query_id is not None and f.may_score(query.query_id, query.scope_id) for f in self.folds]
        i = pick_fold(allowed, query.query_id, query.scope_id, f"{self.tuning.parameter} tuning")
        return self.folds[i].value, i

    def search(self, query: Query, k: int) -> SearchResult:
        value, fold = self.value_for(query)
        c = self.candidates(query)
        t2 = time.perf_counter()
        out = self.fuse(c, k, **{self.tuning.parameter: value})
        return self._result(c, out, t2, tuned_value=value, tuning_fold=fold)

    def describe(self) -> dict[str, Any]:
        out = {**super().describe(), "name": "hybrid_tuned", "tuning": asdict(self.tuning)}
        if self.card is not None:  # the choice per fold, without the query id lists
            out["tuning_card"] = {
                **{k: v for k, v in self.card.items() if k != "folds"},
                "folds": [
                    {k: v for k, v in f.items() if not k.endswith("_ids") and k != "scopes"} for f in self.card["folds"]
                ],
            }
        return out
