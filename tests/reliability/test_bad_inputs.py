"""Strict input types and clear errors (issue 36, item 3): a LoCoMo-format file with a wrong field type used to be
read silently wrong (evidence "D1:3" read character by character; a question object scored as the text "{'q': 1}";
a repeated key keeping its last value), degenerate data crashed with a bare KeyError, a malformed override named
neither itself nor its key, a full disk named no path. Each case here asserts the message that names file, record
and field, or override and key."""

from __future__ import annotations

import copy
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lethe.core import atomic
from lethe.core.paths import PROJECT_ROOT
from lethebench.build import build_dataset
from lethebench.loaders.locomo import load_locomo
from lethebench.schema import DatasetError
from tests.conftest import LOCOMO


@pytest.fixture(scope="module")
def conversation() -> dict:
    """LoCoMo's first conversation (conv-26) with its first four questions."""
    conv = copy.deepcopy(json.loads(LOCOMO.read_text())[0])
    conv["qa"] = conv["qa"][:4]
    return conv


def _write(tmp_path: Path, conv: dict | str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "mine.json"
    path.write_text(conv if isinstance(conv, str) else json.dumps([conv]))
    return path


def _first_turn(conv: dict) -> dict:
    return conv["conversation"]["session_1"][0]


CASES = {
    # name: (how the conversation is changed, words the error must hold)
    "evidence a string": (
        lambda c: c["qa"][0].update(evidence="D1:3"),
        ["conv-26 qa #0", "key 'evidence'", "expected a list of turn ids", "got str"],
    ),
    "evidence id a number": (lambda c: c["qa"][1].update(evidence=[13]), ["conv-26 qa #1", "evidence[0]", "got int"]),
    "question an object": (
        lambda c: c["qa"][0].update(question={"q": 1}),
        ["conv-26 qa #0", "key 'question'", "expected a string", "got dict"],
    ),
    "turn text a list": (
        lambda c: _first_turn(c).update(text=["a", "b"]),
        ["conv-26/session_1 turn #0", "key 'text'", "got list"],
    ),
    "speaker a number": (lambda c: _first_turn(c).update(speaker=7), ["session_1 turn #0", "key 'speaker'", "got int"]),
    "category a bool": (lambda c: c["qa"][0].update(category=True), ["conv-26 qa #0", "key 'category'", "got bool"]),
    "sample_id a list": (lambda c: c.update(sample_id=["conv-26"]), ["conversation #0", "key 'sample_id'"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_field_of_the_wrong_type_is_refused_naming_file_record_and_field(tmp_path, conversation, case):
    conv = copy.deepcopy(conversation)
    change, words = CASES[case]
    change(conv)
    path = _write(tmp_path, conv)
    with pytest.raises(DatasetError) as exc:
        load_locomo(path)
    assert str(path) in str(exc.value) and all(w in str(exc.value) for w in words), str(exc.value)


def test_a_repeated_json_key_is_refused(tmp_path, conversation):
    text = json.dumps([conversation]).replace('"question": ', '"question": "first?", "question": ', 1)
    with pytest.raises(DatasetError, match="key 'question' appears twice in one JSON object"):
        load_locomo(_write(tmp_path, text))


def _build(tmp_path: Path, conv: dict, embedder) -> Path:
    path = _write(tmp_path, conv)
    cfg = {"name": "mine", "loader": "locomo", "files": [path.name]}
    return build_dataset(cfg, tmp_path, tmp_path / "processed", embedder)


def test_degenerate_data_is_refused_with_a_sentence_not_a_key_error(tmp_path, conversation, embedder):
    dangling = copy.deepcopy(conversation)
    for qa in dangling["qa"]:
        qa["evidence"] = ["D99:1"]  # every evidence id names a turn that does not exist
    with pytest.raises(DatasetError, match="dataset mine: no query has qrels"):
        _build(tmp_path / "a", dangling, embedder)
    empty = copy.deepcopy(conversation)
    empty["qa"] = []
    with pytest.raises(DatasetError, match="dataset mine: loader 'locomo' found no questions"):
        _build(tmp_path / "b", empty, embedder)
    surrogate = copy.deepcopy(conversation)
    _first_turn(surrogate)["text"] = "broken \ud800 text"
    path = _write(tmp_path / "c", surrogate)  # json.dumps escapes the lone surrogate, as a file from elsewhere may
    with pytest.raises(
        DatasetError,
        match=r"mine.json: key 'text' holds '\\ud800' at character 7 \(in 'broken '"
        r"\.\.\.\), which UTF-8 cannot encode",
    ):
        load_locomo(path)


def test_a_malformed_override_names_itself_and_its_key(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.run", "dataset.scopes=[conv-26"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "the override 'dataset.scopes=[conv-26' (key dataset.scopes) cannot be parsed" in proc.stderr, proc.stderr
    assert not (tmp_path / "results").exists()


def test_a_full_disk_names_the_path(tmp_path, monkeypatch):
    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError, match=f"the disk holding {tmp_path / 'card.json'} is full"):
        atomic.atomic_write_text(tmp_path / "card.json", "{}")
    monkeypatch.undo()
    with (
        pytest.raises(OSError, match=f"the disk holding {tmp_path / 'run'} is full"),
        atomic.atomic_dir(tmp_path / "run") as tmp,
    ):
        (tmp / "run.trec").write_text("x")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert not (tmp_path / "run").exists() and list(tmp_path.iterdir()) == []
