"""A cross-encoder model set is written with its checksums and checked when a run binds it (issue 58, item 3; the
other caches: tests/reliability/test_cache_checksums.py). On the smoke tier's real set."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lethe.core.checksums import QUARANTINE
from lethebench.runs import RunFolder
from tests.support.located import on_this_machine


def test_an_edited_model_set_is_quarantined_never_loaded(smoke, tmp_path):
    """The smoke tier's LoCoMo cross-encoder set, copied, then one weight byte changed: binding refuses it naming the
    file and moves it aside, and its prerequisite is no longer done (make reproduce trains it again)."""
    from experiments.run_identity import method_params
    from lethe.core.models import ModelNotFoundError
    from lethe.core.targets import build
    from lethe.retrieval.crossencoder import model_set_damage

    (found,) = (smoke["base"] / "results" / "locomo" / "cross_encoder").glob("*/manifest.json")
    manifest = RunFolder(found.parent).manifest
    set_dir = Path(on_this_machine(manifest["method"], smoke)["model"]["set"])  # the manifest says <cache_dir>
    folder = tmp_path / "models" / set_dir.parent.name / set_dir.name
    shutil.copytree(set_dir, folder)
    method = manifest["config"]["method"]
    params = method_params({**method, "model": {**method["model"], "path": str(tmp_path / "models")}})
    info = {"name": "locomo", "build_key": manifest["dataset"]["build_key"]}

    def bind() -> None:
        ce = build(params, cache_dir=None, progress=False, _convert_="all")
        try:
            ce.bind_dataset(info)
        finally:
            ce.close()

    assert model_set_damage(folder) == []
    bind()  # whole: it loads
    weights = next(folder.glob("fold0/*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    assert model_set_damage(folder) == [f"edited fold0/{weights.name}"]
    with pytest.raises(ModelNotFoundError, match=f"damaged \\(edited fold0/{weights.name}\\).*not loaded"):
        bind()
    assert not folder.exists() and (folder.parent / QUARANTINE / folder.name).is_dir()
    assert model_set_damage(folder) == ["no folds.json"]  # so the prerequisite is not done: it trains the set again
