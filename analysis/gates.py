"""Sanity gates of the rerankers: each against its own first stage and a seeded random reordering.

A reranker (``cfg["rerankers"]``, ``conf/analysis/default.yaml``) reorders the candidates of a first-stage
run. Per dataset, :func:`gate` pairs it per query with that run (on the queries both scored) on
``cfg["gate_metric"]`` and, where declared, with its random control (the same candidates in a seeded random
order, ``baselines/random_rerank.py``). The candidate depth each run used is read from its manifest, never
assumed. The comparison holds only when the manifests show the reranker started from exactly that first
stage: the same processed dataset (build key), ``run.k`` and the declared method keys; otherwise the gate
says which setting differs and marks nothing.

A reranker is below its first stage only when the 95% CI of the paired mean difference lies below 0; it is then
marked in Table 1, Table 2 and the claims section and is never "the best baseline" (:func:`excluded_from_best`).
A CI that holds 0 is "no detectable difference", whatever the sign of the point estimate; the random control is
judged by the same rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.formatting import NM, flatten, fmt, fmt_p
from analysis.metric_names import display_metric
from analysis.views import DatasetView, paired_row
from lethebench.supervision import KEY as SUPERVISION_KEY

BELOW = "▼"
BELOW_NOTE = (
    f"{BELOW} = below its own first stage (the 95% CI of the paired mean difference on the queries both scored lies "
    "below 0): reranking made the order worse; never used as the best baseline (section 'Sanity gates'). A CI that "
    "holds 0 is 'no detectable difference'."
)

# verdicts
V_BELOW, V_OK, V_NO_DIFF = "below first stage", "above first stage", "no detectable difference from first stage"
V_NOT_COMPARABLE, V_NOT_RUN, V_NOT_DECLARED = (
    "not comparable",
    "first stage not run (n/m†)",
    "first stage not in the report",
)


@dataclass
class Gate:
    """One reranker on one dataset against its first stage and its random control."""

    dataset: str
    reranker: str
    first_stage: str
    verdict: str
    depth: Any = None  # the reranker's candidate depth, from its manifest (None: not recorded)
    random: str | None = None
    random_depth: Any = None
    test: dict[str, Any] | None = None  # paired row reranker vs first stage (analysis.views.paired_row)
    random_test: dict[str, Any] | None = None  # paired row reranker vs random control
    notes: list[str] = field(default_factory=list)

    @property
    def below(self) -> bool:
        return self.verdict == V_BELOW


def declared(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The declared rerankers: label -> spec (``first_stage``, ``random``, ``depth``, and ``first_stage_keys``
    or ``own_keys``); a spec with both or neither is an error."""
    out = {}
    for label, spec in (cfg.get("rerankers") or {}).items():
        spec = dict(spec)
        if not spec.get("first_stage") or not spec.get("depth"):
            raise ValueError(f"analysis.rerankers.{label}: needs first_stage and depth, got {spec}")
        if bool(spec.get("first_stage_keys")) == bool(spec.get("own_keys")):
            raise ValueError(f"analysis.rerankers.{label}: give exactly one of first_stage_keys and own_keys")
        out[str(label)] = spec
    return out


def method_value(run: Any, key: str) -> Any:
    """The value of dotted ``key`` in a run's resolved method config (manifest), None when absent."""
    node: Any = (run.manifest.get("config") or {}).get("method") or {}
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _method_config(run: Any) -> dict[str, Any]:
    return dict((run.manifest.get("config") or {}).get("method") or {})


