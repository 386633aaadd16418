"""The processed-dataset data model (DESIGN.md, "Data model") and its validation.

A processed dataset is a folder holding ``corpus.parquet``, ``queries.parquet``, ``qrels.trec``,
optionally ``contradictions.parquet``, and ``card.json`` / ``card.md``. :class:`Dataset` is the
in-memory form; :func:`validate` rejects bad input with a message that says what and where.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from lethe.core.atomic import atomic_dir
from lethebench.card import render_card_md
from lethe.core.hashing import sha256_file
from lethebench.trec import Qrels, read_qrels, write_qrels

# column -> pandas dtype family: "str", "int", "str?" (nullable str), "list" (list of str), "json"
CORPUS_COLUMNS: dict[str, str] = {
    "doc_id": "str",
    "scope_id": "str",
    "position": "int",
    "text": "str",
    "kind": "str",
    "speaker": "str?",
    "timestamp": "str?",
    "source_id": "str",
    "entities": "list",
    "meta": "json",
}
QUERY_COLUMNS: dict[str, str] = {
    "query_id": "str",
    "scope_id": "str",
    "position": "int",
    "text": "str",
    "history": "list",
    "domain": "str?",
    "category": "str?",
    "complexity": "str?",
    "plan_label": "str?",
    "answer": "str?",
    "split": "str?",  # train / dev / test for datasets with splits (LetheBench), else null
    "meta": "json",
}
CONTRADICTION_COLUMNS: dict[str, str] = {
    "query_id": "str",
    "stale_doc_id": "str",
    "current_doc_id": "str",
}


class DatasetError(ValueError):
    """A dataset (raw or processed) is malformed; the message names file, row and key."""


@dataclass
class Dataset:
    """A processed dataset in memory.

    ``corpus`` and ``queries`` follow :data:`CORPUS_COLUMNS` / :data:`QUERY_COLUMNS`; ``meta`` cells
    are JSON strings. ``qrels`` maps query_id -> {doc_id: grade >= 1}. Queries without a ``split``
    column (folders written before it existed, hand-built tables) get one: the ``split`` their
    ``meta`` names, else null.
    """

    name: str
    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: Qrels
    contradictions: pd.DataFrame | None = None
    card: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "split" not in self.queries.columns:  # a dataset without splits may omit the column
            self.queries = self.queries.assign(split=None)

    def scope_ids(self) -> list[str]:
        """Scope ids in first-appearance order of the corpus."""
        return list(dict.fromkeys(self.corpus["scope_id"]))


def _check_columns(df: pd.DataFrame, spec: dict[str, str], where: str) -> None:
    missing = [c for c in spec if c not in df.columns]
    if missing:
        raise DatasetError(f"{where}: missing column(s) {missing}; expected {list(spec)}")
    for col, kind in spec.items():
        s = df[col]
        if kind == "int":
            if not pd.api.types.is_integer_dtype(s):
                raise DatasetError(f"{where}: column '{col}' must hold integers, found dtype {s.dtype}")
            continue
        for i, v in enumerate(s):
            ok: bool
            if kind == "str":
                ok = isinstance(v, str)
            elif kind == "str?":
                ok = v is None or isinstance(v, str) or (isinstance(v, float) and pd.isna(v))
            elif kind == "list":
                ok = hasattr(v, "__len__") and not isinstance(v, str | bytes) and all(isinstance(x, str) for x in v)
            else:  # json
                ok = isinstance(v, str)
                if ok:
                    try:
                        json.loads(v)
                    except json.JSONDecodeError:
                        ok = False
            if not ok:
                raise DatasetError(f"{where}: row {i}, column '{col}': expected {kind}, got {v!r:.80}")


def _check_unique(df: pd.DataFrame, col: str, where: str) -> None:
    dup = df[col][df[col].duplicated()]
    if len(dup):
        raise DatasetError(f"{where}: duplicate {col} {sorted(set(dup))[:5]} ({len(dup)} duplicates)")


def _check_nonempty_text(df: pd.DataFrame, id_col: str, where: str) -> None:
    empty = df[id_col][df["text"].str.strip().str.len() == 0]
    if len(empty):
        raise DatasetError(f"{where}: empty text for {id_col} {list(empty)[:5]} ({len(empty)} rows)")


def validate(ds: Dataset) -> None:
    """Raise :class:`DatasetError` if ``ds`` breaks the data model.

    Checks: required columns and types, unique ids, non-empty text, qrels naming only known
    queries and docs, qrel docs in the query's scope, positive integer grades, and
    contradiction pairs naming known queries/docs.
    """
    _check_columns(ds.corpus, CORPUS_COLUMNS, f"{ds.name}/corpus")
    _check_columns(ds.queries, QUERY_COLUMNS, f"{ds.name}/queries")
    _check_unique(ds.corpus, "doc_id", f"{ds.name}/corpus")
    _check_unique(ds.queries, "query_id", f"{ds.name}/queries")
    _check_nonempty_text(ds.corpus, "doc_id", f"{ds.name}/corpus")
    _check_nonempty_text(ds.queries, "query_id", f"{ds.name}/queries")
    doc_scope = dict(zip(ds.corpus["doc_id"], ds.corpus["scope_id"]))
    q_scope = dict(zip(ds.queries["query_id"], ds.queries["scope_id"]))
    unknown_scopes = set(q_scope.values()) - set(doc_scope.values())
    if unknown_scopes:
        raise DatasetError(f"{ds.name}/queries: scope_id(s) with no corpus docs: {sorted(unknown_scopes)[:5]}")
    for qid, docs in ds.qrels.items():
        if qid not in q_scope:
            raise DatasetError(f"{ds.name}/qrels.trec: query '{qid}' is not in queries.parquet")
        for did, grade in docs.items():
            if did not in doc_scope:
                raise DatasetError(f"{ds.name}/qrels.trec: query '{qid}' names unknown doc '{did}'")
            if doc_scope[did] != q_scope[qid]:
                raise DatasetError(
                    f"{ds.name}/qrels.trec: query '{qid}' (scope {q_scope[qid]}) names doc '{did}' "
                    f"of another scope ({doc_scope[did]})"
                )
            if not isinstance(grade, int) or grade < 1:
                raise DatasetError(f"{ds.name}/qrels.trec: query '{qid}' doc '{did}': grade must be an int >= 1, got {grade!r}")
    if ds.contradictions is not None:
        where = f"{ds.name}/contradictions"
        _check_columns(ds.contradictions, CONTRADICTION_COLUMNS, where)
        for i, row in enumerate(ds.contradictions.itertuples(index=False)):
            if row.query_id not in q_scope:
                raise DatasetError(f"{where}: row {i}: unknown query '{row.query_id}'")
            for did in (row.stale_doc_id, row.current_doc_id):
                if did not in doc_scope:
                    raise DatasetError(f"{where}: row {i}: unknown doc '{did}'")


def write_dataset(ds: Dataset, folder: str | Path) -> Path:
    """Validate ``ds`` and write it atomically to ``folder`` (replacing an older copy)."""
    validate(ds)
    folder = Path(folder)
    with atomic_dir(folder) as tmp:
        ds.corpus.to_parquet(tmp / "corpus.parquet", index=False)
        ds.queries.to_parquet(tmp / "queries.parquet", index=False)
        write_qrels(ds.qrels, tmp / "qrels.trec")
        if ds.contradictions is not None:
            ds.contradictions.to_parquet(tmp / "contradictions.parquet", index=False)
        files = sorted(f.name for f in tmp.iterdir() if f.suffix in (".parquet", ".trec"))
        ds.card = {**ds.card, "outputs_sha256": {f: sha256_file(tmp / f) for f in files}}
        (tmp / "card.json").write_text(json.dumps(ds.card, indent=2, sort_keys=True) + "\n")
        (tmp / "card.md").write_text(render_card_md(ds.card))
    return folder


def read_dataset(folder: str | Path, name: str | None = None) -> Dataset:
    """Read and validate a processed dataset folder."""
    folder = Path(folder)
    for f in ("corpus.parquet", "queries.parquet", "qrels.trec", "card.json"):
        if not (folder / f).is_file():
            raise DatasetError(f"{folder}: missing {f}; build the dataset first (python -m experiments.build_data dataset=<name>)")
    contra = folder / "contradictions.parquet"
    ds = Dataset(
        name=name or folder.name,
        corpus=pd.read_parquet(folder / "corpus.parquet"),
        queries=pd.read_parquet(folder / "queries.parquet"),
        qrels=read_qrels(folder / "qrels.trec"),
        contradictions=pd.read_parquet(contra) if contra.is_file() else None,
        card=json.loads((folder / "card.json").read_text()),
    )
    for df in (ds.corpus, ds.queries):
        for col in ("entities", "history"):
            if col in df.columns:
                df[col] = [list(v) for v in df[col]]
    validate(ds)
    return ds


@dataclass
class SourceDataset:
    """What a loader returns before chunking: one row per source (turn, technote, context).

    ``sources`` has the corpus columns with ``doc_id == source_id``; ``qrels`` are on sources
    unless the loader sets ``chunk_qrels`` (a function building chunk-level qrels from the chunked
    corpus, for datasets whose relevance is decided per chunk). ``card`` holds the loader's facts
    (description, how relevance was derived, exclusions, licence, inputs with sha256).
    """

    name: str
    sources: pd.DataFrame
    queries: pd.DataFrame
    qrels: Qrels
    card: dict[str, Any]
    contradictions: pd.DataFrame | None = None
    # (chunked corpus, source_id -> [doc_id]) -> chunk-level qrels; None: every chunk of a relevant
    # source gets the source's grade (lethebench.chunking.map_qrels)
    chunk_qrels: Callable[[pd.DataFrame, dict[str, list[str]]], Qrels] | None = None
