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
Writes ``<out_dir>/bench.json`` (default ``results/bench``) and prints a summary.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from experiments.config import load_config, to_dict
from experiments.run_identity import method_params
from lethe.core.arguments import check_arguments
from lethe.core.paths import PROJECT_ROOT, project_path
from lethebench.runs import RunFolder
from lethebench.schema import read_table


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


def bench_methods(methods: list[str], scratch: Path) -> dict[str, Any]:
    """Full-LoCoMo runs of each method into a scratch folder (doc embeddings from the project cache;
    queries are never cached by default, so latency includes encoding them)."""
    from experiments.runner import run_experiment

    out = {}
    for m in methods:
        cfg = load_config([f"method={m}", f"results_dir={scratch}", "run.progress=false", "run.print_summary=false"])
        res = RunFolder(run_experiment(cfg))
        met = res.metrics
        out[m] = {
            "qps": met["qps"],
            "p50_ms": met["latency_ms"]["p50"],
            "p95_ms": met["latency_ms"]["p95"],
            "queries": met["queries"]["evaluated"],
            "ndcg@10": met["means"]["ndcg@10"],
            "index_build_s": res.manifest["index_build_seconds"],
        }
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
        out[m] = {
            "queries": met["queries"]["evaluated"],
            "p50_ms": met["latency_ms"]["p50"],
            "p95_ms": met["latency_ms"]["p95"],
            "mean_ms": total,
            "ndcg@10": met["means"]["ndcg@10"],
            "stage_mean_ms": {c: float(stages[c].mean()) for c in stages.columns},
            "stage_share": {c: float(stages[c].mean()) / total for c in stages.columns},
            "unattributed_share": 1.0 - float(stages.sum(axis=1).mean()) / total,
            "load_average": res.manifest["load_average"],
        }
    return out


LLM_BENCH_PROMPT = (
    "Summarize in two sentences why per-session term statistics can help retrieval over a long "
    "conversation between a developer and a coding assistant. "
) * 6


def _rate(tokens: int | None, ms: float | None) -> float | None:
    """Tokens per second, or None without tokens or time."""
    return tokens / (ms / 1e3) if tokens and ms else None