def mismatches(
    reranker: Any, other: Any, keys: Mapping[str, str] | None = None, own: list[str] | None = None
) -> list[str]:
    """Why ``other`` is not the run ``reranker`` started from: a different processed dataset, ``run.k``, or
    method keys (``keys``: reranker key -> other's key; ``own``: every value but those under these dotted keys,
    ``name``, ``variant`` and ``supervision``)."""
    out = []
    bk = [(r.manifest.get("dataset") or {}).get("build_key") for r in (reranker, other)]
    if bk[0] != bk[1]:
        out.append(f"dataset build {bk[0]} vs {bk[1]}")
    rk = [((r.manifest.get("config") or {}).get("run") or {}).get("k") for r in (reranker, other)]
    if rk[0] != rk[1]:
        out.append(f"run.k {rk[0]} vs {rk[1]}")
    if keys:
        for a, b in keys.items():
            va, vb = method_value(reranker, a), method_value(other, b)
            if va != vb:
                out.append(f"{a}={va} vs {b}={vb}")
    if own is not None:
        skip = {"name", "variant", SUPERVISION_KEY, *own}  # what names or describes a method, not what it computes
        ma, mb = dict(flatten(_method_config(reranker))), dict(flatten(_method_config(other)))
        for k in sorted(set(ma) | set(mb)):
            if not any(k == s or k.startswith(s + ".") for s in skip) and ma.get(k) != mb.get(k):
                out.append(f"method.{k} differs")
    return out


_GATE_CACHE: dict[tuple, Gate] = {}


def gate(v: DatasetView, label: str, cfg: Mapping[str, Any]) -> Gate | None:
    """The gate of reranker ``label`` on dataset ``v`` (None when ``label`` has no finished run there)."""
    spec = declared(cfg).get(label)
    if spec is None or label not in v.per_query or label not in v.runs:
        return None
    fs, rnd = str(spec["first_stage"]), spec.get("random")
    run = v.runs[label]
    key = (
        v.name,
        label,
        run.config_hash,
        fs,
        getattr(v.runs.get(fs), "config_hash", None),
        fs in v.missing,
        rnd,
        getattr(v.runs.get(rnd), "config_hash", None) if rnd else None,
        repr(sorted(spec.items())),
        cfg["gate_metric"],
        int(cfg["permutation_resamples"]),
        int(cfg["seed"]),
        float(cfg["confidence"]),
    )
    if key in _GATE_CACHE:
        return _GATE_CACHE[key]
    g = Gate(v.name, label, fs, V_NOT_DECLARED, depth=method_value(run, str(spec["depth"])))
    metric = str(cfg["gate_metric"])
    if fs in v.missing:
        g.verdict = V_NOT_RUN
    elif fs in v.per_query and fs in v.runs:
        why = mismatches(run, v.runs[fs], spec.get("first_stage_keys"), spec.get("own_keys"))
        g.test = paired_row(v, v.name, label, fs, metric, cfg)
        if why:
            g.verdict = V_NOT_COMPARABLE
            g.notes.append("first stage: " + "; ".join(why))
        elif g.test is None:
            g.verdict = V_NOT_COMPARABLE
            g.notes.append(f"no common queries with {metric}")
        else:
            g.verdict = side(g.test, V_BELOW, V_OK, V_NO_DIFF)
    if rnd:
        g.random = str(rnd)
        if rnd in v.per_query and rnd in v.runs:
            rkeys = spec.get("random_keys") or {}
            g.random_depth = method_value(v.runs[rnd], str(rkeys.get(spec["depth"], spec["depth"])))
            why = mismatches(run, v.runs[rnd], rkeys)
            if why:
                g.notes.append("random control: " + "; ".join(why))
            else:
                g.random_test = paired_row(v, v.name, label, rnd, metric, cfg)
        elif rnd in v.missing:
            g.notes.append(f"random control {rnd} not run (n/m†)")
    _GATE_CACHE[key] = g
    return g


def side(test: Mapping[str, Any], below: str, above: str, neither: str) -> str:
    """``below``/``above`` when the 95% CI of the paired mean difference (``ci_low``, ``ci_high``) excludes 0 on that
    side, else ``neither`` (a CI that holds 0, or none)."""
    lo, hi = test.get("ci_low"), test.get("ci_high")
    if lo is None or hi is None or lo != lo or hi != hi:
        return neither
    return below if hi < 0 else above if lo > 0 else neither


