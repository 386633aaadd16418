"""Every method config builds into a method object, alone and with every ablation that applies to it
(as lightning-hydra-template's test that instantiates every config): a broken `_target_`, an unknown
key or a bad default fails here, not hours into a sweep. Every top config (conf/*.yaml) composes, is the
top config of exactly one Hydra entry point, comments each of its keys and keeps Hydra out of the
working directory. Models come from the packages the tests install (MiniLM, SmolLM2); artifacts a
method must be given first (a trained cross-encoder, a learned fusion model) are missing in the empty
cache, and must fail with an error that says how to make them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra.utils import instantiate

from experiments.config import load_config, to_dict
from experiments.run_identity import method_params
from lethe.core.models import ModelNotFoundError
from lethe.core.paths import CONF_DIR, PROJECT_ROOT
from lethe.core.typed_config import ConfigError
from lethebench.supervision import method_supervision
from tests.conftest import DATA_ROOT

METHODS = sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml"))
ABLATIONS = sorted(p.stem for p in (CONF_DIR / "ablation").glob("*.yaml"))
# method -> what its error must tell the user to run when the runner binds a dataset it has no trained artifact for
NEEDS_ARTIFACT = {
    "cross_encoder": "make models",
    "cross_encoder_hybrid": "make models",
    "hybrid_tuned": "experiments.tune_hybrid",
    "hybrid_rrf_tuned": "experiments.tune_hybrid",
}


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
    return bool(((load_config(overrides).method.get("stages") or {}).get("learned_fusion") or {}).get("enabled"))


def _build(overrides: list[str], tmp: Path) -> Any:
    """Build the method; one that needs a learned-fusion model (none in the empty cache) builds, and binding a
    dataset then says how to train it (the model is per dataset build and query pool, so it loads there)."""
    m = _build_now(overrides, tmp)
    if _needs_fusion(overrides):
        with pytest.raises(FileNotFoundError, match="train_fusion"):
            m.bind_dataset({"name": "locomo", "build_key": "0" * 16, "pool": ""})
    return m


def _build_now(overrides: list[str], tmp: Path) -> Any:
    small = ["llm=smollm2"]  # the tests' model in every LLM slot a method has
    if (load_config(overrides).method.get("stages") or {}).get("llm_rerank") is not None:
        small += [
            f"llm@method.stages.{slot}=smollm2" for slot in ("llm_rerank.llm", "generation.llm", "generation.judge.llm")
        ]
    cfg = load_config([*overrides, *small, f"cache_dir={tmp}", f"data.root={DATA_ROOT}"])
    return instantiate(method_params(to_dict(cfg.method)), cache_dir=tmp, progress=False, _convert_="all")


@pytest.mark.parametrize("method", METHODS)
def test_every_method_config_builds(method, tmp_path):
    m = _build([f"method={method}"], tmp_path)
    if method in NEEDS_ARTIFACT:
        with pytest.raises(ModelNotFoundError, match=NEEDS_ARTIFACT[method]):
            m.bind_dataset({"name": "locomo", "build_key": "0" * 16})
    try:
        assert callable(m.index) and callable(m.search) and isinstance(m.describe(), dict)
    finally:
        m.close()


@pytest.mark.parametrize("method", METHODS)
def test_every_method_config_declares_what_it_learns_from(method):
    """Issue 57: every method config states its supervision (lethebench/supervision.py), so the report can choose each
    method's best baseline among those that saw as much; a method without one fails here."""
    cfg = to_dict(load_config([f"method={method}"]).method)
    assert method_supervision(cfg), method
    with pytest.raises(ConfigError, match="declares no `supervision`"):
        method_supervision({k: v for k, v in cfg.items() if k != "supervision"})


def test_the_cross_encoder_supervision_follows_its_regime():
    def of(regime: str) -> tuple[str, ...]:
        return method_supervision(
            to_dict(load_config(["method=cross_encoder", f"method.model.train.regime={regime}"]).method)
        )

    assert [of(r) for r in ("in_domain", "transfer", "lethebench", "label_free")] == [
        ("in_domain",),
        ("other_datasets",),
        ("other_datasets",),
        ("llm",),
    ]


def test_every_ablation_applies_to_some_method():
    assert {a for _, a in PAIRS} == set(ABLATIONS)


@pytest.mark.parametrize("method,ablation", PAIRS, ids=[f"{m}+{a}" for m, a in PAIRS])
def test_every_method_ablation_pair_builds(method, ablation, tmp_path):
    m = _build([f"method={method}", f"+ablation={ablation}"], tmp_path)
    m.close()


