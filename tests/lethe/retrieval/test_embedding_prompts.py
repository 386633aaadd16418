"""Query/document prefixes of the embedder (E5 "query: " / "passage: ", a BGE instruction): they reach the encoder,
they are part of the embedding cache's key, and the model configs that use them compose."""

from __future__ import annotations

import numpy as np

from experiments.config import load_config, to_dict
from lethe.retrieval.dense import make_embedder


def test_prefix_reaches_the_encoder(embedder):
    cfg = to_dict(load_config([]).embedder)
    with_prompts = make_embedder({**cfg, "prompts": {"query": "query: ", "doc": "passage: "}}, None, progress=False)
    q = with_prompts.encode(["where did Lena move"], role="query")[0]
    d = with_prompts.encode(["Lena moved to Porto"], role="doc")[0]
    plain_q, plain_d = embedder.encode(["query: where did Lena move", "passage: Lena moved to Porto"], role="query")
    assert np.allclose(q, plain_q, atol=1e-6) and np.allclose(d, plain_d, atol=1e-6)  # the prefix, and only it
    assert not np.allclose(q, embedder.encode(["where did Lena move"], role="query")[0], atol=1e-3)


def test_prefix_changes_the_cache_key(tmp_path):
    cfg = {**to_dict(load_config([]).embedder), "backend": "torch"}
    plain = make_embedder(cfg, tmp_path, progress=False)
    e5 = make_embedder({**cfg, "prompts": {"doc": "passage: "}}, tmp_path, progress=False)
    plain.encode(["Lena moved to Porto"], role="doc")
    e5.encode(["Lena moved to Porto"], role="doc")
    plain.flush(), e5.flush()
    assert plain.stats()["cache"]["doc"]["dir"] != e5.stats()["cache"]["doc"]["dir"]
    again = make_embedder({**cfg, "prompts": {"doc": "passage: "}}, tmp_path, progress=False)
    again.encode(["Lena moved to Porto"], role="doc")
    assert again.last_cache_hits == 1 and again.stats()["cache"]["doc"]["dir"] == e5.stats()["cache"]["doc"]["dir"]


def test_prefixed_model_configs_compose():
    e5 = load_config(["model@embedder=e5_small_v2"]).embedder
    assert dict(e5.prompts) == {"query": "query: ", "doc": "passage: "} and e5.hub_id == "intfloat/e5-small-v2"
    assert e5.pypi_module is None and e5.backend == "onnx"  # the rest from minilm.yaml
    bge = load_config(["model@embedder=bge_small_en_v15"]).embedder
    assert list(bge.prompts) == ["query"] and "prompts" not in load_config([]).embedder
