"""``make bench`` section ``rerank_reuse``: iteration 4's LLM reranker on LetheBench, old path (every judgment
re-evaluates its whole prompt) against new path (prefix reuse and passage token cut, ``conf/method/lethe_iter4.yaml``),
interleaved in one process per model: the share of the top 10 judged per budget (the budget curve), the ratio at
1200 ms with its target (>= 3x), tokens evaluated per call and the p(yes) agreement of the two."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.config import load_config, to_dict
from lethe.core.paths import Paths
from lethebench.runs import RunFolder
from lethebench.schema import read_table


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
    folder = it3.dataset_folder
    queries = read_table(folder, "queries").set_index("query_id")
    text = read_table(folder, "corpus", ["doc_id", "text"]).set_index("doc_id")["text"].to_dict()
    iter3_pq = it3.per_query.set_index("query_id")
    qids = list(iter3_pq.index)
    cands = {q: [(d, text[d], sc) for d, sc in it3.run.get(q, [])] for q in qids}
    acfg = load_cfg()
    cache = Paths.default().resolve(load_config(common).cache_dir)
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
            load_config(
                ["method=lethe_iter4", f"llm@method.stages.llm_rerank.llm={name}", *common]
            ).method.stages.llm_rerank
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


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    return bench_rerank_reuse(cfg.rerank_reuse, scratch / "runs")


def show(r: dict[str, Any]) -> None:
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
