"""The processed-dataset data model (DESIGN.md, "Data model") and its validation.

A processed dataset is a folder holding ``corpus.parquet``, ``queries.parquet``, ``qrels.trec``,
optionally ``contradictions.parquet``, and ``card.json`` / ``card.md``. :class:`Dataset` is the
in-memory form; :func:`validate` rejects bad input with a message that says what and where.

``card.json`` records the sha256 of every data file (``outputs_sha256``); :func:`read_dataset`
checks the files against it, so a file edited after the folder was written is an error, never a
silently reused dataset, and gives the content hash of the checked files
(:attr:`Dataset.content_sha256`, :func:`dataset_content_sha256`) for run identities.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lethe.core.atomic import atomic_dir, atomic_write_text
from lethe.core.faults import kill_point
from lethe.core.hashing import content_hash, sha256_file, sha256_file_cached
from lethebench.card import render_card_md
from lethebench.trec import Qrels, read_qrels, write_qrels

log = logging.getLogger(__name__)

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
    column (folders written before it existed, hand-built tables) get one, null for every query.
    ``content_sha256`` is the content hash of the folder's data files (:func:`content_sha256`), set
    by :func:`read_dataset` and :func:`write_dataset`; None for a dataset that was never on disk.
    """

    name: str
    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: Qrels
    contradictions: pd.DataFrame | None = None
    card: dict[str, Any] = field(default_factory=dict)
    content_sha256: str | None = None

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
    doc_scope = dict(zip(ds.corpus["doc_id"], ds.corpus["scope_id"], strict=True))
    q_scope = dict(zip(ds.queries["query_id"], ds.queries["scope_id"], strict=True))
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
                raise DatasetError(
                    f"{ds.name}/qrels.trec: query '{qid}' doc '{did}': grade must be an int >= 1, got {grade!r}"
                )
    if ds.contradictions is not None:
        where = f"{ds.name}/contradictions"
        _check_columns(ds.contradictions, CONTRADICTION_COLUMNS, where)
        for i, row in enumerate(ds.contradictions.itertuples(index=False)):
            if row.query_id not in q_scope:
                raise DatasetError(f"{where}: row {i}: unknown query '{row.query_id}'")
            for did in (row.stale_doc_id, row.current_doc_id):
                if did not in doc_scope:
                    raise DatasetError(f"{where}: row {i}: unknown doc '{did}'")


DATA_SUFFIXES = (".parquet", ".trec")  # the data files of a folder; card.json records their sha256


def _data_files(folder: Path) -> list[str]:
    return sorted(f.name for f in folder.iterdir() if f.is_file() and f.suffix in DATA_SUFFIXES)


def content_sha256(files_sha256: Mapping[str, str]) -> str:
    """The content hash of a dataset: sha256 of its data files' names and sha256 (sorted JSON)."""
    return content_hash(dict(files_sha256))


def _read_card(folder: Path) -> dict[str, Any]:
    path = folder / "card.json"
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(card, dict):
        raise DatasetError(f"{path}: expected a JSON object, got {type(card).__name__}")
    return card


def _fix_hint(folder: Path, card: Mapping[str, Any]) -> str:
    if isinstance(card.get("build"), dict):
        return (
            "rebuild it (python -m experiments.build_data dataset=<name> force=true), or delete the folder so "
            "the next run builds it again"
        )
    return (
        f"if the change is intended, record the new hashes with lethebench.schema.update_card_hashes('{folder}') "
        f"(it validates the folder first)"
    )


