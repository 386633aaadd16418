"""Every method config builds into a method object, alone and with every ablation that applies to it
(as lightning-hydra-template's test that instantiates every config): a broken `_target_`, an unknown
key or a bad default fails here, not hours into a sweep. Models come from the packages the tests
install (MiniLM, SmolLM2); artifacts a method must be given first (a trained cross-encoder, a learned
fusion model) are missing in the empty cache, and must fail with an error that says how to make them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra.utils import instantiate

from experiments.config import load_config, to_dict
from lethe.core.paths import CONF_DIR
from lethe.core.models import ModelNotFoundError
from tests.conftest import DATA_ROOT

METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
ABLATIONS = sorted(p.stem for p in (CONF_DIR / "ablation").glob("*.yaml"))
NEEDS_ARTIFACT = {"cross_encoder": "make models"}   # method -> what its error must tell the user to run


def _keys(d: dict[str, Any], prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, prefix + k + ".")
    return out


def _applies(method: str, ablation: str) -> bool:
    """An ablation applies to a method whose config has every key the ablation sets (its variant aside)."""
    ab = yaml.safe_load((CONF_DIR / "ablation" / f"{ablation}.yaml").read_text())["method"]
    ab.pop("variant", None)
    return _keys(ab) <= _keys(to_dict(load_config([f"method={method}"]).method))


PAIRS = [(m, a) for a in ABLATIONS for m in METHODS if _applies(m, a)]


def _needs_fusion(overrides: list[str]) -> bool:
    return bool(load_config(overrides).method.get("learned_fusion", {}).get("enabled"))


def _build(overrides: list[str], tmp: Path) -> Any:
    """Build the method; one that needs a learned-fusion model (none in the empty cache) must say how to
    train it, and is then built with learned fusion off, so every other part of its config is built too."""
    if _needs_fusion(overrides):
        with pytest.raises(Exception, match="train_fusion") as err:   # Hydra wraps the error
            _build_now(overrides, tmp)
        assert isinstance(err.value.__cause__ or err.value, FileNotFoundError)
        overrides = [*overrides, "method.learned_fusion.enabled=false"]
    return _build_now(overrides, tmp)


def _build_now(overrides: list[str], tmp: Path) -> Any:
    small = ["llm=smollm2"]   # the tests' model in every LLM slot a method has
    if load_config(overrides).method.get("llm_rerank") is not None:
        small += [f"llm@method.{slot}=smollm2" for slot in ("llm_rerank.llm", "generation.llm", "generation.judge.llm")]
    cfg = load_config([*overrides, *small, f"cache_dir={tmp}", f"data.root={DATA_ROOT}"])
    params = to_dict(cfg.method)
    params.pop("name")
    params.pop("variant", None)
    return instantiate(params, cache_dir=tmp, progress=False, _convert_="all")


@pytest.mark.parametrize("method", METHODS)
def test_every_method_config_builds(method, tmp_path):
    if method in NEEDS_ARTIFACT:
        with pytest.raises(Exception, match=NEEDS_ARTIFACT[method]) as err:   # Hydra wraps the error
            _build_now([f"method={method}"], tmp_path)
        assert isinstance(err.value, ModelNotFoundError) or isinstance(err.value.__cause__, ModelNotFoundError)
        return
    m = _build([f"method={method}"], tmp_path)
    try:
        assert callable(m.index) and callable(m.search) and isinstance(m.describe(), dict)
    finally:
        m.close()


def test_every_ablation_applies_to_some_method():
    assert {a for _, a in PAIRS} == set(ABLATIONS)


@pytest.mark.parametrize("method,ablation", PAIRS, ids=[f"{m}+{a}" for m, a in PAIRS])
def test_every_method_ablation_pair_builds(method, ablation, tmp_path):
    m = _build([f"method={method}", f"+ablation={ablation}"], tmp_path)
    m.close()
