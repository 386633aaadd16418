"""Bring your own system: a Python retriever, a callable or a finished ranking, run like any config method.

:func:`experiments.api.experiment` accepts, besides method config names, any of:

* an object with the method protocol (``index(docs)`` / ``search(query, k)``, :class:`lethe.core.protocol.Method`;
  ``describe``/``close`` optional): called exactly as the runner calls a config method, so it sees only each
  query's eligible docs, and an ineligible doc in its ranking stops the run (as for every method);
* a callable ``text -> [(doc_id, score), ...]`` (or ``{doc_id: score}``): a retriever over the whole collection;
  its results are cut to each query's eligible docs (later turns and other scopes dropped, counted per query in
  the flag ``byo_dropped``), put in the runner's canonical order (lethe.retrieval.ranking) and cut to ``run.k``;
* a finished ranking: a TREC run file (a :class:`pathlib.Path`), a ranx ``Run``, a dict
  ``{query_id: {doc_id: score}}`` or a DataFrame with columns ``query_id`` (or ``q_id``), ``doc_id``, ``score``;
  each query's ranking is cut to its eligible docs as for a callable; a query the ranking lacks has no results
  (status ``no_results``, scored 0, counted by the flag ``byo_missing``).

Each becomes a run config whose method section is ``{name, _target_: experiments.byo.registered, key, kind,
fingerprint}``; the runner builds it through :func:`registered`, which returns the adapter this process
registered under ``key``, and files the run like any other (``<results_dir>/<dataset>/<name>/<config hash>``).
A finished ranking's fingerprint is the sha256 of its content, so the same ranking reuses its finished run; a
Python object's is its class and its ``describe()`` (when it has one), and since code can change under the
same description, such a run is always made again (``run.overwrite=true``).

A dataset of your own (``corpus``, ``queries``, ``qrels`` as frames, dicts or files) is written once as a BEIR
folder named by the sha256 of its content and loaded by ``dataset=beir`` (:func:`adhoc_dataset`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lethe.core.hashing import content_hash
from lethe.core.protocol import Doc, Method, Query, SearchResult
from lethe.core.secrets import redact
from lethe.retrieval.ranking import top_k
from lethebench.trec import read_run

TARGET = "experiments.byo.registered"
Scores = dict[str, dict[str, float]]  # query_id -> doc_id -> score

_REGISTRY: dict[str, tuple[str, Any]] = {}  # key -> (kind, what the runner calls)


def _eligible_ranking(scores: Mapping[str, float], allowed: set[str], k: int) -> tuple[list[tuple[str, float]], int]:
    """The top ``k`` of ``scores`` among ``allowed`` docs (score descending, then doc id descending) and how many
    scored docs were not allowed."""
    kept = [(d, float(s)) for d, s in scores.items() if d in allowed]
    return top_k(kept, k), len(scores) - len(kept)


def _as_scores(pairs: Any, what: str) -> dict[str, float]:
    """``[(doc_id, score), ...]`` or ``{doc_id: score}`` -> {doc_id: score}; a doc id named twice, a score that is not a
    finite number, or anything else than pairs or a mapping is an error naming ``what``."""
    if pairs is None or isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
        raise TypeError(
            f"{what}: returned {type(pairs).__name__} {str(pairs)[:40]!r}; expected (doc_id, score) pairs or a "
            "{doc_id: score} mapping"
        )
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    out: dict[str, float] = {}
    for item in items:
        try:
            doc, score = item
        except (TypeError, ValueError):
            raise TypeError(
                f"{what}: expected (doc_id, score) pairs or a {{doc_id: score}} mapping, got {item!r}"
            ) from None
        if str(doc) in out:
            raise ValueError(f"{what}: doc id {doc!r} named twice")
        out[str(doc)] = _finite(score, f"{what}, doc {doc!r}")
    return out


def _finite(value: Any, what: str, noun: str = "score") -> float:
    """``value`` as a finite float, else ValueError naming ``what`` and ``noun`` (a NaN score would be ranked
    arbitrarily)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {noun} {value!r} is not a number") from None
    if not math.isfinite(x):
        raise ValueError(f"{what}: {noun} {value!r} is not a finite number")
    return x


class Adapter:
    """What the runner calls for a bring-your-own system (the method protocol)."""

    name: str
    kind: str

    def __init__(self, name: str) -> None:
        self.name = name
        self._allowed: set[str] = set()

    def index(self, docs: Sequence[Doc]) -> None:
        self._allowed = {d.doc_id for d in docs}

    def search(self, query: Query, k: int) -> SearchResult:  # pragma: no cover - each adapter defines it
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind}

    def close(self) -> None:
        pass


