"""The declared runs of the reproduction contract and where their results folders are.

A tier (``conf/reference/<tier>.yaml``) lists runs as grids: every entry expands to one run per
(dataset, method[, ablation]) with its ``sample``, ``variant`` and ``overrides``. A run's **key** is
``<dataset>/<method label>`` (the label is ``method``, ``method+variant`` or ``method+ablation``, as
results are filed). :func:`resolve` composes a run's Hydra config and finds its results folder by
config hash without running or building anything, so the report and the verification read exactly
the declared runs and nothing else.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig

from analysis.declared_runs import RunRef
from experiments.config import load_config
from experiments.datasets import dataset_build_key
from experiments.run_identity import run_identity
from lethe.core.paths import Paths, plain_name, portable_location
from lethebench.runs import RunFolder

REFERENCE_TIERS = (
    "core",
    "ablations",
    "regimes",
    "label_free",
    "rerank_pool",
    "llm",
    "llm_studies",
    "seeds",
    "seed003",
    "judges",
)  # tier=all, in this order
NOT_TIERS = (
    "tolerances",
    "seed_claims",
)  # the other files of conf/reference/: tolerance classes, the seed studies' claims
ENTRY_KEYS = {"dataset", "datasets", "method", "methods", "ablations", "sample", "variant", "overrides", "replay"}
TIER_KEYS = {"description", "report", "overrides", "difficulty", "runs", "studies"}
STUDY_KEYS = {"module", "dataset", "overrides", "publish", "verify", "runs"}


@dataclass(frozen=True)
class DeclaredRun:
    """One run of a tier, as declared (before its config is composed)."""

    tier: str
    dataset: str
    method: str
    ablation: str | None = None
    variant: str | None = None
    sample: int | None = None
    overrides: tuple[str, ...] = ()  # the tier's and the entry's overrides, in that order
    replay: bool = False  # its LLM reranker replays the reach the reference store recorded (budget=replay)

    @property
    def label(self) -> str:
        """The method name results are filed under (an ablation's variant is its file name)."""
        extra = self.variant or self.ablation
        return f"{self.method}+{extra}" if extra else self.method

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.label}"

    def hydra_overrides(self) -> list[str]:
        out = [f"dataset={self.dataset}", f"method={self.method}"]
        if self.ablation:
            out.append(f"+ablation={self.ablation}")
        if self.variant:
            out.append(f"++method.variant={self.variant}")
        if self.sample is not None:
            out.append(f"dataset.sample={self.sample}")
        return out + list(self.overrides)

    def describe(self) -> str:
        """The declaration in one line: sample and overrides (for tables and logs)."""
        parts = [f"sample={self.sample}"] if self.sample is not None else []
        return ", ".join(parts + list(self.overrides)) or "defaults"


@dataclass(frozen=True)
class Study:
    """A study command of a tier (an analysis module that calls models itself, outside the runner, a
    Hydra entry point with its own top config ``conf/<module name>.yaml``): run as
    ``python -m <module> <overrides> out_dir=<results_dir>/studies/<name> cache_dir=<cache_dir>``
    (plus ``dataset_folder=<processed folder>`` when ``dataset`` names one), its outputs copied into
    the report's folder under ``publish``; ``verify`` names the JSON rows' key fields and the metrics
    checked against the expected-scores file. ``runs`` names declared runs of the same tier (name -> run key)
    whose results folders the study reads: it gets ``run_folders={name: folder, ...}``, and runs after them."""

    tier: str
    name: str
    module: str
    overrides: tuple[str, ...] = ()
    dataset: str | None = None
    publish: str = "tables"
    row_key: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    runs: tuple[tuple[str, str], ...] = ()  # (name, declared run key of this tier)

    @property
    def key(self) -> str:
        return f"study/{self.name}"


