"""``make bench`` section ``speed``: the query encoder and the cross-encoder on fp32 ONNX Runtime (the default,
``conf/model/*.yaml`` ``backend``) and int8 ONNX (an option) against sentence-transformers' fp32 torch path,
interleaved in one process on LoCoMo and TechQA samples: queries/s and pairs/s ratios, top-10 overlap and nDCG@10
difference with their targets, and Lethe iterations 1-3's warm P95 on full LoCoMo with either embedder."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.config import load_config, to_dict
from experiments.run_identity import method_params
from lethe.core.paths import Paths
from lethebench.runs import RunFolder
from lethebench.schema import read_table


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
            folder = bm25.dataset_folder
            queries = read_table(folder, "queries").set_index("query_id")
            text = read_table(folder, "corpus", ["doc_id", "text"]).set_index("doc_id")["text"].to_dict()
            qids = [q for q in bm25.per_query["query_id"] if q in bm25.run]
            qtexts = [str(queries.loc[q, "text"]) for q in qids]
            res: dict[str, Any] = {"queries": len(qids)}
            # query encoder: each query alone, as a run encodes it (queries are not cached)
            embs = {}
            for p, v in paths.items():
                ecfg = load_config([*sample, *common, *_variant_overrides("embedder", v)])
                embs[p] = make_embedder(to_dict(ecfg.embedder), Paths.of(ecfg).cache, progress=False)
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
                m = build(params, cache_dir=Paths.of(mcfg).cache, progress=False, _convert_="all")
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


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_speed(cfg.speed, int(cfg.reps), scratch / "runs")


def show(r: dict[str, Any]) -> None:
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
