"""Results folders: one run's files, written atomically and read back typed (like ranx's Run/Qrels).

``<results_dir>/<dataset>/<method label>/<config_hash>/`` (:func:`run_path`) holds:

- ``run.trec``: the rankings in TREC format, rank 1 first (any IR tool reads it);
- ``run.parquet``: the same rankings as a table (query_id, rank, doc_id, score);
- ``qrels.trec``: the qrels of the evaluated queries;
- ``per_query.parquet``: one row per evaluated query (query_id, scope_id, category, n_eligible,
  n_results, status, error, latency_ms, ``timings_ms``, ``flags``, one column per metric, answer
  columns when answers were generated);
- ``metrics.json`` (means, counts, latency summaries) and ``manifest.json`` (config, provenance);
- ``DONE``, written last.

The folder is assembled under a temporary name and swapped into place
(:func:`lethe.core.atomic.atomic_dir`), so it is either complete or absent, and once it exists a
rewrite never leaves it missing. :meth:`RunFolder.claim` holds the run's lock (the hidden file
``.<config_hash>.lock`` beside the folder) so that an identical job started concurrently waits for
the first one and then finds its folder done.

Two per-query columns hold JSON strings (the on-disk format; every existing folder reads):
``timings_ms`` (stage name -> milliseconds, only the stages that ran) and ``flags`` (what the
method reports about a query, e.g. ``plan`` or ``rerank``). :func:`encode_cells` writes them;
:func:`decode_cell`, :func:`flags_frame`, :func:`flag_frame` and :func:`timings_frame` read them.
Nothing else encodes or decodes these columns.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from lethe.core.atomic import atomic_dir
from lethe.core.faults import kill_point
from lethe.core.locking import hold
from lethebench.trec import Qrels, Ranking, read_qrels, read_run, write_qrels, write_run

DONE = "DONE"
RUN_TREC = "run.trec"
RUN_PARQUET = "run.parquet"
QRELS_TREC = "qrels.trec"
PER_QUERY = "per_query.parquet"
METRICS = "metrics.json"
MANIFEST = "manifest.json"
FILES = (RUN_TREC, RUN_PARQUET, QRELS_TREC, PER_QUERY, METRICS, MANIFEST, DONE)
LABELS = "labels.json"  # a reference store folder's label metrics and their settings (experiments.reference_store)

TIMINGS_COLUMN = "timings_ms"
FLAGS_COLUMN = "flags"


def run_path(results_dir: str | os.PathLike, dataset: str, label: str, config_hash: str) -> Path:
    """``<results_dir>/<dataset>/<label>/<config_hash>``: where a run's folder lives (existing or not)."""
    return Path(results_dir) / dataset / label / config_hash


# ---------------------------------------------------------------------------------------------
# The JSON columns of per_query.parquet


def encode_cells(timings_ms: Mapping[str, float], flags: Mapping[str, Any]) -> dict[str, str]:
    """The stored ``timings_ms`` and ``flags`` cells of one query (canonical JSON, keys sorted;
    flag values JSON cannot hold are written with ``str``). ``encode_cells({}, {})`` gives the
    cells of a query the method never ranked."""
    return {
        TIMINGS_COLUMN: json.dumps(dict(timings_ms), sort_keys=True),
        FLAGS_COLUMN: json.dumps(dict(flags), sort_keys=True, default=str),
    }


def decode_cell(cell: Any) -> dict[str, Any]:
    """One stored ``timings_ms`` or ``flags`` cell as a dict: a JSON object string is parsed, a
    mapping is copied; an empty string, None, NaN or any other JSON value gives ``{}``."""
    if isinstance(cell, Mapping):
        return dict(cell)
    if isinstance(cell, str) and cell.strip():
        value = json.loads(cell)
        return value if isinstance(value, dict) else {}
    return {}


def _cells(per_query: pd.DataFrame, column: str) -> list[dict[str, Any]]:
    if column not in per_query.columns:
        return [{} for _ in range(len(per_query))]
    return [decode_cell(c) for c in per_query[column]]


def flags_frame(per_query: pd.DataFrame) -> pd.DataFrame:
    """The ``flags`` of a per-query table: one row per row of ``per_query`` (same index), one column
    per top-level flag key in order of first appearance; NaN where a query lacks the key (nested
    flags stay dicts). A table without a ``flags`` column gives rows without columns."""
    return pd.DataFrame(_cells(per_query, FLAGS_COLUMN), index=per_query.index)


