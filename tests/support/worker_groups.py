"""Which tests share a pytest-xdist worker (``make test`` runs two): each test module is a group, so that its module
fixtures are made once, and the tests of an expensive session fixture (the smoke tier, the end-to-end runs) are one
group, so that it is made once in the whole run (each worker makes its own session fixtures).

xdist's own ``--dist loadgroup`` cannot be used with pytest 9 (it renames ``item._nodeid``, which pytest 9 no longer
reads), so the workers write each test's group to a folder the controller names, and the controller's scheduler
(xdist's load-scope scheduling: the long groups first, then the largest) reads it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FOLDER_ENV = "LETHE_TEST_GROUPS"  # set by the controller before it starts the workers; they inherit it
# session fixtures whose tests share one worker, so that each is made once
SHARED_SESSION_FIXTURES = ("smoke", "e2e_runs")


def group_of(nodeid: str, fixtures: Iterable[str]) -> str:
    """The group of the test ``nodeid`` that uses ``fixtures`` (directly or through other fixtures)."""
    used = set(fixtures)
    return next((f for f in SHARED_SESSION_FIXTURES if f in used), nodeid.split("::")[0])


def write_groups(items: Iterable[Any], worker: str) -> None:
    """In a worker: each collected test's group, and the long groups (:func:`long_groups`), to
    ``$LETHE_TEST_GROUPS/<worker>.json``."""
    folder = Path(os.environ[FOLDER_ENV])
    items = list(items)
    groups = {item.nodeid: group_of(item.nodeid, getattr(item, "fixturenames", ())) for item in items}
    long = long_groups(groups, [item.nodeid for item in items if item.get_closest_marker("long")])
    tmp = folder / f".{worker}.json.tmp"
    tmp.write_text(json.dumps({"groups": groups, "long": long}))
    tmp.replace(folder / f"{worker}.json")


def long_groups(groups: dict[str, str], marked: Iterable[str]) -> list[str]:
    """The groups that take minutes: a shared session fixture's, and each group holding a test marked ``long``. They
    are handed out first, so that no worker is left alone with one at the end while the other has nothing to do."""
    return sorted({*(g for g in groups.values() if g in SHARED_SESSION_FIXTURES), *(groups[n] for n in marked)})


def make_scheduler(config: Any, log: Any) -> Any:
    """The controller's scheduler: xdist's load-scope scheduling over the groups the workers wrote, long ones first."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        written: dict[str, Any] | None = None
        ordered = False

        def _read(self) -> dict[str, Any]:
            if self.written is None:  # read once every worker has collected (schedule() runs only then)
                files = sorted(Path(os.environ[FOLDER_ENV]).glob("*.json"))
                self.written = json.loads(files[0].read_text()) if files else {"groups": {}, "long": []}
            return self.written

        def _split_scope(self, nodeid: str) -> str:
            return self._read()["groups"].get(nodeid) or group_of(nodeid, ())

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is whole by the first assignment: move the long groups to its front
                self.ordered = True
                long = set(self._read()["long"])
                for group in reversed([g for g in self.workqueue if g in long]):
                    self.workqueue.move_to_end(group, last=False)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)