class ObjectAdapter(Adapter):
    """An object with ``index``/``search``: every call goes to it (its optional abilities too)."""

    kind = "object"

    def __init__(self, name: str, obj: Any) -> None:
        super().__init__(name)
        self.obj = obj

    def index(self, docs: Sequence[Doc]) -> None:
        self.obj.index(docs)

    def search(self, query: Query, k: int) -> SearchResult:
        res = self.obj.search(query, k)
        if isinstance(res, SearchResult):
            return res
        return SearchResult(top_k(_as_scores(res, f"system {self.name!r}: {_qualname(self.obj)}.search"), k))

    def describe(self) -> dict[str, Any]:
        own = self.obj.describe() if callable(getattr(self.obj, "describe", None)) else None
        # an outside object may report a key or a URL with a password: it reaches the manifest redacted
        return {**super().describe(), "class": _qualname(self.obj), "describe": redact(own)}

    def close(self) -> None:
        if callable(getattr(self.obj, "close", None)):
            self.obj.close()


class CallableAdapter(Adapter):
    """A callable ``text -> scored docs`` over the whole collection, cut to each query's eligible docs."""

    kind = "callable"

    def __init__(self, name: str, fn: Callable[[str], Any]) -> None:
        super().__init__(name)
        self.fn = fn

    def search(self, query: Query, k: int) -> SearchResult:
        ranking, dropped = _eligible_ranking(
            _as_scores(self.fn(query.text), f"system {self.name!r} ({_qualname(self.fn)})"), self._allowed, k
        )
        return SearchResult(ranking, flags={"byo_dropped": dropped})

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "callable": _qualname(self.fn)}


class RankingAdapter(Adapter):
    """A finished ranking ``{query_id: {doc_id: score}}``, cut to each query's eligible docs."""

    kind = "ranking"

    def __init__(self, name: str, scores: Scores, source: str, fingerprint: str) -> None:
        super().__init__(name)
        self.scores, self.source, self.fingerprint = scores, source, fingerprint

    def set_collection(self, docs: Sequence[Doc]) -> None:
        """Refuse a ranking that is empty or names no document of the dataset, before any search."""
        if not any(self.scores.values()):
            raise ValueError(f"ranking {self.name!r} ({self.source}) is empty: it scores no document")
        known = {d.doc_id for d in docs}
        if not any(d in known for r in self.scores.values() for d in r):
            some = sorted({d for r in self.scores.values() for d in r})[:3]
            raise ValueError(
                f"ranking {self.name!r} ({self.source}) names no document of this dataset (e.g. {some}; the "
                f"dataset's are e.g. {sorted(known)[:3]}): is it a ranking of another collection?"
            )

    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Refuse a ranking that names none of the run's queries, before any search."""
        if not any(str(q) in self.scores for q in query_ids):
            raise ValueError(
                f"ranking {self.name!r} ({self.source}) names none of the run's {len(query_ids)} queries (its query "
                f"ids are e.g. {sorted(self.scores)[:3]}; the run's e.g. {list(query_ids)[:3]})"
            )

    def search(self, query: Query, k: int) -> SearchResult:
        own = self.scores.get(str(query.query_id))
        ranking, dropped = _eligible_ranking(own or {}, self._allowed, k)
        return SearchResult(ranking, flags={"byo_dropped": dropped, "byo_missing": own is None})

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "source": self.source,
            "sha256": self.fingerprint,
            "queries": len(self.scores),
            "scored_docs": sum(len(v) for v in self.scores.values()),
        }


def _qualname(obj: Any) -> str:
    # a function or class by its own name, an instance by its class
    t = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(t, '__module__', '?')}.{t.__qualname__}"


