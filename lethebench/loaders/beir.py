"""A folder in BEIR's format -> the data model (one scope, every document eligible for every query).

BEIR's layout (Thakur et al., 2021; what ``beir.datasets.data_loader.GenericDataLoader`` reads):

* ``corpus.jsonl``: one JSON object per line, ``{"_id", "title", "text"}`` (``title`` may be missing or
  empty; other keys such as ``metadata`` are kept in the doc's ``meta``);
* ``queries.jsonl``: ``{"_id", "text"}`` per line (other keys kept in the query's ``meta``);
* ``qrels/<split>.tsv``: ``query-id<TAB>corpus-id<TAB>score`` with a header line; ``<split>`` is
  ``test``, ``dev``, ``train`` or any name.

What the loader does, and where it differs from BEIR's own loader:

* **Which qrels.** Every ``qrels/<split>.tsv`` among the input files is read; a query takes the split of
  the file that names it (the ``split`` column; ``dataset.split`` picks one at run time). A query named
  by two split files is an error. As in BEIR, only queries named by a loaded qrels file are kept; the
  others (queries of splits not loaded) are counted in the card.
* **Scope and eligibility.** One scope (``scope``; default the folder's name) holds every document,
  at positions 0..n-1 in file order; every query sits at position n, so every document is eligible.
* **Text.** A document's text is ``title + " " + text`` when it has a title (BEIR's dense models
  encode ``title + " " + text``; Pyserini's "flat" BEIR indexes also join the two), else ``text``; the title is also
  kept in ``meta.title``. A document whose title and text are both empty cannot be a retrieval unit
  here: it is dropped (listed in the card, with any qrels naming it).
* **Retrieval unit.** As in BEIR, one document of ``corpus.jsonl`` is one retrieval unit, its doc id the
  ``_id``, whatever its length (``chunk=False``, the default; a dense model still reads only its first
  ``max_seq_length`` tokens, as in BEIR, and the card says how many documents are longer). ``chunk=True``
  chunks documents longer than ``chunking.size_tokens`` like any other corpus (``<_id>#<i>``), every chunk
  of a relevant document relevant at its grade: metrics then count chunks and are not comparable with
  published BEIR numbers; the build logs the document and chunk counts and the card says so.
* **Where.** ``dataset.beir_dir`` is absolute or relative to the work root (``conf/dataset/beir.yaml`` sets
  ``files_root: .``), not ``data.root``; :func:`check_config` names the key and the folder tried.
* **Relevance.** Graded scores are kept as grades; rows with score <= 0 mean "not relevant" (as
  ``pytrec_eval`` reads them in BEIR's evaluation) and give no qrel. A query whose rows are all <= 0
  has no relevant document: the runner excludes it from retrieval metrics and counts it (BEIR's
  evaluation would average it in as 0); the card counts such queries.
* **Errors** name the file and line: bad JSON, a missing or empty ``_id``, an id with whitespace (TREC
  files cannot hold it), duplicate ids, missing or non-string text, a qrels line without three fields,
  a score that is not an integer, a qrels row naming an unknown query or document (``unknown_ids:
  drop`` drops and lists those rows instead), conflicting duplicate rows.

**The sidecar.** A folder written by :func:`lethebench.export_beir.export_beir` also holds
``lethe_sidecar.jsonl`` (:data:`SIDECAR`): the exported dataset's scopes, positions and every column
BEIR lacks. When it is among the input files, the dataset is restored exactly as exported (docs are
already chunks: restored as they were, whatever the build's chunking; every query, with or without
qrels, with its split). It records the sha256 of the BEIR files it was written with, so an edited
file stops the build instead of being paired with the wrong columns. When the folder holds a sidecar
that is not among the input files, the build stops (``sidecar: ignore`` loads it as plain BEIR), since
an exported conversation dataset loaded as one scope would let queries see later turns.

The loader knows the format, not the data: where the data came from, its licence and citation are
the dataset config's ``provenance`` section (``conf/dataset/beir.yaml``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterator, Mapping

import pandas as pd

from lethe.core.hashing import sha256_file
from lethebench.schema import CONTRADICTION_COLUMNS, CORPUS_COLUMNS, QUERY_COLUMNS, DatasetError, SourceDataset
from lethebench.trec import Qrels

log = logging.getLogger(__name__)

LOADER_VERSION = "1"
CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
QRELS_HEADER = ("query-id", "corpus-id", "score")
SIDECAR = "lethe_sidecar.jsonl"
SIDECAR_FORMAT = "lethe-beir-sidecar"
SIDECAR_VERSION = 1
FORMAT = ("BEIR folder: corpus.jsonl ({_id, title, text} per line), queries.jsonl ({_id, text} per line), "
          "qrels/<split>.tsv (query-id, corpus-id, score; header line)")
SIDECAR_OPTIONS = ("auto", "ignore")
UNKNOWN_ID_OPTIONS = ("error", "drop")
RETRIEVAL_UNIT = {
    False: ("whole documents (dataset.params.chunk=false): one retrieval unit per corpus.jsonl document, its doc id "
            "the _id, whatever its length, as BEIR evaluates; a dense model reads the first max_seq_length tokens "
            "of each (chunking.share_longer_than_embedder_max)"),
    True: ("chunks (dataset.params.chunk=true): a document longer than chunking.size_tokens is split into windows "
           "<_id>#<i> (counts: chunking.sources documents -> chunking.chunks docs), each relevant at its document's "
           "grade; every metric counts chunks, so scores are not comparable with published BEIR numbers"),
}
EXAMPLES = 10   # ids named in the card for large counts (queries of splits not loaded)


# ----------------------------------------------------------------------------- reading the files


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) of a UTF-8 text file, split on "\\n" only (JSON strings may hold
    other line separators, e.g. U+2028, verbatim); blank lines skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc})") from exc
    for n, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield n, line.rstrip("\r")


def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``"<path>: line N"``, object) per non-blank line of a JSONL file."""
    for n, line in _lines(path):
        where = f"{path}: line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(obj, dict):
            raise DatasetError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        yield where, obj


