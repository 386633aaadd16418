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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from omegaconf import OmegaConf, open_dict

from analysis import tables as T
from analysis import views as V
from analysis.label_metrics import label_columns
from analysis.metric_names import canonical_metric, canonical_or_other, display_metric, is_retrieval_metric
from analysis.report import load_cfg
from experiments.byo import TARGET, Registered, adhoc_dataset, names_of, register
from experiments.comparison import plot_per_query, save, to_latex, to_markdown  # noqa: F401 - the API's own helpers
from experiments.config import load_config, to_dict
from experiments.datasets import dataset_build_key
from experiments.reference import DeclaredRun, ResolvedRun, processed_folder, resolve
from experiments.run_identity import run_identity
from lethe.core.paths import Paths

CORRECTIONS = {"bonferroni": "p_bonferroni", "holm": "p_holm", "bh": "p_bh", None: None}
FORMATS = ("wide", "long")
Spec = Any  # a name, a list of names or systems, or a mapping name -> overrides (a config method) or system


def _is_overrides(v: Any) -> bool:
    return v is None or (isinstance(v, (list, tuple)) and all(isinstance(o, str) for o in v))


def _named(spec: Spec, what: str) -> dict[str, Any]:
    """``"bm25"``, ``["bm25", retriever, Path("run.trec")]`` or ``{"bm25": ["method.k1=0.9"], "mine": retriever}``
    -> {name: list of overrides (a config name) or the system itself (bring your own, experiments.byo)}."""
    if isinstance(spec, str):
        return {spec: []}
    if isinstance(spec, Mapping):
        return {str(k): ([str(o) for o in (v or [])] if _is_overrides(v) else v) for k, v in spec.items()}
    if isinstance(spec, Sequence) and spec:
        names = names_of(spec)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"{what}: two entries are both named {dupes}; give them names in a mapping name -> system")
        return {n: ([] if isinstance(s, str) else s) for n, s in zip(names, spec, strict=True)}
    raise TypeError(
        f"{what}: a name, a list of names or systems, or a mapping name -> list of overrides or system; got {spec!r}"
    )


def _method_spec(name: str) -> tuple[str, str | None]:
    """``"bm25"`` -> ("bm25", None); ``"bm25+k1_09"`` -> ("bm25", "k1_09") (a variant: its own label)."""
    method, _, variant = name.partition("+")
    return method, (variant or None)


def resolve_runs(methods: Spec, datasets: Spec, overrides: Sequence[str] = ()) -> list[ResolvedRun]:
    """Every (dataset, method) as a resolved run (config composed, results folder located by config hash);
    overrides apply in this order: ``overrides``, the dataset's, the method's."""
    systems = _named(methods, "methods")
    # a system of your own is registered once (a run file read and hashed once), then paired with every dataset
    own = {name: register(name, s) for name, s in systems.items() if not _is_overrides(s)}
    out = []
    for ds, ds_over in _named(datasets, "datasets").items():
        if isinstance(ds_over, Mapping):  # your own corpus, topics and qrels: a BEIR folder (experiments.byo)
            root = Paths.default().resolve(load_config(list(overrides)).cache_dir) / "adhoc"
            ds, ds_over = "beir", adhoc_dataset(ds, ds_over, root)
        elif not _is_overrides(ds_over):
            raise TypeError(
                f"datasets: {ds!r} maps to {type(ds_over).__name__}; expected a list of overrides or a mapping "
                "with corpus, queries and qrels"
            )
        for name, m_over in systems.items():
            if name in own:
                out.append(_resolve_own(own[name], ds, [*overrides, *ds_over]))
                continue
            method, variant = _method_spec(name)
            run = DeclaredRun("api", ds, method, None, variant, None, tuple([*overrides, *ds_over, *m_over]))
            out.append(resolve(run))
    return out


def _resolve_own(own: Registered, dataset: str, overrides: Sequence[str]) -> ResolvedRun:
    """A registered bring-your-own system (experiments.byo) on ``dataset`` as a resolved run: the run config of
    ``dataset=<dataset>`` with its method section replaced by the system's; a Python object's run is always made
    again (``run.overwrite=true``: its code may have changed under the same name)."""
    cfg = load_config([f"dataset={dataset}", *overrides])
    with open_dict(cfg):
        cfg.method = OmegaConf.create(own.method)
        if own.live:
            cfg.run.overwrite = True
    key = dataset_build_key(cfg)
    ident = run_identity(cfg, key)
    declared = DeclaredRun("api", dataset, own.method["name"], overrides=tuple(overrides))
    return ResolvedRun(declared, cfg, ident.config_hash, ident.folder, processed_folder(cfg, key))