def flag_frame(per_query: pd.DataFrame, key: str) -> pd.DataFrame:
    """One dict-valued flag (e.g. ``"rerank"``, ``"generation"``) spread into columns: one row per
    row of ``per_query`` (same index), one column per key of the flag; NaN where a query lacks it."""
    rows = [cell.get(key) for cell in _cells(per_query, FLAGS_COLUMN)]
    return pd.DataFrame([r if isinstance(r, dict) else {} for r in rows], index=per_query.index)


def timings_frame(per_query: pd.DataFrame) -> pd.DataFrame:
    """Per-stage latency in ms: one row per row of ``per_query`` (same index), one float column per
    stage in order of first appearance, NaN where the stage did not run for the query."""
    return pd.DataFrame(_cells(per_query, TIMINGS_COLUMN), index=per_query.index, dtype=float)


# ---------------------------------------------------------------------------------------------
# The folder


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def _not_regular(folder: Path) -> list[str]:
    """Paths under ``folder`` (itself included, as ".") that are symlinks or neither files nor folders, not followed."""
    if folder.is_symlink():
        return ["."]
    odd = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in [*dirs, *files]:
            p = Path(root) / name
            if p.is_symlink() or not (p.is_file() or p.is_dir()):
                odd.append(str(p.relative_to(folder)))
    return sorted(odd)


