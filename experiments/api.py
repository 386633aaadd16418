"""One call from Python: run (or reuse) methods on datasets and compare them, in the spirit of PyTerrier's
``pt.Experiment``::

    from experiments.api import experiment
    df = experiment(["bm25", "vector", "lethe_iter1"], "locomo", metrics=["nDCG@10", "R@50"], baseline="bm25",
                    overrides=["dataset.scopes=[conv-26]"])

Each (dataset, method) goes through the same runner as ``python -m experiments.run`` and
``python -m experiments.reproduce``: the same config composition and config hash, so a finished results
folder is reused (never recomputed) and a new one is filed where the command line would file it; missing
prerequisites (processed datasets, cross-encoder model sets, learned-fusion models) are built first. The
comparison is the report's Table 2 code (analysis.tables.table2): paired per query against the baseline
(by default the best baseline of each dataset, as in the report), 95% BCa CIs of the mean difference,
Wilcoxon and sign-flip p values, d_z, wins/ties/losses, and Bonferroni/Holm/BH over all returned rows.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import pandas as pd

from analysis import tables as T
from analysis import views as V
from analysis.metric_names import canonical_or_other, display_metric
from analysis.report import load_cfg
from experiments.reference import DeclaredRun, ResolvedRun, resolve
from lethe.core.paths import project_path

CORRECTIONS = {"bonferroni": "p_bonferroni", "holm": "p_holm", "bh": "p_bh", None: None}
Spec = str | Mapping[str, Sequence[str]] | Sequence[str]


def _named(spec: Spec, what: str) -> dict[str, list[str]]:
    """``"bm25"``, ``["bm25", "vector"]`` or ``{"bm25": ["method.k1=0.9"], ...}`` -> {name: overrides}."""
    if isinstance(spec, str):
        return {spec: []}
    if isinstance(spec, Mapping):
        return {str(k): [str(o) for o in (v or [])] for k, v in spec.items()}
    if isinstance(spec, Sequence) and all(isinstance(s, str) for s in spec) and spec:
        return {str(s): [] for s in spec}
    raise TypeError(f"{what}: a name, a list of names, or a mapping name -> list of overrides; got {spec!r}")


def _method_spec(name: str) -> tuple[str, str | None]:
    """``"bm25"`` -> ("bm25", None); ``"bm25+k1_09"`` -> ("bm25", "k1_09") (a variant: its own label)."""
    method, _, variant = name.partition("+")
    return method, (variant or None)


def resolve_runs(methods: Spec, datasets: Spec, overrides: Sequence[str] = ()) -> list[ResolvedRun]:
    """Every (dataset, method) as a resolved run (config composed, results folder located by config hash);
    overrides apply in this order: ``overrides``, the dataset's, the method's."""
    out = []
    for ds, ds_over in _named(datasets, "datasets").items():
        for name, m_over in _named(methods, "methods").items():
            method, variant = _method_spec(name)
            run = DeclaredRun("api", ds, method, None, variant, None, tuple([*overrides, *ds_over, *m_over]))
            out.append(resolve(run))
    return out


def run_missing(runs: Sequence[ResolvedRun], progress: bool = True) -> None:
    """Build the prerequisites of the runs that are not done, then run them one at a time (in this process,
    so their latencies stay comparable)."""
    from experiments.prerequisites import prepare_steps
    from experiments.runner import run_job

    pending = [r for r in runs if not r.done]
    steps = [s for s in prepare_steps(pending) if not s.done] if pending else []
    jobs = [(s.name, s.make) for s in steps] + [(r.key, lambda c=r.cfg: run_job(c)) for r in pending]
    t0 = time.perf_counter()
    for i, (name, make) in enumerate(jobs, 1):
        make()
        if progress:
            print(f"[{i}/{len(jobs)}] {name}: done · elapsed {time.perf_counter() - t0:.0f} s", flush=True)


def experiment(
    methods: Spec,
    datasets: Spec,
    metrics: Sequence[str] = ("nDCG@10", "R@50"),
    baseline: str | None = None,
    correction: str | None = "holm",
    overrides: Sequence[str] = (),
    save_dir: str | None = None,
    run: bool = True,
    analysis: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Run (or reuse) ``methods`` on ``datasets`` and test each against ``baseline`` per dataset and metric.

    ``methods`` / ``datasets``: config names (``conf/method/``, ``conf/dataset/``), a list of them, or a
    mapping name -> its overrides (a method ``name+variant`` is filed under that label, e.g.
    ``{"bm25+k1_09": ["method.k1=0.9"]}``). ``metrics``: ranx or ir_measures names (``nDCG@10``, ``R@50``,
    ``RR@10``, ``P@10``, ``recall@50``; ``coverage@10`` / ``contradiction@10`` where labelled). ``baseline``:
    a method name, or None for each dataset's best baseline by the report's rule (the report's Table 2).
    ``correction``: which adjusted p value fills ``p_adjusted`` (``holm``, ``bonferroni``, ``bh`` or None for the
    unadjusted p of the primary test, ``analysis.primary_test.table2``); all three are always returned, adjusted
    over the whole returned family. ``overrides``: run overrides for every
    run (e.g. ``data.root=...``); ``save_dir``: the results folder (``results_dir``; default the project's).
    ``run=False`` only reads finished runs (a missing one raises). ``analysis``: report settings
    (conf/analysis/default.yaml), e.g. ``{"bootstrap_resamples": 2000}``.

    Returns one row per (dataset, metric, method): n, baseline_mean, method_mean, mean_diff, ci_low, ci_high
    (of the mean difference), p_wilcoxon, p_randomization, d_z, wins, ties, losses, p_bonferroni, p_holm, p_bh,
    p_adjusted, ci_vs_test (the CI and the primary test disagree), the metric's ir_measures name (``measure``) and
    the method's gate mark (below its first stage). ``attrs``: correction, baseline, family_size, primary_test.
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction={correction!r}: expected one of {sorted(k for k in CORRECTIONS if k)} or None")
    if isinstance(metrics, str):
        metrics = [metrics]
    family = list(dict.fromkeys(canonical_or_other(m) for m in metrics))  # label metrics (coverage@10) kept as is
    over = [*overrides, *([f"results_dir={project_path(save_dir)}"] if save_dir else [])]
    runs = resolve_runs(methods, datasets, over)
    if run:
        run_missing(runs, progress)
    missing = [r.key for r in runs if not r.done]
    if missing:
        raise FileNotFoundError(f"no finished run for {missing}; call with run=True to compute them")
    refs = [r.ref("api") for r in runs]
    cfg = load_cfg([f"{k}={v}" for k, v in (analysis or {}).items()])
    labels = [r.declared.label for r in runs]
    # a method in neither of the report's lists is one of the systems under study here; a reranker's random
    # control (random_rerank) stays out of the family, as in the report (it is a sanity check, not a system)
    controls = {spec.get("random") for spec in (cfg.get("rerankers") or {}).values()}
    cfg["lethe"] = list(cfg["lethe"]) + [
        m for m in dict.fromkeys(labels) if m not in cfg["baselines"] and m not in cfg["lethe"] and m not in controls
    ]
    cfg["family_metrics"] = family
    if baseline is not None and baseline not in labels:
        raise ValueError(f"baseline={baseline!r} is not one of the methods {sorted(set(labels))}")
    views = V.collect(cfg, refs)
    # a label metric (coverage@10) exists only where its labels do; a metric no run has is a mistake
    computed = {c for v in views.values() for pq in v.per_query.values() for c in pq.columns}
    absent = [m for m in family if m not in computed]
    if absent:
        known = sorted(c for c in computed if "@" in c)
        raise ValueError(
            f"metrics {absent} were not computed for any of these runs; available: {known} "
            "(a retrieval metric is computed from the run files when asked for; a label metric such as "
            "coverage@N only where the dataset has its labels, at the report's coverage_n)"
        )
    df = T.table2(views, cfg, baseline=baseline)
    if df.empty:
        return df
    df.insert(df.columns.get_loc("metric") + 1, "measure", [display_metric(m) for m in df["metric"]])
    df["p_adjusted"] = df[CORRECTIONS[correction]] if correction else df[f"p_{df.attrs['primary_test']}"]
    df.attrs.update(correction=correction, baseline=baseline or "best per dataset", family_size=int(len(df)))
    return df
