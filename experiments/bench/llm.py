"""``make bench`` section ``llm``: the in-process llama.cpp backends: prompt and generation tokens/s per model,
cache-hit latency, the speed-up per thread count, and the share of ``lethe_iter2_llm``'s per-query latency spent in
the LLM (from its finished runs)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.config import load_config, to_dict

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


def run(cfg: DictConfig, scratch: Path) -> dict[str, Any]:
    out = bench_llm(list(cfg.llms), int(cfg.reps))
    out["threads"] = bench_llm_threads(list(cfg.llms), [int(n) for n in cfg.llm_threads], int(cfg.reps))
    return out


def show(llm: dict[str, Any]) -> None:
    for m, r in llm["models"].items():
        print(
            f"LLM {m}: prompt {r['prompt_tokens_per_s'] or float('nan'):.1f} tok/s, generation "
            f"{r['generation_tokens_per_s'] or float('nan'):.1f} tok/s ({r['prompt_tokens']} prompt tokens, "
            f"{r['completion_tokens']} generated), uncached call {r['uncached_call_ms']:.0f} ms, "
            f"cache hit {r['cache_hit_ms']:.2f} ms (hit={r['cache_hit']})"
        )
    for m, r in llm["threads"].items():
        print(
            f"LLM {m} by llama.cpp threads: "
            + ", ".join(
                f"{n}: {t['median_call_ms']:.0f} ms per call, {t['generation_tokens_per_s'] or float('nan'):.1f} tok/s "
                f"({r['speedup_over_first'][n]:.2f}x)"
                for n, t in r["threads"].items()
            )
            + f"; texts identical: {r['identical_texts']}"
        )
    for ds, r in llm["iter2_llm_share"].items():
        print(
            f"lethe_iter2_llm on {ds} ({r['queries']} queries, {r['llm']}): mean {r['mean_latency_ms']:.0f} ms per query, "
            f"LLM {r['mean_llm_ms']:.0f} ms = {r['llm_share']:.0%}"
        )
