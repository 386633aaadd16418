"""The contradiction stage (Lethe iteration 4's ``contradiction``): demotion of contradicted (stale) docs.

A detector (``rules`` or ``llm``, :mod:`lethe.stages.contradiction.detectors`) finds (stale, current) pairs among
the docs the query may see (``check_depth: null``; detection runs once per indexed doc set) or among the top
``check_depth`` of the incoming ranking (per query; the only affordable scope for the ``llm`` backend). Every
stale doc in the ranking is demoted by ``penalty`` (:func:`lethe.stages.contradiction.rules.demote`, on the
incoming scores' min-max scale or, ``demote_on: rank``, on ranks), and the pairs that touch the ranking's top
``log_depth`` are logged in ``flags["contradiction"]`` with the number demoted; the stage time is
``timings_ms["contradiction"]``. The ``llm`` backend's failed and unparsed judgments count as LLM failures of the
query.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from lethe.core.protocol import Doc, Query, record_llm_failures
from lethe.llm.pool import LLMPool
from lethe.stages.contradiction.rules import Conflict, demote

SECTION = "method.stages.contradiction"


class ContradictionStage:
    """Detect and demote stale docs (module docstring); a ranking stage with ``IndexAware``, ``ReadsCandidates``
    and ``UsesLLMs``."""

    def __init__(
        self,
        *,
        enabled: bool,
        backend: str,
        penalty: float,
        check_depth: int | None,
        log_depth: int,
        demote_on: str,
        options: Mapping[str, Any],
        llm: Mapping[str, Any] | None,
    ):
        """``backend``: rules | llm; ``penalty`` in [0, 1] on the stale doc's normalized score; ``check_depth``:
        None = all docs the query may see, else the ranking's top N; ``log_depth``: pairs touching this many top
        docs are logged; ``demote_on``: 'score' or 'rank'; ``options``: detector settings; ``llm``: the ``llm``
        backend's model config."""
        if not 0.0 <= float(penalty) <= 1.0:
            raise ValueError(f"{SECTION}.penalty must be in [0, 1], got {penalty}")
        self.enabled, self.backend, self.penalty = bool(enabled), str(backend), float(penalty)
        self.check_depth = None if check_depth is None else int(check_depth)
        self.log_depth, self.demote_on = int(log_depth), str(demote_on)
        self.options, self.llm_cfg = dict(options or {}), llm
        self.detector: Any = None  # built by bind_llms
        self._conflicts: list[Conflict] = []

    def bind_llms(self, llms: LLMPool) -> None:
        """Build the detector (the ``llm`` backend's model from the pool); nothing when the stage is off."""
        if not self.enabled:
            return
        from lethe.stages.contradiction.detectors import make_detector

        llm = llms.get(self.llm_cfg, f"{SECTION}.llm") if self.backend == "llm" else None
        self.detector = make_detector(self.backend, llm=llm, **self.options)

    def on_index(self, docs: Sequence[Doc]) -> None:
        """Detection over the whole eligible set (``check_depth: null``), once per indexed doc set."""
        self._conflicts = []
        if self.detector is not None and self.check_depth is None:
            self._conflicts = list(self.detector.detect(list(docs)).conflicts)

    def candidate_depth(self) -> int:
        return self.check_depth if self.detector is not None and self.check_depth is not None else 0

    def apply(
        self,
        query: Query,
        ranking: list[tuple[str, float]],
        docs_by_id: Mapping[str, Doc],
        timings: dict[str, float],
        flags: dict[str, Any],
    ) -> list[tuple[str, float]]:
        if self.detector is None or not ranking:
            return ranking
        t0 = time.perf_counter()
        conflicts = self._conflicts
        det: dict[str, Any] = {"scope": "eligible"}
        if self.check_depth is not None:
            res = self.detector.detect([docs_by_id[d] for d, _ in ranking[: self.check_depth]])
            conflicts = list(res.conflicts)
            det = {
                "scope": f"top{self.check_depth}",
                "pairs_considered": res.pairs_considered,
                "judged": res.judged,
                "parse_failures": res.parse_failures,
                "timeouts": res.timeouts,
                "errors": res.errors,
                "llm_ms": round(res.llm_ms, 1),
            }
            if self.backend == "llm":
                record_llm_failures(flags, infra=res.errors, parse=res.parse_failures)
        in_ranking = {d for d, _ in ranking}
        hit = [c for c in conflicts if c.stale_doc_id in in_ranking]
        if hit and self.penalty > 0:
            ranking = demote(ranking, hit, self.penalty, on=self.demote_on)
        timings["contradiction"] = (time.perf_counter() - t0) * 1e3
        top_ids = {d for d, _ in ranking[: self.log_depth]}
        det["demoted"] = len({c.stale_doc_id for c in hit})
        det["pairs"] = [
            [c.stale_doc_id, c.current_doc_id, c.entity, c.attribute]
            for c in hit
            if c.stale_doc_id in top_ids or c.current_doc_id in top_ids
        ]
        flags["contradiction"] = det
        return ranking

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "enabled": self.enabled,
            "backend": self.backend,
            "penalty": self.penalty,
            "check_depth": self.check_depth,
            "log_depth": self.log_depth,
            "demote_on": self.demote_on,
            "options": self.options,
            "llm": self.llm_cfg,
        }
        if self.detector is not None:
            out["detector"] = self.detector.describe()
        return out

    def close(self) -> None:
        """The backend belongs to the pipeline's pool, which closes it."""