def _id(obj: dict[str, Any], where: str) -> str:
    if "_id" not in obj:
        raise DatasetError(f"{where}: missing key '_id'")
    raw = obj["_id"]
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise DatasetError(f"{where}: '_id' must be a string, got {type(raw).__name__} {raw!r:.60}")
    s = str(raw)
    if not s:
        raise DatasetError(f"{where}: empty '_id'")
    if any(c.isspace() for c in s):
        raise DatasetError(f"{where}: '_id' {s!r:.60} contains whitespace, which qrels.trec and run files cannot hold")
    return s


def _str_field(obj: dict[str, Any], key: str, where: str, required: bool) -> str:
    if key not in obj or obj[key] is None:
        if required:
            raise DatasetError(f"{where}: missing key '{key}'")
        return ""
    if not isinstance(obj[key], str):
        raise DatasetError(f"{where}: '{key}' must be a string, got {type(obj[key]).__name__} {obj[key]!r:.60}")
    return obj[key]


def _extra(obj: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in known}


def _unique_rows(path: Path, seen: dict[str, str]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(location, object, ``_id``) per row of a JSONL file; a repeated ``_id`` is an error naming both lines.
    ``seen`` collects id -> location."""
    for where, obj in _jsonl(path):
        row_id = _id(obj, where)
        if row_id in seen:
            raise DatasetError(f"{where}: duplicate _id '{row_id}' (first at {seen[row_id].rsplit(': ', 1)[-1]})")
        seen[row_id] = where
        yield where, obj, row_id


def _read_corpus(path: Path) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    """Docs in file order ({doc_id, text, meta}), ids of docs with empty title and text (dropped), and
    doc id -> location of every id seen."""
    docs: list[dict[str, Any]] = []
    empty: list[str] = []
    seen: dict[str, str] = {}
    for where, obj, did in _unique_rows(path, seen):
        title = _str_field(obj, "title", where, required=False).strip()
        text = _str_field(obj, "text", where, required=True)
        full = f"{title} {text}" if title else text
        if not full.strip():
            empty.append(did)
            continue
        meta = {**_extra(obj, ("_id", "title", "text")), **({"title": title} if title else {})}
        docs.append({"doc_id": did, "text": full, "meta": meta})
    return docs, empty, seen


def _read_queries(path: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    queries: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for where, obj, qid in _unique_rows(path, seen):
        text = _str_field(obj, "text", where, required=True)
        if not text.strip():
            raise DatasetError(f"{where}: empty query text for _id '{qid}'")
        queries.append({"query_id": qid, "text": text, "meta": _extra(obj, ("_id", "text"))})
    return queries, seen


class _Qrels:
    """Rows of the qrels files: grades per split, plus what was odd about them (for the card)."""

    def __init__(self, docs: dict[str, str], dropped_docs: set[str], queries: dict[str, str], unknown_ids: str):
        self.docs, self.dropped_docs, self.queries, self.unknown_ids = docs, dropped_docs, queries, unknown_ids
        self.split_of: dict[str, str] = {}            # query id -> split
        self.split_where: dict[str, str] = {}         # query id -> first qrels line naming it
        self.qrels: Qrels = {}                        # query id -> {doc id: grade >= 1}
        self.rows: dict[tuple[str, str], tuple[int, str]] = {}   # (qid, did) -> (score, where)
        self.nonrelevant_rows = 0
        self.duplicate_rows: list[str] = []
        self.unknown: list[str] = []
        self.to_dropped_docs: list[str] = []
        self.rows_by_split: dict[str, int] = {}

    def read(self, path: Path, split: str) -> None:
        self.rows_by_split.setdefault(split, 0)
        first = True
        for n, line in _lines(path):
            where = f"{path}: line {n}"
            parts = line.split("\t")
            if len(parts) != 3:
                raise DatasetError(f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), got "
                                   f"{len(parts)}: {line!r:.80}")
            qid, did, raw = (p.strip() for p in parts)
            try:
                score = int(raw)
            except ValueError:
                # the header: the file's first line, not naming a query (BEIR's is query-id corpus-id score)
                if first and qid not in self.queries:
                    first = False
                    continue
                raise DatasetError(f"{where}: score {raw!r:.40} is not an integer (line {line!r:.80})") from None
            first = False
            self._row(qid, did, score, split, where)
            self.rows_by_split[split] += 1

    def _row(self, qid: str, did: str, score: int, split: str, where: str) -> None:
        unknown = [f"query-id '{qid}' is not in {QUERIES_FILE}"] if qid not in self.queries else []
        if did not in self.docs:
            unknown.append(f"corpus-id '{did}' is not in {CORPUS_FILE}")
        if unknown:
            if self.unknown_ids == "error":
                raise DatasetError(f"{where}: {' and '.join(unknown)} (params.unknown_ids=drop drops such rows)")
            self.unknown.append(f"{split}: {qid} -> {did}")
            return
        if self.split_of.setdefault(qid, split) != split:
            raise DatasetError(f"{where}: query '{qid}' is already in split '{self.split_of[qid]}' "
                               f"({self.split_where[qid]}); a query belongs to one split")
        self.split_where.setdefault(qid, where)
        key = (qid, did)
        if key in self.rows:
            first_score, first_where = self.rows[key]
            if first_score != score:
                raise DatasetError(f"{where}: query '{qid}' doc '{did}' has score {score} here and {first_score} "
                                   f"at {first_where}")
            self.duplicate_rows.append(f"{qid} -> {did} ({where})")
            return
        self.rows[key] = (score, where)
        if score <= 0:
            self.nonrelevant_rows += 1
        elif did in self.dropped_docs:
            self.to_dropped_docs.append(f"{qid} -> {did}")
        else:
            self.qrels.setdefault(qid, {})[did] = score


# ----------------------------------------------------------------------------- input files


def _classify(paths: tuple[str | Path, ...]) -> tuple[Path, Path, dict[str, Path], Path | None, Path]:
    """(corpus, queries, split -> qrels file, sidecar or None, the BEIR folder) from the input paths:
    files named corpus.jsonl, queries.jsonl, <split>.tsv, lethe_sidecar.jsonl, or one BEIR folder."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += [p / CORPUS_FILE, p / QUERIES_FILE, *sorted((p / QRELS_DIR).glob("*.tsv"))]
            if (p / SIDECAR).is_file():
                files.append(p / SIDECAR)
        else:
            files.append(p)
    corpus, queries, sidecar = [], [], []
    qrels: dict[str, Path] = {}
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"beir: input file not found: {f}. Point dataset.beir_dir (absolute, or relative "
                                    f"to the work root) at the BEIR folder (corpus.jsonl, queries.jsonl, "
                                    f"qrels/<split>.tsv)")
        if f.name == CORPUS_FILE:
            corpus.append(f)
        elif f.name == QUERIES_FILE:
            queries.append(f)
        elif f.name == SIDECAR:
            sidecar.append(f)
        elif f.suffix == ".tsv":
            if f.stem in qrels:
                raise DatasetError(f"beir: two qrels files for split '{f.stem}': {qrels[f.stem]} and {f}")
            qrels[f.stem] = f
        else:
            raise DatasetError(f"beir: {f}: not a BEIR file (expected {CORPUS_FILE}, {QUERIES_FILE}, "
                               f"{QRELS_DIR}/<split>.tsv or {SIDECAR})")
    for what, found in ((CORPUS_FILE, corpus), (QUERIES_FILE, queries)):
        if len(found) != 1:
            raise DatasetError(f"beir: expected one {what} among the input files, got {[str(f) for f in found]}")
    if not qrels:
        raise DatasetError(f"beir: no qrels file ({QRELS_DIR}/<split>.tsv) among the input files")
    if len(sidecar) > 1:
        raise DatasetError(f"beir: several sidecars {[str(f) for f in sidecar]}")
    folder = corpus[0].parent
    for f in (queries[0], *sidecar):
        if f.parent != folder:
            raise DatasetError(f"beir: {f} is not in the folder of {corpus[0]}")
    return corpus[0], queries[0], qrels, (sidecar[0] if sidecar else None), folder


