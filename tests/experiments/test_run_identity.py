"""experiments/run_identity.py: the hash covers the identity schema; what a stage needs beyond its section it declares
(lethe.core.protocol.ExtendsIdentity), so the experiments layer imports no method; where data sits is not identity."""

from __future__ import annotations

import ast
import json

import pytest

from experiments import run_identity as RI
from lethe.core.paths import PROJECT_ROOT
from lethe.core.typed_config import ConfigError


def test_run_identity_imports_no_method_stage_or_model():
    tree = ast.parse((PROJECT_ROOT / "experiments" / "run_identity.py").read_text())
    lethe = sorted(
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "lethe"
    )
    assert lethe and all(m.startswith("lethe.core.") for m in lethe), lethe


def test_a_stage_declares_what_its_section_does_not_say(tmp_path):
    """Iteration 4's reranker hashes the content of the reach file it replays, not its path: another reach is another
    run, the same reach in another folder (a tier split moved it) the same run."""
    reach = tmp_path / "reach.json"
    reach.write_text(json.dumps({"q1": 3}))
    section = {"_target_": "lethe.stages.llm_rerank.LLMRerankStage", "top_n": 10, "replay": str(reach)}
    first = RI.with_identity_extras({"method": {"llm_rerank": section}})["method"]["llm_rerank"]
    assert first["replay_sha256"] and first["top_n"] == 10
    reach.write_text(json.dumps({"q1": 4}))
    assert RI.with_identity_extras(section)["replay_sha256"] != first["replay_sha256"]
    assert "replay_sha256" not in RI.with_identity_extras({**section, "replay": None})
    # the same reach read from another folder is the same run: its content is hashed, not where it sits
    elsewhere = tmp_path / "moved" / "reach.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(reach.read_text())
    assert RI.with_identity_extras({**section, "replay": str(elsewhere)}) == RI.with_identity_extras(section)
    assert "replay" not in RI.with_identity_extras(section)
    with pytest.raises(ConfigError, match=r"method.stages.llm_rerank.replay=.*does not exist"):
        RI.with_identity_extras({**section, "replay": str(tmp_path / "none.json")})
    # a target outside the allowlist is never imported here (lethe.core.targets refuses it when the run builds)
    assert RI.with_identity_extras({"_target_": "no_such_package.Evil", "x": 1}) == {
        "_target_": "no_such_package.Evil",
        "x": 1,
    }
    with pytest.raises(ConfigError, match="_target_: lethe.stages.NoSuchStage cannot be imported"):
        RI.with_identity_extras({"_target_": "lethe.stages.NoSuchStage"})


def _resolved(**dataset):
    return {
        "dataset": {"name": "beir", "loader": "beir", **dataset},
        "method": {"name": "bm25", "_target_": "baselines.bm25.PyseriniBM25", "k1": 0.9, "supervision": "none"},
        "chunking": {"size_tokens": 320, "overlap_tokens": 64, "strategy": "tokens"},
        "run": {"k": 100, "metrics": ["ndcg@10"], "seed": 0, "warmup": True, "max_error_share": 0.0},
        "cache_dir": "/somewhere/cache",
    }


def test_the_schema_and_not_the_data_location_or_metrics_make_the_hash(monkeypatch):
    here = RI.hashed_config(_resolved(beir_dir="/a/scifact", files=["/a/scifact/corpus.jsonl"]), "key")
    there = RI.hashed_config(_resolved(beir_dir="/b/link", files=["/b/link/corpus.jsonl"]), "key")
    assert here == there and here["identity_schema"] == RI.IDENTITY_SCHEMA and "metrics" not in here["run"]
    assert "supervision" not in here["method"]
    assert RI.config_hash(RI.hashed_config(_resolved(), "other key")) != RI.config_hash(here)
    before = RI.config_hash(here)
    monkeypatch.setattr(RI, "IDENTITY_SCHEMA", RI.IDENTITY_SCHEMA + 1)
    assert RI.config_hash(RI.hashed_config(_resolved(), "key")) != before  # a change of the rules moves every hash