def verify_files(folder: str | Path, card: Mapping[str, Any] | None = None) -> dict[str, str]:
    """sha256 of every data file of ``folder`` (``*.parquet``, ``*.trec``), checked against ``card.json``.

    Raises :class:`DatasetError` naming the file when a file's sha256 differs from the one
    ``outputs_sha256`` records, a recorded file is missing, or a data file is not recorded. A card
    without ``outputs_sha256`` (a folder assembled by hand) cannot be checked: a warning says so and
    the hashes are returned unchecked. Hashes are cached in memory by path, size, mtime and inode.
    """
    folder = Path(folder)
    card = _read_card(folder) if card is None else card
    actual = {f: sha256_file_cached(folder / f) for f in _data_files(folder)}
    expected = card.get("outputs_sha256")
    if expected is None:
        log.warning(
            "%s: card.json has no outputs_sha256, so its files cannot be checked; write the folder with "
            "lethebench.schema.write_dataset or call update_card_hashes on it",
            folder,
        )
        return actual
    if not isinstance(expected, dict) or not all(isinstance(v, str) for v in expected.values()):
        raise DatasetError(
            f"{folder / 'card.json'}: outputs_sha256 must map file names to sha256 hex strings, got {expected!r:.120}"
        )
    for name, sha in sorted(expected.items()):
        if name not in actual:
            raise DatasetError(
                f"{folder / name}: missing, but card.json lists it in outputs_sha256; {_fix_hint(folder, card)}"
            )
        if actual[name] != sha:
            raise DatasetError(
                f"{folder / name}: content changed after the dataset was written (sha256 {actual[name][:16]}..., "
                f"card.json records {sha[:16]}...); a changed file must not be used under the old dataset's "
                f"identity: {_fix_hint(folder, card)}"
            )
    extra = sorted(set(actual) - set(expected))
    if extra:
        raise DatasetError(
            f"{folder / extra[0]}: data file not listed in card.json outputs_sha256 "
            f"(unlisted: {extra}); {_fix_hint(folder, card)}"
        )
    return actual


def dataset_content_sha256(folder: str | Path) -> str:
    """The content hash of a processed folder's data files, after :func:`verify_files` checked them
    against its card (without reading the tables). Equal to ``read_dataset(folder).content_sha256``."""
    return content_sha256(verify_files(folder))


def write_dataset(ds: Dataset, folder: str | Path) -> Path:
    """Validate ``ds`` and write it atomically to ``folder`` (replacing an older copy)."""
    validate(ds)
    folder = Path(folder)
    with atomic_dir(folder) as tmp:
        ds.corpus.to_parquet(tmp / "corpus.parquet", index=False)
        ds.queries.to_parquet(tmp / "queries.parquet", index=False)
        kill_point("build_data")
        write_qrels(ds.qrels, tmp / "qrels.trec")
        if ds.contradictions is not None:
            ds.contradictions.to_parquet(tmp / "contradictions.parquet", index=False)
        files = sorted(f.name for f in tmp.iterdir() if f.suffix in DATA_SUFFIXES)
        ds.card = {**ds.card, "outputs_sha256": {f: sha256_file(tmp / f) for f in files}}
        (tmp / "card.json").write_text(json.dumps(ds.card, indent=2, sort_keys=True) + "\n")
        (tmp / "card.md").write_text(render_card_md(ds.card))
    ds.content_sha256 = content_sha256(ds.card["outputs_sha256"])
    return folder


