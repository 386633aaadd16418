"""No code runs from the cache (issue 58, item 2): a learned-fusion ``model.pkl`` planted in the cache was unpickled
when iteration 3 bound a dataset, running its payload. The card written with the model now records the pickle's
sha256, and nothing whose bytes differ is unpickled; the project unpickles no other file."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.dummy import DummyRegressor

from lethe.core.paths import PROJECT_ROOT
from lethe.stages.learned_fusion import FEATURE_VERSION, FEATURES, Fold, FusionModel, config_key

BASE, TRAINING = {"depth": 100}, {"alpha_grid": [0.0, 1.0]}


class Payload:
    """What an attacker plants: unpickling it writes a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "ran"))


def _saved(tmp_path: Path) -> Path:
    model = DummyRegressor().fit(np.zeros((2, len(FEATURES))), np.array([[0.5, 0.0], [0.5, 0.0]]))
    card = {"feature_version": FEATURE_VERSION, "base": BASE, "training": TRAINING}
    folder = tmp_path / "fusion" / config_key(BASE, TRAINING)
    FusionModel([Fold(model, frozenset({"q1"}), frozenset({"q2"}), None)], card).save(folder)
    return folder


def test_a_planted_pickle_is_never_unpickled(tmp_path):
    folder = _saved(tmp_path)
    assert len(FusionModel.load(tmp_path / "fusion", BASE, TRAINING).folds) == 1  # the model written here loads
    marker = tmp_path / "ran"
    (folder / "model.pkl").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(ValueError, match="sha256 .* is not the one its card records"):
        FusionModel.load(tmp_path / "fusion", BASE, TRAINING)
    assert not marker.exists()
    assert not FusionModel.is_whole(folder)  # so its prerequisite trains it again (experiments/prerequisites.py)


def test_a_model_written_before_checksums_is_refused_not_unpickled(tmp_path):
    folder = _saved(tmp_path)
    card = (folder / "card.json").read_text()
    (folder / "card.json").write_text(re.sub(r'\s*"model_sha256": "[0-9a-f]+",?', "", card))
    with pytest.raises(ValueError, match="written before checksums"):
        FusionModel.load(tmp_path / "fusion", BASE, TRAINING)
    assert not FusionModel.is_whole(folder)


def test_no_other_module_unpickles_a_file():
    loads = re.compile(r"\b(pickle\.load|joblib\.load|allow_pickle\s*=\s*True|torch\.load)\b")
    found = [
        f"{p.relative_to(PROJECT_ROOT)}:{n}"
        for folder in ("lethe", "experiments", "baselines", "analysis", "lethebench")
        for p in (PROJECT_ROOT / folder).rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if loads.search(line)
    ]
    assert found == [], found  # learned_fusion.py unpickles with pickle.loads, after the checksum
