"""Shared fixtures: real LoCoMo from ../shared/data, built once per session into temp folders."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from experiments.config import load_config
from lethe.core.paths import PROJECT_ROOT
from tests.support import worker_groups

DATA_ROOT = Path(os.environ.get("LETHE_DATA_ROOT", PROJECT_ROOT.parent / "shared" / "data")).resolve()
LOCOMO = DATA_ROOT / "locomo" / "locomo10.json"
TWO_CONVS = "[conv-26,conv-30]"


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    assert LOCOMO.is_file(), f"LoCoMo not found at {LOCOMO}; tests need ../shared/data (or LETHE_DATA_ROOT)"
    return LOCOMO


@pytest.fixture(scope="session")
def conv26_docs(locomo_path) -> list:
    """LoCoMo conversation conv-26 as docs (id, text, position), straight from the loader."""
    from lethe.core.protocol import Doc
    from lethebench.loaders.locomo import load_locomo

    src = load_locomo(locomo_path).sources
    conv = src[src.scope_id == "conv-26"]
    return [Doc(r.doc_id, r.text, int(r.position)) for r in conv.itertuples()]


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> dict[str, Path]:
    """Session temp folders for processed data, caches and results."""
    base = tmp_path_factory.mktemp("lethe")
    return {"processed": base / "processed", "cache": base / "cache", "results": base / "results"}


def overrides_for(work: dict[str, Path], *extra: str) -> list[str]:
    return [
        f"data.root={DATA_ROOT}",
        f"data.processed={work['processed']}",
        f"cache_dir={work['cache']}",
        f"results_dir={work['results']}",
        "run.progress=false",
        "run.print_summary=false",
        *extra,
    ]


@pytest.fixture(scope="session")
def cfg_for(work):
    """Compose a config with the session folders: cfg_for('method=bm25', ...)."""
    return lambda *extra: load_config(overrides_for(work, *extra))


@pytest.fixture(scope="session")
def embedder():
    from lethe.retrieval.embedder import Embedder

    cfg = load_config([])
    return Embedder(dict(cfg.embedder), cache_dir=None, show_progress=False)


@pytest.fixture(scope="session")
def e2e_runs(cfg_for, locomo_path) -> dict[str, Path]:
    """window, bm25 and vector over two real LoCoMo conversations with the real model."""
    from experiments.runner import run_experiment

    return {
        m: run_experiment(cfg_for(f"method={m}", f"dataset.scopes={TWO_CONVS}")) for m in ("window", "bm25", "vector")
    }


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs two workers on this two-core machine) each worker and the processes it
    starts use one thread, llama.cpp's included: two workers with a pool of two threads each would oversubscribe the
    cores, and the threads spinning for work slow both down (llama.cpp's most: on a loaded machine SmolLM2's answers
    ran past their deadline and failed the runs).
    The controller names the folder where the workers write the tests' groups."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[key] = "1"
        from lethe.core.threads import set_threads
        from lethe.llm.backends import set_default_threads

        set_threads(1)
        set_default_threads(1)
    elif getattr(config.option, "numprocesses", None):
        config.test_groups = tempfile.TemporaryDirectory(prefix="lethe-test-groups-")
        os.environ[worker_groups.FOLDER_ENV] = config.test_groups.name


def pytest_unconfigure(config):
    if hasattr(config, "test_groups"):
        config.test_groups.cleanup()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: the tests of one module, or of one expensive session fixture, share a worker
    (tests/support/worker_groups.py)."""
    return worker_groups.make_scheduler(config, log) if config.getvalue("dist") == "loadgroup" else None


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` run only where torch sees a CUDA device. A worker writes each test's group."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and os.environ.get(worker_groups.FOLDER_ENV):
        worker_groups.write_groups(items, worker)
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
