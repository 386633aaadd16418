"""The LoCoMo-style inputs the index sections (``bm25``, ``faiss``) time: a dataset and one scope's documents."""

from __future__ import annotations

from experiments.config import load_config


def dataset(name: str):
    from experiments.datasets import prepare_dataset
    from lethebench.schema import read_dataset

    return read_dataset(prepare_dataset(load_config([f"dataset={name}"])), name)


def scope_docs(ds, scope: str):
    from lethe.core.protocol import Doc

    c = ds.corpus[ds.corpus.scope_id == scope].sort_values("position")
    return [Doc(r.doc_id, r.text, int(r.position)) for r in c.itertuples()]