def _label(path: Path, folder: Path) -> str:
    """A file's name relative to the BEIR folder (``qrels/test.tsv``)."""
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        return path.name


def check_config(dataset_cfg: Mapping[str, Any], root: Path) -> None:
    """FileNotFoundError naming ``dataset.beir_dir`` and the folder tried when the config's BEIR folder is missing.
    ``root``: where its relative paths are read from (``lethebench.build.input_root``: the work root)."""
    given = dataset_cfg.get("beir_dir")
    if given is None:
        return
    folder = root / str(given)
    if not folder.is_dir():
        rule = (f"a relative beir_dir is read from the work root {root} (the folder the command runs from; the "
                f"checkout's root inside the checkout), not data.root; give an absolute path, or "
                f"dataset.beir_dir='${{data.root}}/{given}' for a folder under data.root")
        raise FileNotFoundError(f"dataset.beir_dir={str(given)!r}: no such folder {folder} ("
                                f"{'the path is absolute' if Path(str(given)).is_absolute() else rule})")


def load_beir(*paths: str | Path, scope: str | None = None, sidecar: str = "auto",
              unknown_ids: str = "error", chunk: bool = False) -> SourceDataset:
    """Read a BEIR folder (see the module docstring) into one scope.

    ``paths``: its ``corpus.jsonl``, ``queries.jsonl``, one or more ``qrels/<split>.tsv`` and, for a
    folder written by the export, ``lethe_sidecar.jsonl``; or the folder itself (all its qrels files and
    the sidecar if present). ``scope``: the scope id of plain BEIR (default: the folder's name; an export
    keeps its own scopes). ``sidecar``: ``auto``
    (restore from the sidecar when given; stop if the folder holds one that is not given) or ``ignore``.
    ``unknown_ids``: ``error`` or ``drop`` (qrels rows naming an unknown query or doc). ``chunk``: False keeps
    every document whole (one retrieval unit each, as BEIR); True lets the build chunk long ones. An export
    restored from its sidecar keeps its exported docs either way.
    """
    if not isinstance(chunk, bool):
        raise ValueError(f"beir: chunk={chunk!r}; expected true or false (dataset.params.chunk)")
    if sidecar not in SIDECAR_OPTIONS:
        raise ValueError(f"beir: sidecar={sidecar!r}; expected one of {list(SIDECAR_OPTIONS)}")
    if unknown_ids not in UNKNOWN_ID_OPTIONS:
        raise ValueError(f"beir: unknown_ids={unknown_ids!r}; expected one of {list(UNKNOWN_ID_OPTIONS)}")
    if not paths:
        raise ValueError("beir: no input files given")
    corpus_path, queries_path, qrels_paths, side_path, folder = _classify(paths)
    if sidecar == "ignore":
        side_path = None
    elif side_path is None and (folder / SIDECAR).is_file():
        raise DatasetError(
            f"beir: {folder / SIDECAR} exists (a folder exported by this project) but is not among the input files. "
            f"List it in dataset.files (so its sha256 enters the build key) to restore the exported scopes and "
            f"positions, or set dataset.params.sidecar=ignore to load the folder as plain BEIR (one scope, every "
            f"doc eligible for every query)"
        )
    params = {"scope": scope, "sidecar": sidecar, "unknown_ids": unknown_ids, "chunk": chunk}
    files = [corpus_path, queries_path, *qrels_paths.values(), *([side_path] if side_path else [])]
    inputs = {_label(f, folder): sha256_file(f) for f in files}

    docs, empty, doc_where = _read_corpus(corpus_path)
    queries, query_where = _read_queries(queries_path)
    q = _Qrels(doc_where, set(empty), query_where, unknown_ids)
    for split, path in qrels_paths.items():
        q.read(path, split)

    card: dict[str, Any] = {
        "format": FORMAT,
        "inputs": inputs,
        "loader": {"name": "beir", "version": LOADER_VERSION, "params": params},
        "qrels_rows_by_split": dict(sorted(q.rows_by_split.items())),
    }
    dropped = {
        "documents with empty title and text (dropped)": empty,
        "qrels rows naming a dropped empty document (dropped)": q.to_dropped_docs,
        "qrels rows naming an unknown query or document (dropped, unknown_ids=drop)": q.unknown,
        "identical duplicate qrels rows (read once)": q.duplicate_rows,
    }
    if side_path is not None:
        return _restore(side_path, folder, inputs, docs, queries, q, card, dropped)
    scope_id = scope or folder.name or "beir"
    if any(c.isspace() for c in scope_id):
        raise ValueError(f"beir: scope {scope_id!r} contains whitespace; set dataset.params.scope")
    return _plain(scope_id, docs, queries, q, card, dropped, chunk)