def ranking_scores(system: Any) -> tuple[Scores, str] | None:
    """A finished ranking as ({query_id: {doc_id: score}}, where it came from), or None if ``system`` is not one."""
    if isinstance(system, Path):
        run = read_run(system)
        return {q: _as_scores(r, f"{system}, query {q}") for q, r in run.items()}, str(system)
    if isinstance(system, pd.DataFrame):
        qcol = "query_id" if "query_id" in system.columns else "q_id"
        missing = [c for c in (qcol, "doc_id", "score") if c not in system.columns]
        if missing:
            raise ValueError(f"a ranking DataFrame needs columns query_id (or q_id), doc_id, score; missing {missing}")
        out: Scores = {}
        for i, (q, d, s) in enumerate(
            zip(system[qcol].astype(str), system["doc_id"].astype(str), system["score"], strict=True)
        ):
            if d in out.setdefault(q, {}):
                raise ValueError(f"ranking DataFrame: query {q!r} names doc {d!r} twice")
            out[q][d] = _finite(s, f"ranking DataFrame row {i}, query {q!r}, doc {d!r}")
        return out, "DataFrame"
    source = "dict"
    if type(system).__name__ == "Run" and callable(getattr(system, "to_dict", None)):  # ranx.Run, not importing ranx
        system, source = system.to_dict(), "ranx.Run"
    if isinstance(system, Mapping) and system and all(isinstance(v, Mapping) for v in system.values()):
        return {str(q): _as_scores(r, f"ranking {source}, query {q!r}") for q, r in system.items()}, source
    return None


@dataclass(frozen=True)
class Registered:
    """A bring-your-own system ready for a run config: its method section and whether its run is always remade."""

    method: dict[str, Any]
    live: bool


def register(name: str, system: Any) -> Registered:
    """Register ``system`` under ``name`` in this process; the method section a run config gets for it."""
    ranking = ranking_scores(system)
    if ranking is not None:
        scores, source = ranking
        fingerprint = content_hash(scores)
        adapter: Any = RankingAdapter(name, scores, source, fingerprint)
    elif callable(getattr(system, "index", None)) and callable(getattr(system, "search", None)):
        # the whole protocol: the runner calls the object itself, optional abilities (set_collection, ...) included
        adapter = system if isinstance(system, Method) else ObjectAdapter(name, system)
        own = system.describe() if callable(getattr(system, "describe", None)) else None
        fingerprint = content_hash({"class": _qualname(system), "describe": own})
    elif callable(system):
        adapter = CallableAdapter(name, system)
        fingerprint = content_hash({"callable": _qualname(system)})
    else:
        raise TypeError(
            f"system {name!r}: expected a method config name, an object with index/search, a callable "
            f"text -> [(doc_id, score)], a TREC run file (pathlib.Path), a ranx Run, a DataFrame "
            f"(query_id, doc_id, score) or a dict {{query_id: {{doc_id: score}}}}; got {type(system).__name__}"
        )
    kind = getattr(adapter, "kind", "object") if isinstance(adapter, Adapter) else "object"
    key = f"{name}@{fingerprint[:16]}"
    _REGISTRY[key] = (kind, adapter)
    section = {"name": name, "_target_": TARGET, "key": key, "kind": kind, "fingerprint": fingerprint}
    if getattr(system, "supervision", None) is not None:  # what it learns from, if it says (lethebench/supervision.py)
        section["supervision"] = system.supervision
    return Registered(section, live=kind != "ranking")


def registered(key: str, kind: str, fingerprint: str, cache_dir: Any = None, progress: bool = False) -> Any:
    """The adapter :func:`register` filed under ``key`` in this process (the ``_target_`` of a bring-your-own
    run's method section; ``kind``/``fingerprint`` identify the run, ``cache_dir``/``progress`` are unused)."""
    entry = _REGISTRY.get(key)
    if entry is None:
        raise LookupError(
            f"method.key={key!r}: no system of that key is registered in this process; a bring-your-own system "
            "runs from the Python process that passed it to experiments.api.experiment"
        )
    if entry[0] != kind:
        raise ValueError(f"method.key={key!r} is a {entry[0]}, the config says {kind}")
    return entry[1]


def names_of(systems: Iterable[Any]) -> list[str]:
    """Default names of systems given in a list: a config name as is, a file its stem, an object its ``name``
    attribute or class name, a callable its ``__name__``."""
    out = []
    for s in systems:
        if isinstance(s, str):
            out.append(s)
        elif isinstance(s, Path):
            out.append(s.stem)
        elif isinstance(getattr(s, "name", None), str):
            out.append(s.name)
        elif callable(s) and hasattr(s, "__name__") and s.__name__ != "<lambda>":
            out.append(s.__name__)
        else:
            out.append(type(s).__name__)
    return out


# ----------------------------------------------------------------------------- your own topics and qrels

ADHOC_KEYS = ("corpus", "queries", "qrels")


