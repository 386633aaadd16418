"""TechQA -> the data model, from either of two layouts.

* ``nvidia``: JSONL rows ``{id, question, answer, is_impossible, contexts: [{filename, text}]}`` as in
  nvidia/TechQA-RAG-Eval (the local 480-row sample ``techqa/techqa_rag_eval_sample_480.jsonl``).
* ``ibm``: the original IBM TechQA release: question files (``training_Q_A.json``, ``dev_Q_A.json``;
  JSON lists of ``{QUESTION_ID, QUESTION_TITLE, QUESTION_TEXT, DOCUMENT, ANSWERABLE, START_OFFSET,
  END_OFFSET, ANSWER, ...}``) plus a technotes file (``training_dev_technotes.json``; a JSON object
  technote id -> ``{id, title, text, ...}``).

One scope (``techqa``) holds every distinct technote; one source per technote; all technotes are
eligible for every question. Relevance: the gold technote of an answerable question (the row's
context in the NVIDIA layout, ``DOCUMENT`` in the IBM layout), grade 1. Unanswerable questions stay
in ``queries`` without qrels, so the runner leaves them out of retrieval metrics and counts them.

The loader knows the layouts, not the data: where the data came from, its licence and citation
are the dataset config's ``provenance`` section (``conf/dataset/techqa.yaml``, which also shows the
values for the IBM release), written to the card by the build.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from lethe.core.hashing import sha256_file
from lethebench.loaders.fields import strict_loads, type_error
from lethebench.schema import CORPUS_COLUMNS, QUERY_COLUMNS, DatasetError, SourceDataset

LOADER_VERSION = "1"
SCOPE_ID = "techqa"
LAYOUTS = ("auto", "nvidia", "ibm")
SHIPPED_FILE = "nvidia/TechQA-RAG-Eval, train split, 480-row sample"  # named in the file-not-found hint only
FORMATS = {
    "nvidia": ("NVIDIA TechQA-RAG-Eval layout: one JSONL row per question {id, question, answer, is_impossible, "
               "contexts: [{filename, text}]} with its context technote(s) inlined"),
    "ibm": ("original IBM TechQA layout: question files (JSON lists of {QUESTION_ID, QUESTION_TITLE, QUESTION_TEXT, "
            "DOCUMENT, ANSWERABLE, ANSWER, ...}) plus a technotes file (JSON object id -> {id, title, text})"),
}
# Upstream cut every context of the NVIDIA set to this many characters.
NVIDIA_CONTEXT_CHARS = 2400

NVIDIA_KEYS = ("id", "question", "answer", "is_impossible", "contexts")
IBM_QA_KEYS = ("QUESTION_ID", "QUESTION_TITLE", "QUESTION_TEXT", "DOCUMENT", "ANSWERABLE", "ANSWER")
IBM_TECHNOTE_KEYS = ("title", "text")
CATEGORIES = ("answerable", "impossible")  # query.category values

_WS = re.compile(r"\s+")


class _Collected:
    """Technote versions and questions gathered from the input files, plus what was odd about them."""

    def __init__(self) -> None:
        self.technotes: dict[str, dict[str, dict[str, Any]]] = {}  # id -> text -> {"meta", "where"}
        self.questions: list[dict[str, Any]] = []
        self.query_where: dict[str, str] = {}
        self.ids_whitespace_replaced: list[str] = []
        self.answerable_without_gold: list[str] = []
        self.answerable_with_multiple_golds: list[str] = []
        self.impossible_with_gold: list[str] = []
        self.gold_not_in_corpus: list[dict[str, str]] = []
        self.technote_id_mismatch: list[str] = []

    def clean_id(self, raw: Any, where: str, key: str) -> str:
        """Whitespace-free id: strip, then replace inner whitespace runs with '_' (counted)."""
        if not isinstance(raw, str | int) or isinstance(raw, bool):
            raise DatasetError(f"{where}: key '{key}': expected a string id, got {type(raw).__name__} {raw!r:.60}")
        s = str(raw).strip()
        if not s:
            raise DatasetError(f"{where}: key '{key}': empty id")
        clean = _WS.sub("_", s)
        if clean != str(raw):
            self.ids_whitespace_replaced.append(f"{raw!r} -> {clean}")
        return clean

    def add_technote(self, doc_id: str, text: str, meta: dict[str, Any], where: str, key: str) -> None:
        if not text.strip():
            raise DatasetError(f"{where}: key '{key}': empty technote text for '{doc_id}'")
        versions = self.technotes.setdefault(doc_id, {})
        if text not in versions:
            versions[text] = {"meta": meta, "where": where}

    def add_question(self, q: dict[str, Any], where: str) -> None:
        qid = q["query_id"]
        if qid in self.query_where:
            raise DatasetError(f"{where}: duplicate question id '{qid}' (first at {self.query_where[qid]})")
        self.query_where[qid] = where
        self.questions.append(q)


def _missing(path: Path, what: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"TechQA {what} not found at {path}. Point data.root (or LETHE_DATA_ROOT) at the folder that holds "
        f"techqa/techqa_rag_eval_sample_480.jsonl (upstream: {SHIPPED_FILE}), or pass the IBM TechQA files "
        f"(training_Q_A.json, dev_Q_A.json, training_dev_technotes.json)."
    )


def detect_kind(path: Path) -> str:
    """Kind of one input file: 'nvidia' (JSONL rows), 'ibm_questions' or 'ibm_technotes'.

    Decided by the file name first (``.jsonl``; ``*technote*``; ``*Q_A*`` / ``*question*``), else by
    the content: a JSON list is an IBM question file, a first line holding an object with
    ``question``/``contexts`` is NVIDIA JSONL, anything else an IBM technotes object.
    """
    name = path.name.lower()
    if name.endswith(".jsonl"):
        return "nvidia"
    if "technote" in name:
        return "ibm_technotes"
    if "q_a" in name or "question" in name:
        return "ibm_questions"
    with open(path, encoding="utf-8", errors="replace") as fh:
        head = fh.read(1 << 16).lstrip()
    if head.startswith("["):
        return "ibm_questions"
    try:
        first = json.loads(head.split("\n", 1)[0])
    except json.JSONDecodeError:
        return "ibm_technotes"
    if isinstance(first, dict) and ("contexts" in first or "question" in first):
        return "nvidia"
    return "ibm_technotes"


def _json_error(exc: json.JSONDecodeError, line: bool) -> str:
    """``exc`` as 'what at line L, column C': some of json's messages already end in ' at'
    ('Unterminated string starting at', 'Invalid control character at'), which is not repeated."""
    what = exc.msg.removesuffix(" at")
    return f"{what} at line {exc.lineno}, column {exc.colno}" if line else f"{what} at column {exc.colno}"


def _question_record(rec: Any, where: str, id_key: str, keys: Iterable[str], col: _Collected) -> tuple[str, str]:
    """(question id, location naming it) of one question record of either layout: a JSON object with
    every key of ``keys``; errors name ``where`` (the file and line or item) and the id once known."""
    base = where
    if not isinstance(rec, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if isinstance(rec.get(id_key), str | int):
        where = f"{base} ({id_key} {rec[id_key]})"
    for key in keys:
        if key not in rec:
            raise DatasetError(f"{where}: missing key '{key}'; expected keys {list(keys)}")
    qid = col.clean_id(rec[id_key], where, id_key)
    return qid, f"{base} ({id_key} {qid})"


def _read_nvidia(path: Path, col: _Collected) -> None:
    try:
        # split on "\n" only: JSON strings may hold other line separators (U+2028) verbatim
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc})") from exc
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}: line {lineno}"
        try:
            row = strict_loads(line, where)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON ({_json_error(exc, line=False)})") from exc
        qid, where = _question_record(row, where, "id", NVIDIA_KEYS, col)
        question, answer, impossible, contexts = (row[k] for k in ("question", "answer", "is_impossible", "contexts"))
        if not isinstance(question, str):
            raise type_error(where, "question", "a string", question)
        if not question.strip():
            raise DatasetError(f"{where}: key 'question': empty question")
        if answer is not None and not isinstance(answer, str):
            raise type_error(where, "answer", "a string or null", answer)
        if not isinstance(impossible, bool):
            raise type_error(where, "is_impossible", "true or false", impossible)
        if not isinstance(contexts, list):
            raise type_error(where, "contexts", "a list", contexts)
        golds: list[str] = []
        ctx_texts: list[str] = []
        for j, ctx in enumerate(contexts):
            key = f"contexts[{j}]"
            if not isinstance(ctx, dict):
                raise type_error(where, key, "an object {filename, text}", ctx)
            for sub in ("filename", "text"):
                if sub not in ctx:
                    raise DatasetError(f"{where}: key '{key}': missing key '{sub}'")
            if not isinstance(ctx["filename"], str):
                raise type_error(where, f"{key}.filename", "a string", ctx["filename"])
            if not isinstance(ctx["text"], str):
                raise type_error(where, f"{key}.text", "a string", ctx["text"])
            fname = ctx["filename"].strip()
            stem = fname[: -len(".txt")] if fname.lower().endswith(".txt") else fname
            doc_id = col.clean_id(stem, where, f"{key}.filename")
            col.add_technote(doc_id, ctx["text"], {"filename": fname}, where, f"{key}.text")
            if doc_id not in golds:
                golds.append(doc_id)
                ctx_texts.append(ctx["text"])
        col.add_question({
            "query_id": qid, "text": question.strip(), "impossible": impossible,
            "answer": None if impossible else answer, "golds": golds, "gold_texts": ctx_texts,
            "meta": {"id": row["id"], "is_impossible": impossible,
                     **({"answer_raw": answer} if impossible else {}),
                     "context_filenames": [c["filename"] for c in contexts]},
        }, where)


def _load_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return strict_loads(fh.read(), str(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({_json_error(exc, line=True)})") from exc
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc})") from exc


def _read_ibm_questions(path: Path, col: _Collected) -> None:
    data = _load_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of questions (IBM TechQA *_Q_A.json), got {type(data).__name__}")
    for i, item in enumerate(data):
        qid, where = _question_record(item, f"{path}: item #{i}", "QUESTION_ID", IBM_QA_KEYS, col)
        for key in ("QUESTION_TITLE", "QUESTION_TEXT", "DOCUMENT", "ANSWER"):
            if not isinstance(item[key], str):
                raise type_error(where, key, "a string", item[key])
        flag = item["ANSWERABLE"]
        if flag not in ("Y", "N"):
            raise type_error(where, "ANSWERABLE", "'Y' or 'N'", flag)
        text = "\n".join(s for s in (item["QUESTION_TITLE"].strip(), item["QUESTION_TEXT"].strip()) if s)
        if not text:
            raise DatasetError(f"{where}: keys 'QUESTION_TITLE'/'QUESTION_TEXT': empty question")
        impossible = flag == "N"
        doc = item["DOCUMENT"].strip()
        golds = [] if doc in ("", "-") else [col.clean_id(doc, where, "DOCUMENT")]
        meta: dict[str, Any] = {"id": item["QUESTION_ID"], "is_impossible": impossible, "ANSWERABLE": flag,
                                "DOCUMENT": item["DOCUMENT"], "file": path.name}
        for key in ("START_OFFSET", "END_OFFSET"):
            if key in item:
                meta[key] = item[key]
        if isinstance(item.get("DOC_IDS"), list):
            meta["DOC_IDS"] = [str(d) for d in item["DOC_IDS"]]
        if impossible:
            meta["answer_raw"] = item["ANSWER"]
        col.add_question({
            "query_id": qid, "text": text, "impossible": impossible,
            "answer": None if impossible else item["ANSWER"], "golds": golds, "gold_texts": None, "meta": meta,
        }, where)


def _read_ibm_technotes(path: Path, col: _Collected) -> None:
    data = _load_json(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object technote id -> {{id, title, text}}, got {type(data).__name__}")
    for i, (key_id, note) in enumerate(data.items()):
        where = f"{path}: technote #{i} ({key_id!r:.60})"
        if not isinstance(note, dict):
            raise DatasetError(f"{where}: expected a JSON object {{id, title, text}}, got {type(note).__name__}")
        for key in IBM_TECHNOTE_KEYS:
            if key not in note:
                raise DatasetError(f"{where}: missing key '{key}'; expected keys {['id', *IBM_TECHNOTE_KEYS]}")
            if not isinstance(note[key], str):
                raise type_error(where, key, "a string", note[key])
        doc_id = col.clean_id(key_id, where, "technote id")
        if "id" in note and str(note["id"]).strip() != str(key_id).strip():
            col.technote_id_mismatch.append(f"{key_id} (id field {note['id']!r:.60})")
        text = "\n".join(s for s in (note["title"].strip(), note["text"]) if s.strip())
        col.add_technote(doc_id, text, {"title": note["title"].strip(), "file": path.name}, where, "text")


def _resolve_technotes(col: _Collected) -> tuple[dict[str, tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    """One text per technote id: the longest version (ties: the lexicographically smallest)."""
    kept: dict[str, tuple[str, dict[str, Any]]] = {}
    conflicts: list[dict[str, Any]] = []
    for doc_id in sorted(col.technotes):
        versions = col.technotes[doc_id]
        text = min(versions, key=lambda t: (-len(t), t))
        kept[doc_id] = (text, versions[text]["meta"])
        if len(versions) > 1:
            conflicts.append({"technote_id": doc_id, "versions": len(versions),
                              "chars": sorted((len(t) for t in versions), reverse=True), "kept_chars": len(text),
                              "seen_at": [v["where"] for v in versions.values()]})
    return kept, conflicts


def _inputs(paths: Iterable[Path]) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in paths}


def load_techqa(*paths: str | Path, layout: str = "auto") -> SourceDataset:
    """Read TechQA files of either layout (see the module docstring).

    ``layout``: 'auto' (decide per file with :func:`detect_kind`), 'nvidia' (every file is NVIDIA
    JSONL) or 'ibm' (question files plus at least one technotes file, in any order).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"techqa: unknown layout {layout!r}; known: {list(LAYOUTS)}")
    if not paths:
        raise ValueError("techqa: no input files given")
    files = [Path(p) for p in paths]
    for p in files:
        if not p.is_file():
            raise _missing(p, "input file")
    kinds = {p: ("nvidia" if layout == "nvidia" else detect_kind(p)) for p in files}
    nvidia = [p for p in files if kinds[p] == "nvidia"]
    ibm_q = sorted((p for p in files if kinds[p] == "ibm_questions"), key=lambda p: (p.name, str(p)))
    ibm_t = sorted((p for p in files if kinds[p] == "ibm_technotes"), key=lambda p: (p.name, str(p)))
    if nvidia and (ibm_q or ibm_t):
        raise DatasetError(f"techqa: mixed layouts: NVIDIA JSONL {[str(p) for p in nvidia]} with IBM files "
                           f"{[str(p) for p in ibm_q + ibm_t]}; pass one layout at a time")
    if layout == "ibm" and nvidia:
        raise DatasetError(f"techqa: layout=ibm but {nvidia[0]} looks like NVIDIA JSONL")
    resolved = "nvidia" if nvidia else "ibm"
    col = _Collected()
    if resolved == "nvidia":
        for p in nvidia:
            _read_nvidia(p, col)
    else:
        if not ibm_q or not ibm_t:
            raise DatasetError(
                f"techqa: the IBM layout needs question file(s) (*_Q_A.json) and a technotes file "
                f"(*technotes*.json); got questions {[str(p) for p in ibm_q]}, technotes {[str(p) for p in ibm_t]}"
            )
        for p in ibm_t:
            _read_ibm_technotes(p, col)
        for p in ibm_q:
            _read_ibm_questions(p, col)
    return _assemble(col, resolved, layout, files)


