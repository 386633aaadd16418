"""Export a processed dataset to BEIR's format, so other tools (BEIR, Pyserini, MTEB, ...) can run on it.

The folder written (:func:`export_beir`):

* ``corpus.jsonl``: ``{"_id": doc_id, "title": "", "text": text}`` per doc (docs are the dataset's
  retrieval units, i.e. chunks), in corpus order. The title stays empty so the text round-trips as is.
* ``queries.jsonl``: ``{"_id": query_id, "text": text}`` per query, every query (also those without qrels).
* ``qrels/<split>.tsv``: header ``query-id  corpus-id  score``, then one row per relevant (query, doc)
  with its grade, for each split of the queries with qrels; queries without a split go to
  ``qrels/test.tsv`` (:data:`NULL_SPLIT`).
* ``lethe_sidecar.jsonl``: what BEIR has no place for. Line 1 is a header (format, version, the dataset's
  name, build key and content hash, its card's description/provenance/scope/relevance, the column
  order of each table, the sha256 of every BEIR file above); then ``{"doc": {...}}`` per doc (every corpus
  column but ``text``), ``{"query": {...}}`` per query (every query column but ``text``) and
  ``{"contradiction": {...}}`` per labelled pair. :func:`lethebench.loaders.beir.load_beir` reads it
  back, so the round trip gives the same dataset.

A BEIR tool that ignores the sidecar sees every doc of the dataset as one collection: for a
conversation dataset (LoCoMo, LetheBench) that lets a query retrieve turns of other conversations and
turns after it, which this project's runner never allows. Its numbers are then not comparable with
this project's runs; the sidecar's scope and position columns say how to restrict them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from lethe.core.atomic import atomic_dir
from lethe.core.hashing import sha256_file
from lethebench.loaders.beir import (
    CORPUS_FILE,
    QRELS_DIR,
    QRELS_HEADER,
    QUERIES_FILE,
    SIDECAR,
    SIDECAR_FORMAT,
    SIDECAR_VERSION,
)
from lethebench.schema import Dataset, DatasetError, read_dataset, validate

NULL_SPLIT = "test"  # the qrels file of queries without a split
CARD_KEYS = ("name", "description", "provenance", "license", "format", "scope", "relevance")  # copied into the sidecar


def _plain(v: Any) -> Any:
    """A table cell as JSON: numpy scalars and arrays to Python, missing values (None, NaN, pd.NA) to null."""
    if isinstance(v, str | bool | int) or v is None:
        return v
    if hasattr(v, "tolist") and not isinstance(v, float):  # numpy scalar or array
        return _plain(v.tolist())
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if v is pd.NA:
        return None
    return v


def _jsonl(rows: list[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _records(df: pd.DataFrame, drop: str) -> list[dict[str, Any]]:
    cols = [c for c in df.columns if c != drop]
    return [
        {c: _plain(v) for c, v in zip(cols, row, strict=True)} for row in df[cols].itertuples(index=False, name=None)
    ]


def _check_target(out: Path) -> None:
    """Refuse to replace a folder that is not an earlier export (``atomic_dir`` swaps the whole folder)."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / SIDECAR).is_file())):
        raise FileExistsError(
            f"{out}: exists and is not an earlier BEIR export of this project (no {SIDECAR}); "
            f"choose an empty or new out_dir"
        )


def export_beir(dataset: Dataset | str | Path, out_dir: str | Path) -> Path:
    """Write ``dataset`` (a :class:`Dataset` or a processed folder, read and checked with ``read_dataset``)
    as a BEIR folder plus the sidecar (module docstring) to ``out_dir``; returns ``out_dir``.

    The folder is written under a temporary name and renamed into place (an earlier export there is
    replaced whole). Raises ``FileExistsError`` if ``out_dir`` holds something else.
    """
    ds = dataset if isinstance(dataset, Dataset) else read_dataset(dataset)
    validate(ds)
    out = Path(out_dir)
    _check_target(out)
    queries = ds.queries
    split_of = {
        qid: (s if isinstance(s, str) else NULL_SPLIT)
        for qid, s in zip(queries["query_id"], queries["split"], strict=True)
    }
    by_split: dict[str, list[str]] = {}
    for qid in queries["query_id"]:
        if ds.qrels.get(qid):
            by_split.setdefault(split_of[qid], []).append(qid)
    if any(os_sep in s for s in by_split for os_sep in ("/", "\\")) or "" in by_split:
        raise DatasetError(f"{ds.name}: a split name cannot be a file name: {sorted(by_split)}")

    with atomic_dir(out) as tmp:
        docs = [{"_id": d, "title": "", "text": t} for d, t in zip(ds.corpus["doc_id"], ds.corpus["text"], strict=True)]
        (tmp / CORPUS_FILE).write_text(_jsonl(docs), encoding="utf-8")
        qs = [{"_id": q, "text": t} for q, t in zip(queries["query_id"], queries["text"], strict=True)]
        (tmp / QUERIES_FILE).write_text(_jsonl(qs), encoding="utf-8")
        (tmp / QRELS_DIR).mkdir()
        names = [CORPUS_FILE, QUERIES_FILE]
        for split, qids in sorted(by_split.items()):
            lines = ["\t".join(QRELS_HEADER)] + [
                f"{qid}\t{did}\t{int(ds.qrels[qid][did])}" for qid in qids for did in sorted(ds.qrels[qid])
            ]
            name = f"{QRELS_DIR}/{split}.tsv"
            (tmp / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
            names.append(name)
        header = {
            "format": SIDECAR_FORMAT,
            "version": SIDECAR_VERSION,
            "dataset": ds.card.get("name") or ds.name,
            "build_key": (ds.card.get("build") or {}).get("key"),
            "content_sha256": ds.content_sha256,
            "exported_by": "lethebench.export_beir",
            "null_split": NULL_SPLIT,
            "card": {k: ds.card[k] for k in CARD_KEYS if k in ds.card},
            "corpus_columns": list(ds.corpus.columns),
            "query_columns": list(queries.columns),
            "contradiction_columns": None if ds.contradictions is None else list(ds.contradictions.columns),
            "files_sha256": {n: sha256_file(tmp / n) for n in names},
        }
        rows: list[Mapping[str, Any]] = [header]
        rows += [{"doc": r} for r in _records(ds.corpus, "text")]
        rows += [{"query": r} for r in _records(queries, "text")]
        if ds.contradictions is not None:
            rows += [{"contradiction": r} for r in _records(ds.contradictions, "")]
        (tmp / SIDECAR).write_text(_jsonl(rows), encoding="utf-8")
    return out


def beir_files(out_dir: str | Path) -> list[str]:
    """The files of an export in the order ``conf/dataset/beir.yaml`` lists them (for ``dataset.files``):
    corpus, queries, every qrels file, the sidecar."""
    out = Path(out_dir)
    return [
        str(out / CORPUS_FILE),
        str(out / QUERIES_FILE),
        *(str(p) for p in sorted((out / QRELS_DIR).glob("*.tsv"))),
        str(out / SIDECAR),
    ]