def _median(xs: list[float | None]) -> float | None:
    """The median of the values that are not None (None when there are none)."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def bench_llm_threads(models: list[str], threads: list[int], reps: int) -> dict[str, Any]:
    """Per model: ``reps`` uncached calls at each llama.cpp thread count of ``threads``, interleaved call by call
    (so load drifts hit every count alike); median call ms and tokens/s per count, the speed-up of each count over
    the first, and whether every count generated the same texts (a thread count that changes outputs is another run)."""
    from lethe.llm.backends import make_llm
    from lethe.llm.base import Decoding, Message

    out: dict[str, Any] = {}
    msgs = [Message("user", LLM_BENCH_PROMPT)]
    for name in models:
        base = to_dict(load_config([f"llm={name}"]).llm)
        with tempfile.TemporaryDirectory() as tmp:
            llms = {n: make_llm({**base, "n_threads": n, "cache": False}, cache_dir=tmp) for n in threads}
            calls: dict[int, list[Any]] = {n: [] for n in threads}
            for i in range(reps):
                for n in threads if i % 2 == 0 else threads[::-1]:
                    calls[n].append(llms[n].chat(msgs, Decoding(max_tokens=64, seed=i)))
            for llm in llms.values():
                llm.close()
        ms = {n: statistics.median(c.timings_ms["total"] for c in cs) for n, cs in calls.items()}
        out[name] = {
            "threads": {
                str(n): {
                    "median_call_ms": ms[n],
                    "generation_tokens_per_s": _median(
                        [_rate(c.completion_tokens, c.timings_ms.get("generation")) for c in cs]
                    ),
                }
                for n, cs in calls.items()
            },
            "speedup_over_first": {str(n): ms[threads[0]] / ms[n] for n in threads},
            "identical_texts": all([c.text for c in calls[n]] == [c.text for c in calls[threads[0]]] for n in threads),
        }
    return out


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

        out["models"][name] = {
            "prompt_tokens_per_s": _median([_rate(c.prompt_tokens, c.timings_ms.get("prompt")) for c in calls]),
            "generation_tokens_per_s": _median(
                [_rate(c.completion_tokens, c.timings_ms.get("generation")) for c in calls]
            ),
            "uncached_call_ms": _median([c.timings_ms["total"] for c in calls]),
            "prompt_tokens": calls[0].prompt_tokens,
            "completion_tokens": calls[0].completion_tokens,
            "cache_hit_ms": hit_ms,
            "cache_hit": hit.cached,
        }
    refs = [ref for ref in R.refs_for("reference", R.load()) if ref.label == "lethe_iter2_llm"]
    for ds, r in ((ref.dataset, load_run(ref.folder)) for ref in refs):
        if r is None:
            continue
        t = r.timings().fillna(0.0)
        lat = float(r.per_query["latency_ms"].mean())
        out["iter2_llm_share"][ds] = {
            "queries": len(r.per_query),
            "mean_latency_ms": lat,
            "mean_llm_ms": float(t["llm"].mean()) if "llm" in t else 0.0,
            "llm_share": float(t["llm"].mean()) / lat if "llm" in t and lat else 0.0,
            "llm": r.manifest.get("config", {}).get("llm", {}).get("name"),
        }
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
    from lethe.retrieval.embedder import Embedder
    from lethe.retrieval.ranking import top_indices

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
    from experiments.prerequisites import prepare_file, read_json

    out: dict[str, Any] = {}
    for name in tiers:
        rows = {}
        for _tier, runs in R.resolve_tiers(R.load([f"tier={name}", *overrides])):
            for r in runs:
                if not r.done:
                    rows[r.key] = None
                    continue
                man = RunFolder(r.folder).manifest
                rows[r.key] = {
                    "wall_s": man.get("wall_seconds"),
                    "init_s": man.get("method_init_seconds"),
                    "index_s": man.get("index_build_seconds"),
                    "queries": man.get("dataset", {}).get("card_counts", {}).get("queries"),
                    "load_average": man.get("load_average", {}).get("at_start"),
                }
            prep = read_json(prepare_file(runs))
            out[name] = {
                "runs": rows,
                "prepare_s": prep,
                "total_run_s": sum(v["wall_s"] for v in rows.values() if v),
                "missing": [k for k, v in rows.items() if v is None],
            }
    return out


def bench_reproduce(scratch: Path) -> dict[str, Any]:
    """Wall time of `make reproduce` restricted to three LoCoMo runs of the core tier (window, BM25,
    vector) from empty data/cache/results folders, then again (warm: everything is skipped)."""
    args = (
        f"select=[locomo/window,locomo/bm25,locomo/vector] data.processed={scratch / 'processed'} "
        f"cache_dir={scratch / 'cache'} results_dir={scratch / 'results'} run.progress=false "
        f"out_dir.reference={scratch / 'out'}"
    )
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
    return {
        "cold_s": times[0],
        "warm_s": times[1],
        "warm_over_cold": times[1] / times[0],
        "target": "< 0.25",
        "verification": verified,
    }


def bench_rerank_reuse(s: Any, scratch: Path) -> dict[str, Any]:
    """Iteration 4's reranker, old path vs new path, per model in ONE process on the same seeded
    LetheBench sample: iteration 3's rankings (a real lethe_iter3 run into ``scratch``) are reranked at
    every budget of ``s.budgets_ms`` by two ``BudgetedReranker`` s built from lethe_iter4.yaml's rerank
    section: *new* = the section as configured, *old* = the same with ``s.old`` replacing values
    (no prefix reuse, no token cut: what the reranker did before). Each path has its own backend of
    the same model file (so the new one's KV cache only ever holds its own earlier prompts, as in a
    run). Budgets run in turn; within a budget the queries run once each per path, the two paths
    interleaved query by query (alternating which goes first). The budget curve (share judged, stage
    P50/P95, nDCG@10 with CI) comes from ``analysis.iteration4.budget_points`` over the per-query
    flags, as Figure 4's does from run folders. Also: prompt tokens llama.cpp evaluated per call,
    and |p(yes) new - old| on candidates both paths judged with the same passage text."""
    from types import SimpleNamespace

    import pandas as pd

    from analysis.iteration4 import budget_points
    from analysis.metrics import evaluate_run
    from analysis.report import load_cfg
    from analysis.views import DatasetView
    from experiments.api import resolve_runs, run_missing
    from lethe.llm.backends import make_llm
    from lethe.stages.rerank import DECODING, BudgetedReranker

    n, budgets, target_ms = int(s.queries), [float(b) for b in s.budgets_ms], float(s.target_ms)
    common = ["dataset=lethebench", f"dataset.sample={n}", *[str(o) for o in s.overrides]]
    # its learned-fusion model is keyed by this query pool (the sample): built first if missing, as reproduce does
    (it3_run,) = resolve_runs(
        "lethe_iter3",
        {"lethebench": common[1:]},
        [f"results_dir={scratch}", "run.progress=false", "run.print_summary=false"],
    )
    run_missing([it3_run], progress=False)
    it3 = RunFolder(it3_run.folder)
    folder = Path(it3.manifest["dataset"]["folder"])
    queries = read_table(folder, "queries").set_index("query_id")
    text = read_table(folder, "corpus", ["doc_id", "text"]).set_index("doc_id")["text"].to_dict()
    iter3_pq = it3.per_query.set_index("query_id")
    qids = list(iter3_pq.index)
    cands = {q: [(d, text[d], sc) for d, sc in it3.run.get(q, [])] for q in qids}
    acfg = load_cfg()
    cache = project_path(load_config(common).cache_dir)
    out: dict[str, Any] = {
        "queries": len(qids),
        "budgets_ms": budgets,
        "target_ms": target_ms,
        "target_ratio": float(s.target_ratio),
        "old_overrides": to_dict(s.old),
        "models": {},
    }
    for name in s.llms:
        section = to_dict(
            load_config(["method=lethe_iter4", f"llm@method.llm_rerank.llm={name}", *common]).method.llm_rerank
        )
        old = {
            **section,
            **{k: v for k, v in to_dict(s.old).items() if k != "llm"},
            "llm": {**section["llm"], **(to_dict(s.old).get("llm") or {})},
        }
        paths = {"old": old, "new": section}
        llms = {p: make_llm(c["llm"], cache_dir=cache) for p, c in paths.items()}
        rerankers = {
            (p, b): BudgetedReranker(
                llms[p],
                budget_ms=b,
                top_n=c["top_n"],
                weight=c["weight"],
                prompt_version=c["prompt_version"],
                max_passage_chars=c["max_passage_chars"],
                max_passage_tokens=c["max_passage_tokens"],
                predictive_stop=c["predictive_stop"],
                predict_quantile=c["predict_quantile"],
                probe_every=c["probe_every"],
            )
            for p, c in paths.items()
            for b in budgets
        }
        for p in paths:  # load each model copy and warm it on the last query (as if it had just run), unmeasured
            rr = rerankers[(p, budgets[0])]
            llms[p].chat(
                rr.prompt.render(query=str(queries.loc[qids[-1], "text"]), passage=rr.passage(cands[qids[-1]][0][1])),
                DECODING,
            )
        warm = {p: (llms[p].model_calls, llms[p].prompt_tokens_seen, llms[p].prompt_tokens_evaluated) for p in paths}
        load_start = os.getloadavg()
        rows: dict[tuple[str, float], list[dict[str, Any]]] = {k: [] for k in rerankers}
        pairs: list[float] = []
        t0 = time.perf_counter()
        for b in budgets:
            for i, q in enumerate(qids):
                res = {}
                for p in ("old", "new") if i % 2 == 0 else ("new", "old"):
                    r = res[p] = rerankers[(p, b)].rerank(str(queries.loc[q, "text"]), cands[q])
                    rows[(p, b)].append(
                        {
                            "query_id": q,
                            "ranking": r.ranking,
                            "timings_ms": {"llm_rerank": r.total_ms - r.fallback_ms},
                            "flags": {
                                "rerank": {
                                    "judged": r.judged,
                                    "considered": r.considered,
                                    "share_judged": r.share_judged,
                                    "timeouts": r.timeouts,
                                    "predicted_stops": r.predicted_stops,
                                    "llm_ms": r.llm_ms,
                                }
                            },
                        }
                    )
                same_text = {
                    d
                    for d, _, _ in cands[q][: int(old["top_n"])]
                    if rerankers[("old", b)].passage(text[d]) == rerankers[("new", b)].passage(text[d])
                }
                pairs += [
                    abs(res["new"].scores[d]["p_yes"] - res["old"].scores[d]["p_yes"])
                    for d in same_text
                    if res["new"].scores[d]["p_yes"] is not None and res["old"].scores[d]["p_yes"] is not None
                ]
        wall = time.perf_counter() - t0
        load_end = os.getloadavg()
        label = {p: f"{llms[p].name} ({p})" for p in paths}
        per_query, runs = {"lethe_iter3": iter3_pq}, {}
        for (p, b), rs in rows.items():
            m = f"lethe_iter4+{p}_{b:g}ms"
            ndcg = evaluate_run(it3.qrels, {r["query_id"]: r["ranking"] for r in rs}, ["ndcg@10"])["ndcg@10"]
            per_query[m] = pd.DataFrame(
                [
                    {
                        "query_id": r["query_id"],
                        "ndcg@10": float(ndcg.get(r["query_id"], 0.0)),
                        "timings_ms": r["timings_ms"],
                        "flags": r["flags"],
                    }
                    for r in rs
                ]
            ).set_index("query_id")
            runs[m] = SimpleNamespace(
                manifest={
                    "config": {"method": {"llm_rerank": {"enabled": True, "budget_ms": b, "llm": {"name": label[p]}}}}
                }
            )
        curve = budget_points(DatasetView("lethebench", queries.reset_index(), runs, per_query), acfg)
        share = {
            p: {float(r.budget_ms): float(r.share_judged) for r in curve.itertuples() if r.model == label[p]}
            for p in paths
        }
        old_t, new_t = share["old"].get(target_ms), share["new"].get(target_ms)
        calls = {
            p: (
                llms[p].model_calls - warm[p][0],
                llms[p].prompt_tokens_seen - warm[p][1],
                llms[p].prompt_tokens_evaluated - warm[p][2],
            )
            for p in paths
        }
        out["models"][name] = {
            "model": llms["new"].name,
            "model_sha256": llms["new"].model.sha256,
            "threads": llms["new"].describe().get("n_threads_effective"),
            "load_average": {"before": list(load_start), "after": list(load_end)},
            "wall_s": wall,
            "paths": {
                p: {
                    "max_passage_tokens": c["max_passage_tokens"],
                    "max_passage_chars": c["max_passage_chars"],
                    "reuse_prompt_cache": bool(c["llm"].get("reuse_prompt_cache")),
                    "calls": calls[p][0],
                    "prompt_tokens_per_call": calls[p][1] / calls[p][0] if calls[p][0] else None,
                    "evaluated_tokens_per_call": calls[p][2] / calls[p][0] if calls[p][0] else None,
                }
                for p, c in paths.items()
            },
            "share_judged": {p: {f"{b:g}": v for b, v in share[p].items()} for p in paths},
            "ratio_at_target": (new_t / old_t) if old_t else None,
            "ratio_by_budget": {
                f"{b:g}": (share["new"][b] / share["old"][b]) if share["old"].get(b) else None for b in share["new"]
            },
            "curve": json.loads(curve.drop(columns=["method"]).to_json(orient="records")),
            "p_yes_agreement": {
                "pairs": len(pairs),
                "max_abs_diff": max(pairs) if pairs else None,
                "mean_abs_diff": (sum(pairs) / len(pairs)) if pairs else None,
            },
        }
        for llm in llms.values():
            llm.close()
    return out


def _print_rerank_reuse(r: dict[str, Any]) -> None:
    t = r["target_ms"]
    for m in r["models"].values():
        la = m["load_average"]
        print(
            f"rerank_reuse {m['model']} on LetheBench ({r['queries']} queries, iteration 3's top 10, one process, "
            f"{m['threads']} thread(s); load average before {la['before'][0]:.2f}/{la['before'][1]:.2f}, after "
            f"{la['after'][0]:.2f}/{la['after'][1]:.2f}; {m['wall_s'] / 60:.1f} min)"
        )
        for p, c in m["paths"].items():
            tok = c["evaluated_tokens_per_call"]
            print(
                f"  {p}: reuse_prompt_cache={c['reuse_prompt_cache']}, max_passage_tokens={c['max_passage_tokens']}; "
                f"{c['calls']} calls, prompt {c['prompt_tokens_per_call'] or float('nan'):.1f} tokens/call, "
                f"evaluated {tok if tok is not None else float('nan'):.1f} tokens/call"
            )
        print(
            f"  {'budget ms':>9} {'path':>4} {'share judged':>12} {'new/old':>8} {'P50 ms':>8} {'P95 ms':>8} "
            f"{'nDCG@10':>8} {'95% CI':>17} {'iter3':>7}"
        )
        for row in sorted(m["curve"], key=lambda x: (x["budget_ms"], x["model"])):
            p = "new" if row["model"].endswith("(new)") else "old"
            ratio = m["ratio_by_budget"].get(f"{row['budget_ms']:g}") if p == "new" else None
            print(
                f"  {row['budget_ms']:9.0f} {p:>4} {row['share_judged']:12.4f} "
                f"{(f'{ratio:.2f}' if ratio is not None else '-'):>8} {row['rerank_p50']:8.1f} {row['rerank_p95']:8.1f} "
                f"{row['ndcg']:8.4f} [{row['ci_low']:.4f}, {row['ci_high']:.4f}] {row['iter3_same']:7.4f}"
            )
        ratio = m["ratio_at_target"]
        old_t, new_t = m["share_judged"]["old"].get(f"{t:g}"), m["share_judged"]["new"].get(f"{t:g}")
        print(
            f"  share of the top 10 judged at {t:g} ms: old {old_t:.4f}, new {new_t:.4f}, ratio "
            + (f"{ratio:.2f}" if ratio is not None else "n/a (old path judged none)")
            + f" (target >= {r['target_ratio']:g})"
        )
        a = m["p_yes_agreement"]
        if a["pairs"]:
            print(
                f"  p(yes) new vs old on the {a['pairs']} candidates both judged (same passage text): "
                f"max |diff| {a['max_abs_diff']:.4f}, mean {a['mean_abs_diff']:.5f}"
            )


def _variant_overrides(prefix: str, variant: Any) -> list[str]:
    """Hydra overrides that turn the model config at ``prefix`` (embedder, method.model) into ``variant``."""
    v = to_dict(variant)
    return [
        f"{prefix}.backend={v['backend']}",
        *(f"{prefix}.onnx.{k}={'null' if x is None else x}" for k, x in (v.get("onnx") or {}).items()),
    ]


def _top10_overlap(a: dict[str, list], b: dict[str, list], qids: list[str]) -> float:
    """Mean over ``qids`` of |top 10 of a & top 10 of b| / 10 (rankings as [(doc_id, score)])."""
    import numpy as np

    return (
        float(np.mean([len({d for d, _ in a.get(q, [])[:10]} & {d for d, _ in b.get(q, [])[:10]}) / 10 for q in qids]))
        if qids
        else float("nan")
    )


def _interleaved(
    paths: dict[str, Any], items: list[Any], call: Any, reps: int
) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Run ``call(path_obj, item)`` for every item and path, the paths interleaved item by item (the order
    rotated per item and rep), ``reps`` times. Returns per path the total seconds of each rep and the
    results of the first rep."""
    names = list(paths)
    totals = {p: [] for p in names}
    results: dict[str, list[Any]] = {p: [] for p in names}
    for rep in range(reps):
        t = dict.fromkeys(names, 0.0)
        for i, item in enumerate(items):
            k = (i + rep) % len(names)
            for p in names[k:] + names[:k]:
                t0 = time.perf_counter()
                r = call(paths[p], item)
                t[p] += time.perf_counter() - t0
                if rep == 0:
                    results[p].append(r)
        for p in names:
            totals[p].append(t[p])
    return totals, results


