"""The fusion stage of the Lethe pipeline (paper Eq. 3): per sub-query, alpha * minmax(BM25) + (1 - alpha) * cosine
+ boost over the union of its candidates; several sub-queries' lists, each cut to retrieval's depth
(``s.list_depth``), are merged with RRF (``s.rrf_k``, set by the stage that made them). The ranking is the fused list cut to the pipeline's depth; the whole list stays in
``s.fused`` for diversification."""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np

from lethe.retrieval.fusion import minmax, rrf
from lethe.retrieval.ranking import top_indices
from lethe.stages.state import QueryState


class Fuse:
    """No parameter of its own: alpha comes from planning or learned fusion, the RRF constant from understanding."""

    phase: ClassVar[str] = "rank"

    def step(self, s: QueryState) -> None:
        if s.alpha is None:
            raise ValueError("fuse: no alpha (a planning or learned-fusion stage sets it before fusion)")
        t0 = time.perf_counter()
        alpha = float(s.alpha)
        lists = []
        for c in s.subs:
            score = alpha * minmax(c.bm25) + (1 - alpha) * c.cos + c.boost
            order = top_indices(score, len(score), tie_rank=c.idx)
            lists.append((c.idx[order], score[order]))
        if len(lists) == 1:
            idx, rel = lists[0]
        else:
            if s.rrf_k is None:
                raise ValueError("fuse: several sub-query lists but no RRF constant (s.rrf_k)")
            fused = rrf([list(ix[: s.list_depth]) for ix, _ in lists], s.rrf_k)
            keys = np.fromiter(fused.keys(), dtype=np.int64, count=len(fused))
            vals = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
            order = top_indices(vals, len(vals), tie_rank=keys)
            idx, rel = keys[order], vals[order]
        s.fused = (idx, rel)
        ids = [s.collection.docs[i].doc_id for i in idx[: s.depth]]
        s.ranking = [(d, float(r)) for d, r in zip(ids, rel[: s.depth], strict=True)]
        s.timings["fusion"] = (time.perf_counter() - t0) * 1e3
        s.flags.update({"alpha": round(alpha, 4), "candidates": int(sum(len(c.idx) for c in s.subs))})