@dataclass(frozen=True)
class Tier:
    """A tier file: its runs and the report they belong to. A run's prerequisites (its dataset, the
    cross-encoder model set, the learned-fusion model) follow from its own config, so that the run's
    config hash covers how they were trained."""

    name: str
    description: str
    report: str
    runs: tuple[DeclaredRun, ...]
    overrides: tuple[str, ...] = ()
    difficulty: tuple[str, ...] = ()
    studies: tuple[Study, ...] = ()


def _as_list(x: Any) -> list:
    return [] if x is None else list(x) if isinstance(x, (list, tuple)) else [x]


def load_tier(name: str, reference_dir: str | Path = "conf/reference") -> Tier:
    """Read and expand ``<reference_dir>/<name>.yaml``; errors name the file and the entry."""
    path = Paths.default().resolve(reference_dir) / f"{plain_name(name, 'tier')}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml") if p.stem not in NOT_TIERS)
        raise FileNotFoundError(f"no tier '{name}': {path} does not exist; known tiers: {known} (or 'all')")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: a tier file is a mapping with keys {sorted(TIER_KEYS)}")
    unknown = set(doc) - TIER_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {sorted(unknown)}; allowed: {sorted(TIER_KEYS)}")
    tier_over = tuple(str(o) for o in _as_list(doc.get("overrides")))
    runs: list[DeclaredRun] = []
    if not isinstance(doc.get("runs") or [], list):
        raise ValueError(f"{path}: runs must be a list of entries")
    for i, entry in enumerate(doc.get("runs") or []):
        where = f"{path}: runs[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: an entry is a mapping with keys {sorted(ENTRY_KEYS)}, got {entry!r}")
        bad = set(entry) - ENTRY_KEYS
        if bad:
            raise ValueError(f"{where}: unknown key(s) {sorted(bad)}; allowed: {sorted(ENTRY_KEYS)}")
        datasets = _as_list(entry.get("datasets")) + _as_list(entry.get("dataset"))
        methods = _as_list(entry.get("methods")) + _as_list(entry.get("method"))
        if not datasets or not methods:
            raise ValueError(f"{where}: needs datasets and methods")
        sample = entry.get("sample")
        if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
            raise ValueError(f"{where}: sample must be a positive integer, got {sample!r}")
        over = tier_over + tuple(str(o) for o in _as_list(entry.get("overrides")))
        replay = entry.get("replay", False)
        if not isinstance(replay, bool):
            raise ValueError(f"{where}: replay must be true or false, got {replay!r}")
        for d in datasets:
            for m in methods:
                for a in _as_list(entry.get("ablations")) or [None]:
                    runs.append(DeclaredRun(name, str(d), str(m), a, entry.get("variant"), sample, over, replay))
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.key] = seen.get(r.key, 0) + 1
    dupes = sorted(k for k, n in seen.items() if n > 1)
    if dupes:
        raise ValueError(f"{path}: runs declared twice (a run is identified by dataset/method label): {dupes}")
    studies = []
    for sname, st in (doc.get("studies") or {}).items():
        where = f"{path}: studies.{sname}"
        if not isinstance(st, dict) or "module" not in st or set(st) - STUDY_KEYS:
            raise ValueError(f"{where}: a study is a mapping with `module` and optional keys {sorted(STUDY_KEYS)}")
        ver = st.get("verify") or {}
        st_runs = st.get("runs") or {}
        if not isinstance(st_runs, dict):
            raise ValueError(f"{where}: runs maps a name to a declared run key (<dataset>/<method label>)")
        missing = sorted(str(k) for k in st_runs.values() if str(k) not in seen)
        if missing:
            raise ValueError(f"{where}: runs names run keys this tier does not declare: {missing}")
        studies.append(
            Study(
                name,
                str(sname),
                str(st["module"]),
                tuple(str(a) for a in _as_list(st.get("overrides"))),
                st.get("dataset"),
                str(st.get("publish", "tables")),
                tuple(_as_list(ver.get("row_key"))),
                tuple(_as_list(ver.get("metrics"))),
                tuple((str(n), str(k)) for n, k in st_runs.items()),
            )
        )
    return Tier(
        name,
        str(doc.get("description", "")),
        str(doc.get("report", "reference")),
        tuple(runs),
        tier_over,
        tuple(_as_list(doc.get("difficulty"))),
        tuple(studies),
    )