def run_missing(runs: Sequence[ResolvedRun], progress: bool = True) -> None:
    """Build the prerequisites of the runs that are not done, then run them one at a time (in this process,
    so their latencies stay comparable); a run whose config says ``run.overwrite=true`` is made again."""
    from experiments.prerequisites import prepare_steps
    from experiments.runner import run_job

    pending = [r for r in runs if not r.done or r.cfg.run.get("overwrite")]
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
    baseline: str | Sequence[str] | None = None,
    correction: str | None = "holm",
    overrides: Sequence[str] = (),
    save_dir: str | None = None,
    run: bool = True,
    analysis: Mapping[str, Any] | None = None,
    progress: bool = True,
    format: str = "wide",
    perquery: bool = False,
    verbose: bool = False,
) -> pd.DataFrame:
    """Run (or reuse) ``methods`` on ``datasets`` and test each against ``baseline`` per dataset and metric.

    ``methods``: config names (``conf/method/``), systems of your own (experiments.byo: an object with
    ``index``/``search``, a callable ``text -> [(doc_id, score)]``, a TREC run file as a ``pathlib.Path``, a ranx
    ``Run``, a DataFrame ``query_id, doc_id, score``), a list of them, or a mapping name -> overrides (a config
    method; ``name+variant`` is filed under that label, e.g. ``{"bm25+k1_09": ["method.k1=0.9"]}``) or name ->
    system. ``datasets``: config names (``conf/dataset/``), a list, or a mapping name -> overrides, or name -> your
    own ``{"corpus", "queries", "qrels"}`` (frames, dicts or files; an ad-hoc BEIR dataset, experiments.byo). ``metrics``:
    ranx or ir_measures names (``nDCG@10``, ``R@50``, ``AP@100``, ``Rprec``, ``Success@10``, ...;
    ``coverage@10`` / ``contradiction@10`` where labelled). ``baseline``: a method name, a list of them (every system against
    each, one correction family per baseline; ``attrs["family_size"]`` per baseline, and the wide form one row per
    (dataset, baseline, system)), or None for each dataset's best baseline by the report's rule (the report's Table 2). ``correction``: which adjusted p value fills
    ``p_adjusted`` and the marks (``holm``, ``bonferroni``, ``bh`` or None for the unadjusted p of the primary
    test, ``analysis.primary_test.table2``), adjusted over the whole family of comparisons. ``overrides``: run
    overrides for every run (e.g. ``data.root=...``); ``save_dir``: the results folder (``results_dir``; default
    the project's). ``run=False`` only reads finished runs (a missing one raises). ``analysis``: report settings
    (conf/analysis/default.yaml), e.g. ``{"bootstrap_resamples": 2000}``. ``verbose=False`` (default) keeps each
    run's summary table and progress bar out of the output (``run.print_summary``/``run.progress`` false);
    ``progress`` prints one line per job made.

    ``format="wide"`` (default): one row per (dataset, system), the baseline first; per metric its mean, the mean
    difference to the baseline (``Δ``) with its BCa CI (``CI low``/``CI high``), ``p`` (``p_adjusted``) and
    ``sig`` (``+``/``-``: significantly better/worse at 1 - ``analysis.confidence``, ``base`` on the baseline
    row); then ``n`` (queries), ``folder`` and ``config_hash`` of the run. Use ``.round(4)``, ``.to_markdown()``,
    ``.to_latex()``. ``format="long"``: one row per (dataset, metric, method): n, baseline_mean, method_mean,
    mean_diff, ci_low, ci_high, p_wilcoxon, p_randomization, d_z, wins, ties, losses, p_bonferroni, p_holm,
    p_bh, p_adjusted, ci_vs_test, ``measure`` (the ir_measures name) and the gate mark. ``perquery=True``: the
    per-query scores instead, one row per (dataset, system, query_id), a column per metric. Every form's
    ``attrs`` holds ``runs`` ({(dataset, system): {folder, config_hash}}), correction, baseline, family_size,
    primary_test.
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction={correction!r}: expected one of {sorted(k for k in CORRECTIONS if k)} or None")
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: expected one of {list(FORMATS)}")
    if isinstance(metrics, str):
        metrics = [metrics]
    for m in metrics:  # a name at a cutoff that is neither a retrieval nor a label metric: refused before any work
        if "@" in str(m) and not is_retrieval_metric(m) and not label_columns([str(m)]):
            canonical_metric(m, "metrics")  # raises UnknownMetric: one line, the accepted families
    family = list(dict.fromkeys(canonical_or_other(m) for m in metrics))  # label metrics (coverage@10) kept as is
    quiet = [] if verbose else ["run.print_summary=false", "run.progress=false"]
    over = [*quiet, *overrides, *([f"results_dir={Paths.default().resolve(save_dir)}"] if save_dir else [])]
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
    bases = [baseline] if baseline is None or isinstance(baseline, str) else list(baseline)
    for b in bases:
        if b is not None and b not in labels:
            raise ValueError(f"baseline={b!r} is not one of the methods {sorted(set(labels))}")
    views = V.collect(cfg, refs)
    # a label metric (coverage@10) exists only where its labels do; a metric no run has is a mistake
    computed = {c for v in views.values() for pq in v.per_query.values() for c in pq.columns}
    absent = [m for m in family if m not in computed]
    if absent:
        known = sorted(c for c in computed if "@" in c)
        raise ValueError(
            f"metrics {absent}: no such column in any of these runs (a retrieval metric is computed from the run "
            f"files when asked for; a label metric such as coverage@N exists only where the dataset has its labels, "
            f"at the report's setting); columns here: {known}"
        )
    _warn_dropped(runs)
    where = {
        (str(r.cfg.dataset.name), r.declared.label): {"folder": str(r.folder), "config_hash": r.config_hash}
        for r in runs
    }
    if perquery:
        return _per_query(views, family, where)
    # one correction family per baseline: each list entry's rows equal a call with that baseline alone
    parts = {b: T.table2(views, cfg, baseline=b) for b in bases}
    df = pd.concat(parts.values(), ignore_index=True) if len(parts) > 1 else parts[bases[0]]
    df.attrs.update(
        {k: v for k, v in parts[bases[0]].attrs.items() if k not in df.attrs},
        correction=correction,
        baseline=baseline if baseline is not None else "best per dataset",
        family_size={b: len(d) for b, d in parts.items()} if len(parts) > 1 else int(len(df)),
        runs=where,
    )
    if df.empty:  # one system per dataset, or nothing comparable: no comparison to show
        return df
    written = {canonical_or_other(m): str(m) for m in metrics}  # each metric headed as the caller wrote it
    df.insert(df.columns.get_loc("metric") + 1, "measure", [written.get(m, display_metric(m)) for m in df["metric"]])
    df["p_adjusted"] = df[CORRECTIONS[correction]] if correction else df[f"p_{df.attrs['primary_test']}"]
    return df if format == "long" else wide(df, where, alpha=1.0 - float(cfg["confidence"]), by_baseline=len(bases) > 1)


def wide(
    long: pd.DataFrame,
    runs: Mapping[tuple[str, str], Mapping[str, str]],
    alpha: float = 0.05,
    by_baseline: bool = False,
) -> pd.DataFrame:
    """The long comparison frame as one row per (dataset, system), the baseline first (see :func:`experiment`);
    ``by_baseline`` (several baselines): one row per (dataset, baseline, system)."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for ds, part in long.groupby("dataset", sort=False):
        for _, r in part.iterrows():
            m = r["measure"]
            at = (ds, r["baseline"]) if by_baseline else (ds,)
            base = rows.setdefault((*at, r["baseline"]), {})
            base[m], base[f"{m} sig"], base["n"] = r["baseline_mean"], "base", int(r["n"])
            mine = rows.setdefault((*at, r["method"]), {})
            significant = bool(r["p_adjusted"] < alpha)
            mine.update(
                {
                    m: r["method_mean"],
                    f"{m} Δ": r["mean_diff"],
                    f"{m} CI low": r["ci_low"],
                    f"{m} CI high": r["ci_high"],
                    f"{m} p": r["p_adjusted"],
                    f"{m} sig": ("+" if r["mean_diff"] > 0 else "-") if significant else "",
                }
            )
            mine["n"] = int(r["n"])
    out = pd.DataFrame.from_dict(rows, orient="index")
    names = ["dataset", "baseline", "system"] if by_baseline else ["dataset", "system"]
    out.index = pd.MultiIndex.from_tuples(out.index, names=names)
    measures = list(dict.fromkeys(long["measure"]))
    cols = [c for m in measures for c in (m, f"{m} Δ", f"{m} CI low", f"{m} CI high", f"{m} p", f"{m} sig")]
    out = out.reindex(columns=[*cols, "n"])
    key = [(i[0], i[-1]) for i in out.index]  # (dataset, system)
    out["folder"] = [runs.get(k, {}).get("folder") for k in key]
    out["config_hash"] = [runs.get(k, {}).get("config_hash") for k in key]
    out.attrs.update(long.attrs)
    return out


