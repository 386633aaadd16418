"""Declared runs: tier files expand to unique runs, bad declarations name their file, and a run's
results folder is found by config hash without building or running anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.reference import (
    NOT_TIERS,
    DeclaredRun,
    ResolvedRun,
    load_tier,
    report_tiers,
    resolve,
    select,
    select_with_studies,
    selected_studies,
    tier_names,
)
from lethe.core.paths import CONF_DIR, PROJECT_ROOT, project_path
from lethe.core.typed_config import ConfigError
from tests.conftest import DATA_ROOT

TIERS = sorted(p.stem for p in (CONF_DIR / "reference").glob("*.yaml") if p.stem not in NOT_TIERS)
CORE_DATASETS = {"lethebench", "lethebench_heldout", "locomo", "techqa", "ultradomain_cs", "ultradomain_mix"}
CORE_METHODS = {
    "window",
    "bm25",
    "bm25_rm3",
    "vector",
    "hybrid",
    "hybrid_tuned",
    "hybrid_rrf_tuned",
    "cross_encoder",
    "cross_encoder_alone",
    "random_rerank",
    "faiss_ivf",
    "mmr",
    "lethe_iter1",
    "lethe_iter2",
    "lethe_iter3",
}


def test_every_real_tier_loads_with_unique_keys():
    assert {"core", "ablations", "llm", "smoke"} <= set(TIERS)
    for name in TIERS:
        tier = load_tier(name)
        keys = [r.key for r in tier.runs] + [st.key for st in tier.studies]  # a tier may be studies alone (judges)
        assert keys and len(keys) == len(set(keys)), name
        assert {r.tier for r in tier.runs} <= {name} and {st.tier for st in tier.studies} <= {name}
        assert all(r.key == f"{r.dataset}/{r.label}" for r in tier.runs)
    # the reference report reads core, ablations and llm together: their keys do not collide either
    keys = [r.key for t in tier_names("all") for r in load_tier(t).runs]
    assert len(keys) == len(set(keys))


def test_core_tier_is_six_datasets_by_fifteen_methods():
    core = load_tier("core")
    assert len(core.runs) == 90
    assert {r.dataset for r in core.runs} == CORE_DATASETS and {r.method for r in core.runs} == CORE_METHODS
    keys = {r.key for r in core.runs}
    assert "techqa/cross_encoder" in keys and "locomo/bm25" in keys
    assert core.report == "reference" and core.difficulty == ("window", "bm25", "vector")
    bm25 = next(r for r in core.runs if r.key == "locomo/bm25")
    assert bm25.hydra_overrides() == ["dataset=locomo", "method=bm25"] and bm25.describe() == "defaults"


def test_ablation_and_variant_runs():
    first = load_tier("ablations").runs[0]
    assert (first.label, first.key) == ("lethe_iter1+no_plan", "lethebench/lethe_iter1+no_plan")
    assert first.hydra_overrides() == ["dataset=lethebench", "method=lethe_iter1", "+ablation=no_plan"]
    budget = next(r for r in load_tier("llm_studies").runs if r.key == "lethebench/lethe_iter4+budget300ms")
    assert budget.sample == 100 and budget.ablation is None
    assert budget.hydra_overrides() == [
        "dataset=lethebench",
        "method=lethe_iter4",
        "++method.variant=budget300ms",
        "dataset.sample=100",
        "method.stages.generation.enabled=false",
        "method.stages.llm_rerank.budget_ms=300",
    ]
    assert (
        budget.describe()
        == "sample=100, method.stages.generation.enabled=false, method.stages.llm_rerank.budget_ms=300"
    )


def test_tier_overrides_come_before_the_entry_overrides():
    smoke = load_tier("smoke")
    assert smoke.report == "smoke"
    assert smoke.overrides == ("cache_dir=.cache/lethe-smoke", "results_dir=results/smoke/runs")
    ce = next(r for r in smoke.runs if r.key == "locomo/cross_encoder")
    assert ce.overrides[:4] == (
        "cache_dir=.cache/lethe-smoke",
        "results_dir=results/smoke/runs",
        "dataset.scopes=[conv-26,conv-30]",
        "method.candidates=5",
    )
    # the in_domain default needs no source overrides; the entry only caps the training budget
    assert ce.overrides[4] == "method.model.train.max_train_queries=12"
    assert not any("source_overrides" in o for o in ce.overrides)


def test_tier_names_and_report_tiers():
    every = [
        "core",
        "ablations",
        "regimes",
        "label_free",
        "rerank_pool",
        "llm",
        "llm_studies",
        "seeds",
        "seed003",
        "judges",
    ]
    assert tier_names("all") == every  # written out here: the order is the contract, not a copy of the constant
    assert tier_names("smoke") == ["smoke"]
    assert [t.name for t in report_tiers("reference")] == every
    assert [t.name for t in report_tiers("smoke")] == ["smoke"]
    assert report_tiers("nothing") == []


def test_two_studies_of_one_report_never_publish_the_same_files(tmp_path):
    """The five pairwise studies of the reference report all write pairwise_answers.*: each has its own folder. Two
    studies of one module in one folder are refused when the report's tiers load, before anything runs."""
    published = [(st.publish, st.module) for t in report_tiers("reference") for st in t.studies]
    assert len(published) == len(set(published))
    study = "studies:\n  {name}: {{module: experiments.studies.pairwise_answers}}\n"
    for name in ("a", "b"):
        _tier(tmp_path, f"report: r\nruns: [{{dataset: d, method: m}}]\n{study.format(name=name)}", name)
    with pytest.raises(
        ValueError,
        match=r"b.yaml: studies.b and .*a.yaml: studies.a both publish "
        r"experiments.studies.pairwise_answers's files to tables/",
    ):
        report_tiers("r", tmp_path)
    _tier(
        tmp_path,
        f"report: r\nruns: [{{dataset: d, method: m}}]\n{study.format(name='b')}".replace(
            "pairwise_answers}", "pairwise_answers, publish: tables/b}"
        ),
        "b",
    )
    assert [t.name for t in report_tiers("r", tmp_path)] == ["a", "b"]