def tier_names(tier: str) -> list[str]:
    """``all`` -> the reference tiers in order; anything else -> itself."""
    return list(REFERENCE_TIERS) if tier == "all" else [tier]


def report_tiers(report: str, reference_dir: str | Path = "conf/reference") -> list[Tier]:
    """Every tier whose runs belong to ``report`` (the reference report: core, ablations, regimes, label_free, llm, llm_studies, seeds, seed003, judges)."""
    names = [p.stem for p in sorted(Paths.default().resolve(reference_dir).glob("*.yaml")) if p.stem not in NOT_TIERS]
    order = {t: i for i, t in enumerate(REFERENCE_TIERS)}
    tiers = [load_tier(n, reference_dir) for n in sorted(names, key=lambda n: (order.get(n, 99), n))]
    group = [t for t in tiers if t.report == report]
    _check_publish(group, reference_dir)
    return group


def _check_publish(tiers: Sequence[Tier], reference_dir: str | Path) -> None:
    """ValueError when two studies of one report publish to the same folder with the same module: they write files
    of the same names, so the later copy would silently replace the earlier one in the report's folder."""
    seen: dict[tuple[str, str], str] = {}
    for t in tiers:
        for st in t.studies:
            where = f"{reference_dir}/{t.name}.yaml: studies.{st.name}"
            other = seen.setdefault((st.publish, st.module), where)
            if other != where:
                raise ValueError(
                    f"{where} and {other} both publish {st.module}'s files to {st.publish}/: the later "
                    "copy would replace the earlier one; give each its own `publish` folder "
                    f"(e.g. publish: tables/{st.name})"
                )


def matches(key: str, patterns: Sequence[str]) -> bool:
    """Whether ``key`` matches any fnmatch pattern of ``patterns``."""
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def select(runs: Iterable[DeclaredRun], patterns: Sequence[str] | None) -> list[DeclaredRun]:
    """Runs whose key matches any fnmatch pattern (all when ``patterns`` is empty); an unmatched pattern is an error."""
    return select_with_studies(runs, (), patterns)[0]


def selected_studies(studies: Iterable[Study], patterns: Sequence[str] | None) -> list[Study]:
    """The studies whose key (``study/<name>``) matches any fnmatch pattern; all when ``patterns`` is empty."""
    return [st for st in studies if not patterns or matches(st.key, patterns)]


def select_with_studies(
    runs: Iterable[DeclaredRun], studies: Iterable[Study], patterns: Sequence[str] | None
) -> tuple[list[DeclaredRun], list[Study]]:
    """What ``select`` names: the runs and studies whose keys match any fnmatch pattern, plus the runs those
    studies read (a study runs after them); everything when ``patterns`` is empty. A pattern that matches
    neither a run nor a study is an error."""
    runs, studies = list(runs), list(studies)
    if not patterns:
        return runs, studies
    unmatched = [p for p in patterns if not any(matches(x.key, [p]) for x in [*runs, *studies])]
    if unmatched:
        raise ValueError(
            f"select: {unmatched} match no declared run{' or study' if studies else ''}; keys look like "
            f"{runs[0].key if runs else '?'}{' or ' + studies[0].key if studies else ''}"
        )
    picked = selected_studies(studies, patterns)
    read = {(key, st.tier) for st in picked for _, key in st.runs}
    return [r for r in runs if (r.key, r.tier) in read or matches(r.key, patterns)], picked