# ----------------------------------------------------------------------------- plain BEIR


def _plain(scope_id: str, docs: list[dict[str, Any]], queries: list[dict[str, Any]], q: _Qrels,
           card: dict[str, Any], dropped: dict[str, list[str]], chunk: bool) -> SourceDataset:
    if not docs:
        raise DatasetError(f"beir: {CORPUS_FILE} holds no document with text: nothing to retrieve from")
    n = len(docs)
    sources = pd.DataFrame([
        {"doc_id": d["doc_id"], "scope_id": scope_id, "position": i, "text": d["text"], "kind": "document",
         "speaker": None, "timestamp": None, "source_id": d["doc_id"], "entities": [],
         "meta": json.dumps(d["meta"], sort_keys=True)}
        for i, d in enumerate(docs)
    ], columns=list(CORPUS_COLUMNS))
    sources["position"] = sources["position"].astype("int64")
    kept = [x for x in queries if x["query_id"] in q.split_of]
    qdf = pd.DataFrame([
        {"query_id": x["query_id"], "scope_id": scope_id, "position": n, "text": x["text"], "history": [],
         "domain": None, "category": None, "complexity": None, "plan_label": None, "answer": None,
         "split": q.split_of[x["query_id"]], "meta": json.dumps(x["meta"], sort_keys=True)}
        for x in kept
    ], columns=list(QUERY_COLUMNS))
    qdf["position"] = qdf["position"].astype("int64")
    not_loaded = [x["query_id"] for x in queries if x["query_id"] not in q.split_of]
    no_relevant = [qid for qid in q.split_of if qid not in q.qrels]
    card.update({
        "scope": (f"one scope '{scope_id}' holding every document of {CORPUS_FILE} ({n}) at positions 0..{n - 1} "
                  f"in file order; every query sits at position {n}: every document is eligible for every query"),
        "retrieval_unit": RETRIEVAL_UNIT[chunk],
        "relevance": ("the qrels files' scores as grades (graded relevance kept); rows with score <= 0 are not "
                      "relevant. Documents are 'title text' (title prepended with one space, as BEIR's dense "
                      "models encode them)" + ("; a document split into chunks gives every chunk its grade."
                                               if chunk else ".")),
        "queries_by_split_loaded": {s: sum(1 for v in q.split_of.values() if v == s) for s in sorted(q.rows_by_split)},
        "exclusions": {
            "queries_in_file": len(queries),
            "queries_not_in_loaded_qrels": len(not_loaded),
            "queries_not_in_loaded_qrels_examples": not_loaded[:EXAMPLES],
            "queries_without_relevant_doc": len(no_relevant),
            "queries_without_relevant_doc_ids": no_relevant,
            "qrels_rows_score_le_0": q.nonrelevant_rows,
            "documents_empty": len(dropped["documents with empty title and text (dropped)"]),
        },
    })
    if not_loaded:
        log.info("beir: %d of %d queries are in no loaded qrels file (other splits): not loaded",
                 len(not_loaded), len(queries))
    dropped["queries whose qrels rows all have score <= 0 (no relevant doc: excluded from retrieval metrics)"] = \
        no_relevant
    return SourceDataset(scope_id, sources, qdf, q.qrels, card, keep_whole=not chunk,
                         dropped={k: v for k, v in dropped.items() if v})


