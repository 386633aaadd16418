"""A few real (query, passages) cases for the LLM reranking tests: LetheBench (a small generated build)
and LoCoMo (two conversations of ../shared/data), each query with passages it may see (its relevant
turns first, then the eligible turns just before it)."""

from __future__ import annotations

from collections.abc import Callable

from experiments.datasets import prepare_dataset
from lethebench.schema import Dataset, read_dataset

SMALL_LB = [
    "dataset=lethebench",
    "dataset.params.splits={test: 3, train: 6, dev: 3}",
    "dataset.params.session_turns=[20,30]",
]
TWO_CONVS = ["dataset=locomo", "dataset.scopes=[conv-26,conv-30]"]

Case = tuple[str, list[tuple[str, str, float]]]  # (query text, [(doc_id, text, prior score)], best first)


def cases_from(ds: Dataset, n_queries: int, per_query: int) -> list[Case]:
    """The first ``n_queries`` queries (by id) with relevance labels, each with ``per_query`` eligible passages."""
    out: list[Case] = []
    corpus = ds.corpus.set_index("doc_id")
    for q in ds.queries.sort_values("query_id").itertuples():
        rel = [d for d in ds.qrels.get(q.query_id, {}) if d in corpus.index]
        if not rel:
            continue
        scope = ds.corpus[(ds.corpus.scope_id == q.scope_id) & (ds.corpus.position < q.position)]
        before = scope.sort_values("position", ascending=False)["doc_id"].tolist()
        ids = list(dict.fromkeys([*rel, *before]))[:per_query]
        out.append((q.text, [(d, str(corpus.loc[d, "text"]), float(per_query - i)) for i, d in enumerate(ids)]))
        if len(out) == n_queries:
            break
    return out


def real_cases(cfg_for: Callable[..., object], lethebench: int = 2, locomo: int = 1, per_query: int = 3) -> list[Case]:
    """``lethebench`` LetheBench cases then ``locomo`` LoCoMo cases (``cfg_for``: the conftest fixture)."""
    lb = read_dataset(prepare_dataset(cfg_for(*SMALL_LB)), "lethebench")
    lc = read_dataset(prepare_dataset(cfg_for(*TWO_CONVS)), "locomo")
    return cases_from(lb, lethebench, per_query) + cases_from(lc, locomo, per_query)
