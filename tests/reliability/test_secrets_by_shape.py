"""Credentials are found by the shape of their key and URL (issue 58, item 7): ``+embedder.hf_key=...`` and a URL with
``?access_token=...`` were written to manifests and Hydra's records; a bring-your-own ``describe()`` returning an
``api_key`` and a ``https://user:pw@...`` URL had both written to the manifest. Every project config stays clean."""

from __future__ import annotations

import pytest

from experiments import byo
from experiments.config import load_config, to_dict
from lethe.core.paths import CONF_DIR
from lethe.core.secrets import REDACTED, is_secret_key, redact, refuse_secret_arguments, secret_keys, url_has_userinfo


@pytest.mark.parametrize(
    "name", ["hf_key", "api_key", "apiKey", "access_token", "client_secret", "password", "auth_header", "Authorization"]
)
def test_a_key_with_a_credential_word_is_a_secret(name):
    assert is_secret_key(name)


@pytest.mark.parametrize(
    "name", ["api_key_env", "max_tokens", "keywords", "tokenizer", "keyword_boost", "random_keys", "key"]
)
def test_names_and_counts_are_not(name):
    assert not is_secret_key(name)


def test_config_trees_and_overrides_are_checked_by_shape():
    assert secret_keys({"embedder": {"hf_key": "hf_abcdef"}}) == ["embedder.hf_key"]
    assert secret_keys({"verify": {"row_key": ["backend", "model"]}, "llm": {"api_key_env": "OPENAI_API_KEY"}}) == []
    assert secret_keys({"data": {"root": "https://host/data?access_token=abc123"}}) == ["data.root"]
    assert url_has_userinfo("https://host/x?page=2&api_key=abc") and not url_has_userinfo("https://host/x?page=2")
    for argv in (["+embedder.hf_key=hf_abcdef"], ["data.root=https://host/data?access_token=abc123"]):
        with pytest.raises(SystemExit, match="a credential on the command line"):
            refuse_secret_arguments(argv)


def test_redaction_keeps_everything_but_the_credential():
    tree = {
        "api_key": "sk-123",
        "url": "https://user:pw@host:8080/v1?access_token=t0k&page=2",
        "nested": [{"password": 1234, "model": "m"}],
        "api_key_env": "KEY_VAR",
    }
    out = redact(tree)
    assert out["api_key"] == REDACTED and out["nested"][0] == {"password": REDACTED, "model": "m"}
    assert out["url"] == f"https://{REDACTED}@host:8080/v1?access_token={REDACTED}&page=2"
    assert out["api_key_env"] == "KEY_VAR" and "sk-123" not in str(out) and "pw" not in out["url"]


def test_a_bring_your_own_describe_reaches_the_manifest_redacted():
    class Mine:
        def index(self, docs):
            pass

        def search(self, query, k):
            return []

        def describe(self):
            return {"api_key": "sk-live-123", "endpoint": "https://me:hunter2@api.example.org/v1", "k1": 0.9}

    described = byo.ObjectAdapter("mine", Mine()).describe()["describe"]
    assert described == {"api_key": REDACTED, "endpoint": f"https://{REDACTED}@api.example.org/v1", "k1": 0.9}


@pytest.mark.parametrize("method", sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml")))
def test_no_project_config_is_taken_for_a_credential(method):
    assert secret_keys(to_dict(load_config([f"method={method}"]))) == []