def bench_speed(s: Any, reps: int, scratch: Path) -> dict[str, Any]:
    """Today's fp32 torch path vs each fast path of ``s.variants`` (the first: the configured default), for
    the query encoder and the cross-encoder, in ONE process with torch and ONNX Runtime pinned to
    ``s.threads`` threads. Per dataset of ``s.datasets``, on a seeded sample of ``s.queries`` queries:
    queries/s of encoding each query alone (as a run does; paths interleaved query by query, ``reps``
    times, ratio of the median totals), cosine of the query vectors, and top-10 overlap and nDCG@10
    difference of ``vector`` runs on the sample; for the first ``s.ce_queries`` of them, pairs/s of
    scoring their BM25 top ``candidates`` with the cross-encoder (paths interleaved query by query,
    ``s.ce_reps`` times), top-10 overlap and nDCG@10 difference of the reranked lists. Then full-LoCoMo
    runs of ``s.lethe`` with today's and the default's embedder, alternated: warm P95 ratio."""
    import numpy as np
    import torch

    from analysis.metrics import evaluate_run
    from experiments.runner import run_experiment
    from lethe.core.protocol import Query
    from lethe.core.targets import build
    from lethe.retrieval.crossencoder import score_pairs
    from lethe.retrieval.dense import make_embedder
    from lethe.retrieval.onnx_backend import inference_info
    from lethe.retrieval.ranking import canonical_order

    threads_before = torch.get_num_threads()
    torch.set_num_threads(int(s.threads))
    variants = {str(k): v for k, v in s.variants.items()}
    default = next(iter(variants))
    paths = {"torch": {"backend": "torch"}, **{k: to_dict(v) for k, v in variants.items()}}
    common = [*map(str, s.overrides), "run.progress=false", "run.print_summary=false", f"results_dir={scratch}"]
    out: dict[str, Any] = {
        "threads": {"torch": int(s.threads), "onnxruntime": "= torch (onnx.threads null)"},
        "load_average": {"start": list(os.getloadavg())},
        "reps": reps,
        "default": default,
        "paths": paths,
        "targets": to_dict(s.targets),
        "datasets": {},
        "lethe": {},
    }
    try:
        for name in s.datasets:
            sample = [f"dataset={name}", f"dataset.sample={int(s.queries)}"]
            bm25 = RunFolder(run_experiment(load_config([*sample, "method=bm25", *common])))
            folder = Path(bm25.manifest["dataset"]["folder"])
            queries = read_table(folder, "queries").set_index("query_id")
            text = read_table(folder, "corpus", ["doc_id", "text"]).set_index("doc_id")["text"].to_dict()
            qids = [q for q in bm25.per_query["query_id"] if q in bm25.run]
            qtexts = [str(queries.loc[q, "text"]) for q in qids]
            res: dict[str, Any] = {"queries": len(qids)}
            # query encoder: each query alone, as a run encodes it (queries are not cached)
            embs = {}
            for p, v in paths.items():
                ecfg = load_config([*sample, *common, *_variant_overrides("embedder", v)])
                embs[p] = make_embedder(to_dict(ecfg.embedder), project_path(ecfg.cache_dir), progress=False)
            for e in embs.values():
                e.encode(qtexts[:2], "query")  # load (and export) outside the timing
            totals, vecs = _interleaved(embs, qtexts, lambda e, q: e.encode([q], "query")[0], reps)
            ref = np.vstack(vecs["torch"])
            enc: dict[str, Any] = {"torch": {"queries_per_s": len(qids) / statistics.median(totals["torch"])}}
            for p in variants:
                cos = (ref * np.vstack(vecs[p])).sum(axis=1)
                enc[p] = {
                    "queries_per_s": len(qids) / statistics.median(totals[p]),
                    "ratio": statistics.median(totals["torch"]) / statistics.median(totals[p]),
                    "cosine_min": float(cos.min()),
                    "cosine_mean": float(cos.mean()),
                    "inference": embs[p].stats()["onnx"],
                }
            # retrieval with those vectors: vector runs on the same sample
            vruns = {
                p: RunFolder(
                    run_experiment(load_config([*sample, "method=vector", *common, *_variant_overrides("embedder", v)]))
                )
                for p, v in paths.items()
            }
            for p in variants:
                enc[p].update(
                    top10_overlap=_top10_overlap(vruns["torch"].run, vruns[p].run, qids),
                    ndcg10_torch=vruns["torch"].metrics["means"]["ndcg@10"],
                    ndcg10_delta=vruns[p].metrics["means"]["ndcg@10"] - vruns["torch"].metrics["means"]["ndcg@10"],
                )
            res["query_encoder"] = enc
            # cross-encoder: BM25's top `candidates` of the first ce_queries queries, scored by every path
            ce_q = qids[: int(s.ce_queries)]
            rerankers = {}
            for p, v in paths.items():
                mcfg = load_config(
                    [
                        *sample,
                        "method=cross_encoder",
                        *map(str, s.ce_overrides),
                        *common,
                        *_variant_overrides("method.model", v),
                    ]
                )
                params = method_params(to_dict(mcfg.method))  # as the runner does
                m = build(params, cache_dir=project_path(mcfg.cache_dir), progress=False, _convert_="all")
                m.bind_dataset({"name": name, "build_key": bm25.manifest["dataset"]["build_key"]})
                rerankers[p] = m
            n_cand = rerankers["torch"].candidates
            items = []
            for q in ce_q:
                fold = rerankers["torch"]._fold(
                    Query(str(queries.loc[q, "text"]), query_id=q, scope_id=str(queries.loc[q, "scope_id"]))
                )
                cands = [d for d, _ in bm25.run[q][:n_cand]]
                items.append((q, fold, str(queries.loc[q, "text"]), cands, [text[d] for d in cands]))
            for m in rerankers.values():
                score_pairs(m.models[0], "warm-up", [items[0][4][0]], m.batch_size)
            ce_reps = int(s.ce_reps)
            totals, scores = _interleaved(
                rerankers, items, lambda m, it: score_pairs(m.models[it[1]], it[2], it[4], m.batch_size), ce_reps
            )
            pairs = sum(len(it[3]) for it in items)
            runs = {
                p: {
                    it[0]: canonical_order(zip(it[3], map(float, sc), strict=True))
                    for it, sc in zip(items, scores[p], strict=True)
                }
                for p in paths
            }
            qrels = {q: bm25.qrels[q] for q in ce_q if q in bm25.qrels}
            ndcg = {p: float(evaluate_run(qrels, r, ["ndcg@10"])["ndcg@10"].mean()) for p, r in runs.items()}
            ce = {
                "torch": {
                    "pairs_per_s": pairs / statistics.median(totals["torch"]),
                    "ndcg10": ndcg["torch"],
                    "inference": inference_info(rerankers["torch"].models[0]),
                }
            }
            for p in variants:
                diff = max(float(np.abs(a - b).max()) for a, b in zip(scores["torch"], scores[p], strict=True))
                ce[p] = {
                    "pairs_per_s": pairs / statistics.median(totals[p]),
                    "ratio": statistics.median(totals["torch"]) / statistics.median(totals[p]),
                    "top10_overlap": _top10_overlap(runs["torch"], runs[p], ce_q),
                    "ndcg10_delta": ndcg[p] - ndcg["torch"],
                    "max_abs_logit_diff": diff,
                    "inference": inference_info(rerankers[p].models[0]),
                }
            res["cross_encoder"] = {
                "queries": len(ce_q),
                "pairs": pairs,
                "candidates": n_cand,
                "reps": ce_reps,
                "batch_size": rerankers["torch"].batch_size,
                "paths": ce,
            }
            for m in rerankers.values():
                m.close()
            out["datasets"][name] = res
        # Lethe iterations on full LoCoMo, today's embedder vs the default's, alternated
        for i, method in enumerate(s.lethe):
            order = ["torch", default] if i % 2 == 0 else [default, "torch"]
            try:
                folders = {
                    p: RunFolder(
                        run_experiment(
                            load_config(
                                [
                                    "dataset=locomo",
                                    f"method={method}",
                                    *common,
                                    *_variant_overrides("embedder", paths[p]),
                                ]
                            )
                        )
                    )
                    for p in order
                }
            except Exception as exc:  # noqa: BLE001 - a missing model (e.g. iteration 3's fusion model) is reported
                out["lethe"][method] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            t, d = folders["torch"].metrics, folders[default].metrics
            qs = list(folders["torch"].run)
            out["lethe"][method] = {
                "queries": t["queries"]["evaluated"],
                "p95_ms_torch": t["latency_ms"]["p95"],
                "p95_ms_default": d["latency_ms"]["p95"],
                "p95_ratio": d["latency_ms"]["p95"] / t["latency_ms"]["p95"],
                "p50_ms_torch": t["latency_ms"]["p50"],
                "p50_ms_default": d["latency_ms"]["p50"],
                "ndcg10_delta": d["means"]["ndcg@10"] - t["means"]["ndcg@10"],
                "top10_overlap": _top10_overlap(folders["torch"].run, folders[default].run, qs),
                "order": order,
            }
    finally:
        torch.set_num_threads(threads_before)
        out["load_average"]["end"] = list(os.getloadavg())
    return out