@dataclass
class ResolvedRun:
    """A declared run with its composed config and results folder (which may not exist yet)."""

    declared: DeclaredRun
    cfg: DictConfig
    config_hash: str
    folder: Path  # the results folder
    dataset_folder: Path  # the processed dataset (built or not)
    blocked: str | None = None  # why the run cannot be made as declared (e.g. its replay file is not in the store)

    @property
    def key(self) -> str:
        return self.declared.key

    @property
    def done(self) -> bool:
        return self.blocked is None and RunFolder(self.folder).is_whole

    def ref(self, tier: str) -> RunRef:
        """The run as a report reads it, under the dataset name its config gives: a LoCoMo-format file declared as
        ``locomo`` with ``dataset.name=mine`` is reported (and written) as ``mine``."""
        return RunRef(
            str(self.cfg.dataset.name),
            self.declared.label,
            tier,
            self.folder,
            self.dataset_folder,
            self.declared.describe(),
        )


REPLAY_KEY = "method.stages.llm_rerank.replay"
BUDGETS = ("replay", "wallclock")  # how a declared `replay: true` run's LLM reranker meets its budget


def replay_overrides(run: DeclaredRun, store: Path | None, budget: str) -> tuple[list[str], str | None]:
    """(overrides, blocked) that make a declared ``replay: true`` run judge the reach the reference store recorded
    for it (``<store>/<tier>/<dataset>/<label>/reach.json``), with ``budget=replay``; with ``budget=wallclock``, none
    (the wall-clock budget: a latency study whose reach depends on the CPU). ``blocked`` says why the run cannot be
    made when the store holds no reach for it."""
    if budget not in BUDGETS:
        raise ValueError(f"budget={budget!r} is not one of {list(BUDGETS)}")
    if not run.replay or budget == "wallclock":
        return [], None
    from experiments.reference_store import REACH, run_folder

    if store is None:
        return [], f"{run.key}: declared replay: true, but no reference store was given to read its reach from"
    file = run_folder(store, run.tier, run.key) / REACH
    if not file.is_file():
        return [], (
            f"{run.key}: the reference store holds no recorded reach ({file}); record it from wall-clock runs "
            f"first: python -m experiments.reproduce tier={run.tier} budget=wallclock action=run, then "
            f'action=record_reach budget=wallclock (docs/reproduction.md, "Budget runs")'
        )
    return [f"+{REPLAY_KEY}={portable_location(file)}"], None  # one spelling on every clone (the hash holds it)


def resolve(
    run: DeclaredRun, extra: Sequence[str] = (), store: Path | None = None, budget: str = "replay"
) -> ResolvedRun:
    """Compose the run's config (``extra`` overrides last) and locate its results folder by config hash. A
    ``replay: true`` run replays the reach ``store`` recorded for it (see :func:`replay_overrides`)."""
    replay, blocked = replay_overrides(run, store, budget)
    try:
        cfg = load_config([*run.hydra_overrides(), *extra, *replay])
    except Exception as exc:  # noqa: BLE001 - Hydra's own errors, with the declaration named
        raise ValueError(f"declared run {run.key} (tier {run.tier}) does not compose: {exc}") from exc
    key = dataset_build_key(cfg)
    ident = run_identity(cfg, key)
    if ident.label != run.label:
        raise ValueError(
            f"declared run {run.key} (tier {run.tier}) is filed as {ident.label}: an ablation's "
            f"method.variant must equal its file name"
        )
    return ResolvedRun(run, cfg, ident.config_hash, ident.folder, processed_folder(cfg, key), blocked)


def processed_folder(cfg: DictConfig, build_key: str) -> Path:
    """The processed dataset a run config reads: its ``dataset.folder`` (a custom folder), else
    ``<data.processed>/<dataset.name>/<build_key>``."""
    paths = Paths.of(cfg)
    return (
        paths.resolve(cfg.dataset.folder)
        if cfg.dataset.get("folder")
        else paths.processed / cfg.dataset.name / build_key
    )