def _assemble(col: _Collected, resolved: str, layout: str, files: list[Path]) -> SourceDataset:
    kept, conflicts = _resolve_technotes(col)
    if not kept:
        raise DatasetError(f"techqa: no technotes in {[str(p) for p in files]}: nothing to retrieve from")
    doc_ids = sorted(kept)
    n = len(doc_ids)
    sources = pd.DataFrame([
        {"doc_id": d, "scope_id": SCOPE_ID, "position": i, "text": kept[d][0], "kind": "technote",
         "speaker": None, "timestamp": None, "source_id": d, "entities": [],
         "meta": json.dumps(kept[d][1], sort_keys=True)}
        for i, d in enumerate(doc_ids)
    ], columns=list(CORPUS_COLUMNS))
    sources["position"] = sources["position"].astype("int64")

    qrels: dict[str, dict[str, int]] = {}
    queries = []
    answer_missing: list[str] = []
    answerable = 0
    for q in col.questions:
        qid, golds = q["query_id"], q["golds"]
        if q["impossible"]:
            if golds:
                col.impossible_with_gold.append(qid)
        else:
            answerable += 1
            present = [g for g in golds if g in kept]
            for g in golds:
                if g not in kept:
                    col.gold_not_in_corpus.append({"query_id": qid, "technote_id": g})
            if not golds:
                col.answerable_without_gold.append(qid)
            elif len(golds) > 1:
                col.answerable_with_multiple_golds.append(qid)
            if present:
                qrels[qid] = {g: 1 for g in present}
                # answer inside its context: the row's own context text (NVIDIA) or the technote (IBM)
                texts = q["gold_texts"] if q["gold_texts"] is not None else [kept[g][0] for g in present]
                if q["answer"] and not any(q["answer"] in t for t in texts):
                    answer_missing.append(qid)
        queries.append({
            "query_id": qid, "scope_id": SCOPE_ID, "position": n, "text": q["text"], "history": [],
            "domain": None, "category": CATEGORIES[1] if q["impossible"] else CATEGORIES[0], "complexity": None,
            "plan_label": None, "answer": q["answer"], "split": None, "meta": json.dumps(q["meta"], sort_keys=True),
        })
    qdf = pd.DataFrame(queries, columns=list(QUERY_COLUMNS))
    qdf["position"] = qdf["position"].astype("int64")

    impossible = len(col.questions) - answerable
    lengths = [len(kept[d][0]) for d in doc_ids]
    gold_docs = {g for v in qrels.values() for g in v}
    ibm = resolved == "ibm"
    answered = sum(1 for q in col.questions if not q["impossible"] and q["query_id"] in qrels and q["answer"])
    context_facts: dict[str, Any] = {
        "answerable_with_gold_and_answer": answered,
        "answers_not_substring_of_context": len(answer_missing),
        "answers_not_substring_of_context_ids": answer_missing,
        "technotes": n,
        "technotes_gold_for_some_question": len(gold_docs),
        "technote_chars_max": max(lengths) if lengths else 0,
    }
    if not ibm:
        context_facts[f"technotes_at_{NVIDIA_CONTEXT_CHARS}_chars"] = sum(1 for x in lengths if x == NVIDIA_CONTEXT_CHARS)
        texts_of = {q["query_id"]: q["gold_texts"] or [] for q in col.questions}
        missing_cut = [qid for qid in answer_missing if any(len(t) == NVIDIA_CONTEXT_CHARS for t in texts_of[qid])]
        context_facts[f"answers_not_in_context_whose_context_is_{NVIDIA_CONTEXT_CHARS}_chars"] = len(missing_cut)

    card: dict[str, Any] = {
        "format": FORMATS[resolved],
        "inputs": _inputs(files),
        "loader": {"name": "techqa", "version": LOADER_VERSION, "params": {"layout": layout},
                   "layout_detected": resolved},
        "scope": (
            f"one scope '{SCOPE_ID}' holding every distinct technote of the input ({n}); a question's gold technote "
            "competes with all other technotes as distractors. Technotes are placed in sorted id order "
            f"(positions 0..{n - 1}) and every question sits at position {n}: all technotes are eligible."
        ),
        "relevance": (
            ("gold = the technote named by DOCUMENT of a question with ANSWERABLE == 'Y', grade 1. "
             if ibm else
             "gold = the answerable row's single context technote (its filename without '.txt'), grade 1; "
             "an answerable row with several contexts would get all of them at grade 1 (listed under exclusions). ")
            + "Unanswerable questions (category 'impossible') have no qrels: they stay in queries.parquet (answer "
            "null, upstream answer in meta.answer_raw) and are excluded from retrieval metrics, counted by every run. "
            + (f"Upstream cut every context to {NVIDIA_CONTEXT_CHARS:,} characters, so some answers are not fully "
               "inside their context: " if not ibm else "Answers checked against their gold technote: ")
            + f"{len(answer_missing)} of {answered} answers are not an exact substring of their context text."
        ),
        "categories": {"answerable": "the question has a gold technote (upstream is_impossible false / ANSWERABLE 'Y')",
                       "impossible": "no answer in the collection (upstream is_impossible true / ANSWERABLE 'N')"},
        "answers_vs_context": context_facts,
        "exclusions": {
            "questions_total": len(col.questions),
            "answerable": answerable,
            "answerable_with_qrels": len(qrels),
            "impossible_excluded": impossible,
            "answerable_without_gold": len(col.answerable_without_gold),
            "answerable_without_gold_ids": col.answerable_without_gold,
            "answerable_with_multiple_golds": len(col.answerable_with_multiple_golds),
            "answerable_with_multiple_golds_ids": col.answerable_with_multiple_golds,
            "impossible_with_context": len(col.impossible_with_gold),
            "impossible_with_context_ids": col.impossible_with_gold,
            "gold_not_in_corpus": len(col.gold_not_in_corpus),
            "gold_not_in_corpus_refs": col.gold_not_in_corpus,
            "technote_text_conflicts": len(conflicts),
            "technote_text_conflict_rule": "keep the longest text (ties: lexicographically smallest)",
            "technote_text_conflicts_list": conflicts,
            "technote_id_field_mismatches": col.technote_id_mismatch,
            "ids_whitespace_replaced": len(col.ids_whitespace_replaced),
            "ids_whitespace_replaced_list": col.ids_whitespace_replaced,
        },
    }
    dropped = {
        "gold technotes not in the corpus (reference dropped)":
            [f"{r['query_id']} -> {r['technote_id']}" for r in col.gold_not_in_corpus],
        "answerable questions without a gold technote (no qrels: excluded from retrieval metrics)":
            list(col.answerable_without_gold),
        "impossible questions with a context (context ignored: no qrels)": list(col.impossible_with_gold),
        "ids with whitespace (replaced by '_')": list(col.ids_whitespace_replaced),
        "technotes with conflicting texts (longest kept)": [c["technote_id"] for c in conflicts],
        "technotes whose id field differs from their key (key used)": list(col.technote_id_mismatch),
    }
    return SourceDataset("techqa", sources, qdf, qrels, card, dropped={k: v for k, v in dropped.items() if v})