def _print_speed(r: dict[str, Any]) -> None:
    t = r["targets"]
    la = r["load_average"]
    print(
        f"speed: today's fp32 torch path vs {list(r['paths'])[1:]} (default: {r['default']}), one process, "
        f"{r['threads']['torch']} thread(s) each, median of {r['reps']}; load average at start "
        f"{la['start'][0]:.2f}, at end {la['end'][0]:.2f}"
    )
    print(
        f"  {'dataset':8} {'model':13} {'path':10} {'rate':>14} {'ratio':>6} {'target':>7} {'top10':>7} {'target':>7} "
        f"{'dnDCG@10':>9} {'target':>8} {'agreement':>22}"
    )
    for ds, d in r["datasets"].items():
        enc = d["query_encoder"]
        for p, v in enc.items():
            if p == "torch":
                print(f"  {ds:8} {'query enc.':13} {p:10} {v['queries_per_s']:10.1f} q/s")
                continue
            star = " (default)" if p == r["default"] else ""
            print(
                f"  {ds:8} {'query enc.':13} {p:10} {v['queries_per_s']:10.1f} q/s {v['ratio']:6.2f} {'>= ' + str(t['queries_per_s']):>7} "
                f"{v['top10_overlap']:7.4f} {'>= ' + str(t['top10_overlap']):>7} {v['ndcg10_delta']:+9.4f} "
                f"{'<= ' + str(t['ndcg10_abs_delta']):>8} cos min {v['cosine_min']:.7f}{star}"
            )
        ce = d["cross_encoder"]
        for p, v in ce["paths"].items():
            if p == "torch":
                onnx_bs = {
                    q: (w["inference"].get("options") or {}).get("batch_size")
                    for q, w in ce["paths"].items()
                    if q != "torch"
                }
                print(
                    f"  {ds:8} {'cross-enc.':13} {p:10} {v['pairs_per_s']:8.1f} pairs/s  ({ce['queries']} queries x "
                    f"{ce['candidates']} candidates, batch {ce['batch_size']}, ONNX batch {onnx_bs}, nDCG@10 {v['ndcg10']:.4f})"
                )
                continue
            star = " (default)" if p == r["default"] else ""
            print(
                f"  {ds:8} {'cross-enc.':13} {p:10} {v['pairs_per_s']:8.1f} pairs/s {v['ratio']:6.2f} {'>= ' + str(t['ce_pairs_per_s']):>7} "
                f"{v['top10_overlap']:7.4f} {'>= ' + str(t['top10_overlap']):>7} {v['ndcg10_delta']:+9.4f} "
                f"{'<= ' + str(t['ndcg10_abs_delta']):>8} max |dlogit| {v['max_abs_logit_diff']:.2e}{star}"
            )
    for m, v in r["lethe"].items():
        if "error" in v:
            print(f"  {m} on LoCoMo: not measured ({v['error'][:200]})")
            continue
        print(
            f"  {m} on LoCoMo ({v['queries']} queries): warm P95 torch {v['p95_ms_torch']:.2f} ms, {r['default']} "
            f"{v['p95_ms_default']:.2f} ms, ratio {v['p95_ratio']:.3f} (target <= {t['lethe_p95_ratio']}); P50 "
            f"{v['p50_ms_torch']:.2f} -> {v['p50_ms_default']:.2f} ms; top-10 overlap {v['top10_overlap']:.4f}, "
            f"dnDCG@10 {v['ndcg10_delta']:+.4f}"
        )


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
    reps = int(cfg.reps)
    out_dir = project_path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = out_dir / "bench.json"
    # sections not re-run keep their last figures (`sections` updates just the sections it names)
    report: dict[str, Any] = json.loads(previous.read_text()) if previous.is_file() else {}
    if "encode" in only:
        e = report["encode"] = bench_encode(int(cfg.texts), reps)
        print(
            f"encode ({e['texts']} LoCoMo turns, median of {e['reps']}): runner {e['runner_texts_per_s']:.1f} texts/s, "
            f"bare SentenceTransformer {e['bare_texts_per_s']:.1f} texts/s, ratio {e['runner_over_bare']:.3f} (target >= 0.9)"
        )
    if "methods" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["methods"] = bench_methods(list(cfg.methods), Path(scratch) / "runs")
        print(f"{'method':14} {'queries':>7} {'QPS':>9} {'P50 ms':>8} {'P95 ms':>8} {'index s':>8} {'nDCG@10':>8}")
        for m, r in report["methods"].items():
            print(
                f"{m:14} {r['queries']:7d} {r['qps']:9.1f} {r['p50_ms']:8.2f} {r['p95_ms']:8.2f} {r['index_build_s']:8.2f} {r['ndcg@10']:8.4f}"
            )
    if "bm25" in only:
        b = report["bm25"] = bench_bm25(reps)
        print(
            f"BM25 on LoCoMo ({b['in_memory']['queries']} queries, k=100, median of {reps}): in-memory "
            f"{b['in_memory']['qps']:.0f} q/s, index {b['in_memory']['index_s']:.2f} s; Pyserini {b['pyserini']['qps']:.0f} q/s, "
            f"index {b['pyserini']['index_s']:.2f} s; ratio {b['qps_ratio_in_memory_over_pyserini']:.2f}"
        )
    if "faiss" in only:
        ivf = load_config(["method=faiss_ivf"]).method
        report["faiss"] = bench_faiss(int(ivf.nlist), int(ivf.nprobe), reps)
        for name, r in report["faiss"].items():
            print(
                f"FAISS-IVF on {name} (nlist used {r['nlist_used']}, nprobe {r['nprobe']}): recall@10 vs exact "
                f"{r['recall@10_vs_exact']:.4f}, exact {r['exact_ms_per_query']:.3f} ms/q, IVF {r['ivf_ms_per_query (batched)']:.3f} ms/q, "
                f"speed-up {r['speedup']:.1f}x"
            )
    if "lethe" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["lethe"] = bench_lethe(list(cfg.lethe), Path(scratch) / "runs")
        for m, r in report["lethe"].items():
            shares = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r["stage_share"].items(), key=lambda x: -x[1]))
            print(
                f"{m} on LoCoMo ({r['queries']} queries): P50 {r['p50_ms']:.2f} ms, P95 {r['p95_ms']:.2f} ms "
                f"(target < 50), nDCG@10 {r['ndcg@10']:.4f}; stages: {shares}, other {r['unattributed_share']:.0%}"
            )
    if "llm" in only:
        report["llm"] = bench_llm(list(cfg.llms), reps)
        report["llm"]["threads"] = bench_llm_threads(list(cfg.llms), [int(n) for n in cfg.llm_threads], reps)
        for m, r in report["llm"]["models"].items():
            print(
                f"LLM {m}: prompt {r['prompt_tokens_per_s'] or float('nan'):.1f} tok/s, generation "
                f"{r['generation_tokens_per_s'] or float('nan'):.1f} tok/s ({r['prompt_tokens']} prompt tokens, "
                f"{r['completion_tokens']} generated), uncached call {r['uncached_call_ms']:.0f} ms, "
                f"cache hit {r['cache_hit_ms']:.2f} ms (hit={r['cache_hit']})"
            )
        for m, r in report["llm"]["threads"].items():
            print(
                f"LLM {m} by llama.cpp threads: "
                + ", ".join(
                    f"{n}: {t['median_call_ms']:.0f} ms per call, {t['generation_tokens_per_s'] or float('nan'):.1f} tok/s "
                    f"({r['speedup_over_first'][n]:.2f}x)"
                    for n, t in r["threads"].items()
                )
                + f"; texts identical: {r['identical_texts']}"
            )
        for ds, r in report["llm"]["iter2_llm_share"].items():
            print(
                f"lethe_iter2_llm on {ds} ({r['queries']} queries, {r['llm']}): mean {r['mean_latency_ms']:.0f} ms per query, "
                f"LLM {r['mean_llm_ms']:.0f} ms = {r['llm_share']:.0%}"
            )
    if "rerank_reuse" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["rerank_reuse"] = bench_rerank_reuse(cfg.rerank_reuse, Path(scratch) / "runs")
        _print_rerank_reuse(report["rerank_reuse"])
    if "speed" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["speed"] = bench_speed(cfg.speed, reps, Path(scratch) / "runs")
        _print_speed(report["speed"])
    if "jobs" in only:
        report["jobs"] = bench_jobs(list(cfg.tiers), [str(o) for o in cfg.run_overrides])
        for tier, j in report["jobs"].items():
            print(
                f"tier {tier}: {len(j['runs']) - len(j['missing'])} finished runs, {j['total_run_s'] / 60:.1f} min of "
                f"runs; prerequisites: "
                + (", ".join(f"{k} {v:.0f} s" for k, v in j["prepare_s"].items()) or "none measured")
            )
            for key, r in sorted(j["runs"].items(), key=lambda kv: -(kv[1] or {}).get("wall_s", 0)):
                if r:
                    print(
                        f"  {key:45} {r['wall_s']:9.1f} s  (start-up {r['init_s']:.1f} s, index {r['index_s']:.1f} s, "
                        f"load {r['load_average']})"
                    )
            if j["missing"]:
                print(f"  not run: {j['missing']}")
    if "analysis" in only:
        a = report["analysis"] = bench_analysis()
        print(f"analysis of all finished runs: {a['seconds']:.1f} s (target < 60 s)")
    if "reproduce" in only:
        with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
            report["reproduce"] = bench_reproduce(Path(scratch))
        r = report["reproduce"]
        print(
            f"make reproduce: cold {r['cold_s']:.1f} s, warm {r['warm_s']:.1f} s, warm/cold {r['warm_over_cold']:.3f} (target < 0.25)"
        )
    (out_dir / "bench.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {out_dir / 'bench.json'}")
    return report


@hydra.main(config_path="../conf", config_name="bench", version_base="1.3")
def main(cfg: DictConfig) -> None:
    bench(cfg)


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
