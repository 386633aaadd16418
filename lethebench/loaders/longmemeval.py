"""LongMemEval's JSON (xiaowu0162/LongMemEval: ``longmemeval_s.json``, ``longmemeval_m.json``,
``longmemeval_oracle.json``) -> the data model.

Each question has its own haystack of chat sessions, so each question is one scope, asked after its whole haystack
(every unit eligible). The retrieval units follow the official retrieval code (``src/retrieval/run_retrieval.py``):
``unit=session`` makes one doc per haystack session holding its user turns' text joined by spaces; ``unit=turn``
one doc per user turn, numbered as the official turn ids are (``<session id>_<turn index from 1>``, assistant turns
counted in the index but not indexed). Units are whole (the build does not chunk them).

Relevance (grade 1): a session unit of an evidence session (``answer_session_ids``) with at least one user turn
marked ``has_answer``; a turn unit that is a user turn marked ``has_answer`` in an evidence session. Abstention
questions (``question_id`` ending ``_abs``) get no qrels, as the official evaluation leaves them out of its
retrieval averages; they are counted on the card. The metrics the official evaluation reports on these units are
``analysis.longmemeval`` (``recall_any@k``, ``recall_all@k``, ``ndcg_any@k``; turn-level runs also at session
level).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from lethe.core.hashing import sha256_file
from lethebench.loaders.fields import checked, strict_loads
from lethebench.schema import DatasetError, SourceDataset

LOADER_VERSION = "1"
UNITS = ("session", "turn")
ABSTENTION_SUFFIX = "_abs"
FORMAT = ("LongMemEval JSON: a list of questions {question_id, question_type, question, answer, question_date, "
          "haystack_session_ids: [id], haystack_dates: [date], haystack_sessions: [[{role, content, has_answer?}]], "
          "answer_session_ids: [id]}")
REQUIRED = ("question_id", "question_type", "question", "answer", "haystack_session_ids", "haystack_sessions",
            "answer_session_ids")


def turn_unit_id(session_id: str, turn_index: int) -> str:
    """The official id of the turn at 0-based ``turn_index`` of session ``session_id``: ``<session id>_<index + 1>``."""
    return f"{session_id}_{turn_index + 1}"


def _turns(session: Any, where: str) -> list[dict[str, Any]]:
    checked(session, where, "haystack_sessions[i]", list, "a list of turns")
    for ti, t in enumerate(session):
        at = f"{where} turn #{ti}"
        if not isinstance(t, dict):
            raise DatasetError(f"{at}: expected a JSON object, got {type(t).__name__}")
        for key in ("role", "content"):
            if key not in t:
                raise DatasetError(f"{at}: missing key '{key}'")
            checked(t[key], at, key, str, "a string")
        if "has_answer" in t:
            checked(t["has_answer"], at, "has_answer", bool, "true or false")
    return session


def load_longmemeval(path: str | Path, unit: str = "session") -> SourceDataset:
    """Read a LongMemEval file with retrieval units ``unit`` (``session`` or ``turn``; module docstring)."""
    if unit not in UNITS:
        raise DatasetError(f"dataset.params.unit={unit!r}: one of {list(UNITS)}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"LongMemEval file not found at {path}. Put longmemeval_s.json (or _m, _oracle; from the authors' "
            f"release, xiaowu0162/LongMemEval) under data.root (or LETHE_DATA_ROOT) and name it in dataset.files."
        )
    try:
        data = strict_loads(path.read_text(encoding="utf-8"), str(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at offset {exc.start})") from exc
    if not isinstance(data, list) or not data:
        raise DatasetError(f"{path}: expected a non-empty JSON list of questions")

    sources: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    qrels: dict[str, dict[str, int]] = {}
    abstention: list[str] = []
    without_evidence: list[str] = []
    seen: set[str] = set()
    for qi, q in enumerate(data):
        where = f"{path}: question #{qi}"
        if not isinstance(q, dict):
            raise DatasetError(f"{where}: expected a JSON object, got {type(q).__name__}")
        for key in REQUIRED:
            if key not in q:
                raise DatasetError(f"{where}: missing key '{key}'")
        qid = checked(q["question_id"], where, "question_id", str, "a string")
        where = f"{path}: {qid}"
        if qid in seen:
            raise DatasetError(f"{where}: question_id appears twice")
        seen.add(qid)
        sids = checked(q["haystack_session_ids"], where, "haystack_session_ids", list, "a list of session ids")
        sessions = checked(q["haystack_sessions"], where, "haystack_sessions", list, "a list of sessions")
        dates = q.get("haystack_dates") or [None] * len(sids)
        if not (len(sids) == len(sessions) == len(dates)):
            raise DatasetError(f"{where}: haystack_session_ids ({len(sids)}), haystack_sessions ({len(sessions)}) "
                               f"and haystack_dates ({len(dates)}) must be as long as each other")
        evidence = {str(s) for s in checked(q["answer_session_ids"], where, "answer_session_ids", list, "a list")}
        pos, relevant = 0, {}
        for sid, session, date in zip(sids, sessions, dates, strict=True):
            sid = str(checked(sid, where, "haystack_session_ids[i]", (str, int), "a session id"))
            turns = _turns(session, f"{where} session {sid}")
            user = [(ti, t) for ti, t in enumerate(turns) if t["role"] == "user"]
            if unit == "session":
                units = [(f"{qid}:{sid}", " ".join(t["content"] for _, t in user), any(t.get("has_answer") for _, t in user),
                          {"session_id": sid})]
            else:
                units = [(f"{qid}:{turn_unit_id(sid, ti)}", t["content"], bool(t.get("has_answer")),
                          {"session_id": sid, "turn": ti + 1}) for ti, t in user]
            for doc_id, text, has_answer, meta in units:
                sources.append({
                    "doc_id": doc_id, "scope_id": qid, "position": pos, "text": text, "kind": unit,
                    "speaker": "user" if unit == "turn" else None,
                    "timestamp": None if date is None else str(date), "source_id": doc_id, "entities": [],
                    "meta": json.dumps(meta, sort_keys=True),
                })
                pos += 1
                if sid in evidence and has_answer:
                    relevant[doc_id] = 1
        is_abstention = qid.endswith(ABSTENTION_SUFFIX)
        if is_abstention:
            abstention.append(qid)
        elif relevant:
            qrels[qid] = relevant
        else:
            without_evidence.append(qid)
        answer = q["answer"]
        queries.append({
            "query_id": qid, "scope_id": qid, "position": pos,
            "text": str(checked(q["question"], where, "question", str, "a string")).strip(),
            "history": [], "domain": None,
            "category": str(checked(q["question_type"], where, "question_type", str, "a string")),
            "complexity": None, "plan_label": None, "answer": None if answer is None else str(answer), "split": None,
            "meta": json.dumps({"question_date": q.get("question_date"), "abstention": is_abstention,
                                "answer_session_ids": sorted(evidence)}, sort_keys=True),
        })
    card = {
        "format": FORMAT,
        "inputs": {path.name: sha256_file(path)},
        "loader": {"name": "longmemeval", "version": LOADER_VERSION, "unit": unit},
        "scope": "one question's haystack (question_id); the question is asked after its last session: all units eligible",
        "units": ("one doc per haystack session: its user turns' text joined by spaces" if unit == "session" else
                  "one doc per user turn, id <session id>_<turn index from 1> (assistant turns counted, not indexed)"),
        "relevance": (
            "grade 1 for a unit of an evidence session (answer_session_ids) holding a user turn marked has_answer "
            "(turn units: that turn itself); abstention questions (question_id ending _abs) have no qrels and are left "
            "out of the retrieval metrics, as in the official evaluation"
        ),
        "exclusions": {
            "questions_total": len(queries),
            "abstention_questions": len(abstention),
            "abstention_question_ids": abstention,
            "questions_without_evidence_units": len(without_evidence),
            "questions_without_evidence_unit_ids": without_evidence,
        },
    }
    dropped = {
        "abstention questions (no qrels: left out of the retrieval metrics, as the official evaluation does)": abstention,
        "questions whose evidence sessions hold no user turn marked has_answer (no qrels)": without_evidence,
    }
    return SourceDataset("longmemeval", pd.DataFrame(sources), pd.DataFrame(queries), qrels, card,
                         keep_whole=True, dropped={k: v for k, v in dropped.items() if v})
