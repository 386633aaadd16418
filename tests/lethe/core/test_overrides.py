"""Override keys as Hydra's parser reads them (the one override parser)."""

from __future__ import annotations

import pytest
from hydra.errors import OverrideParseException

from lethe.core.overrides import override_keys


def test_keys_lose_their_prefix_and_keep_a_group_package():
    given = [
        "+method.x=1",
        "~a.b",
        "++c=[1,2]",
        "llm@method.stages.llm_rerank.llm=smollm2",
        "select=[a/b,c/*]",
        "d=1,2",
        "dataset.scopes='[conv-26, conv-30]'",
    ]
    assert override_keys(given) == [
        "method.x",
        "a.b",
        "c",
        "llm@method.stages.llm_rerank.llm",
        "select",
        "d",
        "dataset.scopes",
    ]


def test_an_unparseable_override_raises_hydras_error():
    with pytest.raises(OverrideParseException):
        override_keys(["dataset.scopes=[conv-26"])