def _tier(tmp_path: Path, text: str, name: str = "t") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_grid_expansion_of_a_tier_file(tmp_path):
    _tier(
        tmp_path,
        """\
description: d
overrides: [run.k=5]
runs:
  - {dataset: a, method: m, sample: 3, overrides: [x=1]}
  - {datasets: [a, b], methods: [m], ablations: [p, q]}
""",
    )
    tier = load_tier("t", tmp_path)
    assert [r.key for r in tier.runs] == ["a/m", "a/m+p", "a/m+q", "b/m+p", "b/m+q"]
    assert tier.runs[0].hydra_overrides() == ["dataset=a", "method=m", "dataset.sample=3", "run.k=5", "x=1"]
    assert tier.runs[-1].hydra_overrides() == ["dataset=b", "method=m", "+ablation=q", "run.k=5"]
    assert tier.report == "reference" and tier.description == "d"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "runs:\n  - {datasets: [a], methods: [m]}\n  - {datasets: [a], methods: [m], sampel: 3}\n",
            r"runs\[1\]: unknown key\(s\) \['sampel'\]",
        ),
        ("runz: []\n", r"unknown key\(s\) \['runz'\]"),
        (
            "runs:\n  - {datasets: [a], methods: [m], sample: 0}\n",
            r"runs\[0\]: sample must be a positive integer, got 0",
        ),
        ("runs:\n  - {datasets: [a], methods: [m], sample: -5}\n", r"runs\[0\]: sample must be a positive integer"),
        ("runs:\n  - {datasets: [a], methods: [m], sample: '10'}\n", r"runs\[0\]: sample must be a positive integer"),
        ("runs:\n  - {datasets: [a]}\n", r"runs\[0\]: needs datasets and methods"),
        (
            "runs:\n  - {datasets: [a, b], methods: [m]}\n  - {datasets: [b], methods: [m]}\n",
            r"runs declared twice .*\['b/m'\]",
        ),
        ("runs:\n  - {datasets: [a], methods: [m], ablations: [p, p]}\n", r"declared twice .*\['a/m\+p'\]"),
        ("runs: [ {datasets: [a]\n", r"is not valid YAML"),
    ],
)
def test_bad_tier_files_name_the_file(tmp_path, text, message):
    path = _tier(tmp_path, text)
    with pytest.raises(ValueError, match=message) as err:
        load_tier("t", tmp_path)
    assert str(err.value).startswith(str(path))


