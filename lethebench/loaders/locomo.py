"""Conversations in LoCoMo's JSON format (snap-research/LoCoMo ``locomo10.json``) -> the data model.

One scope per conversation; one source per dialog turn; questions are asked after the whole
conversation, so every turn is eligible. Relevance: the turns named in a question's ``evidence``
(grade 1), after cleaning the ids as described in ``../shared/data/README.md``.

The loader knows the format, not the data: where the data came from, its licence and citation
are the dataset config's ``provenance`` section (``conf/dataset/locomo.yaml``), written to the
card by the build, so the same loader serves any conversation set in this format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from lethe.core.hashing import sha256_file
from lethebench.loaders.fields import checked, strict_loads
from lethebench.schema import DatasetError, SourceDataset

LOADER_VERSION = "1"
# The category map of the official LoCoMo evaluation code, pinned here and written to the card.
CATEGORY_MAP: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SHIPPED_FILE = "snap-research/LoCoMo data/locomo10.json"  # named in the file-not-found hint only
FORMAT = ("LoCoMo JSON: a list of conversations {sample_id, conversation: {speaker_a, speaker_b, session_<N>: "
          "[{speaker, dia_id, text, blip_caption?}], session_<N>_date_time}, qa: [{question, answer | "
          "adversarial_answer, evidence: [dia_id], category}]}")

_SESSION_RE = re.compile(r"^session_(\d+)$")
_ID_RE = re.compile(r"^D:?(\d+):(\d+)$")


def clean_evidence(raw: list[Any]) -> tuple[list[str], list[str]]:
    """Clean LoCoMo evidence ids: split on ';' and whitespace, 'D:11:26' -> 'D11:26', 'D30:05' -> 'D30:5'.

    Returns (clean ids in first-seen order without duplicates, tokens that are not turn ids).
    """
    ids: list[str] = []
    bad: list[str] = []
    for entry in raw:
        for tok in re.split(r"[;\s]+", str(entry).strip()):
            if not tok:
                continue
            m = _ID_RE.match(tok)
            if m:
                cid = f"D{int(m.group(1))}:{int(m.group(2))}"
                if cid not in ids:
                    ids.append(cid)
            else:
                bad.append(tok)
    return ids, bad


def _turn_text(turn: dict[str, Any], speaker_prefix: bool, image_captions: bool) -> str:
    text = str(turn.get("text", "")).strip()
    if image_captions and turn.get("blip_caption"):
        text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
    return f"{turn['speaker']}: {text}" if speaker_prefix else text


def load_locomo(path: str | Path, speaker_prefix: bool = True, image_captions: bool = True) -> SourceDataset:
    """Read ``locomo10.json``.

    ``speaker_prefix`` writes "Speaker: text" as the turn text (questions name speakers);
    ``image_captions`` appends the BLIP caption of a shared photo, as the LoCoMo RAG setup does.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"LoCoMo file not found at {path}. Point data.root (or LETHE_DATA_ROOT) at the folder that "
            f"holds locomo/locomo10.json; upstream: {SHIPPED_FILE}."
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DatasetError(
            f"{path}: not UTF-8 text: byte {raw[exc.start]:#04x} at line {line}, column {col} (offset {exc.start}) "
            f"({exc.reason}); LoCoMo files are UTF-8 JSON"
        ) from exc
    try:
        data = strict_loads(text, str(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of conversations, got {type(data).__name__}")
    if not data:
        raise DatasetError(f"{path}: the JSON list holds no conversations; expected at least one "
                           f"{{sample_id, conversation, qa}} object")

    sources, queries, qrels = [], [], {}
    report: dict[str, Any] = {"questions": 0, "without_evidence": [], "dangling_evidence": [],
                              "malformed_evidence_tokens": [], "stray_session_keys": {}}
    for ci, conv in enumerate(data):
        if not isinstance(conv, dict):
            raise DatasetError(f"{path}: conversation #{ci}: expected a JSON object, got {type(conv).__name__}")
        for key in ("sample_id", "conversation", "qa"):
            if key not in conv:
                raise DatasetError(f"{path}: conversation #{ci}: missing key '{key}'")
        sid = str(checked(conv["sample_id"], f"{path}: conversation #{ci}", "sample_id", (str, int), "a string"))
        c = conv["conversation"]
        if not isinstance(c, dict):
            raise DatasetError(f"{path}: {sid}: key 'conversation' must be an object, got {type(c).__name__}")
        if not isinstance(conv["qa"], list):
            raise DatasetError(f"{path}: {sid}: key 'qa' must be a list, got {type(conv['qa']).__name__}")
        sessions = sorted((int(m.group(1)), k) for k in c if (m := _SESSION_RE.match(k)))
        stray = sorted((k for k in c if k.endswith("_date_time") and k[: -len("_date_time")] not in c),
                       key=lambda k: int(re.findall(r"\d+", k)[0]))
        if stray:
            report["stray_session_keys"][sid] = stray
        turn_ids = set()
        pos = 0
        for snum, skey in sessions:
            turns = c[skey]
            if not isinstance(turns, list):
                raise DatasetError(f"{path}: {sid}/{skey}: expected a list of turns, got {type(turns).__name__}")
            when = c.get(f"{skey}_date_time")
            if when is not None:
                checked(when, f"{path}: {sid}", f"{skey}_date_time", str, "a string or null")
            for ti, t in enumerate(turns):
                if not isinstance(t, dict):
                    raise DatasetError(f"{path}: {sid}/{skey} turn #{ti}: expected a JSON object, got {type(t).__name__}")
                for key in ("speaker", "dia_id", "text"):
                    if key not in t:
                        raise DatasetError(f"{path}: {sid}/{skey} turn #{ti}: missing key '{key}'")
                    checked(t[key], f"{path}: {sid}/{skey} turn #{ti}", key, str, "a string")
                if t.get("blip_caption") is not None:
                    checked(t["blip_caption"], f"{path}: {sid}/{skey} turn #{ti}", "blip_caption", str,
                            "a string or null")
                dia = clean_evidence([t["dia_id"]])[0]
                if len(dia) != 1:
                    raise DatasetError(f"{path}: {sid}/{skey} turn #{ti}: malformed dia_id {t['dia_id']!r}")
                turn_ids.add(dia[0])
                meta = {"session": snum, "dia_id": dia[0]}
                if t.get("blip_caption"):
                    meta["blip_caption"] = t["blip_caption"]
                sources.append({
                    "doc_id": f"{sid}:{dia[0]}", "scope_id": sid, "position": pos,
                    "text": _turn_text(t, speaker_prefix, image_captions), "kind": "turn",
                    "speaker": str(t["speaker"]), "timestamp": when, "source_id": f"{sid}:{dia[0]}",
                    "entities": [], "meta": json.dumps(meta, sort_keys=True),
                })
                pos += 1
        for qi, qa in enumerate(conv["qa"]):
            report["questions"] += 1
            qid = f"{sid}:q{qi}"
            if not isinstance(qa, dict):
                raise DatasetError(f"{path}: {sid} qa #{qi}: expected a JSON object, got {type(qa).__name__}")
            for key in ("question", "category"):
                if key not in qa:
                    raise DatasetError(f"{path}: {sid} qa #{qi}: missing key '{key}'")
            where = f"{path}: {sid} qa #{qi}"
            checked(qa["question"], where, "question", str, "a string")
            for key in ("answer", "adversarial_answer"):   # LoCoMo writes some answers as numbers (years)
                if qa.get(key) is not None:
                    checked(qa[key], where, key, (str, int, float), "a string, a number or null")
            if qa.get("evidence") is not None:
                checked(qa["evidence"], where, "evidence", list, "a list of turn ids (e.g. [\"D1:3\"])")
                for ei, e in enumerate(qa["evidence"]):
                    checked(e, where, f"evidence[{ei}]", str, "a turn id string (e.g. \"D1:3\")")
            cat = checked(qa["category"], where, "category", int, f"an integer, one of {sorted(CATEGORY_MAP)}")
            if cat not in CATEGORY_MAP:
                raise DatasetError(f"{path}: {sid} qa #{qi}: unknown category {cat!r}; known {sorted(CATEGORY_MAP)}")
            raw_ev = qa.get("evidence") or []
            ids, bad = clean_evidence(raw_ev)
            if bad:
                report["malformed_evidence_tokens"].append({"query_id": qid, "tokens": bad})
            dangling = [i for i in ids if i not in turn_ids]
            if dangling:
                report["dangling_evidence"].append({"query_id": qid, "ids": dangling})
            valid = [i for i in ids if i in turn_ids]
            if valid:
                qrels[qid] = {f"{sid}:{i}": 1 for i in valid}
            else:
                report["without_evidence"].append(qid)
            answer = qa.get("answer")
            meta = {"category_id": cat, "evidence_raw": [str(e) for e in raw_ev]}
            if "adversarial_answer" in qa:
                meta["adversarial_answer"] = qa["adversarial_answer"]
            queries.append({
                "query_id": qid, "scope_id": sid, "position": pos, "text": str(qa["question"]).strip(),
                "history": [], "domain": None, "category": CATEGORY_MAP[cat], "complexity": None,
                "plan_label": None, "answer": None if answer is None else str(answer), "split": None,
                "meta": json.dumps(meta, sort_keys=True),
            })
    if not sources:
        raise DatasetError(f"{path}: no dialog turns in any of its {len(data)} conversation(s); expected "
                           f"session_<N> lists of turns under 'conversation'")
    src = pd.DataFrame(sources)
    qdf = pd.DataFrame(queries)
    dropped = {
        "evidence references to turns that do not exist (dropped)":
            [f"{d['query_id']} -> {i}" for d in report["dangling_evidence"] for i in d["ids"]],
        "malformed evidence tokens (dropped)":
            [f"{d['query_id']} -> {t!r}" for d in report["malformed_evidence_tokens"] for t in d["tokens"]],
        "questions without valid evidence (no qrels: excluded from retrieval metrics)": list(report["without_evidence"]),
        "session_<N>_date_time keys without a session (ignored)":
            [f"{sid}: {k}" for sid, keys in report["stray_session_keys"].items() for k in keys],
    }
    card = {
        "format": FORMAT,
        "inputs": {path.name: sha256_file(path)},
        "loader": {"name": "locomo", "version": LOADER_VERSION, "speaker_prefix": speaker_prefix,
                   "image_captions": image_captions},
        "scope": "one conversation (sample_id); queries are asked after the last turn: all turns eligible",
        "relevance": (
            "grade 1 for each turn named in the question's evidence list, after cleaning ids (split on ';' and "
            "whitespace, 'D:11:26' -> 'D11:26', 'D30:05' -> 'D30:5'); evidence naming no existing turn is dropped "
            "and listed below; questions left with no valid evidence have no qrels and are excluded from "
            "retrieval metrics (counted by every run)."
        ),
        "category_map": {str(k): v for k, v in CATEGORY_MAP.items()},
        "exclusions": {
            "questions_total": report["questions"],
            "questions_without_valid_evidence": len(report["without_evidence"]),
            "questions_without_valid_evidence_ids": report["without_evidence"],
            "invalid_evidence_refs": sum(len(d["ids"]) for d in report["dangling_evidence"])
            + sum(len(d["tokens"]) for d in report["malformed_evidence_tokens"]),
            "dangling_evidence_refs": sum(len(d["ids"]) for d in report["dangling_evidence"]),
            "dangling_evidence": report["dangling_evidence"],
            "malformed_evidence_tokens": report["malformed_evidence_tokens"],
            "stray_session_date_keys": report["stray_session_keys"],
        },
    }
    return SourceDataset("locomo", src, qdf, qrels, card, dropped={k: v for k, v in dropped.items() if v})
