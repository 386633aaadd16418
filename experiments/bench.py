"""``make bench``: performance figures, as ratios within one run and medians (never test asserts).

Measures on LoCoMo:
1. encode throughput of the runner's embedder (cold cache) vs a bare ``SentenceTransformer.encode``
   over the same texts in the same process (target: runner >= 0.9 x bare);
2. queries/s and P50/P95 warm latency per baseline (full LoCoMo runs into a scratch folder);
3. cold vs warm wall time of ``make reproduce`` with fresh data/cache/results folders
   (target: warm < 1/4 of cold).
Writes ``results/bench/bench.json`` and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.config import PROJECT_ROOT, load_config, project_path, to_dict


def bench_encode(n_texts: int, reps: int) -> dict[str, Any]:
    """Texts/s of Embedder.encode (fresh cache each rep) vs bare SentenceTransformer.encode."""
    from experiments.datasets import prepare_dataset
    from lethe.embedder import Embedder
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
    return {"texts": len(texts), "reps": reps, "bare_texts_per_s": len(texts) / bare,
            "runner_texts_per_s": len(texts) / runner, "runner_over_bare": bare / runner, "target": ">= 0.9"}


def bench_methods(methods: list[str], scratch: Path) -> dict[str, Any]:
    """Full-LoCoMo runs of each method with an empty cache (so query latency includes encoding)."""
    from experiments.runner import run_experiment

    out = {}
    for m in methods:
        cfg = load_config([f"method={m}", f"results_dir={scratch}", f"cache_dir={scratch / 'cache'}",
                           "run.progress=false", "run.print_summary=false"])
        folder = run_experiment(cfg)
        met = json.loads((folder / "metrics.json").read_text())
        out[m] = {"qps": met["qps"], "p50_ms": met["latency_ms"]["p50"], "p95_ms": met["latency_ms"]["p95"],
                  "queries": met["queries"]["evaluated"], "ndcg@10": met["means"]["ndcg@10"],
                  "index_build_s": json.loads((folder / "manifest.json").read_text())["index_build_seconds"]}
    return out


def bench_reproduce(scratch: Path) -> dict[str, Any]:
    """Wall time of `make reproduce` from empty data/cache/results folders, then again."""
    env = {**os.environ, "LETHE_PROCESSED": str(scratch / "processed"), "LETHE_CACHE": str(scratch / "cache"),
           "LETHE_RESULTS": str(scratch / "results"), "LETHE_PROGRESS": "false"}
    times = []
    for _ in ("cold", "warm"):
        t0 = time.perf_counter()
        r = subprocess.run(["make", "reproduce"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise RuntimeError(f"make reproduce failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return {"cold_s": times[0], "warm_s": times[1], "warm_over_cold": times[1] / times[0], "target": "< 0.25"}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Lethe harness benchmarks")
    ap.add_argument("--texts", type=int, default=2000, help="texts for the encode comparison")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (median reported)")
    ap.add_argument("--methods", default="window,bm25,vector")
    ap.add_argument("--skip-reproduce", action="store_true", help="skip the cold/warm make reproduce timing")
    args = ap.parse_args(argv)
    out_dir = project_path("results/bench")
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"encode": bench_encode(args.texts, args.reps)}
    e = report["encode"]
    print(f"encode ({e['texts']} LoCoMo turns, median of {e['reps']}): runner {e['runner_texts_per_s']:.1f} texts/s, "
          f"bare SentenceTransformer {e['bare_texts_per_s']:.1f} texts/s, ratio {e['runner_over_bare']:.3f} (target >= 0.9)")
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        report["methods"] = bench_methods(args.methods.split(","), Path(scratch) / "runs")
    print(f"{'method':8} {'queries':>7} {'QPS':>9} {'P50 ms':>8} {'P95 ms':>8} {'index s':>8} {'nDCG@10':>8}")
    for m, r in report["methods"].items():
        print(f"{m:8} {r['queries']:7d} {r['qps']:9.1f} {r['p50_ms']:8.2f} {r['p95_ms']:8.2f} {r['index_build_s']:8.2f} {r['ndcg@10']:8.4f}")
    if not args.skip_reproduce:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["reproduce"] = bench_reproduce(Path(scratch))
        r = report["reproduce"]
        print(f"make reproduce: cold {r['cold_s']:.1f} s, warm {r['warm_s']:.1f} s, warm/cold {r['warm_over_cold']:.3f} (target < 0.25)")
    (out_dir / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {out_dir / 'bench.json'}")


if __name__ == "__main__":
    main()
