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
9. time per job of the reproduction tiers (``tiers``), from the declared runs' manifests (wall,
   method start-up and index build seconds) and the measured prerequisite times (datasets, models).
Writes ``<out_dir>/bench.json`` (default ``results/bench``) and prints a summary.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from experiments.config import load_config, to_dict
from lethe.core.paths import PROJECT_ROOT, project_path
from lethebench.runs import RunFolder


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
    return {"texts": len(texts), "reps": reps, "bare_texts_per_s": len(texts) / bare,
            "runner_texts_per_s": len(texts) / runner, "runner_over_bare": bare / runner, "target": ">= 0.9"}


def bench_methods(methods: list[str], scratch: Path) -> dict[str, Any]:
    """Full-LoCoMo runs of each method into a scratch folder (doc embeddings from the project cache;
    queries are never cached by default, so latency includes encoding them)."""
    from experiments.runner import run_experiment

    out = {}
    for m in methods:
        cfg = load_config([f"method={m}", f"results_dir={scratch}", "run.progress=false", "run.print_summary=false"])
        res = RunFolder(run_experiment(cfg))
        met = res.metrics
        out[m] = {"qps": met["qps"], "p50_ms": met["latency_ms"]["p50"], "p95_ms": met["latency_ms"]["p95"],
                  "queries": met["queries"]["evaluated"], "ndcg@10": met["means"]["ndcg@10"],
                  "index_build_s": res.manifest["index_build_seconds"]}
    return out


def bench_lethe(methods: list[str], scratch: Path) -> dict[str, Any]:
    """Full-LoCoMo runs of the Lethe iterations; per-stage mean ms and share of the mean latency."""
    from experiments.runner import run_experiment

    out = {}
    for m in methods:
        cfg = load_config([f"method={m}", f"results_dir={scratch}", "run.progress=false", "run.print_summary=false"])
        res = RunFolder(run_experiment(cfg))
        met = res.metrics
        stages = res.timings().fillna(0.0)
        total = float(res.per_query["latency_ms"].mean())
        out[m] = {"queries": met["queries"]["evaluated"], "p50_ms": met["latency_ms"]["p50"],
                  "p95_ms": met["latency_ms"]["p95"], "mean_ms": total, "ndcg@10": met["means"]["ndcg@10"],
                  "stage_mean_ms": {c: float(stages[c].mean()) for c in stages.columns},
                  "stage_share": {c: float(stages[c].mean()) / total for c in stages.columns},
                  "unattributed_share": 1.0 - float(stages.sum(axis=1).mean()) / total,
                  "load_average": res.manifest["load_average"]}
    return out


LLM_BENCH_PROMPT = ("Summarize in two sentences why per-session term statistics can help retrieval over a long "
                    "conversation between a developer and a coding assistant. ") * 6


def bench_llm(models: list[str], reps: int) -> dict[str, Any]:
    """Tokens/s (prompt, generation) per model, median of ``reps`` uncached calls; cache-hit latency;
    LLM share of lethe_iter2_llm latency per dataset from finished runs."""
    from analysis.declared_runs import load_run
    from experiments import reproduce as R
    from lethe.llm.backends import make_llm
    from lethe.llm.base import Decoding, Message

    out: dict[str, Any] = {"models": {}, "iter2_llm_share": {}}
    msgs = [Message("user", LLM_BENCH_PROMPT)]
    for name in models:
        cfg = load_config([f"llm={name}"])
        with tempfile.TemporaryDirectory() as tmp:
            llm = make_llm(to_dict(cfg.llm), cache_dir=tmp)
            calls = [llm.chat(msgs, Decoding(max_tokens=64, seed=i)) for i in range(reps)]  # a seed each: uncached
            t0 = time.perf_counter()
            hit = llm.chat(msgs, Decoding(max_tokens=64, seed=0))
            hit_ms = (time.perf_counter() - t0) * 1e3
            llm.close()

        def rate(tokens: int | None, ms: float | None) -> float | None:
            return tokens / (ms / 1e3) if tokens and ms else None

        def med(xs: list[float | None]) -> float | None:
            xs = [x for x in xs if x is not None]
            return statistics.median(xs) if xs else None

        out["models"][name] = {
            "prompt_tokens_per_s": med([rate(c.prompt_tokens, c.timings_ms.get("prompt")) for c in calls]),
            "generation_tokens_per_s": med([rate(c.completion_tokens, c.timings_ms.get("generation")) for c in calls]),
            "uncached_call_ms": med([c.timings_ms["total"] for c in calls]), "prompt_tokens": calls[0].prompt_tokens,
            "completion_tokens": calls[0].completion_tokens, "cache_hit_ms": hit_ms, "cache_hit": hit.cached}
    refs = [ref for ref in R.refs_for("reference", R.load()) if ref.label == "lethe_iter2_llm"]
    for ds, r in ((ref.dataset, load_run(ref.folder)) for ref in refs):
        if r is None:
            continue
        t = r.timings().fillna(0.0)
        lat = float(r.per_query["latency_ms"].mean())
        out["iter2_llm_share"][ds] = {"queries": len(r.per_query), "mean_latency_ms": lat,
                                      "mean_llm_ms": float(t["llm"].mean()) if "llm" in t else 0.0,
                                      "llm_share": float(t["llm"].mean()) / lat if "llm" in t and lat else 0.0,
                                      "llm": r.manifest.get("config", {}).get("llm", {}).get("name")}
    return out


