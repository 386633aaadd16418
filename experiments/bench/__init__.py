"""``make bench``: performance figures, as ratios within one run and medians (never test asserts).

    python -m experiments.bench                                  # every section (make bench)
    python -m experiments.bench sections=[jobs] tiers=[core]     # some sections; settings: conf/bench.yaml

Measures on LoCoMo (``sections``):
1. encode throughput of the runner's embedder (cold cache) vs a bare ``SentenceTransformer.encode``
   over the same texts in the same process (target: runner >= 0.9 x bare);
2. queries/s and P50/P95 warm latency per baseline (full LoCoMo runs into a scratch folder);
3. in-memory BM25 vs Pyserini: index time and queries/s;
4. FAISS-IVF recall@10 against exact search and its speed-up (LoCoMo and UltraDomain cs);
5. wall time of the report over the finished declared runs (target < 60 s);
6. cold vs warm wall time of ``make reproduce`` on three LoCoMo runs of the core tier, with fresh
   data/cache/results folders (target: warm < 1/4 of cold);
7. Lethe iterations 1-3 on full LoCoMo: warm P50/P95 per query (target P95 < 50 ms) and the
   share of the mean latency spent per stage (iteration 3 needs its fusion model:
   ``make fusion-models``);
8. LLM backends (in-process llama.cpp): prompt and generation tokens/s per model, cache-hit
   latency, and the share of ``lethe_iter2_llm``'s per-query latency spent in the LLM (from its
   finished runs);
9. iteration 4's LLM reranker on LetheBench, old path (every judgment re-evaluates its whole prompt)
   vs new path (prefix reuse + passage token cut, conf/method/lethe_iter4.yaml), interleaved in one
   process per model: share of the top 10 judged per budget (the budget curve), the ratio at
   1200 ms with its target (>= 3x), tokens evaluated per call and the p(yes) agreement of the two;
10. fast inference paths (``speed``): the query encoder and the cross-encoder on fp32 ONNX Runtime (the
    default, ``conf/model/*.yaml`` ``backend``) and int8 ONNX (an option) against sentence-transformers'
    fp32 torch path, interleaved in one process on LoCoMo and TechQA samples: queries/s and pairs/s
    ratios, top-10 overlap and nDCG@10 difference with their targets, and Lethe iterations 1-3's warm
    P95 on full LoCoMo with either embedder;
11. time per job of the reproduction tiers (``tiers``), from the declared runs' manifests (wall,
   method start-up and index build seconds) and the measured prerequisite times (datasets, models).
One module per section (``experiments/bench/<section>.py``: ``run(cfg, scratch) -> dict`` and ``show(result)``).
Writes ``<out_dir>/bench.json`` (default ``results/bench``) and prints a summary.
"""

from __future__ import annotations

import importlib
import json
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from lethe.core.paths import Paths

# the sections in the order they run; each is the module experiments.bench.<name>
SECTIONS = (
    "encode",
    "methods",
    "bm25",
    "faiss",
    "lethe",
    "llm",
    "rerank_reuse",
    "speed",
    "jobs",
    "analysis",
    "reproduce",
)


def bench(cfg: DictConfig) -> dict[str, Any]:
    """Run ``cfg.sections`` (settings: ``conf/bench.yaml``), print each, update ``<out_dir>/bench.json``;
    return its content."""
    only = set(cfg.sections)
    unknown = sorted(only - set(SECTIONS))
    if unknown:
        raise SystemExit(f"unknown bench sections {unknown}; known: {list(SECTIONS)}")
    out_dir = Paths.of(cfg).resolve(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = out_dir / "bench.json"
    # sections not re-run keep their last figures (`sections` updates just the sections it names)
    report: dict[str, Any] = json.loads(previous.read_text()) if previous.is_file() else {}
    for name in (s for s in SECTIONS if s in only):
        section = importlib.import_module(f"experiments.bench.{name}")
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:  # the section's runs and folders, removed after
            report[name] = section.run(cfg, Path(scratch))
        section.show(report[name])
    (out_dir / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {out_dir / 'bench.json'}")
    return report
