"""Build processed datasets: load upstream files, chunk, attach qrels, write folder + card.

The command line is ``python -m experiments.build_data`` (it resolves configs and paths).

A processed dataset lives in ``<out>/<name>/<build_key>/`` where ``build_key`` hashes the
loader and its parameters, the sha256 of every input file, the config's ``provenance`` (it is
written to the card), the chunking parameters and the tokenizer's model hash (content-addressed,
like MTEB's caches): a finished folder is reused, any change builds a new one.

Loaders know a format, not the data in it: the card's description, upstream, licence and
citation come from the dataset config's ``provenance`` section, so one loader serves any data in
its format. What a loader dropped or repaired (``SourceDataset.dropped``) is logged at build time,
count and first examples, under the config's ``dataset.name``, and listed in the card.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lethe.core.hashing import content_hash, sha256_file_cached
from lethe.core.paths import Paths
from lethe.retrieval.embedder import Embedder
from lethebench.card import count_by, lexical_overlap, provenance_entries
from lethebench.chunking import ChunkParams, chunk_corpus, hf_token_spans, map_qrels, whole_corpus
from lethebench.duplicates import duplicate_params, inject_duplicates
from lethebench.schema import Dataset, DatasetError, SourceDataset, write_dataset
from lethebench.source_pins import pinned_version

log = logging.getLogger(__name__)
BUILD_VERSION = "2"  # bump when the build output (incl. the card) changes
LOG_EXAMPLES = 3  # examples of each kind of dropped input named in the build log


# loader name -> "module:function"; the function is called as fn(*input_paths, **params) and
# returns a SourceDataset. Imported lazily so a loader's dependencies load only when used.
LOADERS: dict[str, str] = {
    "locomo": "lethebench.loaders.locomo:load_locomo",
    "techqa": "lethebench.loaders.techqa:load_techqa",
    "ultradomain": "lethebench.loaders.ultradomain:load_ultradomain",
    "lethebench": "lethebench.generator:generate",
    "beir": "lethebench.loaders.beir:load_beir",
    "longmemeval": "lethebench.loaders.longmemeval:load_longmemeval",
}


def source_version(loader: str, params: Mapping[str, Any] | None = None) -> str:
    """The loader's LOADER_VERSION plus a hash of its source (a package: all its .py files, or the part of them its
    ``source_files(files, params)`` says the build with ``params`` runs)."""
    mod = importlib.import_module(LOADERS[loader].split(":")[0])
    src = Path(mod.__file__)
    files = sorted(src.parent.rglob("*.py")) if src.name == "__init__.py" else [src]
    if hasattr(mod, "source_files"):
        files = mod.source_files(files, dict(params or {}))
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return f"{getattr(mod, 'LOADER_VERSION', '?')}+{h.hexdigest()[:12]}"


def loader_version(loader: str, params: Mapping[str, Any] | None = None) -> str:
    """The version a build is keyed by: :func:`source_version`, so an edited loader or generator never reuses a
    folder built by older code, unless a source pin (:mod:`lethebench.source_pins`) keeps the version of a refactor
    proven to leave the output byte-identical."""
    return pinned_version(loader, source_version(loader, params))


def input_root(dataset_cfg: Mapping[str, Any], data_root: Path) -> Path:
    """The folder the relative entries of ``dataset_cfg['files']`` are read from: ``data_root`` (``data.root``), or
    the config's ``files_root`` when it sets one (absolute, or relative to the work root, :mod:`lethe.core.paths`;
    ``conf/dataset/beir.yaml`` sets ``.`` so a BEIR folder is found where the user runs, not under data.root)."""
    given = dataset_cfg.get("files_root")
    return data_root if given is None else Paths.default().resolve(str(given))


def input_paths(dataset_cfg: Mapping[str, Any], data_root: Path) -> list[Path]:
    """The dataset's input files (:func:`input_root` joined with each entry of ``files``; an absolute entry is kept).
    A loader module may check its own keys first (``check_config(dataset_cfg, root)``, e.g. ``beir_dir``)."""
    root = input_root(dataset_cfg, data_root)
    mod = importlib.import_module(LOADERS[dataset_cfg["loader"]].split(":")[0])
    if hasattr(mod, "check_config"):
        mod.check_config(dataset_cfg, root)
    return [root / f for f in dataset_cfg.get("files", [])]


def load_sources(loader: str, paths: list[Path], params: Mapping[str, Any]) -> SourceDataset:
    """Run a registered loader on its input files."""
    if loader not in LOADERS:
        raise ValueError(f"unknown loader '{loader}'; known: {sorted(LOADERS)}")
    module, fn = LOADERS[loader].split(":")
    return getattr(importlib.import_module(module), fn)(*paths, **dict(params))


def input_names(dataset_cfg: Mapping[str, Any], paths: list[Path]) -> list[str]:
    """The names the build key gives the input files, never where they sit: an entry read from ``data.root`` is named
    as written (``locomo/locomo10.json``; data.root itself is a location); entries read from elsewhere (``files_root``
    set, as for a BEIR folder, or absolute) are named from their common folder's own name down (``scifact/corpus.jsonl``,
    ``scifact/qrels/test.tsv``: a loader may read that name, as BEIR's scope), so the same folder reached from
    elsewhere or through a symlink of the same name gives the same key."""
    given = [str(f) for f in dataset_cfg.get("files", [])]
    if dataset_cfg.get("files_root") is None and not any(Path(f).is_absolute() for f in given):
        return given
    common = Path(os.path.commonpath([str(p.parent) for p in paths])) if paths else Path()
    return [p.relative_to(common.parent).as_posix() for p in paths]


def build_key(dataset_cfg: Mapping[str, Any], data_root: Path, chunking: ChunkParams, tokenizer_sha: str) -> str:
    """Content hash naming a processed dataset folder: the inputs' names (:func:`input_names`) and contents, the
    loader and its version, its parameters, the chunking and the tokenizer."""
    inputs = {}
    paths = input_paths(dataset_cfg, data_root)
    for f, name, p in zip(dataset_cfg.get("files", []), input_names(dataset_cfg, paths), paths, strict=True):
        if not p.is_file():
            where = (
                f"dataset.files_root={dataset_cfg['files_root']!r}: relative entries of dataset.files are read "
                f"from {input_root(dataset_cfg, data_root)}"
                if dataset_cfg.get("files_root") is not None
                else "Set data.root (or the LETHE_DATA_ROOT environment variable) to the folder holding "
                f"'{f}'; see ../shared/data/README.md."
            )
            raise FileNotFoundError(f"dataset '{dataset_cfg['name']}': input file not found: {p}. {where}")
        inputs[name] = sha256_file_cached(p)  # stat-keyed: resolving many declared runs hashes each input once
    blob = {
        "build_version": BUILD_VERSION,
        "loader": dataset_cfg["loader"],
        "loader_version": loader_version(dataset_cfg["loader"], dataset_cfg.get("params")),
        "params": dict(dataset_cfg.get("params") or {}),
        "inputs": inputs,
        "chunking": chunking.key(),
        "tokenizer_sha256": tokenizer_sha,
    }
    if dataset_cfg.get("provenance"):  # only when given, so configs without one keep their key
        blob["provenance"] = dict(dataset_cfg["provenance"])
    dup = duplicate_params(dataset_cfg.get("duplicates"), dataset_cfg["name"])
    if dup:  # likewise: only a collection with duplicated sources gets another key
        blob["duplicates"] = {"share": dup[0], "seed": dup[1]}
    return content_hash(blob, 16)


def build_dataset(
    dataset_cfg: Mapping[str, Any],
    data_root: str | Path,
    out_root: str | Path,
    embedder: Embedder,
    chunking: ChunkParams = ChunkParams(),
    force: bool = False,
) -> Path:
    """Build (or reuse) the processed folder of one dataset; returns its path."""
    data_root = Path(data_root)
    name = dataset_cfg["name"]
    key = build_key(dataset_cfg, data_root, chunking, embedder.model.sha256)
    folder = Path(out_root) / name / key
    if (folder / "card.json").is_file() and not force:
        log.info("dataset %s: reusing %s", name, folder)
        return folder
    prov = provenance_entries(dataset_cfg.get("provenance"), name)
    t0 = time.perf_counter()
    files = input_paths(dataset_cfg, data_root)
    src = load_sources(dataset_cfg["loader"], files, dataset_cfg.get("params") or {})
    dup = duplicate_params(dataset_cfg.get("duplicates"), name)
    if dup:
        src = inject_duplicates(src, *dup)
    if src.sources.empty:
        raise DatasetError(
            f"dataset {name}: loader '{dataset_cfg['loader']}' found nothing to retrieve from in "
            f"{[str(f) for f in files]}"
        )
    if src.prechunked:  # docs already (a restored export): kept as they are, whatever the chunking settings
        corpus = src.sources.reset_index(drop=True)
        src_to_docs = {d: [d] for d in corpus["doc_id"]}
        chunk_stats = {"prechunked": True, "note": "the loader's docs were kept as they are (not chunked again)"}
    elif src.keep_whole:  # the loader asked for whole documents (e.g. BEIR, dataset.params.chunk=false)
        corpus, src_to_docs, chunk_stats = whole_corpus(
            src.sources, hf_token_spans(embedder.tokenizer), embedder.max_seq_length
        )
    else:
        embed = (lambda texts: embedder.encode(texts, role="query")) if chunking.strategy == "semantic" else None
        corpus, src_to_docs, chunk_stats = chunk_corpus(
            src.sources, hf_token_spans(embedder.tokenizer), chunking, embedder.max_seq_length, embed
        )
        if chunk_stats["sources_split"]:
            log.info(
                "dataset %s: chunked %d sources into %d docs (%d split into windows of chunking.size_tokens=%d); "
                "the metrics count these docs",
                name,
                chunk_stats["sources"],
                chunk_stats["chunks"],
                chunk_stats["sources_split"],
                chunking.size,
            )
    # before the card is copied: a chunk_qrels hook may add measured facts to src.card and query meta
    qrels = src.chunk_qrels(corpus, src_to_docs) if src.chunk_qrels else map_qrels(src.qrels, src_to_docs)
    log_dropped(name, src.dropped)
    refuse_unusable(name, dataset_cfg["loader"], files, src, qrels)
    if not prov and "license" not in src.card:  # the LetheBench generator states its own (it made the data)
        log.warning(
            "dataset %s: its config has no provenance section, so the card will not say where the data "
            "came from or under which licence (see conf/dataset/locomo.yaml)",
            name,
        )
    # the config's name and provenance first (and over the loader's), then the loader's facts
    card = {"name": name, **prov}
    for k, v in src.card.items():
        card.setdefault(k, v)
    card["counts"] = {
        "scopes": int(corpus["scope_id"].nunique()),
        "sources": int(len(src.sources)),
        "docs": int(len(corpus)),
        "queries": int(len(src.queries)),
        "queries_with_qrels": int(len(qrels)),
        "qrels_pairs": int(sum(len(v) for v in qrels.values())),
    }
    splits = src.queries["split"].fillna("none")
    card["queries_by_split"] = {k: int(v) for k, v in sorted(splits.value_counts().items())}
    for col in ("domain", "category", "complexity", "plan_label"):
        card[f"queries_by_{col}"] = count_by(src.queries, col)
    card["lexical_overlap"] = lexical_overlap(src.queries, corpus, qrels)
    card["chunking"] = {**chunk_stats, "tokenizer": embedder.model.describe()}
    card["build"] = {"key": key, "version": BUILD_VERSION}  # no timings: the card must be byte-deterministic
    ds = Dataset(name, corpus, src.queries, qrels, src.contradictions, card)
    write_dataset(ds, folder)
    log.info("dataset %s: built %s in %.1fs", name, folder, time.perf_counter() - t0)
    return folder


def refuse_unusable(name: str, loader: str, files: list[Path], src: SourceDataset, qrels: Mapping[str, Any]) -> None:
    """DatasetError when the loaded data cannot make a benchmark: no question, or no query with qrels."""
    if src.queries.empty:
        raise DatasetError(f"dataset {name}: loader '{loader}' found no questions in {[str(f) for f in files]}")
    if not qrels:
        raise DatasetError(
            f"dataset {name}: no query has qrels: none of its {len(src.queries)} questions names a "
            "relevant document that exists (the dropped evidence is listed above), so there is nothing "
            "to evaluate"
        )


def log_dropped(name: str, dropped: Mapping[str, list[str]]) -> None:
    """Log what a loader dropped or repaired: per kind, the count and the first examples (the card lists all)."""
    for what, items in dropped.items():
        if items:
            more = f" and {len(items) - LOG_EXAMPLES} more" if len(items) > LOG_EXAMPLES else ""
            log.warning(
                "dataset %s: %d %s, e.g. %s%s (all listed in the card)",
                name,
                len(items),
                what,
                ", ".join(map(str, items[:LOG_EXAMPLES])),
                more,
            )