def _dataset(name: str):
    from experiments.datasets import prepare_dataset
    from lethebench.schema import read_dataset

    return read_dataset(prepare_dataset(load_config([f"dataset={name}"])), name)


def _docs(ds, scope: str):
    from lethe.core.protocol import Doc

    c = ds.corpus[ds.corpus.scope_id == scope].sort_values("position")
    return [Doc(r.doc_id, r.text, int(r.position)) for r in c.itertuples()]


def bench_bm25(reps: int) -> dict[str, Any]:
    """In-memory BM25 vs Pyserini on LoCoMo: index seconds and queries/s, same queries, medians."""
    from baselines.bm25 import PyseriniBM25
    from baselines.bm25_memory import InMemoryBM25
    from lethe.core.protocol import Query

    ds = _dataset("locomo")
    out: dict[str, Any] = {}
    for name, cls in (("in_memory", InMemoryBM25), ("pyserini", PyseriniBM25)):
        idx_s, q_s, n_q = [], [], 0
        for _ in range(reps):
            with tempfile.TemporaryDirectory() as cache:
                m = cls(cache_dir=cache)
                ti = tq = 0.0
                n_q = 0
                for scope in ds.scope_ids():
                    docs = _docs(ds, scope)
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
    return out


def bench_faiss(nlist: int, nprobe: int, reps: int) -> dict[str, Any]:
    """FAISS-IVF vs exact search on precomputed query vectors: recall@10 against exact, speed-up."""
    import numpy as np

    from baselines.faiss_ivf import FaissIVF
    from lethe.retrieval.ranking import top_indices
    from lethe.retrieval.embedder import Embedder

    cfg = load_config([])
    emb = Embedder(to_dict(cfg.embedder), cache_dir=project_path(cfg.cache_dir), show_progress=False)
    out = {}
    for name in ("locomo", "ultradomain_cs"):
        ds = _dataset(name)
        recalls, exact_t, ivf_t, used = [], 0.0, 0.0, []
        for scope in ds.scope_ids():
            f = FaissIVF(emb, nlist=nlist, nprobe=nprobe)
            f.index(_docs(ds, scope))
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
            recalls += [len(set(e.tolist()) & set(i.tolist())) / 10 for e, i in zip(ex, ivf)]
        out[name] = {"queries": len(recalls), "recall@10_vs_exact": float(np.mean(recalls)), "nlist_used": sorted(set(used)),
                     "nprobe": nprobe, "exact_ms_per_query": 1e3 * exact_t / len(recalls),
                     "ivf_ms_per_query (batched)": 1e3 * ivf_t / len(recalls), "speedup": exact_t / ivf_t}
    return out


def bench_analysis() -> dict[str, Any]:
    """Wall time of the whole report (tables, figures, report.md) over the finished declared runs."""
    from analysis.report import build_report, load_cfg
    from experiments import reproduce as R

    refs = R.refs_for("reference", R.load())
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        build_report(load_cfg([f"out_dir={out}"]), refs)
        return {"seconds": time.perf_counter() - t0, "declared_runs": len(refs), "target": "< 60"}


