"""Tables, figures and ``report.md`` from exactly the declared runs (:class:`analysis.declared_runs.RunRef`).

The command is ``python -m experiments.reproduce action=report`` (it locates the declared runs of the
reproduction contract by config hash and calls :func:`build_report`). Reads only finished results
folders and the processed datasets they name; never re-runs retrieval. A declared run that is not
finished shows n/m†; a finished run that is not declared never enters. Settings:
``conf/analysis/default.yaml``. The paper's printed numbers (``../shared/paper/claims.yaml``) appear only
as claims beside measurements.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from omegaconf import OmegaConf

from analysis import ce_recipe as CR
from analysis import ce_selection as CS
from analysis import claims as CL
from analysis import families as FAM
from analysis import findings as FI
from analysis import formatting as F
from analysis import gates as G
from analysis import instruments as INS
from analysis import plans as P
from analysis import seeds as SEEDS
from analysis import tables as T
from analysis import verdicts as VD
from analysis import views as V
from analysis.declared_runs import RunRef
from analysis.figures import caption_fields, draw_all
from analysis.iteration4 import iteration4_table
from analysis.metric_names import canonical_or_other, display_metric
from analysis.table import Table
from lethe.core.atomic import atomic_write_text
from lethe.core.faults import kill_point
from lethe.core.paths import CONF_DIR, PROJECT_ROOT, Paths, default_paths

CAPTIONS = {  # templates: analysis.figures.caption_fields fills {paper}, {families}, ... from the settings and runs drawn
    "fig1": "Figure 1, {families}: entity {coverage} per method with 95% BCa CIs (left); nDCG@10 against P95 latency on this machine with the Pareto front (right); main family only. n per method in its row label or legend entry (a method run on a query sample has a smaller n; a panel whose methods differ in n says so in its title). The latency axis is symmetric-log, linear below {linthresh} ms, so a method measured at 0 ms is drawn at 0, not left out or moved. ‡ after a method: its latency was measured under contention (Table 3's mark), not comparable with the others.",
    "fig2": "Figure 2, {paper}: iteration-2 ablation (left); nDCG@10 per method by query complexity, means with 95% BCa CIs (right); main family only. n per method in its row label, n per complexity level in the legend.",
    "fig3": "Figure 3, {families}: learned fusion (iteration 3, and its alpha-only variant) against static fusion (iteration 2), paired nDCG@10 differences with 95% BCa CIs and n (left); mean nDCG@10 per iteration with 95% BCa CIs against the best baseline's mean and CI band (right), n under each iteration (an iteration without a run there says 'not run').",
    "fig4": "Figure 4, iteration 4: (a) quality vs LLM rerank budget, (b) the share of the top 10 judged, (c) the model-choice frontier, (d, e) the share of queries with a stale document in the top {k}, (f) iteration 4 against iteration 3 on the same queries per dataset, (g, h) mean latency by stage, Table 3's numbers: the bar of the stages inside the per-query latency ends at Table 3's total mean (its part no stage timed is drawn as 'untimed'), and answer generation and its judge, timed after the search and not in that total, are a bar of their own (means over all the run's queries). {it4} n in every legend or row label; a mean of 0 is marked '0'. A budget shorter than one LLM call judges nothing (share 0): the predictive stop never starts a call it cannot finish, so there the LLM reorders nothing. ‡ after a method: its latency was measured under contention (Table 3's mark), not comparable with the others.",
    "fig5": "Figure 5: per dataset ({all}), paired mean differences in nDCG@10 against the best baseline with BCa CIs, n and d_z (upper row of each pair), and mean nDCG@10 with 95% CIs and n (lower row); main family only; a mean of 0 is marked '0'.",
    "fig6": "Figure 6, {paper}: nDCG@10, Recall@50, {coverage} and the stale-document rate (top {k}) per method by LetheBench domain, means with 95% BCa CIs (one marker per domain); main family only. n per method in its row label, n per domain in the legend.",
    "fig7": "Figure 7: Lethe steps, ablations and side studies against their references (nDCG@10, paired, 95% BCa CIs, n per row), one panel per dataset: {fig7}.",
}


def load_cfg(overrides: list[str] | None = None, base: Any = None) -> dict[str, Any]:
    """Report settings: ``base`` (default: ``conf/analysis/default.yaml``) with dotlist overrides
    (e.g. ``out_dir=/tmp/x``), paths made absolute, retrieval metric names in their canonical (ranx)
    spelling whichever was given (``nDCG@10`` -> ``ndcg@10``, analysis.metric_names)."""
    paths = Paths.default()
    base = OmegaConf.load(CONF_DIR / "analysis" / "default.yaml") if base is None else base
    cfg = OmegaConf.merge(base, OmegaConf.from_dotlist(list(overrides or [])))
    out = OmegaConf.to_container(cfg, resolve=True)
    out["out_dir"] = str(paths.resolve(out["out_dir"]))
    for key in ("best_baseline_metric", "gate_metric"):
        if key in out:
            out[key] = canonical_or_other(out[key])
    if "family_metrics" in out:
        out["family_metrics"] = [canonical_or_other(m) for m in out["family_metrics"]]
    out.setdefault("claims", str(default_paths().claims))
    if out.get("seeds"):
        out["seeds"] = str(paths.resolve(out["seeds"]))
    return out  # type: ignore[return-value]


def claims_section(
    all_views: Mapping[str, V.DatasetView],
    views: Mapping[str, V.DatasetView],
    t2: pd.DataFrame,
    cfg: Mapping[str, Any],
    tdir: Path,
    studies: Mapping[str, Mapping[str, Any]] | None = None,
    declared: set[str] | None = None,
) -> str:
    """Markdown: the claims table (analysis/claims.py; written as ``table_claims``) of the paper and of every seed
    whose runs the report declares (``declared``: run keys; None = every seed), the verdict rule, then what the sanity
    gates found on every dataset."""
    path = Path(cfg["claims"])
    paper = yaml.safe_load(path.read_text()) if path.is_file() else None
    seeds = yaml.safe_load(Path(cfg["seeds"]).read_text()) or {} if cfg.get("seeds") else {}
    if declared is not None:
        seeds = {k: s for k, s in seeds.items() if SEEDS.run_keys({k: s}) & declared}
    table, per_dataset = CL.claims_tables(all_views, t2, paper, seeds, cfg, studies)
    missing = "" if paper else f"The paper's claims file {path} was not found: only the seeds' claims are below. "
    note = (
        f"{missing}The paper's numbers were **not measurements**: the repository behind the paper produced them from "
        "hard-coded formulas plus random noise; its claims are tested on this harness's LetheBench, dataset "
        f"`{cfg['paper_dataset']}` (test split; not the paper's dataset, which never existed as described). The seeds' numbers are copied from "
        f"`conf/reference/seed_claims.yaml`. {CL.HOW} "
        f"{VD.rule_text(VD.Rules.from_cfg(cfg))} {CL.verdict_counts(table)} ({CL.source_counts(table)})."
    )
    claims = Table("table_claims", "Claims: every printed claim, measured, with its verdict", table, note)
    claims.write(tdir)
    groups = []
    if not per_dataset.empty:
        rows = Table(
            "table_claims_per_dataset",
            "Claims measured on several datasets: the per-dataset rows under each claim's one verdict above",
            per_dataset,
            VD.GROUP_RULE,
        )
        rows.write(tdir)
        groups = [f"**{rows.title}** (rule: {VD.GROUP_RULE}):", "", rows.markdown(footnote=None), ""]
    fidelity = CL.fidelity_lines(seeds)
    fidelity = ["What each seed study approximates:", "", *fidelity, ""] if fidelity else []
    return (
        "\n".join([note, "", claims.markdown(footnote=None), "", *groups, *fidelity]) + "\n" + gate_claims(views, cfg)
    )


def gate_claims(views: Mapping[str, V.DatasetView], cfg: Mapping[str, Any]) -> str:
    """The claims section's statement of the sanity gates: which rerankers are below their own first stage
    (and so are not the best baseline the paper's Table 2 compares against), and which best baseline was used."""
    if not G.declared(cfg):
        return "No rerankers are declared for the sanity gates (`analysis.rerankers`).\n"
    found = G.gate_sentences(views, cfg)
    bases = "; ".join(f"{ds}: {T.best_baseline(v, cfg)}" for ds, v in sorted(views.items()))
    head = (
        f"Sanity gates ({display_metric(cfg['gate_metric'])}, paired per query; section 'Sanity gates'): the paper's Table 2 "
        'compares against "the best baseline"; here that is the best baseline once rerankers below their own first '
        f"stage are left out ({bases})."
    )
    if not found:
        return head + " No declared reranker scored below its own first stage.\n"
    return (
        head + " Below their own first stage, so reranking made the order worse and they were not used as the "
        "best baseline:\n\n" + "\n".join(f"- {x}" for x in found) + "\n"
    )


def gate_footnote(cfg: Mapping[str, Any]) -> str:
    """Table 1's footnote on its "vs first stage" column."""
    return (
        f"vs first stage: a reranker's paired mean {display_metric(cfg['gate_metric'])} difference against its own first-stage "
        "run (on the queries both scored) and the candidate depth it used (from its manifest); n/a = not a "
        "reranker. " + G.BELOW_NOTE
    )


def sanity_section(views: Mapping[str, V.DatasetView], cfg: Mapping[str, Any], tdir: Path) -> str:
    """The sanity table (written as ``table_sanity``) with how to read it; one sentence without rerankers."""
    table = G.sanity_table(views, cfg)
    if table.empty:
        return "No declared reranker (`analysis.rerankers`) has a finished run yet.\n"
    sanity = Table(
        "table_sanity",
        "Sanity gates: rerankers against their first stage and a random reordering of the same candidates",
        table,
        G.BELOW_NOTE,
    )
    sanity.write(tdir)
    metric = display_metric(cfg["gate_metric"])
    return "\n".join(
        [
            f"Each reranker declared in `analysis.rerankers` beside the run whose order it reorders (its first stage) and "
            f"a seeded random reordering of the same candidates (`random_rerank`: the first stage's top `depth` shuffled "
            f"per query from run.seed and the query id), {metric} paired per query on the queries reranker and first "
            "stage both scored (`n`; the random control's difference has its own n). `depth` is the number of candidates "
            "each run reordered, read from its manifest (`method.candidates`, `method.stages.llm_rerank.top_n`): the reference "
            "tiers may set it per dataset, never silently. A gate holds only when the manifests show the reranker "
            "started from exactly that first stage (same processed dataset, run.k and first-stage parameters); "
            "otherwise the verdict says `not comparable` and names what differs.",
            "",
            sanity.markdown(),
        ]
    )


def hardware_line(manifests: Sequence[Mapping[str, Any]]) -> str:
    """The setup's hardware line: the one machine every run was made on, or each machine with its number of runs."""
    machines = Counter(
        "{cpu}, {cores} cores, {ram_gib} GiB RAM; Python {python}".format_map(
            {k: (m.get("hardware") or {}).get(k) for k in ("cpu", "cores", "ram_gib", "python")}
        )
        for m in manifests
    )
    if len(machines) == 1:
        return f"- Hardware: {next(iter(machines))}"
    return "- Hardware (the runs were made on more than one machine; each run's manifest names its own): " + "; ".join(
        f"{m} ({n} run{'s' * (n != 1)})" for m, n in machines.most_common()
    )


def setup_section(views: Mapping[str, V.DatasetView], refs: list[RunRef], cfg: Mapping[str, Any]) -> str:
    """Hardware, versions, and every declared run: tier, subset, config hash, seed, commit, dirty flag."""
    runs = [r for v in views.values() for r in v.runs.values()]
    if not runs:
        return "No declared run has finished yet.\n"
    man = runs[0].manifest
    pk = man.get("packages", {})
    lines = [
        hardware_line([r.manifest for r in runs]),
        "- Packages: " + ", ".join(f"{k} {v}" for k, v in sorted(pk.items()) if v),
        f"- {len(runs)} of {len(refs)} declared runs are finished; the tiers are declared in `conf/reference/` and "
        "their expected scores are in `results/expected/`.",
        "",
    ]
    rows = []
    by_key = {(r.dataset, r.label): r for r in refs}
    for ds in sorted({r.dataset for r in refs}):
        v = views.get(ds)
        labels = V.method_order([r.label for r in refs if r.dataset == ds], cfg)
        for m in labels:
            ref = by_key[(ds, m)]
            run = v.runs.get(m) if v is not None else None
            if run is None:
                state = "DAMAGED in the reference store (n/m†)" if ref.damage else "not run (n/m†)"
                rows.append([ds, m, ref.tier, ref.declared, ref.folder.name, "-", "-", "-", state])
                continue
            g = run.manifest.get("git", {})
            rows.append(
                [
                    ds,
                    m,
                    ref.tier,
                    ref.declared,
                    run.config_hash,
                    run.manifest.get("seed"),
                    str(g.get("commit"))[:10],
                    g.get("dirty"),
                    run.manifest.get("ended", "")[:19],
                ]
            )
    lines += F.markdown_table(
        ["dataset", "method", "tier", "declared", "config hash", "seed", "git commit", "dirty", "ended"], rows
    )
    datasets = []
    for v in sorted(views.values(), key=lambda v: v.name):
        r = max(v.runs.values(), key=lambda x: x.metrics["queries"]["evaluated"])  # not a sampled run
        d = r.manifest["dataset"]
        card = f"results/cards/{v.name}.md"  # written only for datasets with the core tier's difficulty runs
        datasets.append(
            [
                v.name,
                d.get("build_key"),
                (d.get("card_counts") or {}).get("docs"),
                r.metrics["queries"]["evaluated"],
                card
                if (Path(cfg["out_dir"]) / "cards" / f"{v.name}.md").is_file() or (PROJECT_ROOT / card).is_file()
                else "- (no core-tier runs)",
            ]
        )
    lines += [
        "",
        "Datasets (from their cards):",
        "",
        *F.markdown_table(["dataset", "build key", "docs", "queries evaluated", "card"], datasets),
    ]
    return "\n".join(lines) + "\n"


def contradiction_notes(cfg: Mapping[str, Any], studies: Mapping[str, Mapping[str, Any]] | None) -> dict[str, str]:
    """Per dataset, what the rules contradiction detector found there (``findings.contradiction_studies``: dataset ->
    study of the detector over every scope), in words: how many labelled stale pairs it found, and what follows."""
    out = {}
    for ds, name in ((cfg.get("findings") or {}).get("contradiction_studies") or {}).items():
        doc = (studies or {}).get(name)
        rows = [
            r
            for r in (doc or {}).get("rows", [])
            if r.get("backend") == "rules" and str(r.get("scopes", "")).startswith("all")
        ]
        if not rows:
            out[ds] = f"The contradiction stage's detector study `{name}` was not run."
            continue
        r = rows[0]
        found, gold = int(r["tp"]), int(r["n_gold"])
        what = (
            "so iteration 4's contradiction handling cannot act there (`lethe_iter4+contradiction_only` equals iteration 3)"
            if found == 0
            else f"precision {float(r['precision']):.3f}, recall {float(r['recall']):.3f}"
        )
        out[ds] = (
            f"The rules contradiction detector finds {found} of {gold} labelled stale pairs on all {r['n_scopes']} "
            f"scopes (study `{name}`), {what}."
        )
    return out


def findings_section(
    conf: pd.DataFrame,
    t2: pd.DataFrame,
    best: Mapping[str, str | None],
    views: Mapping[str, V.DatasetView],
    cfg: Mapping[str, Any],
    tdir: Path,
    studies: Mapping[str, Mapping[str, Any]] | None,
) -> list[str]:
    """The report's first section: what was found (analysis/findings.py), the confirmatory family's table and how it
    was declared; writes ``table_findings`` (and ``findings.json``, the raw rows the README's summary is made from)
    and ``table_confirmatory``."""
    table = FI.findings_table(conf, t2, best, cfg)
    printed = FI.printable(table)
    note = FAM.note(conf, cfg) if not conf.empty else "No confirmatory comparison has both runs finished yet."
    findings = Table(
        "table_findings",
        "Findings: each Lethe iteration against the best baseline and the iteration before",
        printed,
        note,
    )
    findings.write(tdir)
    atomic_write_text(tdir / "findings.json", table.to_json(orient="records", indent=1, double_precision=10) + "\n")
    md = ["## Findings", "", FI.section(table, cfg, contradiction_notes(cfg, studies)), findings.markdown()]
    if not conf.empty:
        show = conf[
            [
                "dataset",
                "role",
                "metric",
                "baseline",
                "method",
                "n",
                "mean_diff",
                "ci_low",
                "ci_high",
                "p_randomization",
                "p_adj",
                "ci_vs_test",
                "d_z",
                "wins",
                "ties",
                "losses",
            ]
        ]
        family = Table("table_confirmatory", "The confirmatory family: paired tests, Holm over these rows", show, note)
        family.write(tdir)
        md += [FI.FULL_FAMILY, "", family.markdown(F.with_p_strings(show), None)]
    return md


def plan_section(views: Mapping[str, V.DatasetView], cfg: Mapping[str, Any], tdir: Path) -> str:
    """H4 (plan-selection accuracy): ``table_plans`` plus, where gold plan labels exist, each Lethe
    method's confusion matrix and per-category accuracy; one sentence when no run recorded plans."""
    table = P.plan_table(views, cfg)
    if table.empty:
        return (
            "No runs with recorded plans yet: H4 (plan-selection accuracy) is not measured; it needs a Lethe "
            "run with adaptive planning on.\n"
        )
    plans = Table("table_plans", "H4: plan-selection accuracy of the Lethe methods", table)
    plans.write(tdir)
    conf = float(cfg["confidence"])
    lines = [
        f"Accuracy of the plan each Lethe method chose (flags.plan) against the gold plan_label, over the "
        f"evaluated queries with both; {conf:.0%} Wilson score interval; macro-F1 over verify/explore/exploit. "
        "The majority baseline always predicts the most frequent gold label of the same queries (chosen on "
        "them, so a generous reference). 'no plan' counts gold-labelled queries without a recorded plan (not "
        "scored). Plan shares are over all evaluated queries with a recorded plan.",
        "",
        plans.markdown(),
    ]
    per_cat: dict[str, dict[str, pd.DataFrame]] = {}
    for ds, m, v in P.runs_with_plans(views, cfg):
        acc = P.plan_accuracy(v.per_query[m], v.queries, conf)
        if acc is None:
            continue
        cm = acc["confusion"].reset_index().rename(columns={"gold": "gold / predicted"})
        why = ", ".join(f"status {s}: {c}" for s, c in acc["missing_plan_by_status"].items())
        lines += [
            f"Confusion matrix, {m} on {ds} (rows: gold, columns: predicted; n = {acc['n']}; "
            f"no plan: {acc['n_missing_plan']}{f' ({why})' if why else ''})",
            "",
            F.to_markdown(cm),
        ]
        if "per_category" in acc:
            per_cat.setdefault(ds, {})[m] = acc["per_category"]
    for ds, by_m in per_cat.items():
        cats = sorted({c for df in by_m.values() for c in df.index})
        rows = [
            {
                "category": c,
                **{
                    m: (f"{F.fmt(df.loc[c, 'accuracy'])} (n={int(df.loc[c, 'n'])})" if c in df.index else F.NM)
                    for m, df in by_m.items()
                },
            }
            for c in cats
        ]
        lines += [f"Plan accuracy by query category on {ds}", "", F.to_markdown(pd.DataFrame(rows))]
    return "\n".join(lines)


@dataclass
class ReportContext:
    """What the report's sections read: the settings, the declared runs and their views (``views`` without the seed
    studies' labels), and the folders tables and figures are written to. The shared tables are computed once, when
    a section first asks for them."""

    cfg: Mapping[str, Any]
    refs: list[RunRef]
    extra: Sequence[tuple[str, str]]
    studies: Mapping[str, Mapping[str, Any]] | None
    all_views: dict[str, V.DatasetView]
    views: dict[str, V.DatasetView]
    main_refs: list[RunRef]
    tables: Path
    figures: Path

    @cached_property
    def best(self) -> dict[str, str | None]:
        """The best baseline per dataset (of all: the findings' reference)."""
        return {ds: T.best_baseline(v, self.cfg) for ds, v in self.views.items()}

    @cached_property
    def confirmatory(self) -> pd.DataFrame:
        return FAM.confirmatory_table(self.views, self.cfg, self.best)

    @cached_property
    def t2(self) -> pd.DataFrame:
        """Table 2, every row exploratory where no confirmatory comparison has both runs."""
        return FAM.split(T.table2(self.views, self.cfg), self.confirmatory, self.cfg)

    @cached_property
    def ablations(self) -> pd.DataFrame:
        """The steps-and-ablations table."""
        return FAM.split(T.table_ablations(self.views, self.cfg), self.confirmatory, self.cfg, reference="reference")


Section = Callable[[ReportContext], list[str]]
# report section name -> the function writing its tables and returning its Markdown lines; report.md shows the
# sections ``report_sections`` (conf/analysis/default.yaml) lists, in that order
SECTIONS: dict[str, Section] = {}


def report_section(name: str) -> Callable[[Section], Section]:
    """Register a report section under ``name`` (a new table of the report is one such function and its name in
    ``report_sections``)."""

    def register(fn: Section) -> Section:
        if name in SECTIONS:
            raise ValueError(
                f"report section {name!r} is registered twice ({SECTIONS[name].__module__}, {fn.__module__})"
            )
        SECTIONS[name] = fn
        return fn

    return register


@report_section("findings")
def _findings(c: ReportContext) -> list[str]:
    return findings_section(c.confirmatory, c.t2, c.best, c.views, c.cfg, c.tables, c.studies)


@report_section("overview")
def _overview(c: ReportContext) -> list[str]:
    ov = Table(
        "overview_ndcg10", "nDCG@10 per method and dataset", T.overview(c.views, c.cfg, c.main_refs), F.FOOTNOTE_MISSING
    )
    ov.write(c.tables)
    return ["## Overview: nDCG@10", "", ov.markdown()]


@report_section("sanity")
def _sanity(c: ReportContext) -> list[str]:
    return [
        "## Sanity gates: each reranker against its first stage and a random reordering",
        "",
        sanity_section(c.views, c.cfg, c.tables),
    ]


@report_section("ce_selection")
def _ce_selection(c: ReportContext) -> list[str]:
    sel = Table("table_ce_selection", "Cross-encoder model sets: dev selection", CS.selection_table(c.views), CS.NOTE)
    if sel.frame.empty:
        return []
    sel.write(c.tables)
    return ["## Cross-encoder: how each model set was chosen (dev)", "", CS.recipe(c.views), "", sel.markdown()]


@report_section("ce_recipe")
def _ce_recipe(c: ReportContext) -> list[str]:
    recipe = CR.recipe_table(c.views, c.cfg)
    if recipe.empty:
        return []
    t = Table(
        "table_ce_recipe",
        "Cross-encoder recipe chosen on recipe-dev, reported on the other queries",
        recipe,
        CR.note(c.cfg) + " " + CR.finding(recipe, c.cfg),
    )
    t.write(c.tables)
    return ["## Cross-encoder: recipe chosen on recipe-dev, reported on the other queries", "", t.markdown()]


@report_section("ce_regimes")
def _ce_regimes(c: ReportContext) -> list[str]:
    regimes = CS.regime_table(c.views, c.cfg)
    if regimes.empty:
        return []
    note = (
        "Mean nDCG@10 on the evaluated queries: the cross-encoder's first stage, its random control and "
        "each training regime (columns; `(default)` = the core tier's run), all at the dev-chosen "
        "interpolation. " + CS.regime_finding(regimes)
    )
    t = Table("table_ce_regimes", "Cross-encoder training regimes (test)", regimes, note)
    t.write(c.tables)
    return ["## Cross-encoder: training regimes (test)", "", t.markdown()]


@report_section("datasets")
def _datasets(c: ReportContext) -> list[str]:
    """Per dataset: Table 1 (performance), Table 3 (latency by stage) and, where domains exist, Table 4."""
    cfg, md = c.cfg, []
    for ds, v in sorted(c.views.items()):
        t1 = T.with_missing_rows(T.table1(v, cfg, c.studies), v, cfg)
        judge_note = INS.marked_footnote(t1, INS.hallucination_judge_unfit(cfg, c.studies))
        t1_note = " ".join(
            [F.FOOTNOTE_NM, F.FOOTNOTE_MISSING, gate_footnote(cfg), T.FOOTNOTE_TIMING, judge_note]
        ).strip()
        table1 = Table(f"table1_{ds}", f"Table 1 ({ds}): performance summary", t1, t1_note)
        table1.write(c.tables)
        marked = any(T.timing_mark(v, m) for m in v.per_query)
        table3 = Table(
            f"table3_{ds}",
            f"Table 3 ({ds}): latency by pipeline stage (ms)",
            T.table3(v, cfg),
            " ".join([F.FOOTNOTE_NM, *([T.FOOTNOTE_TIMING] if marked else [])]),
        )
        table3.write(c.tables)
        note = (cfg.get("dataset_notes") or {}).get(ds)
        md += [
            f"## {ds}",
            "",
            *([str(note), ""] if note else []),
            table1.title,
            "",
            table1.markdown(),
            f"Table 3 ({ds}): latency by pipeline stage on this machine (mean ms per query; totals from per-query "
            "wall time)",
            "",
            table3.markdown(),
        ]
        t4 = T.table4(v, cfg)
        if t4 is not None:
            table4 = Table(f"table4_{ds}", f"Table 4 ({ds}): nDCG@10 by domain", t4)
            table4.write(c.tables)
            md += [table4.title, "", table4.markdown()]
    return md


# the columns of Table 2 and the steps table report.md shows (their files hold every column)
PAIRED_SHOWN = ("method_mean", "mean_diff", "ci_low", "ci_high", "p_randomization", "p_wilcoxon")
T2_SHOWN = (
    "family",
    "dataset",
    "metric",
    "baseline",
    "versus",
    "method",
    "supervision",
    "n",
    "baseline_mean",
    *PAIRED_SHOWN,
    "n_nonzero",
)
SHOWN_TAIL = ("ci_vs_test", "d_z", "wins", "ties", "losses")


@report_section("significance")
def _significance(c: ReportContext) -> list[str]:
    t2, cfg = c.t2, c.cfg
    if t2.empty:
        return []
    t = Table(
        "table2_significance",
        "Table 2: paired tests against the best baseline (and the best with as much supervision)",
        t2,
        T.best_baseline_note(c.views, cfg),
    )
    t.write(c.tables)
    if "family" in t2.columns:
        cols = [
            *T2_SHOWN,
            *[x for x in ("p_adj", "correction") if x in t2.columns],
            *[x for x in FAM.WHOLE_TABLE if x in t2.columns],
            *SHOWN_TAIL,
            "gate",
        ]
    else:
        cols = [x for x in t2.columns if x not in ("ci_method", "wilcoxon_method", "notes")]
    return [
        "## Table 2: significance against the best baseline",
        "",
        f"{len(t2)} comparisons (methods x metrics {[display_metric(m) for m in cfg['family_metrics']]} x "
        f"datasets), confirmatory rows first. {T.tests_note(t2, cfg)}",
        "",
        t.markdown(F.with_p_strings(t2[cols])),
    ]


@report_section("ablations")
def _ablations(c: ReportContext) -> list[str]:
    ta = c.ablations
    md = ["## Lethe steps and ablations", ""]
    if ta.empty:
        return [*md, "No Lethe iterations or ablation variants with a reference run yet.", ""]
    t = Table("table_ablations", "Lethe steps and ablations: paired tests against the reference", ta)
    t.write(c.tables)
    cols = [
        *[x for x in ("family",) if x in ta.columns],
        "dataset",
        "metric",
        "reference",
        "method",
        "n",
        "reference_mean",
        *PAIRED_SHOWN,
        *[x for x in ("p_adj", "correction", *FAM.WHOLE_TABLE) if x in ta.columns],
        *SHOWN_TAIL,
    ]
    return [
        *md,
        f"Each Lethe iteration against the previous one, and each variant `name+x` against `name` "
        f"(mean_diff = method - reference): {len(ta)} comparisons, confirmatory rows first. {T.tests_note(ta, c.cfg)}",
        "",
        t.markdown(F.with_p_strings(ta[cols]), None),
    ]


@report_section("iteration4")
def _iteration4(c: ReportContext) -> list[str]:
    t_it4 = iteration4_table(c.views, c.cfg, c.studies)
    if t_it4.empty:
        return []
    it4_note = f"{F.FOOTNOTE_NM} {INS.marked_footnote(t_it4, INS.hallucination_judge_unfit(c.cfg, c.studies))}".strip()
    t = Table("table_iteration4", "Iteration 4: LLM reranking, contradiction handling, answers", t_it4, it4_note)
    t.write(c.tables)
    return [
        "## Iteration 4: LLM stages",
        "",
        "Runs on seeded query samples (`n`); nDCG@10 of iteration 3 is on the same queries. `share judged`: "
        "candidates the LLM judged within the budget; the rerank stage must keep its P95 within budget + 10%. "
        "Answers: LoCoMo-protocol token F1, exact match and ROUGE-L against the gold answer, and similarity; "
        "hallucination = share of judged answers the pinned judge prompt found unsupported by the retrieved "
        "context. Means with 95% BCa CIs, shares (EM, hallucination) with 95% Wilson intervals; n = answers scored.",
        "",
        t.markdown(),
    ]


@report_section("seeds_pointer")
def _seeds_pointer(c: ReportContext) -> list[str]:
    if not c.cfg.get("seeds_report"):
        return []
    return ["## Seed studies", "", f"The seed studies, claimed beside measured, are in `{c.cfg['seeds_report']}`.", ""]


@report_section("plans")
def _plans(c: ReportContext) -> list[str]:
    return ["## H4: plan selection", "", plan_section(c.views, c.cfg, c.tables)]


@report_section("instruments")
def _instruments(c: ReportContext) -> list[str]:
    return ["## Instruments: judge validation", "", INS.validation_section(c.cfg, c.studies)]


@report_section("figures")
def _figures(c: ReportContext) -> list[str]:
    kill_point("writing_report")
    figs = draw_all(c.views, c.t2, c.cfg, c.figures, ta=c.ablations)
    md = ["## Figures", ""]
    for name, paths in figs.items():
        md += [
            f"![{name}](figures/{paths[0].name})",
            "",
            CAPTIONS.get(name, name).format_map(caption_fields(c.views, c.cfg, c.ablations)),
            "",
        ]
    return md


@report_section("extra")
def _extra(c: ReportContext) -> list[str]:
    """The sections the caller hands in (``build_report``'s ``extra``: title, Markdown)."""
    return [line for title, body in c.extra for line in (f"## {title}", "", body, "")]


@report_section("claims")
def _claims(c: ReportContext) -> list[str]:
    declared = {r.key for r in c.refs}
    return [
        "## Claims: verdicts",
        "",
        claims_section(c.all_views, c.views, c.t2, c.cfg, c.tables, c.studies, declared),
    ]


@report_section("setup")
def _setup(c: ReportContext) -> list[str]:
    return [FI.SETUP_HEADING, "", setup_section(c.all_views, c.refs, c.cfg)]


def report_sections(cfg: Mapping[str, Any]) -> list[Section]:
    """The sections ``cfg['report_sections']`` names, in order; a ValueError names an unknown one."""
    names = list(cfg.get("report_sections") or [])
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ValueError(f"analysis report_sections: unknown section(s) {unknown}; known: {sorted(SECTIONS)}")
    return [SECTIONS[n] for n in names]


def build_report(
    cfg: Mapping[str, Any],
    refs: list[RunRef],
    extra: Sequence[tuple[str, str]] = (),
    studies: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``<out_dir>``/tables, ``<out_dir>``/figures and ``<out_dir>``/report.md from the declared runs
    ``refs``: the sections ``report_sections`` lists (:data:`SECTIONS`), in order; ``extra`` holds (title, Markdown)
    sections (section ``extra``), ``studies`` the JSON document of each finished study by name (the claims table
    reads seed 003's). Runs whose label matches ``study_labels`` are left out (the seed studies' report,
    analysis/seed_report.py, shows them); ``seeds_report``, when set, names that report in a pointer section."""
    t0 = time.perf_counter()
    sections = report_sections(cfg)
    out = Path(cfg["out_dir"])
    all_views = V.collect(cfg, refs)
    patterns = list(cfg.get("study_labels") or [])
    study = lambda label: SEEDS.is_study_label(label, patterns)  # noqa: E731
    views = V.without_labels(all_views, study)
    ctx = ReportContext(
        cfg,
        refs,
        extra,
        studies,
        all_views,
        views,
        [r for r in refs if not study(r.label)],
        out / "tables",
        out / "figures",
    )
    md = [
        "# Lethe harness: measured results",
        "",
        "Every number here was computed from the declared runs (their results folders, `make reproduce-all`, or their "
        "copy in the committed reference store `results/reference/`, `make report`) by "
        "`python -m experiments.reproduce`; nothing is simulated or copied from the paper. Latencies are this machine's (2 CPU "
        "cores, load recorded per run) and are never verified; quality numbers are verified against "
        "`results/expected/`. Statistics are paired per query on identical query sets: means with "
        f"{cfg['confidence']:.0%} BCa bootstrap CIs ({cfg['bootstrap_resamples']} resamples, seed {cfg['seed']}); "
        "Wilcoxon signed-rank (Pratt), a paired sign-flip randomization test "
        f"({cfg['permutation_resamples']} resamples), d_z = mean(d)/sd(d); Holm over the declared confirmatory family "
        "(Findings), Benjamini-Hochberg over each table's exploratory rows.",
        "",
    ]
    damaged = [r for r in refs if r.damage]
    if damaged:
        md += [
            f"**{len(damaged)} declared run(s) DAMAGED in the reference store** (their stored files differ from the "
            "tier's seal, `results/reference/seals/`; nothing of them is read, so they are n/m† in every table): "
            + "; ".join(f"`{r.tier}/{r.key}` ({r.damage})" for r in damaged)
            + ".",
            "",
        ]
    for section in sections:
        md += section(ctx)
    report = out / "report.md"
    atomic_write_text(report, "\n".join(md))
    print(
        f"analysis: {sum(len(v.runs) for v in views.values())} runs, {len(views)} datasets -> {report} "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    return report
