"""One-screen summaries of results folders (settings: ``conf/summary.yaml``).

python -m experiments.summary [results_dir=results/smoke/runs] ['run.metrics=[nDCG@10,R@100,Judged@10]']
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from analysis.formatting import llm_failure_cell
from analysis.metric_names import canonical_metric, canonical_metrics, display_metric
from lethe.core.arguments import check_arguments
from lethe.core.paths import Paths
from lethebench.runs import finished_runs

SHOWN = ("ndcg@10", "recall@10", "recall@50", "mrr@10", "precision@10")


def load_metrics(results_dir: Path, metrics: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The metrics of every finished run under ``results_dir`` (sorted by dataset, method, config hash), with the mean
    of each of ``metrics`` it did not store computed from its run files (:func:`analysis.metrics.run_scores`: metrics
    are not part of a run's identity); a damaged folder gives a row with ``damaged`` (what is wrong) and the names
    its path holds."""
    asked, rows = canonical_metrics(metrics, "metrics"), []
    for r in finished_runs(results_dir):
        damage = r.damage
        if damage:
            rows.append(
                {"dataset": r.path.parts[-3], "method": r.path.parts[-2], "config_hash": r.path.name, "damaged": damage}
            )
            continue
        row = dict(r.metrics)
        missing = [m for m in asked if m not in row["means"]]
        if missing:
            from analysis.metrics import run_scores  # ranx's numba kernels only when a metric must be computed

            row["means"] = {**row["means"], **run_scores(r, missing).mean().to_dict()}
        rows.append(row)
    return rows


def _describe_filter(key: str, value: object) -> str:
    """'test' for a split, '2 scopes' for a list, 'sample 150' for a sample size."""
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{key} {value}"
    return f"{len(value)} {key}"  # type: ignore[arg-type]


def format_table(rows: Iterable[Mapping[str, Any]], metrics: Sequence[str] = SHOWN) -> str:
    """Plain-text table: dataset, method, hash, counts, the mean of each of ``metrics`` headed as it is written there
    (``SHOWN``, in ir_measures form, by default), latency P50/P95."""
    rows = list(rows)
    shown = [canonical_metric(m, "metrics") for m in metrics]
    head = (
        ["dataset", "subset", "method", "hash", "n", "excl", "fail"]
        + [display_metric(m) if metrics is SHOWN else str(m) for m in metrics]
        + ["p50 ms", "p95 ms", "llm fail/fallback"]
    )
    body, damaged = [], []
    for r in rows:
        if r.get("damaged"):  # listed, not read: running it again (make reproduce, or its command) replaces it
            damaged.append(
                f"DAMAGED ({r['damaged']}): {r['dataset']}/{r['method']}/{r['config_hash']}; running it "
                "again (make reproduce, or its command) replaces it"
            )
            continue
        q = r["queries"]
        excl = q["queries_total"] - q["evaluated"]
        fail = sum(v for k, v in q["status"].items() if k != "ok")
        lat = r.get("latency_ms") or {}
        f = r.get("filters")
        subset = "?" if f is None else (",".join(_describe_filter(k, v) for k, v in f.items() if v) or "all")
        body.append(
            [r["dataset"], subset, r["method"], r["config_hash"][:8], str(q["evaluated"]), str(excl), str(fail)]
            + [f"{r['means'][m]:.4f}" if m in r["means"] else "n/m" for m in shown]
            + [f"{lat[p]:.2f}" if lat.get(p) is not None else "-" for p in ("p50", "p95")]
            + [llm_failure_cell(r)]
        )
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(
        c.rjust(w) if i >= 4 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )  # noqa: E731
    notes = (
        "n = evaluated queries; excl = queries without qrels or filtered out; fail = queries with no eligible docs,"
        " no results or an error (they score 0); llm fail/fallback = shares of LLM-using queries whose LLM call got no"
        " answer / whose unparseable answer a fallback replaced (- = no LLM call, n/m = not counted then)"
    )
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body), *damaged, notes])


def summary(cfg: DictConfig) -> str:
    """The table of every finished run under ``cfg.results_dir``, with the metrics of ``cfg.run.metrics`` as written
    there; SystemExit when there is none."""
    results_dir = Paths.of(cfg).results
    metrics = list(cfg.run.metrics)
    rows = load_metrics(results_dir, metrics)
    if not rows:
        raise SystemExit(f"no finished runs under {results_dir}")
    return format_table(rows, metrics)


@hydra.main(config_path="../conf", config_name="summary", version_base="1.3")
def main(cfg: DictConfig) -> None:
    print(summary(cfg))


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
