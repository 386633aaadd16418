"""``make bench`` section ``encode``: the runner's embedder (cold cache) against a bare
``SentenceTransformer.encode`` over the same LoCoMo texts in one process (target: runner >= 0.9 x bare)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.config import load_config, to_dict


def bench_encode(n_texts: int, reps: int) -> dict[str, Any]:
    """Texts/s of Embedder.encode (fresh cache each rep) vs bare SentenceTransformer.encode."""
    from experiments.datasets import prepare_dataset
    from lethe.retrieval.embedder import Embedder
    from lethebench.schema import read_dataset

    cfg = load_config(["dataset=locomo"])
    ds = read_dataset(prepare_dataset(cfg), "locomo")
    texts = ds.corpus["text"].tolist()[:n_texts]
    emb_cfg = to_dict(cfg.embedder)
    base = Embedder(emb_cfg, cache_dir=None, show_progress=False)
    st = base.st
    st.encode(texts[:64], batch_size=base.batch_size)  # warm-up
    bare_s, runner_s = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        st.encode(texts, batch_size=base.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        bare_s.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as cache:
            e = Embedder(base.model, cache_dir=cache, batch_size=base.batch_size, show_progress=False)
            e._st = st  # same loaded model: the comparison is of the code path, not of loading
            t0 = time.perf_counter()
            e.encode(texts, "doc")
            e.flush()
            runner_s.append(time.perf_counter() - t0)
    bare, runner = statistics.median(bare_s), statistics.median(runner_s)
    return {
        "texts": len(texts),
        "reps": reps,
        "bare_texts_per_s": len(texts) / bare,
        "runner_texts_per_s": len(texts) / runner,
        "runner_over_bare": bare / runner,
        "target": ">= 0.9",
    }


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_encode(int(cfg.texts), int(cfg.reps))


def show(e: dict[str, Any]) -> None:
    print(
        f"encode ({e['texts']} LoCoMo turns, median of {e['reps']}): runner {e['runner_texts_per_s']:.1f} texts/s, "
        f"bare SentenceTransformer {e['bare_texts_per_s']:.1f} texts/s, ratio {e['runner_over_bare']:.3f} (target >= 0.9)"
    )
