"""``make bench`` section ``faiss``: FAISS-IVF recall@10 against exact search and its speed-up (LoCoMo and
UltraDomain cs; ``conf/method/faiss_ivf.yaml``'s nlist and nprobe)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.bench._data import dataset, scope_docs
from experiments.config import load_config, to_dict
from lethe.core.paths import Paths


def bench_faiss(nlist: int, nprobe: int, reps: int) -> dict[str, Any]:
    """FAISS-IVF vs exact search on precomputed query vectors: recall@10 against exact, speed-up."""
    import numpy as np

    from baselines.faiss_ivf import FaissIVF
    from lethe.retrieval.embedder import Embedder
    from lethe.retrieval.ranking import top_indices

    cfg = load_config([])
    emb = Embedder(to_dict(cfg.embedder), cache_dir=Paths.of(cfg).cache, show_progress=False)
    out = {}
    for name in ("locomo", "ultradomain_cs"):
        ds = dataset(name)
        recalls, exact_t, ivf_t, used = [], 0.0, 0.0, []
        for scope in ds.scope_ids():
            f = FaissIVF(emb, nlist=nlist, nprobe=nprobe)
            f.index(scope_docs(ds, scope))
            used.append(f.nlist_used)
            qv = emb.encode(ds.queries[ds.queries.scope_id == scope]["text"].tolist(), role="query")
            x = f.dense.vecs
            te, tv = [], []
            for _ in range(reps):
                t0 = time.perf_counter()
                ex = [top_indices(x @ q, 10) for q in qv]
                te.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                _, ivf = f.index_.search(np.ascontiguousarray(qv, dtype=np.float32), 10)
                tv.append(time.perf_counter() - t0)
            exact_t += statistics.median(te)
            ivf_t += statistics.median(tv)
            recalls += [len(set(e.tolist()) & set(i.tolist())) / 10 for e, i in zip(ex, ivf, strict=True)]
        out[name] = {
            "queries": len(recalls),
            "recall@10_vs_exact": float(np.mean(recalls)),
            "nlist_used": sorted(set(used)),
            "nprobe": nprobe,
            "exact_ms_per_query": 1e3 * exact_t / len(recalls),
            "ivf_ms_per_query (batched)": 1e3 * ivf_t / len(recalls),
            "speedup": exact_t / ivf_t,
        }
    return out


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    ivf = load_config(["method=faiss_ivf"]).method
    return bench_faiss(int(ivf.nlist), int(ivf.nprobe), int(cfg.reps))


def show(faiss: dict[str, Any]) -> None:
    for name, r in faiss.items():
        print(
            f"FAISS-IVF on {name} (nlist used {r['nlist_used']}, nprobe {r['nprobe']}): recall@10 vs exact "
            f"{r['recall@10_vs_exact']:.4f}, exact {r['exact_ms_per_query']:.3f} ms/q, IVF {r['ivf_ms_per_query (batched)']:.3f} ms/q, "
            f"speed-up {r['speedup']:.1f}x"
        )