def _jsonl_rows(part: Any, what: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """A corpus or queries given as a DataFrame (``doc_id``/``query_id`` or ``_id``, ``text``, optional ``title``), a
    dict ``{id: text}`` or a BEIR ``.jsonl`` file -> BEIR rows ``{"_id", "text"[, "title"]}``."""
    if isinstance(part, (str, Path)):
        path = Path(part)
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if isinstance(part, Mapping):
        return [{"_id": str(k), "text": str(v)} for k, v in part.items()]
    if isinstance(part, pd.DataFrame):
        idcol = next((c for c in (*columns, "_id") if c in part.columns), None)
        if idcol is None or "text" not in part.columns:
            raise ValueError(f"{what}: a DataFrame needs columns {' or '.join((*columns, '_id'))} and text")
        rows = [{"_id": str(i), "text": str(t)} for i, t in zip(part[idcol], part["text"], strict=True)]
        if "title" in part.columns:
            for row, title in zip(rows, part["title"], strict=True):
                row["title"] = "" if pd.isna(title) else str(title)
        return rows
    raise TypeError(f"{what}: a DataFrame, a dict {{id: text}} or a BEIR .jsonl file; got {type(part).__name__}")


def _grade(value: Any, what: str) -> int:
    """A relevance grade as an int; a fractional or non-numeric grade is refused (``int()`` would truncate 0.7 to 0)."""
    x = _finite(value, what, "relevance grade")
    if not x.is_integer():
        raise ValueError(f"{what}: relevance grade {value!r} is not a whole number")
    return int(x)


ADHOC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def _qrels_rows(part: Any, what: str) -> list[tuple[str, str, int]]:
    """Qrels given as a DataFrame (``query_id``, ``doc_id``, ``relevance`` or ``score``), a dict ``{qid: {doc: grade}}``
    or a TREC qrels file -> (query, doc, grade) rows."""
    if isinstance(part, (str, Path)):
        from lethebench.trec import read_qrels

        part = read_qrels(part)
    if isinstance(part, Mapping):
        return [(str(q), str(d), _grade(g, f"{what} {q!r}/{d!r}")) for q, docs in part.items() for d, g in docs.items()]
    if isinstance(part, pd.DataFrame):
        grade = next((c for c in ("relevance", "score", "grade") if c in part.columns), None)
        qcol = "query_id" if "query_id" in part.columns else "q_id"
        if grade is None or qcol not in part.columns or "doc_id" not in part.columns:
            raise ValueError(f"{what}: a DataFrame needs columns query_id (or q_id), doc_id, relevance (or score)")
        return [
            (str(q), str(d), _grade(g, f"{what} row {i}"))
            for i, (q, d, g) in enumerate(zip(part[qcol], part["doc_id"], part[grade], strict=True))
        ]
    raise TypeError(f"{what}: a DataFrame, a dict {{query_id: {{doc_id: grade}}}} or a TREC qrels file")


def adhoc_dataset(name: str, spec: Mapping[str, Any], root: Path) -> list[str]:
    """Your own corpus, topics and qrels (``spec``: ``corpus``, ``queries``, ``qrels``) written once as a BEIR folder
    ``<root>/<name>-<sha256 of its content, 16>`` and loaded by ``dataset=beir`` (whole documents, one scope): the
    run overrides that name it. The same content is the same folder and dataset build, so it is built once."""
    if not isinstance(name, str) or not ADHOC_NAME.match(name):
        raise ValueError(
            f"datasets[{name!r}]: an ad-hoc dataset name is 1-64 letters, digits, '_' or '-', starting with a letter or "
            "digit (it names a folder and a config value)"
        )
    unknown = sorted(set(spec) - set(ADHOC_KEYS))
    missing = [k for k in ADHOC_KEYS if k not in spec]
    if unknown or missing:
        raise ValueError(
            f"datasets[{name!r}]: expected the keys {list(ADHOC_KEYS)}; missing {missing}, unknown {unknown}"
        )
    corpus = _jsonl_rows(spec["corpus"], f"datasets[{name!r}].corpus", ("doc_id",))
    queries = _jsonl_rows(spec["queries"], f"datasets[{name!r}].queries", ("query_id", "q_id"))
    qrels = _qrels_rows(spec["qrels"], f"datasets[{name!r}].qrels")
    files = {
        "corpus.jsonl": "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in corpus),
        "queries.jsonl": "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in queries),
        "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels),
    }
    folder = root / f"{name}-{content_hash(files, 16)}"
    if not (folder / "qrels" / "test.tsv").is_file():
        from lethe.core.atomic import atomic_write_text

        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(folder / rel, text)
    return [f"dataset.name={name}", f"dataset.beir_dir={folder.resolve()}"]
