"""The test groups pytest-xdist hands out (tests/support/worker_groups.py)."""

from __future__ import annotations

from tests.support.worker_groups import group_of, long_groups


def test_a_test_of_a_shared_session_fixture_joins_its_group_and_a_long_test_makes_its_group_long():
    groups = {
        "tests/a.py::t1": group_of("tests/a.py::t1", ["tmp_path"]),
        "tests/a.py::t2": group_of("tests/a.py::t2", ["smoke", "tmp_path"]),
        "tests/b.py::t3": group_of("tests/b.py::t3", []),
        "tests/c.py::t4": group_of("tests/c.py::t4", ["e2e_runs"]),
    }
    assert groups == {
        "tests/a.py::t1": "tests/a.py",
        "tests/a.py::t2": "smoke",
        "tests/b.py::t3": "tests/b.py",
        "tests/c.py::t4": "e2e_runs",
    }
    assert long_groups(groups, []) == ["e2e_runs", "smoke"]
    assert long_groups(groups, ["tests/b.py::t3"]) == ["e2e_runs", "smoke", "tests/b.py"]
