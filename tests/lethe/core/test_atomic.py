"""Atomic folders and files: concurrent writers of one folder never fail and never leak temporary
folders, a reader never finds the folder missing or incomplete once it exists, a crashed writer's
debris is removed by the next writer (a live writer's folder never is), and what is written gets
the user's umask, not tempfile's private modes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lethe.core import atomic
from lethe.core.atomic import atomic_dir, atomic_write_bytes, atomic_write_text, debris
from lethe.core.paths import PROJECT_ROOT

FILES = ("a.txt", "b.txt", "DONE")

# one writer process: N complete rewrites of one folder; prints how many failed and why
WRITER = """
import sys
from pathlib import Path
from lethe.core.atomic import atomic_dir
final, n, who = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
failures = []
for i in range(n):
    try:
        with atomic_dir(final) as tmp:
            for name in ("a.txt", "b.txt", "DONE"):
                (tmp / name).write_text(f"{who}-{i}\\n")
    except Exception as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
print(len(failures), failures[:3])
"""

# a writer that is inside atomic_dir when it gets killed (or, with "wait", waits for a file first)
INSIDE = """
import os, signal, sys, time
from pathlib import Path
from lethe.core.atomic import atomic_dir
final, mode = Path(sys.argv[1]), sys.argv[2]
with atomic_dir(final) as tmp:
    (tmp / "a.txt").write_text("partial\\n")
    print(tmp, flush=True)
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while not (final.parent / "go").exists():
        time.sleep(0.01)
    for name in ("b.txt", "DONE"):
        (tmp / name).write_text("live\\n")