def _per_query(views: Mapping[str, Any], metrics: Sequence[str], runs: Mapping[tuple[str, str], Any]) -> pd.DataFrame:
    """One row per (dataset, system, query_id), a column per asked metric (ir_measures names)."""
    frames = []
    for ds, v in views.items():
        for system, pq in v.per_query.items():
            cols = [m for m in metrics if m in pq.columns]
            f = pq[cols].rename(columns=display_metric).reset_index()
            f.insert(0, "system", system)
            f.insert(0, "dataset", ds)
            frames.append(f)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    out.attrs["runs"] = dict(runs)
    return out


def _warn_dropped(runs: Sequence[ResolvedRun]) -> None:
    """Print how many scored docs a bring-your-own ranking or callable named that a query could not see (later
    turns, other scopes): they were cut (experiments.byo), so the user knows their run was not taken whole."""
    from lethebench.runs import RunFolder

    for r in runs:
        if OmegaConf.select(r.cfg, "method._target_") != TARGET:
            continue
        flags = RunFolder(r.folder).flags()
        dropped = flags["byo_dropped"].fillna(0) if "byo_dropped" in flags else pd.Series(0, index=flags.index)
        absent = int(flags["byo_missing"].fillna(False).astype(bool).sum()) if "byo_missing" in flags else 0
        if dropped.sum() or absent:
            print(
                f"{r.key}: {int(dropped.sum())} scored docs of {int((dropped > 0).sum())} queries were not eligible "
                f"for their query (later turns or other scopes) and were cut; {absent} of {len(flags)} queries "
                "were absent from the ranking (scored 0)",
                flush=True,
            )