def bench_jobs(tiers: list[str], overrides: list[str]) -> dict[str, Any]:
    """Per tier: each finished declared run's wall / start-up / index-build seconds (from its manifest)
    and the measured prerequisite times (results dir's .reproduce/prepare_seconds.json)."""
    from experiments import reproduce as R

    out: dict[str, Any] = {}
    for name in tiers:
        rows = {}
        for tier, runs in R.resolve_tiers(R.load([f"tier={name}", *overrides])):
            for r in runs:
                if not r.done:
                    rows[r.key] = None
                    continue
                man = RunFolder(r.folder).manifest
                rows[r.key] = {"wall_s": man.get("wall_seconds"), "init_s": man.get("method_init_seconds"),
                               "index_s": man.get("index_build_seconds"),
                               "queries": man.get("dataset", {}).get("card_counts", {}).get("queries"),
                               "load_average": man.get("load_average", {}).get("at_start")}
            prep = R._read_json(R._prepare_file(runs))
            out[name] = {"runs": rows, "prepare_s": prep,
                         "total_run_s": sum(v["wall_s"] for v in rows.values() if v),
                         "missing": [k for k, v in rows.items() if v is None]}
    return out


def bench_reproduce(scratch: Path) -> dict[str, Any]:
    """Wall time of `make reproduce` restricted to three LoCoMo runs of the core tier (window, BM25,
    vector) from empty data/cache/results folders, then again (warm: everything is skipped)."""
    args = (f"select=[locomo/window,locomo/bm25,locomo/vector] data.processed={scratch / 'processed'} "
            f"cache_dir={scratch / 'cache'} results_dir={scratch / 'results'} run.progress=false "
            f"out_dir.reference={scratch / 'out'}")
    env = {**os.environ, "REPRODUCE_ARGS": args}
    times, verified = [], []
    for _ in ("cold", "warm"):
        t0 = time.perf_counter()
        r = subprocess.run(["make", "reproduce"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        summary = [line for line in r.stdout.splitlines() if " values: " in line]
        if r.returncode != 0 and not summary:  # a verification FAIL still times the command; a crash does not
            raise RuntimeError(f"make reproduce failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        verified.append(summary[-1] if summary else None)
    return {"cold_s": times[0], "warm_s": times[1], "warm_over_cold": times[1] / times[0], "target": "< 0.25",
            "verification": verified}


SECTIONS = ("encode", "methods", "bm25", "faiss", "lethe", "llm", "jobs", "analysis", "reproduce")


def bench(cfg: DictConfig) -> dict[str, Any]:
    """Run ``cfg.sections`` (settings: ``conf/bench.yaml``), print each, update ``<out_dir>/bench.json``;
    return its content."""
    only = set(cfg.sections)
    unknown = sorted(only - set(SECTIONS))
    if unknown:
        raise SystemExit(f"unknown bench sections {unknown}; known: {list(SECTIONS)}")
    reps = int(cfg.reps)
    out_dir = project_path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = out_dir / "bench.json"
    # sections not re-run keep their last figures (`sections` updates just the sections it names)
    report: dict[str, Any] = json.loads(previous.read_text()) if previous.is_file() else {}
    if "encode" in only:
        e = report["encode"] = bench_encode(int(cfg.texts), reps)
        print(f"encode ({e['texts']} LoCoMo turns, median of {e['reps']}): runner {e['runner_texts_per_s']:.1f} texts/s, "
              f"bare SentenceTransformer {e['bare_texts_per_s']:.1f} texts/s, ratio {e['runner_over_bare']:.3f} (target >= 0.9)")
    if "methods" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["methods"] = bench_methods(list(cfg.methods), Path(scratch) / "runs")
        print(f"{'method':14} {'queries':>7} {'QPS':>9} {'P50 ms':>8} {'P95 ms':>8} {'index s':>8} {'nDCG@10':>8}")
        for m, r in report["methods"].items():
            print(f"{m:14} {r['queries']:7d} {r['qps']:9.1f} {r['p50_ms']:8.2f} {r['p95_ms']:8.2f} {r['index_build_s']:8.2f} {r['ndcg@10']:8.4f}")
    if "bm25" in only:
        b = report["bm25"] = bench_bm25(reps)
        print(f"BM25 on LoCoMo ({b['in_memory']['queries']} queries, k=100, median of {reps}): in-memory "
              f"{b['in_memory']['qps']:.0f} q/s, index {b['in_memory']['index_s']:.2f} s; Pyserini {b['pyserini']['qps']:.0f} q/s, "
              f"index {b['pyserini']['index_s']:.2f} s; ratio {b['qps_ratio_in_memory_over_pyserini']:.2f}")
    if "faiss" in only:
        ivf = load_config(["method=faiss_ivf"]).method
        report["faiss"] = bench_faiss(int(ivf.nlist), int(ivf.nprobe), reps)
        for name, r in report["faiss"].items():
            print(f"FAISS-IVF on {name} (nlist used {r['nlist_used']}, nprobe {r['nprobe']}): recall@10 vs exact "
                  f"{r['recall@10_vs_exact']:.4f}, exact {r['exact_ms_per_query']:.3f} ms/q, IVF {r['ivf_ms_per_query (batched)']:.3f} ms/q, "
                  f"speed-up {r['speedup']:.1f}x")
    if "lethe" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["lethe"] = bench_lethe(list(cfg.lethe), Path(scratch) / "runs")
        for m, r in report["lethe"].items():
            shares = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r["stage_share"].items(), key=lambda x: -x[1]))
            print(f"{m} on LoCoMo ({r['queries']} queries): P50 {r['p50_ms']:.2f} ms, P95 {r['p95_ms']:.2f} ms "
                  f"(target < 50), nDCG@10 {r['ndcg@10']:.4f}; stages: {shares}, other {r['unattributed_share']:.0%}")
    if "llm" in only:
        report["llm"] = bench_llm(list(cfg.llms), reps)
        for m, r in report["llm"]["models"].items():
            print(f"LLM {m}: prompt {r['prompt_tokens_per_s'] or float('nan'):.1f} tok/s, generation "
                  f"{r['generation_tokens_per_s'] or float('nan'):.1f} tok/s ({r['prompt_tokens']} prompt tokens, "
                  f"{r['completion_tokens']} generated), uncached call {r['uncached_call_ms']:.0f} ms, "
                  f"cache hit {r['cache_hit_ms']:.2f} ms (hit={r['cache_hit']})")
        for ds, r in report["llm"]["iter2_llm_share"].items():
            print(f"lethe_iter2_llm on {ds} ({r['queries']} queries, {r['llm']}): mean {r['mean_latency_ms']:.0f} ms per query, "
                  f"LLM {r['mean_llm_ms']:.0f} ms = {r['llm_share']:.0%}")
    if "jobs" in only:
        report["jobs"] = bench_jobs(list(cfg.tiers), [str(o) for o in cfg.run_overrides])
        for tier, j in report["jobs"].items():
            print(f"tier {tier}: {len(j['runs']) - len(j['missing'])} finished runs, {j['total_run_s'] / 60:.1f} min of "
                  f"runs; prerequisites: " + (", ".join(f"{k} {v:.0f} s" for k, v in j["prepare_s"].items()) or "none measured"))
            for key, r in sorted(j["runs"].items(), key=lambda kv: -(kv[1] or {}).get("wall_s", 0)):
                if r:
                    print(f"  {key:45} {r['wall_s']:9.1f} s  (start-up {r['init_s']:.1f} s, index {r['index_s']:.1f} s, "
                          f"load {r['load_average']})")
            if j["missing"]:
                print(f"  not run: {j['missing']}")
    if "analysis" in only:
        a = report["analysis"] = bench_analysis()
        print(f"analysis of all finished runs: {a['seconds']:.1f} s (target < 60 s)")
    if "reproduce" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["reproduce"] = bench_reproduce(Path(scratch))
        r = report["reproduce"]
        print(f"make reproduce: cold {r['cold_s']:.1f} s, warm {r['warm_s']:.1f} s, warm/cold {r['warm_over_cold']:.3f} (target < 0.25)")
    (out_dir / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {out_dir / 'bench.json'}")
    return report


@hydra.main(config_path="../conf", config_name="bench", version_base="1.3")
def main(cfg: DictConfig) -> None:
    bench(cfg)


if __name__ == "__main__":
    main()