def gates(v: DatasetView, cfg: Mapping[str, Any]) -> dict[str, Gate]:
    """Every declared reranker with a finished run on ``v``: label -> its gate."""
    return {m: g for m in declared(cfg) if (g := gate(v, m, cfg)) is not None}


def excluded_from_best(v: DatasetView, cfg: Mapping[str, Any]) -> dict[str, Gate]:
    """Rerankers of ``v`` below their first stage (label -> gate): never the best baseline."""
    return {m: g for m, g in gates(v, cfg).items() if g.below}


def first_stage_cell(v: DatasetView, label: str, cfg: Mapping[str, Any]) -> str:
    """Table 1's "vs first stage" cell: the paired mean difference, the first stage, the depth and the
    marker; "random control of X" for a declared control; "n/a" for a method that is not a reranker."""
    controls = {spec.get("random"): m for m, spec in declared(cfg).items() if spec.get("random")}
    g = gate(v, label, cfg)
    if g is None:
        return f"random control of {controls[label]}" if label in controls else "n/a"
    depth = f"depth {g.depth}" if g.depth is not None else f"depth {NM}"
    if g.test is None or g.verdict in (V_NOT_COMPARABLE, V_NOT_RUN, V_NOT_DECLARED):
        return f"{g.verdict} ({g.first_stage}, {depth})"
    return f"{g.test['mean_diff']:+.4f} vs {g.first_stage} ({depth})" + (f" {BELOW}" if g.below else "")


def sanity_table(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (dataset, reranker): the reranker, its first stage and its random control side by side,
    each with the depth it used (from its manifest), paired on the queries reranker and first stage share."""
    metric = str(cfg["gate_metric"])
    rows = []
    for ds, v in sorted(views.items()):
        for m, g in gates(v, cfg).items():
            t, rt = g.test, g.random_test
            rows.append(
                {
                    "dataset": ds,
                    "reranker": m,
                    "depth": g.depth if g.depth is not None else NM,
                    "first stage": g.first_stage,
                    "random control": g.random or "-",
                    "random depth": g.random_depth if g.random_depth is not None else ("-" if not g.random else NM),
                    "n": t["n"] if t else NM,
                    f"reranker {metric}": fmt(t["method_mean"]) if t else fmt(float(v.per_query[m][metric].mean())),
                    f"first stage {metric}": fmt(t["baseline_mean"]) if t else NM,
                    f"random {metric}": fmt(rt["baseline_mean"]) if rt else NM,
                    "reranker - first stage [95% CI]": (
                        f"{t['mean_diff']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]" if t else NM
                    ),
                    "p (Wilcoxon)": fmt_p(t["p_wilcoxon"]) if t else NM,
                    "reranker - random": (f"{rt['mean_diff']:+.4f} (n={rt['n']})" if rt else NM),
                    "verdict": (f"{BELOW} " if g.below else "")
                    + g.verdict
                    + (
                        f"; {side(rt, 'below', 'above', 'no detectable difference from')} its random reordering"
                        if rt
                        else ""
                    ),
                    "notes": "; ".join(g.notes) or "",
                }
            )
    return pd.DataFrame(rows)


def gate_sentences(views: Mapping[str, DatasetView], cfg: Mapping[str, Any]) -> list[str]:
    """One sentence per reranker below its first stage, with its numbers (for Table 2 and the claims)."""
    out = []
    for ds, v in sorted(views.items()):
        for m, g in excluded_from_best(v, cfg).items():
            t = g.test or {}
            out.append(
                f"{ds}: {m} (depth {g.depth}) scores {display_metric(cfg['gate_metric'])} {t.get('method_mean', float('nan')):.4f} "
                f"against {t.get('baseline_mean', float('nan')):.4f} for its own first stage {g.first_stage} "
                f"(paired, n = {t.get('n')}, difference {t.get('mean_diff', float('nan')):+.4f}, "
                f"95% CI [{t.get('ci_low', float('nan')):+.4f}, {t.get('ci_high', float('nan')):+.4f}])"
            )
    return out
