"""LetheBench: an openly synthetic benchmark of agent-style sessions, deterministic from (version, seed).

Sessions mix user, assistant and tool turns (prose, code, logs, tracebacks, JSON, shell output) in
four domains. Queries are asked mid-session; only earlier turns are eligible. Each query carries
graded qrels, a gold answer, gold entities, a category, a complexity and a plan label, all taken
from the generator's own knowledge. Splits (train/dev/test) are disjoint sessions drawn with
seeds derived from (version, seed, split). ``family`` picks the template family the text is written from
(``lethebench.generator.family``): ``dev`` (dataset ``lethebench``) or ``heldout`` (``lethebench_heldout``).
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from lethebench.generator.family import FAMILIES, get_family
from lethebench.generator.sessions import CATEGORIES, DOMAINS, PLAN_LABEL, SessionBuilder
from lethebench.schema import SourceDataset

LOADER_VERSION = "1"
DEFAULT_SPLITS = {"test": 125, "train": 125, "dev": 50}  # queries per domain


METHOD_VISIBLE = ("every turn's `kind` (prose, code, tool, chat) and `speaker`, as a message type and role in a real "
                  "agent log: methods may read them (the boost's kind affinities do). Labels (qrels, answers, "
                  "categories, gold entities, contradictions) are never method-visible.")


def source_files(files: list[Path], params: Mapping[str, Any]) -> list[Path]:
    """The generator's sources a build with ``params`` runs (``lethebench.build.loader_version``): every file but
    those of the other template families, so editing one family never rebuilds another."""
    family = str(params.get("family", "dev"))
    others = [f for f in FAMILIES if f != family]
    return [f for f in files if f.parent.name not in others or f.parent.parent != Path(__file__).parent]


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "big")


def generate(seed: int = 0, splits: Mapping[str, int] | None = None, session_turns: tuple[int, int] = (50, 90),
             queries_per_session: tuple[int, int] = (5, 8), family: str = "dev") -> SourceDataset:
    """Generate every split from template family ``family``. ``splits`` maps split name -> queries per domain."""
    fam = get_family(family)
    salt = () if family == "dev" else (family,)  # the dev family keeps the seeds it was first generated with
    splits = dict(splits or DEFAULT_SPLITS)
    lo_t, hi_t = (int(x) for x in session_turns)
    lo_q, hi_q = (int(x) for x in queries_per_session)
    docs: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    qrels: dict[str, dict[str, int]] = {}
    contra: list[dict[str, str]] = []
    for split in sorted(splits):
        for domain in DOMAINS:
            quota = int(splits[split])
            rng = random.Random(_seed("lethebench", LOADER_VERSION, seed, split, domain, *salt))
            stream: list[str] = []
            made, s_idx = 0, 0
            while made < quota:
                if len(stream) < hi_q:
                    block = CATEGORIES[:]
                    rng.shuffle(block)
                    stream += block
                n_q = min(rng.randint(lo_q, hi_q), quota - made)
                cats, stream = stream[:n_q], stream[n_q:]
                scope = f"{split}-{domain}-{s_idx:03d}"
                srng = random.Random(_seed("session", LOADER_VERSION, seed, split, domain, s_idx, *salt))
                sb = SessionBuilder(srng, domain, fam)
                gq = sb.build(cats, srng.randint(lo_t, hi_t))
                s_idx += 1
                by_pos = sorted(range(len(sb.turns)), key=lambda i: sb.turns[i].pos)
                doc_id = {i: f"{scope}:t{sb.turns[i].pos:03d}" for i in by_pos}
                for i in by_pos:
                    t = sb.turns[i]
                    docs.append({"doc_id": doc_id[i], "scope_id": scope, "position": t.pos, "text": t.text, "kind": t.kind,
                                 "speaker": t.role, "timestamp": None, "source_id": doc_id[i], "entities": list(t.entities),
                                 "meta": json.dumps({"split": split, "domain": domain}, sort_keys=True)})
                for j, q in enumerate(gq):
                    qid = f"{scope}:q{j}"
                    queries.append({
                        "query_id": qid, "scope_id": scope, "position": q.position, "text": q.text, "history": list(q.history),
                        "domain": domain, "category": q.category, "complexity": q.complexity,
                        "plan_label": PLAN_LABEL[q.category], "answer": q.answer, "split": split,
                        "meta": json.dumps({"gold_entities": q.gold_entities, "hops": q.hops,
                                            "subject": q.subject}, sort_keys=True),
                    })
                    qrels[qid] = {doc_id[i]: g for i, g in sorted(q.rel.items(), key=lambda x: doc_id[x[0]])}
                    contra += [{"query_id": qid, "stale_doc_id": doc_id[s], "current_doc_id": doc_id[c]} for s, c in q.stale]
                    made += 1
    card = {
        "name": "lethebench",
        "description": ("LetheBench: openly synthetic agent-style sessions (user, assistant and tool turns: prose, code, "
                        "logs, tracebacks, JSON, test reports, shell output) in four domains, generated by this project "
                        "from its own template libraries. It is not the dataset described in the Lethe paper, which "
                        "never existed as described."),
        "license": "Apache-2.0 (generated by this project)",
        "inputs": {},
        "loader": {"name": "lethebench", "version": LOADER_VERSION, "seed": seed, "splits": splits,
                   "session_turns": [lo_t, hi_t], "queries_per_session": [lo_q, hi_q],
                   **({} if family == "dev" else {"family": family})},
        "scope": "one session; a query at position p sees only turns with position < p",
        "relevance": ("taken from the generator's knowledge of which turn states which fact: grade 2 = the turn holds "
                      "the answer; grade 1 = context needed for it (the ownership turn of a multi-hop question, the "
                      "anchor step of an order question). Updated facts: the superseded turn is not relevant and the "
                      "(stale, current) pair is listed in contradictions.parquet."),
        "categories": {
            "single_hop": "direct question naming the service and attribute",
            "multi_hop": "service -> owning team (grade 1) -> on-call person or channel (grade 2)",
            "temporal": "the step right before/after a named step in an ordered sequence",
            "updated_fact": "a value changed later in the session; the question asks for the current one",
            "elliptical": "follow-up that needs `history` (entity or attribute omitted)",
            "identifier": "exact error code, function name or pinned version; near-duplicate identifiers nearby",
            "paraphrase": "names the service by what it does and the attribute in other words",
            "broad": "every fact about a service (many relevant turns)",
        },
        "complexity_rule": "score = (hops - 1) + ellipsis + [>= 4 eligible non-relevant turns name the query's service]; 0 low, 1 medium, >= 2 high",
        "plan_label_rule": "verify: identifier, updated_fact; explore: broad, multi_hop, paraphrase; exploit: single_hop, temporal, elliptical",
        "hard_negatives": ("turns naming a service and an attribute without its value; the same attribute of other "
                           "services; production and staging near-duplicates differing only in the value; near-duplicate "
                           "error codes, function names and version pins; on-call/channel facts of other teams"),
        "gold_entities": "queries.meta.gold_entities: the entities needed to answer, each occurring in a relevant turn",
    }
    if family != "dev":   # the dev family keeps the card it was first built with (its build key is pinned)
        card["template_family"] = {"name": family, "module": f"lethebench.generator.{family}",
                                   "written_against": fam.written_against}
        card["method_visible_metadata"] = METHOD_VISIBLE
    return SourceDataset("lethebench", pd.DataFrame(docs), pd.DataFrame(queries), qrels, card,
                         contradictions=pd.DataFrame(contra, columns=["query_id", "stale_doc_id", "current_doc_id"]))
