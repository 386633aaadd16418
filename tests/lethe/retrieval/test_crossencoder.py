"""Interpolating a cross-encoder with its first stage (lethe/retrieval/crossencoder.py): min-max per
query, the weight's two ends, and the dev choice of the weight."""

from __future__ import annotations

import numpy as np
import pytest

from lethe.retrieval.crossencoder import choose_weight, interpolate, minmax


def test_minmax_maps_one_query_to_unit_range_and_constants_to_zero():
    assert minmax([3.0, -1.0, 1.0]).tolist() == [1.0, 0.0, 0.5]
    assert minmax([2.0, 2.0]).tolist() == [0.0, 0.0] and minmax([]).size == 0


def test_weight_one_is_the_cross_encoder_order_and_zero_the_first_stage():
    ce, first = np.array([0.1, 5.0, -2.0, 0.3]), np.array([9.0, 1.0, 4.0, 2.0])
    assert np.argsort(-interpolate(ce, first, 1.0)).tolist() == np.argsort(-ce).tolist()
    assert np.argsort(-interpolate(ce, first, 0.0)).tolist() == np.argsort(-first).tolist()
    mid = interpolate(ce, first, 0.5)
    assert mid.tolist() == pytest.approx((0.5 * minmax(ce) + 0.5 * minmax(first)).tolist())
    with pytest.raises(ValueError, match="outside"):
        interpolate(ce, first, 1.5)
    with pytest.raises(ValueError, match="first-stage"):
        interpolate(ce, first[:2], 0.5)


def test_choose_weight_takes_the_best_dev_score_and_the_larger_weight_on_ties():
    dev = {0.0: 0.40, 0.5: 0.45, 1.0: 0.45}
    got = choose_weight([1.0, 0.0, 0.5], dev.__getitem__)
    assert got["weight"] == 1.0 and got["score"] == 0.45 and got["grid"] == [0.0, 0.5, 1.0]
    assert got["scores"] == {"0": 0.40, "0.5": 0.45, "1": 0.45}
    assert choose_weight([0.0, 0.5], dev.__getitem__)["weight"] == 0.5
    with pytest.raises(ValueError, match="interpolation_grid"):
        choose_weight([], dev.__getitem__)


def test_a_regime_only_key_keys_only_its_regime():
    """fold_groups (in_domain) and label_free (label_free) were added after sets of the other regimes existed: a
    set's key must not move when a key its regime never reads is added or changed."""
    from lethe.retrieval.crossencoder import set_key

    base = {"name": "ce", "train": {"regime": "transfer", "epochs": 1}}
    extra = {"fold_groups": "gold_document", "label_free": {"docs": 150}}
    for regime in ("transfer", "lethebench"):
        m = {"name": "ce", "train": {**base["train"], "regime": regime}}
        assert set_key({**m, "train": {**m["train"], **extra}}, "d", "b") == set_key(m, "d", "b")
    ind = {"name": "ce", "train": {"regime": "in_domain", "epochs": 1, "fold_groups": "gold_document"}}
    assert set_key({**ind, "train": {**ind["train"], "label_free": {"docs": 1}}}, "d", "b") == set_key(ind, "d", "b")
    assert set_key({**ind, "train": {**ind["train"], "fold_groups": "query"}}, "d", "b") != set_key(ind, "d", "b")
    lf = {"name": "ce", "train": {"regime": "label_free", "epochs": 1, "label_free": {"docs": 150}}}
    assert set_key({**lf, "train": {**lf["train"], "label_free": {"docs": 100}}}, "d", "b") != set_key(lf, "d", "b")
    assert set_key({**lf, "train": {**lf["train"], "fold_groups": "query"}}, "d", "b") == set_key(lf, "d", "b")