# ------------------------------------------------------------------ entry points and their top configs
TOP_CONFIGS = sorted(p.stem for p in CONF_DIR.glob("*.yaml"))
ENTRY_SOURCES = sorted([*(PROJECT_ROOT / "experiments").rglob("*.py"), *(PROJECT_ROOT / "analysis").glob("*.py")])
_HYDRA_MAIN = re.compile(r'@hydra\.main\(config_path="((?:\.\./)+)conf", config_name="(\w+)", version_base="1\.3"\)')


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PROJECT_ROOT).with_suffix("").parts)


def _entry_points() -> dict[str, str]:
    """conf/<name>.yaml -> the module whose @hydra.main composes it."""
    out: dict[str, str] = {}
    for path in ENTRY_SOURCES:
        for up, name in _HYDRA_MAIN.findall(path.read_text()):
            assert (path.parent / up / "conf").resolve() == CONF_DIR, f"{path}: config_path {up}conf is not conf/"
            assert name not in out, f"conf/{name}.yaml is the top config of {out.get(name)} and {path.stem}"
            out[name] = _module(path)
    return out


def test_one_cli_style_every_entry_point_is_a_hydra_app_with_its_own_top_config():
    entry = _entry_points()
    assert sorted(entry) == TOP_CONFIGS, "every conf/*.yaml is the top config of exactly one entry point"
    assert (
        entry["config"] == "experiments.run"
        and entry["contradiction_detection"] == "experiments.studies.contradiction_detection"
    )
    for path in ENTRY_SOURCES:
        text = path.read_text()
        guard = "check_arguments(sys.argv[1:])"  # the one look at argv, before Hydra (lethe.core.arguments)
        assert "argparse" not in text and "sys.argv" not in text.replace(guard, ""), path  # no hand-made command lines
        if 'if __name__ == "__main__"' in text:  # a module run with python -m is one of the Hydra apps
            assert _module(path) in entry.values(), path
            assert guard in text.split('if __name__ == "__main__"')[1], path


def compose_with_hydra(name: str, overrides: list[str]) -> Any:
    """conf/<name>.yaml composed as its entry point composes it, Hydra's own part included."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=name, overrides=overrides, return_hydra_config=True)


def _documented_keys(path: Path) -> list[str]:
    """Leaf keys of a top config (outside `defaults:` and `hydra:`) with no comment on their line, on the
    line above, or on their parent key's line."""
    missing, stack = [], []  # stack: (indent, commented) of the enclosing mapping keys
    lines = path.read_text().splitlines()
    block = None
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)([\w@.]+):(.*)$", line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3)
        if indent == 0:
            block = key
        if block in ("defaults", "hydra"):
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        commented = "#" in rest or (i > 0 and lines[i - 1].lstrip().startswith("#"))
        value = rest.split("#", 1)[0].strip()
        if value:  # a leaf
            if not (commented or any(c for _, c in stack)):
                missing.append(key)
        else:
            stack.append((indent, commented))
    return missing


@pytest.mark.parametrize("name", TOP_CONFIGS)
def test_every_top_config_composes_documents_its_keys_and_keeps_the_cwd(name):
    path = CONF_DIR / f"{name}.yaml"
    assert _documented_keys(path) == [], f"conf/{name}.yaml: keys without a comment"
    if name != "judge_agreement":  # its llms are required (???): composed with one below
        load_config([], config_name=name)
    composed = compose_with_hydra(name, ["llms=[smollm2]"] if name == "judge_agreement" else [])
    # a credential is refused before Hydra writes its records (tests/reliability/test_secret_routes.py)
    assert composed.hydra.callbacks.secrets._target_ == "experiments.refuse_secrets.RefuseSecretsCallback", name
    hydra_block = yaml.safe_load(path.read_text())["hydra"]
    assert hydra_block["job"]["chdir"] is False, name  # the working directory never changes
    for mode in ("run", "sweep"):  # Hydra's own records go under results/.hydra/, never to ./outputs
        if mode in hydra_block:
            assert hydra_block[mode]["dir"].startswith("results/.hydra/"), (name, mode)
    assert "run" in hydra_block, name


def test_the_study_configs_compose_with_their_required_keys():
    assert list(load_config(["llms=[smollm2]"], config_name="judge_agreement").llms) == ["smollm2"]
    assert load_config([], config_name="contradiction_detection").dataset_folder is None