@dataclass(frozen=True)
class Eligible:
    """What your own ranking of a dataset may use (:func:`eligible_docs`): the evaluated ``queries`` (query_id, text,
    scope_id, position, ...), the ``corpus`` (doc_id, text, scope_id, position, ...) and, per query, the ``docs`` it may
    rank (doc ids of its scope before its position, in position order). Rank only those: the runner cuts anything else
    (and a doc of another scope or a later turn stops a method of the harness)."""

    queries: pd.DataFrame
    corpus: pd.DataFrame
    docs: dict[str, list[str]]


def eligible_docs(dataset: str, overrides: Sequence[str] = ()) -> Eligible:
    """The questions a run of ``dataset`` (a ``conf/dataset/`` name, with run ``overrides`` such as
    ``dataset.scopes=[conv-26]``) evaluates and the docs each may rank, by the runner's own rule (same scope, earlier
    position); the processed dataset is built first when it is missing."""
    from experiments.datasets import prepare_dataset
    from experiments.runner import QuerySelection, group_docs, select_queries, walk_eligible
    from lethebench.schema import read_dataset

    cfg = load_config([f"dataset={dataset}", *overrides])
    ds = read_dataset(prepare_dataset(cfg))
    queries, _ = select_queries(ds, QuerySelection.from_config(to_dict(cfg)["dataset"], int(cfg.run.seed)))
    docs, current = {}, []
    for _, row, n, new in walk_eligible(queries, group_docs(ds)):
        if new is not None:
            current = [d.doc_id for d in new]
        docs[row.query_id] = current[:n] if n else []
    return Eligible(queries.reset_index(drop=True), ds.corpus, docs)
