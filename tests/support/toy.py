"""A tiny conversational dataset in the data model, for runner and validation tests."""

from __future__ import annotations

import json

import pandas as pd

from lethebench.schema import Dataset


def toy_dataset(name: str = "toy") -> Dataset:
    """Two scopes. In 'chat' queries are asked mid-conversation (positions 2 and 5), so only
    earlier turns are eligible; 'notes' is a corpus scope whose query comes after every doc."""
    docs = []
    chat = [
        "install the cli with pip",
        "the cli crashed with ECONNREFUSED",
        "restart the daemon then retry",
        "the daemon listens on port 8080",
        "port 8080 was busy so we moved to 9090",
        "all tests pass now",
    ]
    for i, t in enumerate(chat):
        docs.append(
            {
                "doc_id": f"chat:{i}",
                "scope_id": "chat",
                "position": i,
                "text": t,
                "kind": "turn",
                "speaker": "user" if i % 2 == 0 else "assistant",
                "timestamp": None,
                "source_id": f"chat:{i}",
                "entities": [],
                "meta": "{}",
            }
        )
    for i, t in enumerate(["bm25 ranks by term statistics", "dense vectors capture paraphrase"]):
        docs.append(
            {
                "doc_id": f"notes:{i}",
                "scope_id": "notes",
                "position": i,
                "text": t,
                "kind": "note",
                "speaker": None,
                "timestamp": None,
                "source_id": f"notes:{i}",
                "entities": [],
                "meta": "{}",
            }
        )
    corpus = pd.DataFrame(docs)
    queries = pd.DataFrame(
        [
            {"query_id": "q_early", "scope_id": "chat", "position": 2, "text": "what error did the cli show?"},
            {"query_id": "q_late", "scope_id": "chat", "position": 5, "text": "which port does the daemon use?"},
            {"query_id": "q_first", "scope_id": "chat", "position": 0, "text": "anything before the chat?"},
            {"query_id": "q_notes", "scope_id": "notes", "position": 2, "text": "what captures paraphrase?"},
        ]
    )
    for col in ("domain", "category", "complexity", "plan_label", "answer"):
        queries[col] = None
    queries["history"] = [[] for _ in range(len(queries))]
    queries["meta"] = json.dumps({})
    qrels = {
        "q_early": {"chat:1": 1},
        "q_late": {"chat:3": 2, "chat:4": 1},
        "q_first": {"chat:0": 1},
        "q_notes": {"notes:1": 1},
    }
    return Dataset(name, corpus, queries, qrels, card={"name": name, "description": "toy fixture"})
