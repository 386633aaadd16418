"""A credential planted through every input route is refused and appears in no file and no console line (issue 36,
item 1): before, ``+llm.api_key=...`` was refused only after Hydra had written it into ``.hydra/*.yaml`` and printed
it, and a password in ``llm.base_url`` was written six times into ``manifest.json``, hashed and cached."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.config import load_config
from experiments.runner import run_experiment
from lethe.core.paths import PROJECT_ROOT
from lethe.core.secrets import refuse_secret_arguments, secret_keys
from lethe.core.typed_config import ConfigError
from lethe.llm.backends import OpenAICompatibleBackend, make_llm
from tests.conftest import overrides_for

PLANTED = "PLANTED-s3cr3t-4f1d"
URL = f"http://someone:{PLANTED}@127.0.0.1:9"


def _run(tmp_path: Path, module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m module args`` in ``tmp_path`` with every folder the harness writes under it."""
    full_env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_ROOT),
        "LETHE_RESULTS": str(tmp_path / "results"),
        "LETHE_CACHE": str(tmp_path / "cache"),
        "LETHE_PROCESSED": str(tmp_path / "processed"),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=300
    )


def _leaks(tmp_path: Path, proc: subprocess.CompletedProcess) -> list[str]:
    files = [
        str(p)
        for p in tmp_path.rglob("*")
        if p.is_file() and PLANTED.encode() in p.read_bytes() and "planted" not in p.parts
    ]
    return files + [name for name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)) if PLANTED in text]


def _leaky_conf(tmp_path: Path) -> Path:
    """A config folder (``--config-dir``) holding an llm config with a key in it."""
    conf = tmp_path / "planted"
    (conf / "llm").mkdir(parents=True)
    (conf / "llm" / "leaky.yaml").write_text(
        f"kind: openai_compatible\nbase_url: http://127.0.0.1:9\napi_key: {PLANTED}\n"
    )
    return conf


ROUTES = {
    # name: (module, arguments, environment, the key the message must name)
    "override": ("experiments.run", [f"+llm.api_key={PLANTED}"], None, "llm.api_key"),
    "url override": ("experiments.run", [f"llm.base_url={URL}"], None, "llm.base_url"),
    "hydra env_set": (
        "experiments.run",
        [f"+hydra.job.env_set.OPENAI_API_KEY={PLANTED}"],
        None,
        "hydra.job.env_set.OPENAI_API_KEY",
    ),
    "config file": ("experiments.run", ["--config-dir", "planted", "llm=leaky"], None, "llm.api_key"),
    "config file, multirun": ("experiments.run", ["--config-dir", "planted", "llm=leaky", "-m"], None, "llm.api_key"),
    "environment": (
        "experiments.run",
        ["llm=server", "llm.base_url=${oc.env:LEAKY_URL}"],
        {"LEAKY_URL": URL},
        "llm.base_url",
    ),
    "reproduce, forwarded override": (
        "experiments.reproduce",
        ["tier=smoke", "action=verify", f"+llm.api_key={PLANTED}"],
        None,
        "llm.api_key",
    ),
    "study": ("experiments.studies.judge_validation", [f"+pairwise.token={PLANTED}"], None, "pairwise.token"),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_planted_credential_is_refused_before_anything_is_written(tmp_path, route):
    module, args, env, key = ROUTES[route]
    _leaky_conf(tmp_path)
    proc = _run(tmp_path, module, *args, env=env)
    assert proc.returncode != 0
    assert key in proc.stderr and "a credential" in proc.stderr, proc.stderr[-2000:]
    assert _leaks(tmp_path, proc) == []
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "planted" not in p.parts]
    assert written == []  # refused before Hydra wrote its records, before any run folder


def test_the_python_api_and_the_backend_refuse_credentials_too(tmp_path):
    work = {"processed": tmp_path / "processed", "cache": tmp_path / "cache", "results": tmp_path / "results"}
    cfg = load_config(
        overrides_for(
            work, "dataset=locomo", "dataset.scopes=[conv-26]", "method=bm25", "llm=server", f"llm.base_url={URL}"
        )
    )
    with pytest.raises(ConfigError, match="llm.base_url: a credential") as exc:
        run_experiment(cfg)
    assert PLANTED not in str(exc.value)
    with pytest.raises(ConfigError, match="base_url: a credential"):
        make_llm({"kind": "openai_compatible", "base_url": URL}, tmp_path)
    with pytest.raises(ConfigError, match="user or password"):
        OpenAICompatibleBackend(URL)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()] == []


def test_what_counts_as_a_credential():
    tree = {
        "llm": {
            "api_key_env": "LETHE_LLM_API_KEY",
            "max_tokens": 64,
            "tokenizer": "x",
            "api_key": None,
            "base_url": "http://127.0.0.1:8080",
            "path": "http://host/a@b",
            "password": "p",
        },
        "overrides": ["run.k=5", "+llm.api_key=null", "llm.auth_token=x", "llm.base_url='http://u@h'"],
    }
    assert secret_keys(tree) == ["llm.password", "overrides[2]", "overrides[3]"]
    refuse_secret_arguments(["run.k=5", "llm=server"])
    with pytest.raises(SystemExit, match="llm.api_key: a credential") as exc:
        refuse_secret_arguments(["run.k=5", f"llm.api_key={PLANTED}"])
    assert PLANTED not in str(exc.value.code)