def test_a_boolean_sample_is_rejected(tmp_path):
    _tier(tmp_path, "runs:\n  - {datasets: [a], methods: [m], sample: true}\n")
    with pytest.raises(ValueError, match="sample must be a positive integer"):
        load_tier("t", tmp_path)


@pytest.mark.parametrize("text", ["- {datasets: [a], methods: [m]}\n", "runs: [5]\n"])
def test_a_malformed_structure_names_the_file(tmp_path, text):
    path = _tier(tmp_path, text)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        load_tier("t", tmp_path)


def test_an_unknown_tier_lists_the_known_ones(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_tier("nope")
    msg = str(err.value)
    assert "no tier 'nope'" in msg and str(CONF_DIR / "reference" / "nope.yaml") in msg
    known = re.search(r"known tiers: (\[.*?\])", msg).group(1)
    assert known == str(TIERS) and "tolerances" not in known
    _tier(tmp_path, "runs: []\n", "mine")
    _tier(tmp_path, "classes: {}\n", "tolerances")
    with pytest.raises(FileNotFoundError, match=re.escape("known tiers: ['mine']")):
        load_tier("core", tmp_path)


def test_select():
    runs = load_tier("core").runs
    assert select(runs, None) == list(runs) and select(runs, []) == list(runs)
    picked = select(runs, ["locomo/bm25", "techqa/lethe_iter*"])
    assert [r.key for r in picked] == ["locomo/bm25", "techqa/lethe_iter1", "techqa/lethe_iter2", "techqa/lethe_iter3"]
    assert len(select(runs, ["*/vector"])) == 6
    assert select(runs, ["locomo/*", "locomo/bm25"]) == [r for r in runs if r.dataset == "locomo"]
    with pytest.raises(ValueError, match=r"\['locomo/bm26'\] match no declared run"):
        select(runs, ["locomo/bm25", "locomo/bm26"])
    with pytest.raises(ValueError, match="match no declared run"):
        select(runs, ["LOCOMO/bm25"])  # case-sensitive


def test_select_names_a_study_and_brings_the_runs_it_reads():
    tier = load_tier("seed003")
    runs, studies = select_with_studies(
        tier.runs, tier.studies, ["study/seed003_pairwise", "lethebench/keywords+seed003_dev_free"]
    )
    assert [st.name for st in studies] == ["seed003_pairwise"]
    read = {key for _, key in studies[0].runs}
    assert len(read) == 8 and {r.key for r in runs} == read | {"lethebench/keywords+seed003_dev_free"}
    assert (
        select_with_studies(tier.runs, tier.studies, ["lethebench/keywords+seed003_dev_free"])[1] == []
    )  # no study unless named
    assert select_with_studies(tier.runs, tier.studies, None) == (list(tier.runs), list(tier.studies))
    assert selected_studies(tier.studies, None) == list(tier.studies)
    with pytest.raises(ValueError, match=r"\['study/seed003'\] match no declared run or study"):
        select_with_studies(tier.runs, tier.studies, ["study/seed003"])


@pytest.fixture
def isolated(tmp_path):
    """Overrides that keep resolve's paths out of the repository."""
    return [f"data.root={DATA_ROOT}", f"data.processed={tmp_path / 'processed'}"]


def test_resolve_finds_the_folder_by_config_hash(tmp_path, isolated):
    run = select(load_tier("core").runs, ["locomo/bm25"])[0]
    a, b = resolve(run, isolated), resolve(run, isolated)
    assert re.fullmatch(r"[0-9a-f]{12}", a.config_hash) and a.config_hash == b.config_hash
    assert a.key == "locomo/bm25" and a.declared is run
    assert a.folder == project_path(a.cfg.results_dir) / "locomo" / "bm25" / a.config_hash
    assert a.dataset_folder.parent == tmp_path / "processed" / "locomo"
    other = resolve(run, [*isolated, "method.k1=0.9"])
    assert other.config_hash != a.config_hash and other.folder.parent == a.folder.parent
    # where results go is not part of the hash
    elsewhere = resolve(run, [*isolated, f"results_dir={tmp_path / 'res'}"])
    assert elsewhere.folder == tmp_path / "res" / "locomo" / "bm25" / a.config_hash
    assert not elsewhere.done
    # nothing was built or written
    assert not (tmp_path / "processed").exists() and not (tmp_path / "res").exists()


def test_resolve_done_reads_the_done_file(tmp_path, isolated):
    run = DeclaredRun("x", "locomo", "bm25")
    r = resolve(run, [*isolated, f"results_dir={tmp_path / 'res'}"])
    r.folder.mkdir(parents=True)
    assert not r.done
    (r.folder / "DONE").write_text("complete\n")
    assert not r.done  # DONE alone is a damaged folder (issue 36): made again, never read
    for name in ("run.trec", "qrels.trec"):
        (r.folder / name).write_text("")
    for name in ("metrics.json", "manifest.json"):
        (r.folder / name).write_text("{}")
    for name in ("run.parquet", "per_query.parquet"):
        (r.folder / name).write_bytes(b"PAR1" + b"\0" * 8 + b"PAR1")
    assert r.done


def test_resolve_files_ablations_and_tier_overrides(isolated):
    abl = resolve(load_tier("ablations").runs[0], isolated)
    assert abl.folder.parent.name == "lethe_iter1+no_plan" and abl.cfg.method.variant == "no_plan"
    smoke = resolve(select(load_tier("smoke").runs, ["locomo/bm25"])[0], isolated)
    core = resolve(select(load_tier("core").runs, ["locomo/bm25"])[0], isolated)
    assert smoke.folder.parents[2] == PROJECT_ROOT / "results" / "smoke" / "runs"
    assert smoke.config_hash != core.config_hash  # two conversations, not ten


def test_resolve_errors_name_the_declared_run(isolated):
    with pytest.raises(ValueError, match=r"declared run locomo/nope_method \(tier x\) does not compose"):
        resolve(DeclaredRun("x", "locomo", "nope_method"), isolated)
    # an override that renames the variant would file the run elsewhere than declared
    run = DeclaredRun("x", "lethebench", "lethe_iter1", ablation="no_plan", overrides=("method.variant=zzz",))
    with pytest.raises(ValueError, match=r"lethebench/lethe_iter1\+no_plan .* is filed as lethe_iter1\+zzz"):
        resolve(run, isolated)


@pytest.fixture(scope="module")
def resolved_tiers(tmp_path_factory) -> dict[str, list[ResolvedRun]]:
    """Every declared run of every real tier, resolved once (about 30 s) for the tests below, as experiments.reproduce
    resolves them: a ``replay: true`` run replays the reach the committed reference store recorded."""
    base = tmp_path_factory.mktemp("resolved")
    extra = [f"data.root={DATA_ROOT}", f"data.processed={base / 'processed'}", f"cache_dir={base / 'cache'}"]
    store = PROJECT_ROOT / "results" / "reference"
    return {name: [resolve(run, extra, store) for run in load_tier(name).runs] for name in TIERS}


def test_every_declared_run_resolves_to_a_valid_config(resolved_tiers):
    """Each run of every tier composes (its method, ablation, sample and overrides exist), is filed
    under its declared label, and has a config hash of its own."""
    seen: dict[str, str] = {}
    for name, resolved in resolved_tiers.items():
        for r in resolved:
            run = r.declared
            assert r.folder.parts[-3:-1] == (run.dataset, run.label)
            assert r.cfg.method.get("_target_"), run.key
            if run.sample is not None:
                assert r.cfg.dataset.sample == run.sample
            seen[f"{name}:{run.key}"] = r.config_hash
    assert len(seen) == sum(len(load_tier(n).runs) for n in TIERS)
    assert len(set(seen.values())) == len(seen)  # no two declared runs share a results folder


def test_the_cache_location_is_not_part_of_the_config_hash(tmp_path, isolated):
    """The trained cross-encoder's model path lies under cache_dir; moving the cache (LETHE_CACHE,
    cache_dir=/scratch/cache, with or without a trailing slash) must find the same finished run."""
    run = select(load_tier("core").runs, ["techqa/cross_encoder"])[0]
    here = resolve(run, isolated)
    for cache in (tmp_path / "cache", f"{tmp_path / 'cache'}/"):
        moved = resolve(run, [*isolated, f"cache_dir={cache}"])
        assert str(moved.cfg.method.model.path).startswith(str(tmp_path / "cache"))  # the override took effect
        assert moved.config_hash == here.config_hash and moved.folder == here.folder
    # a model path outside the cache is what the run computes with: it stays in the hash
    other = resolve(run, [*isolated, f"method.model.path={tmp_path / 'my_model'}"])
    assert other.config_hash != here.config_hash


def test_every_declared_run_resolves_to_the_config_hash_of_its_expected_entry(resolved_tiers):
    """A code change that moved a declared run's config hash would orphan its finished results folder (the
    report would show n/m, reproduce would make it again): every expected entry's hash must still resolve
    (with the cache elsewhere than the default, which must not matter)."""
    from analysis.expected import read_expected

    for name, resolved in resolved_tiers.items():
        expected = read_expected(PROJECT_ROOT / "results" / "expected" / f"{name}.yaml")["runs"]
        checked = 0
        for r in resolved:
            want = (expected.get(r.key) or {}).get("config_hash")
            if want:
                assert r.config_hash == want, f"{name}: {r.key}"
                checked += 1
        assert checked == len(resolved), name


def test_each_learned_fusion_model_the_runs_load_has_its_own_prerequisite_step(resolved_tiers, monkeypatch):
    """A fusion model is filed by dataset build, query pool (the run's sample, scopes or categories: it never
    learns from another subset's queries) and configuration. Its step was once named without the pool, so in
    the llm tier iteration 4 on 150 LetheBench queries and the budget sweep on 100 shared one step, one model
    was built, and the other pool's runs failed with "no learned-fusion model" when made in one invocation.
    Naming (and training) a fusion model builds no LLM: iteration 4's reranker and judge act after fusion."""
    from experiments import train_fusion
    from experiments.prerequisites import prepare_steps
    from lethe.llm import backends

    def no_llm(cfg, cache_dir=None):
        raise AssertionError(f"a fusion model's folder was named by building the LLM {cfg.get('name')}")

    monkeypatch.setattr(backends, "make_llm", no_llm)

    for name, resolved in resolved_tiers.items():
        needed = {
            train_fusion.model_folder(r.cfg)
            for r in resolved
            if OmegaConf.select(r.cfg, "method.stages.learned_fusion.enabled")
        }
        steps = [s for s in prepare_steps(resolved) if s.name.startswith("fusion ")]
        built = [train_fusion.model_folder(s.model[1]) for s in steps]
        assert len(built) == len(set(built)), f"{name}: two steps build the same model"
        assert set(built) == needed, f"{name}: models no step builds: {sorted(map(str, needed - set(built)))}"
    for family in ("lethebench", "lethebench_heldout"):  # iteration 4's two query samples (150, and the sweep's 100)
        pools = {
            t: [s.name for s in prepare_steps(resolved_tiers[t]) if s.name.startswith(f"fusion {family} ")]
            for t in ("llm", "llm_studies")  # the sweep is its own tier since the split
        }
        assert all(len(p) == 1 and " pool " in p[0] for p in pools.values()), pools
        assert pools["llm"] != pools["llm_studies"], pools


def test_a_tier_name_that_is_a_path_is_refused():
    with pytest.raises(ConfigError, match=r"tier='../core': must be a plain name"):
        load_tier("../core")