class RunFolder:
    """One results folder: :meth:`write` it once, read it back through typed properties.

    Readers read their file on first use and keep it (a finished folder never changes in place;
    :meth:`write` drops what was read). ``per_query``'s index is a RangeIndex; :meth:`flags`,
    :meth:`flag` and :meth:`timings` are indexed by query_id.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunFolder) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    @property
    def is_done(self) -> bool:
        """True when the folder is complete (its ``DONE`` exists)."""
        return (self.path / DONE).is_file()

    @property
    def damage(self) -> str | None:
        """What makes a finished folder unreadable, e.g. ``missing metrics.json`` or ``unreadable manifest.json``;
        None when it is whole or not finished. A results folder needs every file of :data:`FILES`; a reference store
        folder (with ``labels.json``) its metrics, manifest and per-query table. Edited values are not damage here:
        verification recomputes the metrics from the run files and says where ``metrics.json`` differs."""
        if not self.is_done:
            return None
        odd = _not_regular(self.path)
        if odd:  # never followed: a symlinked file would be read, verified and uploaded as this run's
            return f"not a regular file: {', '.join(odd[:3])}{' ...' if len(odd) > 3 else ''} (symlink or special file)"
        store = (self.path / LABELS).is_file()
        needed = (METRICS, MANIFEST, PER_QUERY) if store else FILES
        missing = [name for name in needed if not (self.path / name).is_file()]
        if missing:
            return f"missing {', '.join(missing)}"
        for name, attr in ((METRICS, "metrics"), (MANIFEST, "manifest")):
            try:  # read through the cached readers, so a reader after this check does not parse it again
                if not isinstance(getattr(self, attr), dict):
                    self.__dict__.pop(attr, None)
                    return f"unreadable {name} (not a JSON object)"
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                return f"unreadable {name} ({type(exc).__name__})"
        for name in (PER_QUERY, *(() if store else (RUN_PARQUET,))):
            with open(self.path / name, "rb") as fh:  # a whole Parquet file starts and ends with its magic bytes
                head = fh.read(4)
                fh.seek(max(0, (self.path / name).stat().st_size - 4))
                if head != b"PAR1" or fh.read(4) != b"PAR1":
                    return f"unreadable {name} (truncated or not Parquet)"
        return None

    @property
    def is_whole(self) -> bool:
        """Finished and not damaged (see :attr:`damage`): what a reader may read and a resumed run may skip."""
        return self.is_done and self.damage is None

    @contextlib.contextmanager
    def claim(self, overwrite: bool = False, timeout: float | None = None) -> Iterator[bool]:
        """Hold this run's lock for the block; yields whether the caller should run the job.

        ``with RunFolder(path).claim(overwrite) as fresh:`` then ``if fresh:`` run and :meth:`write`
        inside the block. ``fresh`` is False when the folder is done and whole (written before, or by an
        identical job this one waited for) and ``overwrite`` is false; a damaged folder is made again. A holder that crashes or
        fails without writing releases the lock and the next one runs the job. Waits ``timeout``
        seconds at most when given (then :class:`filelock.Timeout`). The lock file
        ``.<config_hash>.lock`` stays beside the folder; readers skip names starting with ``.``.
        """
        with hold(self.path, timeout=timeout):
            yield overwrite or not self.is_whole

    @property
    def results_dir(self) -> Path:
        """The results folder this run is filed under (three levels up)."""
        return self.path.parents[2]

    def write(
        self,
        run: Mapping[str, Sequence[tuple[str, float]]],
        qrels: Qrels,
        per_query: pd.DataFrame,
        metrics: Mapping[str, Any],
        manifest: Mapping[str, Any],
        tag: str,
    ) -> RunFolder:
        """Write the complete folder atomically, replacing an older one; ``DONE`` is written last.

        ``run``: query_id -> [(doc_id, score)] in final order; ``qrels``: of the evaluated queries;
        ``per_query``: one row per evaluated query (``timings_ms``/``flags`` cells from
        :func:`encode_cells`); ``tag``: the run tag of ``run.trec``.
        """
        with atomic_dir(self.path) as tmp:
            write_run(run, tmp / RUN_TREC, tag)
            rows = [(q, r, d, s) for q in sorted(run) for r, (d, s) in enumerate(run[q], 1)]
            pd.DataFrame(rows, columns=["query_id", "rank", "doc_id", "score"]).to_parquet(
                tmp / RUN_PARQUET, index=False
            )
            write_qrels(qrels, tmp / QRELS_TREC)
            kill_point("writing_folder")
            per_query.to_parquet(tmp / PER_QUERY, index=False)
            (tmp / METRICS).write_text(_json(metrics))
            (tmp / MANIFEST).write_text(_json(manifest))
            (tmp / DONE).write_text("complete\n")
        for name in ("metrics", "manifest", "per_query", "run", "qrels"):
            self.__dict__.pop(name, None)
        return self

    @cached_property
    def metrics(self) -> dict[str, Any]:
        """``metrics.json``: dataset, method, config_hash, filters, query counts, metric means,
        latency summaries (ms), answer metrics when answers were generated."""
        return json.loads((self.path / METRICS).read_text())

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """``manifest.json``: the config, its hashed part and hash, dataset, method description, git,
        packages, hardware, wall/start-up/index seconds, memory and load."""
        return json.loads((self.path / MANIFEST).read_text())

    @cached_property
    def per_query(self) -> pd.DataFrame:
        """``per_query.parquet`` as stored (``timings_ms`` and ``flags`` are JSON strings; use
        :meth:`timings` and :meth:`flags` for them)."""
        return pd.read_parquet(self.path / PER_QUERY)

    @cached_property
    def run(self) -> dict[str, Ranking]:
        """``run.trec``: query_id -> [(doc_id, score)], rank 1 first."""
        return read_run(self.path / RUN_TREC)

    @cached_property
    def qrels(self) -> Qrels:
        """``qrels.trec``: query_id -> {doc_id: grade >= 1} of the evaluated queries."""
        return read_qrels(self.path / QRELS_TREC)

    def _by_query(self) -> pd.DataFrame:
        return self.per_query.set_index("query_id")

    def flags(self) -> pd.DataFrame:
        """Every query's flags (see :func:`flags_frame`), indexed by query_id."""
        return flags_frame(self._by_query())

    def flag(self, key: str) -> pd.DataFrame:
        """One dict-valued flag spread into columns (see :func:`flag_frame`), indexed by query_id."""
        return flag_frame(self._by_query(), key)

    def timings(self) -> pd.DataFrame:
        """Per-stage latency in ms (see :func:`timings_frame`), indexed by query_id, NaN where a
        stage did not run."""
        return timings_frame(self._by_query())

    @property
    def dataset(self) -> str:
        return self.metrics["dataset"]

    @property
    def method(self) -> str:
        """The method label (name or name+variant)."""
        return self.metrics["method"]

    @property
    def config_hash(self) -> str:
        return self.metrics["config_hash"]

    @property
    def dataset_folder(self) -> Path:
        """The processed dataset the run read (from the manifest; a relative path, as the reference store
        writes it, is relative to this folder)."""
        folder = Path(self.manifest["dataset"]["folder"])
        return folder if folder.is_absolute() else (self.path / folder).resolve()


def finished_runs(results_dir: str | os.PathLike) -> list[RunFolder]:
    """Every finished run folder under ``results_dir`` (``*/*/*`` with ``DONE``; temporary folders,
    whose names start with ``.``, are skipped), sorted by path."""
    return [
        RunFolder(p)
        for p in sorted(Path(results_dir).glob("*/*/*"))
        if p.is_dir() and not any(part.startswith(".") for part in p.parts[-3:]) and (p / DONE).is_file()
    ]
