"""StudyFolder: a study's folder written whole (DONE last, atomically) and read back typed."""

from __future__ import annotations

import json

import pytest

from lethebench.studies import StudyFolder


def test_write_replaces_the_folder_whole_and_reads_back(tmp_path):
    folder = StudyFolder(tmp_path / "study")
    assert not folder.is_done and folder.document is None and folder.table is None and folder.seconds is None
    folder.write(
        {"a.json": json.dumps({"rows": [1]}), "a.md": "# A\n", "notes.jsonl": "{}\n"},
        {"command": "python -m x k=1", "seconds": 2.5, "config": {"k": 1}},
    )
    assert folder.is_done and folder.document == {"rows": [1]} and folder.table == "# A\n"
    assert folder.command == "python -m x k=1" and folder.seconds == 2.5 and folder.manifest["config"] == {"k": 1}
    assert sorted(p.name for p in folder.path.iterdir()) == ["DONE", "a.json", "a.md", "manifest.json", "notes.jsonl"]
    folder.write({"b.md": "# B\n"}, {"command": "python -m x k=2"})  # a new run replaces every file of the old one
    assert sorted(p.name for p in folder.path.iterdir()) == ["DONE", "b.md", "manifest.json"]
    assert folder.document is None and folder.command == "python -m x k=2" and folder.seconds is None
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_failing_writer_leaves_the_old_folder_and_a_failed_study_is_not_done(tmp_path, monkeypatch):
    folder = StudyFolder(tmp_path / "study").write({"a.md": "# A\n"}, {"seconds": 1.0})
    with pytest.raises(TypeError):
        folder.write({"b.md": None}, {})  # fails mid-write: nothing of it is published
    assert folder.table == "# A\n" and folder.is_done
    with pytest.raises(ValueError, match="DONE"):
        folder.write({"DONE": "x"}, {})
    folder.write_failed({"replies.jsonl": "{}\n"})  # the replies alone: not done, nothing stale beside them
    assert not folder.is_done and sorted(p.name for p in folder.path.iterdir()) == ["replies.jsonl"]


def test_older_folders_read_their_command_and_seconds_files(tmp_path):
    folder = StudyFolder(tmp_path / "old").write({"a.md": "x"}, {"command": "python -m x", "seconds": 1.0})
    (folder.path / "command.txt").write_text("python -m x out_dir=/o\n")
    (folder.path / "seconds.txt").write_text("7.5\n")
    assert folder.command == "python -m x out_dir=/o" and folder.seconds == 7.5