# ----------------------------------------------------------------------------- the sidecar


def _sidecar_rows(path: Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """(header, {"doc": rows, "query": rows, "contradiction": rows}) of a sidecar file."""
    header: dict[str, Any] | None = None
    rows: dict[str, list[dict[str, Any]]] = {"doc": [], "query": [], "contradiction": []}
    for where, obj in _jsonl(path):
        if header is None:
            if obj.get("format") != SIDECAR_FORMAT or obj.get("version") != SIDECAR_VERSION:
                raise DatasetError(f"{where}: not a {SIDECAR_FORMAT} version {SIDECAR_VERSION} header "
                                   f"(format {obj.get('format')!r}, version {obj.get('version')!r})")
            header = obj
            continue
        if len(obj) != 1 or next(iter(obj)) not in rows or not isinstance(next(iter(obj.values())), dict):
            raise DatasetError(f"{where}: expected {{\"doc\" | \"query\" | \"contradiction\": {{...}}}}, "
                               f"got keys {list(obj)}")
        kind, row = next(iter(obj.items()))
        rows[kind].append(row)
    if header is None:
        raise DatasetError(f"{path}: empty sidecar")
    return header, rows


def _frame(rows: list[dict[str, Any]], columns: list[str], spec: dict[str, str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for col, kind in spec.items():
        if kind == "int" and col in df.columns:
            df[col] = df[col].astype("int64")
    return df


def _restore(path: Path, folder: Path, inputs: dict[str, str], docs: list[dict[str, Any]],
             queries: list[dict[str, Any]], q: _Qrels, card: dict[str, Any],
             dropped: dict[str, list[str]]) -> SourceDataset:
    """The exported dataset, from the BEIR files (ids, texts, qrels) and the sidecar (every other column)."""
    header, rows = _sidecar_rows(path)
    for key in ("files_sha256", "corpus_columns", "query_columns"):
        if not header.get(key):
            raise DatasetError(f"{path}: line 1: the header has no '{key}'")
    recorded: dict[str, str] = header["files_sha256"]
    given = {k: v for k, v in inputs.items() if k != SIDECAR}
    for name, sha in sorted(recorded.items()):
        if name not in given:
            raise DatasetError(f"{path}: the export wrote {folder / name}, which is not among the input files; list "
                               f"every file of the export in dataset.files for an exact restore")
        if given[name] != sha:
            raise DatasetError(f"{folder / name}: changed after the export wrote it (sha256 {given[name][:16]}..., "
                               f"the sidecar records {sha[:16]}...); the sidecar no longer describes it. Load the "
                               f"folder as plain BEIR (dataset.params.sidecar=ignore and leave the sidecar out of "
                               f"files)")
    extra = sorted(set(given) - set(recorded))
    if extra:
        raise DatasetError(f"{path}: {extra} are not part of the export; leave them out of dataset.files")
    if any(dropped.values()):
        raise DatasetError(f"{path}: the exported files hold {[k for k, v in dropped.items() if v]}: not an export")

    text_of = {d["doc_id"]: d["text"] for d in docs}
    qtext_of = {x["query_id"]: x["text"] for x in queries}
    corpus_cols, query_cols = header["corpus_columns"], header["query_columns"]
    for kind, table, known, cols in (("doc", rows["doc"], text_of, corpus_cols),
                                     ("query", rows["query"], qtext_of, query_cols)):
        id_col = cols[0]
        ids = [r.get(id_col) for r in table]
        if ids != list(known):
            missing = sorted(set(known) - set(ids))[:5]
            unknown = sorted(set(ids) - set(known), key=str)[:5]
            raise DatasetError(f"{path}: its {kind} rows do not match the BEIR file's ids in order "
                               f"(missing {missing}, unknown {unknown})")
        for r in table:
            r["text"] = known[r[id_col]]
    corpus = _frame(rows["doc"], corpus_cols, CORPUS_COLUMNS)
    qdf = _frame(rows["query"], query_cols, QUERY_COLUMNS)
    contra = (_frame(rows["contradiction"], header["contradiction_columns"], CONTRADICTION_COLUMNS)
              if header.get("contradiction_columns") is not None else None)
    null_split = header.get("null_split", "test")
    split_mismatch = [qid for qid, split in zip(qdf["query_id"], qdf["split"])
                      if qid in q.split_of and q.split_of[qid] != (split if isinstance(split, str) else null_split)]
    if split_mismatch:
        raise DatasetError(f"{path}: queries {split_mismatch[:5]} are in another qrels file than their split")

    source = header.get("card") or {}
    card.update({
        "scope": (f"restored from the export of dataset '{header.get('dataset')}' ({SIDECAR}): its scopes, positions "
                  "and eligibility. " + str(source.get("scope", ""))).strip(),
        "relevance": (f"the exported qrels (grades as exported). As derived for '{header.get('dataset')}': "
                      + str(source.get("relevance", "not stated"))),
        "sidecar": {k: header.get(k) for k in ("dataset", "build_key", "content_sha256", "exported_by")},
        "exported_card": source,
    })
    # The docs are chunks already: chunking them again is not the identity (a window that began inside a word
    # can re-tokenize longer and be split), so the build keeps them as they are.
    return SourceDataset(str(header.get("dataset") or folder.name), corpus, qdf, q.qrels, card,
                         contradictions=contra, prechunked=True)