def _read_parquet(path: Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    try:
        return pd.read_parquet(path, columns=None if columns is None else list(columns))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file; all mean the same
        raise DatasetError(f"{path}: cannot read it as parquet ({type(exc).__name__}: {exc})") from exc


LIST_COLUMNS = ("entities", "history")  # arrays in parquet, Python lists in memory


def _as_lists(df: pd.DataFrame) -> pd.DataFrame:
    for col in LIST_COLUMNS:
        if col in df.columns:
            df[col] = [list(v) for v in df[col]]
    return df


TABLES = ("corpus", "queries", "contradictions")


def read_table(
    folder: str | Path, table: str, columns: Sequence[str] | None = None, optional: bool = False
) -> pd.DataFrame | None:
    """One table (``corpus``, ``queries`` or ``contradictions``) of a processed dataset folder, or of a stored copy
    of one (the reference store keeps only some tables and columns), read as :func:`read_dataset` reads it (list
    columns as lists), ``columns`` only; nothing is validated beyond the file being readable (a run validated the
    whole dataset when it read it). A missing file raises :class:`DatasetError` naming it, or gives None when
    ``optional``."""
    if table not in TABLES:
        raise ValueError(f"table={table!r}: one of {', '.join(TABLES)}")
    path = Path(folder) / f"{table}.parquet"
    if not path.is_file():
        if optional:
            return None
        raise DatasetError(
            f"{path}: missing; build the dataset first (python -m experiments.build_data dataset=<name>)"
        )
    return _as_lists(_read_parquet(path, columns))


def _load(folder: Path, name: str | None, card: dict[str, Any]) -> Dataset:
    try:
        qrels = read_qrels(folder / "qrels.trec")
    except ValueError as exc:  # the message names file and line
        raise DatasetError(str(exc)) from exc
    contra = folder / "contradictions.parquet"
    ds = Dataset(
        name=name or folder.name,
        corpus=_read_parquet(folder / "corpus.parquet"),
        queries=_read_parquet(folder / "queries.parquet"),
        qrels=qrels,
        contradictions=_read_parquet(contra) if contra.is_file() else None,
        card=card,
    )
    for df in (ds.corpus, ds.queries):
        _as_lists(df)
    validate(ds)
    return ds


def _check_required(folder: Path) -> None:
    for f in ("corpus.parquet", "queries.parquet", "qrels.trec", "card.json"):
        if not (folder / f).is_file():
            raise DatasetError(
                f"{folder}: missing {f}; build the dataset first (python -m experiments.build_data dataset=<name>)"
            )


def read_dataset(folder: str | Path, name: str | None = None) -> Dataset:
    """Read and validate a processed dataset folder, after checking its files against ``card.json``
    (:func:`verify_files`); the result carries their content hash (``content_sha256``)."""
    folder = Path(folder)
    _check_required(folder)
    card = _read_card(folder)
    files = verify_files(folder, card)
    ds = _load(folder, name, card)
    ds.content_sha256 = content_sha256(files)
    return ds


def update_card_hashes(folder: str | Path) -> str:
    """Record the current sha256 of a folder's data files in its ``card.json`` (and ``card.md``), after
    validating the data; returns the new content hash.

    For a dataset folder of your own (``dataset=custom``) that you edited on purpose: runs on it get a
    new identity. Never use it on a built folder under ``data.processed`` (its name is the hash of
    what built it): rebuild that instead.
    """
    folder = Path(folder)
    _check_required(folder)
    card = _read_card(folder)
    _load(folder, None, card)
    files = {f: sha256_file(folder / f) for f in _data_files(folder)}
    card = {**card, "outputs_sha256": files}
    atomic_write_text(folder / "card.json", json.dumps(card, indent=2, sort_keys=True) + "\n")
    atomic_write_text(folder / "card.md", render_card_md(card))
    return content_sha256(files)


@dataclass
class SourceDataset:
    """What a loader returns before chunking: one row per source (turn, technote, context).

    ``sources`` has the corpus columns with ``doc_id == source_id`` (unless ``prechunked``); ``qrels`` are on sources
    unless the loader sets ``chunk_qrels`` (a function building chunk-level qrels from the chunked
    corpus, for datasets whose relevance is decided per chunk). ``card`` holds the loader's facts
    (the input format, how relevance was derived, exclusions, inputs with sha256); where the data
    came from (description, upstream, licence, citation) is the dataset config's ``provenance``,
    added by the build. ``dropped`` names what the loader dropped, repaired or ignored in the input
    (a description -> every item, e.g. ``"conv-42:q58 -> D30:5"``); the build logs the count and the
    first examples of each, and the card lists them in full.
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
    # True: ``sources`` are docs already (chunks with their own source_id, e.g. a restored BEIR export); the
    # build keeps them as they are, whatever its chunking settings, and ``qrels`` are on them
    prechunked: bool = False
    # True: every source is one doc whatever its length (e.g. BEIR's whole documents, dataset.params.chunk=false);
    # the build does not chunk them, and ``qrels`` on sources are qrels on docs
    keep_whole: bool = False
    dropped: dict[str, list[str]] = field(default_factory=dict)
