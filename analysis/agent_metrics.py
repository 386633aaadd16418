"""Agent-context metrics (seed 002, "LetheBench-Agents") from LetheBench's own generator labels.

Every label comes from the generator, never from the text: a doc's ``kind`` (``tool`` = a tool output turn), its
``entities`` (the service a turn is about first, then identifiers), the qrels (which turns answer a query) and the
query ``category``. Methods never see the labelled entities, the qrels or the category. ``kind`` is different: it
is method-visible metadata, a turn's message type as a real agent log records it, and the metadata boost of the
Lethe iterations reads it (``lethe/stages/boost.py``). The two metrics marked [kind] below are defined on it. Per
query (a pandas Series indexed by query_id):

- **tool-result recall@k** [kind] (seed Table 1): over queries with at least one relevant (grade >= 1) tool-output doc,
  the share of those docs in the top k.
- **action-pair recall@k** (our operational "action consistency", seed Table 1): over ``temporal`` queries, whose
  qrels are two steps of one labelled action sequence (the step asked about, grade 2, and its anchor, grade 1),
  the share of the two in the top k. The seed gives no definition; this one is stated, not the seed's.
- **tool diversity@k** [kind] (seed Table 3): over queries whose eligible history holds tool outputs, the number of
  distinct tool sources among the tool-output docs of the top k, divided by min(k, the number of distinct tool
  sources among the eligible tool-output docs); a tool output's source is its first labelled entity (the service
  the command ran against).
- **agent entity coverage@10** (seed Table 3) is Coverage@10 (``analysis.labels.coverage_at_n``).

Planning coherence (Table 1) and planning-pattern coverage (Table 3) have no definition in the seed that these
labels support; the report says so instead of inventing one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

Run = Mapping[str, Sequence[tuple[str, float]]]
Qrels = Mapping[str, Mapping[str, int]]


def tool_result_recall(run: Run, qrels: Qrels, corpus: pd.DataFrame, k: int = 10) -> pd.Series:
    """Per query with relevant tool-output docs: the share of them in its top ``k``."""
    tools = set(corpus.loc[corpus["kind"] == "tool", "doc_id"])
    out = {}
    for qid, rel in qrels.items():
        want = {d for d, g in rel.items() if g >= 1 and d in tools}
        if want:
            top = {d for d, _ in run.get(qid, [])[:k]}
            out[qid] = len(want & top) / len(want)
    return pd.Series(out, name=f"tool_result_recall@{k}", dtype=float)


def action_pair_recall(run: Run, qrels: Qrels, queries: pd.DataFrame, k: int = 10) -> pd.Series:
    """Per ``temporal`` query: the share of its two labelled action steps in its top ``k``."""
    out = {}
    for qid in queries.loc[queries["category"] == "temporal", "query_id"]:
        want = {d for d, g in (qrels.get(qid) or {}).items() if g >= 1}
        if want:
            top = {d for d, _ in run.get(qid, [])[:k]}
            out[qid] = len(want & top) / len(want)
    return pd.Series(out, name=f"action_pair_recall@{k}", dtype=float)


def _source(entities) -> str | None:
    ents = list(entities) if entities is not None else []
    return str(ents[0]) if ents else None


def tool_diversity(run: Run, queries: pd.DataFrame, corpus: pd.DataFrame, k: int = 20) -> pd.Series:
    """Per query whose eligible history (its scope's docs before its position) holds tool outputs: distinct tool
    sources in the top ``k`` over min(k, distinct tool sources eligible)."""
    tools = corpus[corpus["kind"] == "tool"]
    source = dict(zip(tools["doc_id"], tools["entities"].map(_source), strict=True))
    by_scope = {s: g for s, g in tools.groupby("scope_id")}
    out = {}
    for qid, scope, pos in zip(queries["query_id"], queries["scope_id"], queries["position"], strict=True):
        g = by_scope.get(scope)
        if g is None:
            continue
        eligible = {s for s in g.loc[g["position"] < pos, "entities"].map(_source) if s is not None}
        if not eligible:
            continue
        got = {source[d] for d, _ in run.get(qid, [])[:k] if source.get(d) is not None}
        out[qid] = len(got) / min(k, len(eligible))
    return pd.Series(out, name=f"tool_diversity@{k}", dtype=float)


def peak_memory_mb(manifest: Mapping) -> float | None:
    """The peak resident memory a run added above what its process held when it started (MiB; manifest
    ``memory_mb.run_added``, measured per run since the runner resets the peak counter). None for runs made before
    that measurement existed: the process-wide ``peak_rss_mb`` cannot tell one run's peak from an earlier run's."""
    return (manifest.get("memory_mb") or {}).get("run_added")
