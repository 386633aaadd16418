"""``make bench`` section ``bm25``: in-memory BM25 against Pyserini on LoCoMo: index time and queries/s."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.bench._data import dataset, scope_docs


def bench_bm25(reps: int) -> dict[str, Any]:
    """In-memory BM25 vs Pyserini on LoCoMo: index seconds and queries/s, same queries, medians."""
    from baselines.bm25 import PyseriniBM25
    from baselines.bm25_memory import InMemoryBM25
    from lethe.core.protocol import Query

    ds = dataset("locomo")
    out: dict[str, Any] = {}
    for name, cls in (("in_memory", InMemoryBM25), ("pyserini", PyseriniBM25)):
        idx_s, q_s, n_q = [], [], 0
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as cache:
                m = cls(cache_dir=cache)
                ti = tq = 0.0
                n_q = 0
                for scope in ds.scope_ids():
                    docs = scope_docs(ds, scope)
                    t0 = time.perf_counter()
                    m.index(docs)
                    ti += time.perf_counter() - t0
                    qs = ds.queries[ds.queries.scope_id == scope]["text"].tolist()
                    t0 = time.perf_counter()
                    for q in qs:
                        m.search(Query(q), 100)
                    tq += time.perf_counter() - t0
                    n_q += len(qs)
                m.close()
            idx_s.append(ti)
            q_s.append(tq)
        out[name] = {"index_s": statistics.median(idx_s), "qps": n_q / statistics.median(q_s), "queries": n_q}
    out["qps_ratio_in_memory_over_pyserini"] = out["in_memory"]["qps"] / out["pyserini"]["qps"]
    out["reps"] = reps
    return out


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_bm25(int(cfg.reps))


def show(b: dict[str, Any]) -> None:
    print(
        f"BM25 on LoCoMo ({b['in_memory']['queries']} queries, k=100, median of {b['reps']}): in-memory "
        f"{b['in_memory']['qps']:.0f} q/s, index {b['in_memory']['index_s']:.2f} s; Pyserini {b['pyserini']['qps']:.0f} q/s, "
        f"index {b['pyserini']['index_s']:.2f} s; ratio {b['qps_ratio_in_memory_over_pyserini']:.2f}"
    )
