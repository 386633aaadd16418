"""Label-free training queries for the cross-encoder (regime ``label_free``; InPars, Bonifacio et al. 2022;
Promptagator, Dai et al. 2022): the local LLM writes one question for each of a seeded sample of documents of the
evaluated collection, and that document is the question's one relevant document. No evaluated query, qrel or
answer is read; on datasets with splits (LetheBench) only documents of train/dev scopes are sampled.

Settings: ``method.model.train.label_free`` (``conf/model/cross_encoder.yaml``). The generated set is a cached
prerequisite of the model set, written atomically to ``<cache_dir>/synthetic_queries/<dataset>/<key>/``
(``queries.parquet``: one row per sampled document with its question or why there is none; ``manifest.json``:
settings, prompt name/version/sha256, the model, counts, seconds); ``key`` hashes the dataset build, the settings,
the prompt's sha256 and the model file's sha256. LLM responses are cached too, so an interrupted generation
resumes where it stopped. A failed or unparsable generation is recorded per document; past ``failure_share`` of
them the set fails loudly.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from experiments.config import load_config, to_dict
from lethe.core.atomic import atomic_dir
from lethe.core.hashing import content_hash
from lethe.core.locking import hold
from lethe.core.paths import Paths
from lethe.llm.base import Decoding, LLMError
from lethe.llm.parsing import ParseError, parse_question
from lethe.llm.prompts import load_prompt
from lethe.text.collapse import collapse
from lethebench.schema import Dataset

FORBIDDEN_SPLIT = "test"
QUERIES, MANIFEST = "queries.parquet", "manifest.json"
ID_PREFIX = (
    "synthetic:"  # never an evaluated query id, so the reranker's leakage guard lets every evaluated query through
)


def _doc_split(meta: str) -> str | None:
    return json.loads(meta).get("split") if meta else None


def sample_docs(corpus: pd.DataFrame, n: int, min_chars: int, seed: int) -> pd.DataFrame:
    """A seeded sample of ``n`` documents with at least ``min_chars`` characters of text, from scopes holding no
    test-split document; sorted by (scope, position, doc id)."""
    split = corpus["meta"].map(_doc_split)
    test_scopes = set(corpus.loc[split == FORBIDDEN_SPLIT, "scope_id"])
    pool = corpus[~corpus["scope_id"].isin(test_scopes) & (corpus["text"].str.len() >= int(min_chars))]
    pool = pool.sort_values(["scope_id", "position", "doc_id"], kind="stable").reset_index(drop=True)
    if pool.empty:
        raise ValueError(f"label_free: no document of at least {min_chars} characters outside test scopes")
    take = np.sort(np.random.default_rng(seed).permutation(len(pool))[: min(int(n), len(pool))])
    return pool.iloc[take].reset_index(drop=True)


def set_key(build_key: str, settings: Mapping[str, Any], prompt_sha256: str, model_sha256: str) -> str:
    """16-hex key of a generated set."""
    blob = {"build_key": build_key, "settings": dict(settings), "prompt": prompt_sha256, "model": model_sha256}
    return content_hash(blob, 16)


def llm_config(name: str) -> dict[str, Any]:
    """``conf/llm/<name>.yaml`` as a plain mapping."""
    return to_dict(load_config([f"llm={name}"]).llm)


def generate(
    ds: Dataset,
    build_key: str,
    settings: Mapping[str, Any],
    cache_dir: str | Path,
    progress: bool = True,
    llm: Any = None,
) -> Path:
    """The generated set of ``ds`` under ``settings`` (``train.label_free``): its folder, generated when missing.
    ``llm``: a backend to use instead of ``settings.llm`` (tests)."""
    from lethe.llm.backends import make_llm

    root = Paths.default().resolve(str(cache_dir))
    own = llm is None
    if own:
        llm = make_llm(llm_config(str(settings["llm"])), cache_dir=root)
    try:
        prompt = load_prompt(str(settings["prompt"]["name"]), str(settings["prompt"]["version"]))
        model_sha = str(llm.describe().get("model_sha256") or llm.name)
        folder = root / "synthetic_queries" / ds.name / set_key(build_key, settings, prompt.sha256, model_sha)
        with hold(folder):  # one process generates a set; another one waiting for it reads it
            if (folder / MANIFEST).is_file():
                return folder
            docs = sample_docs(ds.corpus, int(settings["docs"]), int(settings["min_chars"]), int(settings["seed"]))
            decoding = Decoding(max_tokens=int(settings["max_tokens"]), temperature=0.0, seed=int(settings["seed"]))
            rows, t0, started = [], time.perf_counter(), dt.datetime.now(dt.UTC)
            for i, d in enumerate(
                tqdm(
                    docs.itertuples(index=False),
                    total=len(docs),
                    disable=not progress,
                    desc=f"questions {ds.name}",
                    unit="doc",
                )
            ):
                text = collapse(str(d.text), int(settings["max_doc_chars"]))
                row = {
                    "query_id": f"{ID_PREFIX}{i:05d}",
                    "doc_id": d.doc_id,
                    "scope_id": d.scope_id,
                    "text": None,
                    "status": "ok",
                    "error": None,
                    "raw": None,
                }
                try:
                    resp = llm.chat(prompt.render(document=text), decoding, timeout_s=settings.get("timeout_s"))
                    row["raw"] = resp.text
                    row["text"] = parse_question(resp.text)
                except ParseError as e:
                    row["status"], row["error"] = "unparsable", str(e)
                except LLMError as e:
                    row["status"], row["error"] = "llm_error", f"{type(e).__name__}: {e}"[:300]
                rows.append(row)
            table = pd.DataFrame(rows)
            failed = int((table["status"] != "ok").sum())
            share = failed / len(table)
            if share > float(settings["failure_share"]):
                raise RuntimeError(
                    f"label_free questions for {ds.name}: {failed} of {len(table)} generations failed "
                    f"({share:.0%} > train.label_free.failure_share={settings['failure_share']}); e.g. "
                    f"{table.loc[table['status'] != 'ok', 'error'].head(3).tolist()}"
                )
            manifest = {
                "dataset": ds.name,
                "build_key": build_key,
                "settings": dict(settings),
                "prompt": prompt.describe(),
                "llm": llm.describe(),
                "documents": int(len(table)),
                "failed": failed,
                "failed_by_status": table.loc[table["status"] != "ok", "status"].value_counts().to_dict(),
                "created": started.isoformat(),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            with atomic_dir(folder) as tmp:
                table.to_parquet(tmp / QUERIES, index=False)
                (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")
            print(
                f"label_free questions for {ds.name}: {len(table) - failed} of {len(table)} documents "
                f"({manifest['seconds']} s) -> {folder}",
                flush=True,
            )
        return folder
    finally:
        if own:
            llm.close()


def synthetic_dataset(ds: Dataset, folder: Path, dev_share: float, seed: int) -> Dataset:
    """``ds``'s corpus with the generated questions of ``folder`` as its only queries (qrels: the source document,
    grade 1), split ``train``/``dev`` (a seeded ``dev_share`` of them); each question is placed after its scope's
    last document, so the whole scope is eligible."""
    table = pd.read_parquet(folder / QUERIES)
    ok = table[table["status"] == "ok"].reset_index(drop=True)
    if not 0 < dev_share < 1:
        raise ValueError(f"train.label_free.dev_share={dev_share}: expected a share in (0, 1)")
    is_dev = np.zeros(len(ok), bool)
    is_dev[np.random.default_rng(seed).permutation(len(ok))[: max(1, round(len(ok) * dev_share))]] = True
    last = ds.corpus.groupby("scope_id")["position"].max()
    queries = pd.DataFrame(
        {
            "query_id": ok["query_id"],
            "scope_id": ok["scope_id"],
            "position": ok["scope_id"].map(last).astype(int) + 1,
            "text": ok["text"],
            "history": [[] for _ in range(len(ok))],
            "domain": None,
            "category": None,
            "complexity": None,
            "plan_label": None,
            "answer": None,
            "split": np.where(is_dev, "dev", "train"),
            "meta": "{}",
        }
    )
    qrels = {q: {d: 1} for q, d in zip(ok["query_id"], ok["doc_id"], strict=True)}
    return Dataset(ds.name, ds.corpus, queries, qrels, None, dict(ds.card), None)


def manifest(folder: Path) -> dict[str, Any]:
    """The generated set's manifest (for the model set's folds.json)."""
    return json.loads((folder / MANIFEST).read_text())