"""


def _python(script: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _complete(final: Path) -> bool:
    return final.is_dir() and all((final / f).is_file() for f in FILES)


def _write(final: Path, text: str) -> None:
    with atomic_dir(final) as tmp:
        for name in FILES:
            (tmp / name).write_text(text)


def _poll_while(final: Path, running) -> dict[str, int]:
    """Check ``final`` over and over while ``running()``: how often it was missing or incomplete."""
    seen = {"polls": 0, "missing": 0, "incomplete": 0}
    while running():
        seen["polls"] += 1
        if not final.is_dir():
            seen["missing"] += 1
        elif not _complete(final):
            seen["incomplete"] += 1
    return seen


def test_two_processes_rewriting_one_folder(tmp_path):
    """Before: 2 processes x 300 rewrites gave FileNotFoundError / 'Directory not empty' failures,
    leaked .old folders, and readers found the folder missing thousands of times."""
    final = tmp_path / "results" / "run"
    _write(final, "first\n")
    n = 150
    procs = [_python(WRITER, final, n, who) for who in ("p1", "p2")]
    seen = _poll_while(final, lambda: any(p.poll() is None for p in procs))
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.startswith("0 "), out  # no write failed
    assert seen["polls"] > 100, seen  # the reader really polled while they wrote
    assert seen["missing"] == 0 and seen["incomplete"] == 0, seen
    assert _complete(final)
    text = {(final / f).read_text() for f in FILES}
    assert len(text) == 1 and text.pop() in {"p1-149\n", "p2-149\n"}  # one whole version: a last write
    assert sorted(p.name for p in final.parent.iterdir()) == ["run"]  # no .tmp/.old left


def test_threads_rewriting_one_folder_without_the_atomic_swap(tmp_path, monkeypatch):
    """Where renameat2(RENAME_EXCHANGE) is unavailable (NFS), writers still never fail or leak."""
    monkeypatch.setattr(atomic, "exchange", lambda a, b: False)
    final = tmp_path / "run"
    errors: list[BaseException] = []

    def writer(who: str) -> None:
        for i in range(60):
            try:
                _write(final, f"{who}-{i}\n")
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in ("t1", "t2")]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    assert _complete(final) and [p.name for p in tmp_path.iterdir()] == ["run"]


def test_replacing_swaps_in_one_step(tmp_path):
    final = tmp_path / "run"
    _write(final, "old\n")
    inode = final.stat().st_ino
    with atomic_dir(final) as tmp:
        (tmp / "DONE").write_text("new\n")
        assert (final / "a.txt").read_text() == "old\n"  # untouched until the block ends
    assert (final / "DONE").read_text() == "new\n" and not (final / "a.txt").exists()
    assert final.stat().st_ino != inode and [p.name for p in tmp_path.iterdir()] == ["run"]


def test_exchange_swaps_two_folders(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / name).touch()
    if not atomic.exchange(tmp_path / "a", tmp_path / "b"):
        pytest.skip("no renameat2(RENAME_EXCHANGE) on this system or filesystem (the fallback is tested above)")
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b"] and [p.name for p in (tmp_path / "b").iterdir()] == [
        "a"
    ]
    with pytest.raises(FileNotFoundError):
        atomic.exchange(tmp_path / "a", tmp_path / "missing")


def test_a_killed_writers_debris_is_removed_by_the_next_writer(tmp_path):
    """Before: a writer killed inside atomic_dir left .run.*.tmp/ for ever."""
    final = tmp_path / "run"
    _write(final, "v1\n")
    killed = _python(INSIDE, final, "kill")
    out, err = killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL, err
    left = Path(out.strip())
    assert left.is_dir() and debris(final) == [left]
    old = tmp_path / ".run.abcd1234.old"  # a crashed fallback writer's moved-aside folder
    old.mkdir()
    (old / "DONE").write_text("v0\n")
    newer = tmp_path / ".run.zzzz9999.tmp"  # newer than the next writer: not its business
    newer.mkdir()
    os.utime(newer, (time.time() + 3600,) * 2)
    unrelated = tmp_path / ".other.abcd1234.tmp"  # debris of another folder
    unrelated.mkdir()
    time.sleep(0.05)
    _write(final, "v2\n")
    assert not left.exists() and not old.exists()
    assert newer.is_dir() and unrelated.is_dir()
    assert (final / "DONE").read_text() == "v2\n"


def test_a_live_writers_folder_is_never_removed(tmp_path):
    final = tmp_path / "run"
    live = _python(INSIDE, final, "wait")
    try:
        tmp = Path(live.stdout.readline().strip())
        assert tmp.is_dir()
        time.sleep(0.05)  # the live folder is older than the next writer
        _write(final, "quick\n")  # another writer comes and goes meanwhile
        assert tmp.is_dir() and (tmp / "a.txt").read_text() == "partial\n"
        (tmp_path / "go").touch()
        assert live.wait(timeout=60) == 0, live.stderr.read()
    finally:
        if live.poll() is None:
            live.kill()
        live.communicate()
    assert (final / "DONE").read_text() == "live\n" and (final / "a.txt").read_text() == "partial\n"
    assert debris(final) == []


@pytest.fixture
def umask():
    """Set the process umask for a test and restore the old one afterwards."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return p.stat().st_mode & 0o777


@pytest.mark.parametrize(
    "mask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750), (0o002, 0o664, 0o775)]
)
def test_modes_follow_the_umask(tmp_path, umask, mask, file_mode, dir_mode):
    """Before: 0600 files and 0700 folders (tempfile's private modes) that colleagues cannot read."""
    umask(mask)
    assert atomic.current_umask() == mask
    atomic_write_bytes(tmp_path / "cache" / "x.npz", b"x")
    atomic_write_text(tmp_path / "card.json", "{}\n")
    final = tmp_path / "results" / "run"
    _write(final, "v1\n")
    _write(final, "v2\n")  # replaced: the swapped-in folder has the mode too
    assert _mode(tmp_path / "cache" / "x.npz") == file_mode and _mode(tmp_path / "card.json") == file_mode
    assert _mode(final) == dir_mode and _mode(final / "DONE") == file_mode
    assert _mode(tmp_path / "cache") == dir_mode and _mode(tmp_path / "results") == dir_mode


def test_a_failed_block_leaves_the_old_folder_and_nothing_else(tmp_path):
    final = tmp_path / "run"
    _write(final, "v1\n")
    with pytest.raises(RuntimeError), atomic_dir(final) as tmp:
        (tmp / "DONE").write_text("v2\n")
        raise RuntimeError("job failed")
    assert (final / "DONE").read_text() == "v1\n" and [p.name for p in tmp_path.iterdir()] == ["run"]
