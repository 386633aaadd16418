"""The label metrics the report adds to every run: one registry that the views, the reference store's labels and the
tables loop over, so a new label metric is one :func:`register` call.

A label metric scores a run's rankings against its dataset's own labels (gold entities, stale/current pairs, gold
answers; :mod:`analysis.labels`), which methods never see. Its parameter is an analysis setting
(``conf/analysis/default.yaml``; null switches it off) and names its per-query column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.labels import answer_recall_at_chars, contradiction_at_k, coverage_at_n

Run = Mapping[str, Sequence[tuple[str, float]]]


@dataclass(frozen=True)
class LabelData:
    """A dataset build's label inputs, read once per build: its corpus (doc_id, text) and stale/current pairs."""

    corpus: pd.DataFrame
    contradictions: pd.DataFrame | None


@dataclass(frozen=True)
class LabelMetric:
    """``setting``: the analysis key holding the parameter; ``column_format``: the per-query column, ``{}`` taking the
    parameter; ``score(run, data, evaluated, param)``: per evaluated query that has the label (a Series indexed by
    query_id; ``evaluated`` is the dataset's query rows the run evaluated)."""

    setting: str
    column_format: str
    score: Callable[[Run, LabelData, pd.DataFrame, int], pd.Series]

    def column(self, param: int) -> str:
        return self.column_format.format(int(param))

    @property
    def prefix(self) -> str:
        """The start every column of this metric has, whatever its parameter (``coverage@``)."""
        return self.column_format.split("{", 1)[0]


LABEL_METRICS: dict[str, LabelMetric] = {}  # setting -> metric, in the order they are added


def register(metric: LabelMetric) -> LabelMetric:
    """Add ``metric`` to :data:`LABEL_METRICS` (a ValueError for a setting already registered)."""
    if metric.setting in LABEL_METRICS:
        raise ValueError(f"a label metric with setting {metric.setting!r} is registered already")
    LABEL_METRICS[metric.setting] = metric
    return metric


def label_params(cfg: Mapping[str, Any]) -> dict[str, int | None]:
    """Each registered metric's parameter in the report settings ``cfg`` (None: off)."""
    return {s: (int(cfg[s]) if cfg.get(s) is not None else None) for s in LABEL_METRICS}


def label_columns(columns: Sequence[str]) -> list[str]:
    """The label-metric columns among ``columns``, sorted."""
    prefixes = tuple(m.prefix for m in LABEL_METRICS.values())
    return sorted(c for c in columns if c.startswith(prefixes))


def add_label_scores(
    pq: pd.DataFrame, run: Run, data: LabelData, evaluated: pd.DataFrame, cfg: Mapping[str, Any]
) -> None:
    """Add every switched-on label metric's column to ``pq`` (indexed by query_id) where the dataset has its labels."""
    for setting, param in label_params(cfg).items():
        if not param:
            continue
        metric = LABEL_METRICS[setting]
        scores = metric.score(run, data, evaluated, param)
        if len(scores):
            pq[metric.column(param)] = scores.reindex(pq.index)


register(LabelMetric("coverage_n", "coverage@{}", lambda run, d, ev, n: coverage_at_n(run, ev, d.corpus, n)))
register(
    LabelMetric(
        "contradiction_k",
        "contradiction@{}",
        lambda run, d, ev, k: contradiction_at_k(run, d.contradictions, list(ev["query_id"]), k),
    )
)
register(
    LabelMetric(
        "answer_recall_chars",
        "answer_recall@{}c",
        lambda run, d, ev, chars: answer_recall_at_chars(run, ev, d.corpus, chars),
    )
)
