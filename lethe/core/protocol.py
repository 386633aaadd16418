"""The one protocol every retrieval method implements (baselines and Lethe iterations).

The runner calls ``index(docs)`` with exactly the docs a query may see (its scope, and for
conversations only earlier positions), then ``search(query, k)`` for those queries. Methods never
see other scopes, later turns, qrels or answers, so they cannot peek.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

# The retrieval plans of the Lethe planner (lethe.stages.planning): the values of a query's ``flags["plan"]`` and of
# LetheBench's gold ``plan_label``, which the plan-accuracy analysis compares (analysis/plans.py).
PLANS = ("verify", "explore", "exploit")


@dataclass(frozen=True)
class Doc:
    """A retrieval unit (a chunk) as a method sees it."""

    doc_id: str
    text: str
    position: int
    kind: str = "text"
    speaker: str | None = None
    timestamp: str | None = None


@dataclass(frozen=True)
class Query:
    """A query as a method sees it: its text and the conversation history before it (oldest first).

    ``query_id`` and ``scope_id`` identify it (never its labels); a method trained on labelled
    queries uses them to prove it is not scoring a query it was trained on.
    """

    text: str
    history: tuple[str, ...] = ()
    query_id: str | None = None
    scope_id: str | None = None


@dataclass
class SearchResult:
    """A ranking (doc_id, score) with non-increasing scores, plus per-stage timings in ms.

    ``flags`` records anything the runner must count per query (fallbacks, timeouts, errors).
    """

    ranking: list[tuple[str, float]]
    timings_ms: dict[str, float] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)


LLM_FAILURES = "llm_failures"  # the per-query flag below


def record_llm_failures(flags: dict[str, Any], infra: int = 0, parse: int = 0) -> None:
    """Count, in ``flags["llm_failures"]``, this query's LLM calls that failed: ``infra`` = no usable answer
    (connection or HTTP error, timeout of a call that had to answer) and ``parse`` = an answer that did not
    parse (a fallback answered instead). A method that calls an LLM records every query, zeros included:
    the runner fails a run whose share of queries with infra failures exceeds ``run.max_error_share`` and
    marks it degraded past ``run.max_parse_fallback_share``."""
    rec = flags.setdefault(LLM_FAILURES, {"infra": 0, "parse": 0})
    rec["infra"] += int(infra)
    rec["parse"] += int(parse)


def count_fallback_causes(causes: Sequence[str]) -> tuple[int, int]:
    """(infra, parse) from fallback causes ``timeout`` / ``error`` / ``parse``."""
    return sum(c in ("timeout", "error") for c in causes), sum(c == "parse" for c in causes)


@runtime_checkable
class Method(Protocol):
    """A retrieval method as the runner drives it.

    Constructor contract: a method is built from its config section (``conf/method/<name>.yaml``, its ``_target_``
    checked by :func:`lethe.core.targets.build`) with every key of that section as a keyword argument, plus two the
    runner always passes: ``cache_dir`` (a folder for content-addressed caches, or None for no cache) and
    ``progress`` (whether to draw progress bars). A method accepts both, and reads every other key its config has
    (a test checks that each key is read). Then :meth:`index` whenever the eligible docs change, :meth:`search` per query,
    :meth:`describe` for the manifest and :meth:`close` once at the end; the optional abilities below are called
    where they say.
    """

    def index(self, docs: Sequence[Doc]) -> None:
        """Prepare to search exactly ``docs`` (replaces any previous index)."""

    def search(self, query: Query, k: int) -> SearchResult:
        """Top ``k`` of the indexed docs for ``query``."""

    def describe(self) -> dict[str, Any]:
        """Effective parameters, model ids and hashes, for the run manifest."""

    def close(self) -> None:
        """Flush caches and release resources."""


# Optional abilities. The runner checks each with isinstance (never hasattr) and calls it at the moment
# stated; a method implements only those it needs.


@runtime_checkable
class ExtendsIdentity(Protocol):
    """A method or stage (its class, named by a config section's ``_target_``) whose results depend on more than its
    section says, e.g. the content of a file the section names: ``hashed_section(section)`` returns the section as
    the run's identity hashes it (experiments.run_identity calls it on the resolved section before hashing; a
    ConfigError names a key it cannot read)."""

    @classmethod
    def hashed_section(cls, section: Mapping[str, Any]) -> Mapping[str, Any]: ...


@runtime_checkable
class MigratesSection(Protocol):
    """A method or stage whose config section changed shape: ``migrated_section(section)`` gives a section recorded
    in an older shape in today's (and today's unchanged), so a stored run's recorded config hashes as its current
    declaration does (experiments.run_identity.migrated; ``action=rekey`` refiles the records)."""

    @classmethod
    def migrated_section(cls, section: Mapping[str, Any]) -> Mapping[str, Any]: ...


@runtime_checkable
class UsesCollection(Protocol):
    def set_collection(self, docs: Sequence[Doc]) -> None:
        """Called once before any query with every doc of the dataset, for collection statistics such
        as corpus IDF. Results are still checked against each query's eligible docs."""


@runtime_checkable
class BindsDataset(Protocol):
    def bind_dataset(self, info: Mapping[str, Any]) -> None:
        """Called once before any query with ``{"name", "build_key", "pool"}`` of the dataset (``pool``: the
        key of the run's scopes/categories/sample selection, "" for every query), so a method carrying a
        trained artifact can load the one trained on this very build and query pool (else it raises)."""


@runtime_checkable
class UsesQuerySet(Protocol):
    def set_queries(self, query_ids: Sequence[str]) -> None:
        """Called once before any query with the ids of every query the run evaluates (in run order),
        e.g. to draw a seeded sample of queries for answer generation."""


@runtime_checkable
class Annotates(Protocol):
    def annotate(self, query: Query, result: SearchResult) -> None:
        """Called after each timed search, outside its latency: adds work that is not retrieval (answer
        generation and judging) to ``result.flags`` / ``result.timings_ms``. An exception is recorded
        on the query (status ``annotate_error``), the ranking is kept."""
