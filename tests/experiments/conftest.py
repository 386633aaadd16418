"""Fixtures of the experiments tests: the smoke tier, made once per session (about three minutes)."""

from __future__ import annotations

import pytest

from experiments import reproduce as R
from tests.conftest import DATA_ROOT


@pytest.fixture(scope="session")
def smoke(tmp_path_factory) -> dict:
    """The smoke tier run, reported and verified in its own empty folders (independent of test order):
    ``base`` (processed data, cache, results), ``paths`` (the overrides that point there), ``code`` (the exit
    code) and ``out`` (the smoke report's folder)."""
    base = tmp_path_factory.mktemp("smoke")
    paths = [
        f"data.root={DATA_ROOT}",
        f"data.processed={base / 'processed'}",
        f"cache_dir={base / 'cache'}",
        f"results_dir={base / 'results'}",
        "run.progress=false",
        f"out_dir.smoke={base / 'out'}",
        "analysis.bootstrap_resamples=2000",
        "analysis.permutation_resamples=2000",
    ]
    code = R.reproduce(R.load(["tier=smoke", *paths]))
    return {"base": base, "paths": paths, "code": code, "out": base / "out"}


@pytest.fixture(scope="session")
def smoke_store(smoke, tmp_path_factory) -> dict:
    """The session's smoke tier stored once (``action=store``: runs, datasets, index and seal) into ``store``;
    ``local_table`` holds the session's own verification table before and after storing. A test that changes a
    store changes a copy."""
    base = tmp_path_factory.mktemp("smoke_store")
    table = smoke["out"] / "verification" / "smoke.md"
    before = table.read_bytes()
    args = [f"store_dir={base / 'store'}", f"+committed_dir.smoke={base / 'committed'}"]
    assert R.reproduce(R.load(["tier=smoke", "action=store", *smoke["paths"], *args])) == 0
    return {"store": base / "store", "local_table": (before, table.read_bytes())}