# ------------------------------------------------------------------ every config key is read by code
_SOURCES = [p for d in ("lethe", "baselines", "experiments") for p in (PROJECT_ROOT / d).rglob("*.py")]


def _attribute_reads() -> set[str]:
    """Every name read anywhere in the project's code (tests aside) as an attribute (``x.name``) or a key
    (``x["name"]``, ``x.get("name")``)."""
    import ast

    out: set[str] = set()
    for path in _SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                out.add(node.attr)
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                out.add(str(node.slice.value))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                out.add(str(node.args[0].value))
    return out


def _target_sections(node: Any, key: str = "method") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        if "_target_" in node:
            out.append((key, node))
        for k, v in node.items():
            out += _target_sections(v, f"{key}.{k}")
    return out


def _unread_parameters(target: str, keys: list[str], attribute_reads: set[str]) -> list[str]:
    """The keys of a ``_target_`` section no code reads: for a dataclass, a field no attribute access anywhere
    reads; for a class or function, a parameter its own body never uses."""
    import ast
    import dataclasses
    import inspect
    import textwrap

    from hydra.utils import get_object

    obj = get_object(target)
    if not keys:  # a stage with no parameter (lethe.stages.fuse.Fuse) has nothing to read
        return []
    if dataclasses.is_dataclass(obj):
        return [k for k in keys if k not in attribute_reads]
    fn = obj.__init__ if inspect.isclass(obj) else obj
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0].body  # the function's statements: its signature's defaults are not a use
    used = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return [k for k in keys if k not in used]


class _DeadKey:
    def __init__(self, used: int, unused: int):
        self.used = used


def test_an_unread_parameter_is_found():
    assert _unread_parameters(f"{__name__}._DeadKey", ["used", "unused"], set()) == ["unused"]


def test_every_config_key_of_every_method_is_read_by_code():
    """A key that is accepted but read by nothing (as iteration 4's `llm_rerank.cache` was: the stage overwrote
    `llm_rerank.llm.cache` with it, so the nested key was a dead switch) makes a config say what the run did not
    do. Every key of every `_target_` section of every method config and ablation is a parameter its code uses."""
    reads = _attribute_reads()
    dead: list[str] = []
    for overrides in ([f"method={m}"] for m in METHODS):
        for ov in (overrides, *([*overrides, f"+ablation={a}"] for m, a in PAIRS if f"method={m}" == overrides[0])):
            method = to_dict(load_config([*ov, "llm=smollm2"]).method)
            for key, section in _target_sections(method_params(method)):
                keys = [k for k in section if not k.startswith("_")]
                dead += [
                    f"{key}.{k} ({section['_target_']})"
                    for k in _unread_parameters(str(section["_target_"]), keys, reads)
                ]
    assert sorted(set(dead)) == []


def test_the_rerank_stage_hands_its_llm_section_to_the_backend_as_written(monkeypatch):
    """`llm_rerank.llm.cache` is live: the backend gets the section as the YAML writes it (it was overwritten)."""
    import lethe.llm.backends as backends
    from lethe.llm.pool import LLMPool
    from tests.support.fake_llm import FakeLLM
    from tests.support.method_yaml import build_stage

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(backends, "make_llm", lambda cfg, cache_dir=None: seen.append(dict(cfg)) or FakeLLM(0.0))
    for cache in (False, True):
        stage = build_stage(
            "llm_rerank", "lethe_iter4", llm={"kind": "fake", "name": "fake", "cache": cache}, max_passage_tokens=None
        )
        stage.bind_llms(LLMPool(None))
        assert seen[-1] == {"kind": "fake", "name": "fake", "cache": cache}


@pytest.mark.parametrize("method", ["hybrid_tuned", "hybrid_rrf_tuned"])
def test_the_tuned_hybrids_are_tuned_on_iteration_3s_folds_and_alpha_grid(method):
    """The same folds need the same k and seed as iteration 3's learned fusion; hybrid_tuned's alpha grid is its."""
    tuned = load_config([f"method={method}"]).method
    iter3 = load_config(["method=lethe_iter3"]).method.stages.learned_fusion
    assert (tuned.tuning.folds, tuned.tuning.seed) == (iter3.folds, iter3.seed)
    if tuned.tuning.parameter == "alpha":
        assert list(tuned.tuning.grid) == list(iter3.alpha_grid)
    assert method_supervision(to_dict(tuned)) == ("in_domain",)
