"""LetheBench generator: determinism, label consistency, split disjointness, for every template family."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from lethe.core.hashing import sha256_file
from lethebench.build import build_dataset, loader_version, source_version
from lethebench.card import content_tokens
from lethebench.generator import generate
from lethebench.generator.family import FAMILIES, get_family
from lethebench.generator.sessions import CATEGORIES, DOMAINS, PLAN_LABEL
from lethebench.schema import read_dataset
from lethebench.source_pins import output_sha256, pins
from tests.conftest import DATA_ROOT

SMALL = {"test": 24, "train": 12, "dev": 6}


def cfg(seed: int = 0) -> dict:
    return {"name": "lethebench", "loader": "lethebench", "files": [], "params": {"seed": seed, "splits": SMALL}}


def _family(src) -> str:
    return src.card.get("template_family", {}).get("name", "dev")


@pytest.fixture(scope="module", params=FAMILIES)
def small(request):
    return generate(seed=0, splits=SMALL, family=request.param)


def test_same_seed_gives_byte_identical_files(tmp_path, embedder):
    a = build_dataset(cfg(), tmp_path, tmp_path / "a", embedder)
    b = build_dataset(cfg(), tmp_path, tmp_path / "b", embedder, force=True)
    files = sorted(p.name for p in a.iterdir())
    assert files == [
        "card.json",
        "card.md",
        "contradictions.parquet",
        "corpus.parquet",
        "qrels.trec",
        "queries.parquet",
    ]
    assert [sha256_file(a / f) for f in files] == [sha256_file(b / f) for f in files]
    read_dataset(a)  # validates


def test_other_seed_gives_other_sessions(small):
    other = generate(seed=1, splits=SMALL, family=_family(small))
    assert set(small.sources["text"]) != set(other.sources["text"])
    assert list(small.queries["text"]) != list(other.queries["text"])


def test_counts_categories_domains_and_rules(small):
    q = small.queries
    meta = q["meta"].map(json.loads)
    assert not any("split" in m for m in meta)  # the split is the queries' column only
    for split, n in SMALL.items():
        assert (q["split"] == split).sum() == n * len(DOMAINS)
    assert (q["scope_id"].str.split("-").str[0] == q["split"]).all()
    assert set(q["domain"]) == set(DOMAINS)
    assert set(q["category"]) == set(CATEGORIES)
    assert (q["plan_label"] == q["category"].map(PLAN_LABEL)).all()
    assert set(q["complexity"]) <= {"low", "medium", "high"}
    assert ((q["history"].map(len) > 0) == (q["category"] == "elliptical")).all()


def test_every_label_points_at_an_eligible_doc(small):
    docs = small.sources.set_index("doc_id")
    q = small.queries.set_index("query_id")
    for qid, rel in small.qrels.items():
        assert rel and set(rel.values()) <= {1, 2} and 2 in rel.values()
        for did in rel:
            assert docs.loc[did, "scope_id"] == q.loc[qid, "scope_id"]
            assert docs.loc[did, "position"] < q.loc[qid, "position"], (qid, did)
    c = small.contradictions
    assert len(c) and set(q.loc[c["query_id"], "category"]) == {"updated_fact"}
    for row in c.itertuples():
        stale, cur = docs.loc[row.stale_doc_id], docs.loc[row.current_doc_id]
        assert stale.position < cur.position < q.loc[row.query_id, "position"]
        assert row.stale_doc_id not in small.qrels[row.query_id] and small.qrels[row.query_id][row.current_doc_id] == 2


def test_gold_entities_occur_in_relevant_docs(small):
    text = dict(zip(small.sources["doc_id"], small.sources["text"], strict=True))
    for qid, m in zip(small.queries["query_id"], small.queries["meta"], strict=True):
        ents = json.loads(m)["gold_entities"]
        assert ents, qid
        rel_text = " ".join(text[d] for d in small.qrels[qid]).lower()
        for e in ents:
            assert e.lower() in rel_text, (qid, e)


def test_answers_are_in_the_grade_2_docs(small):
    text = dict(zip(small.sources["doc_id"], small.sources["text"], strict=True))
    q = small.queries.set_index("query_id")
    for qid, rel in small.qrels.items():
        if q.loc[qid, "category"] == "broad":
            continue  # the answer lists several facts, each in its own turn
        ans = q.loc[qid, "answer"]
        # literally, or token by token (a database answer "engine at host" may be written as a URL)
        assert any(
            ans.lower() in text[d].lower() or content_tokens(ans) <= content_tokens(text[d])
            for d, g in rel.items()
            if g == 2
        ), qid


def test_splits_are_disjoint_sessions(small):
    meta = small.sources["meta"].map(json.loads)
    split_of_scope = dict(zip(small.sources["scope_id"], meta.map(lambda m: m["split"]), strict=True))
    assert all(s.startswith(split_of_scope[s]) for s in split_of_scope)
    sessions = small.sources.groupby("scope_id")["text"].apply(tuple)
    by_split: dict[str, set] = {}
    for scope, texts in sessions.items():
        by_split.setdefault(split_of_scope[scope], set()).add(texts)
    assert not (by_split["train"] & by_split["test"]) and not (by_split["dev"] & by_split["test"])
    assert isinstance(small.sources, pd.DataFrame)


def test_a_function_turn_has_the_kind_its_template_declares(small):
    """Issue 56: the held-out family's Go ``func`` and Rust ``fn`` turns were labelled prose (the kind came from a
    template's first word, def/function). Every rendered function turn has its template's declared kind."""
    templates = get_family(_family(small)).templates.FUNC_TURNS
    assert {k for k, _ in templates} == {"code", "prose"}
    kind_of_text = dict(zip(small.sources["text"], small.sources["kind"], strict=True))
    seen = set()
    for kind, tpl in templates:
        marks = {"fn": "\x00", "svc": "\x00", "ret": "\x00"}
        pattern = re.compile(re.escape(tpl.format(**marks)).replace("\x00", ".+?"), re.DOTALL)
        hits = [k for t, k in kind_of_text.items() if pattern.search(t)]  # search: chatty prose may wrap a turn
        seen |= {kind} if hits else set()
        assert set(hits) <= {kind}, (tpl, set(hits))
    assert seen == {"code", "prose"}, "the sample rendered no function turn of some kind"


def test_families_share_no_vocabulary_and_give_other_text(small):
    dev, heldout = (get_family(f) for f in ("dev", "heldout"))
    for pool in (
        "SERVICE_ROOTS",
        "TEAMS",
        "PEOPLE",
        "CHANNELS",
        "LIBRARIES",
        "ERROR_MESSAGES",
        "SMALL_TALK",
        "PROSE_FILLER",
        "CODE_FILLER",
        "TOOL_FILLER",
    ):
        assert not set(map(str, getattr(dev.vocab, pool))) & set(map(str, getattr(heldout.vocab, pool))), pool
    for tpl in ("ELLIPSIS_ENTITY", "ELLIPSIS_ATTR", "ERROR_Q", "FUNC_Q", "PIN_Q", "BROAD_Q", "ONCALL", "CHANNEL"):
        assert not set(getattr(dev.templates, tpl)) & set(getattr(heldout.templates, tpl)), tpl
    other = "heldout" if _family(small) == "dev" else "dev"
    texts = set(generate(seed=0, splits=SMALL, family=other).sources["text"])
    assert len(set(small.sources["text"]) & texts) < 0.05 * len(texts)  # only a few shared filler-free lines


def test_the_card_says_what_was_written_against_the_family(small):
    if _family(small) == "dev":  # the dev family keeps the card it was first built with (its build key is pinned)
        assert "template_family" not in small.card and "family" not in small.card["loader"]
    else:
        fam = small.card["template_family"]
        assert fam["written_against"] == get_family(fam["name"]).written_against
        assert small.card["loader"]["family"] == fam["name"] and "kind" in small.card["method_visible_metadata"]
    with pytest.raises(ValueError, match="dataset.params.family='nope'"):
        generate(seed=0, splits=SMALL, family="nope")


def test_every_source_pin_holds():
    """A pin keeps a refactored generator's build key only while its output is the pinned output, byte for byte
    (lethebench/source_pins.py); a pin the source no longer has is stale and fails too."""
    found = [p for p in pins() if p["loader"] == "lethebench"]
    assert found, "no pin: delete this test with the last pin"
    for pin in found:
        stale = f"stale pin {pin['version']}: the source moved"
        assert pin["version"] == source_version("lethebench", pin["params"]), stale
        assert loader_version("lethebench", pin["params"]) == pin["pinned"]
        assert output_sha256(generate(**pin["params"])) == pin["output_sha256"], "the pinned output moved"
    # the held-out family is not pinned: its version is its own sources' hash
    assert loader_version("lethebench", {"family": "heldout"}) not in {p["pinned"] for p in found}


@pytest.mark.parametrize("pin", [p for p in pins() if p["loader"] != "lethebench"], ids=lambda p: p["dataset"])
def test_every_loader_pin_holds_on_its_dataset(pin):
    """A loader edited without changing what it reads (issue 36's type checks) keeps its builds' key while its output
    on the pinned dataset's real files is the pinned output, byte for byte."""
    from experiments.config import load_config, to_dict
    from lethebench.build import load_sources

    ds = to_dict(load_config([f"dataset={pin['dataset']}"]).dataset)
    assert ds["loader"] == pin["loader"] and (ds.get("params") or {}) == pin["params"]
    assert pin["version"] == source_version(pin["loader"], pin["params"]), (
        f"stale pin {pin['version']}: the source moved"
    )
    assert loader_version(pin["loader"], pin["params"]) == pin["pinned"]
    src = load_sources(ds["loader"], [DATA_ROOT / f for f in ds["files"]], ds["params"])
    assert output_sha256(src) == pin["output_sha256"], "the pinned output moved"


def test_the_heldout_dataset_config_generates_the_heldout_family():
    from experiments.config import load_config, to_dict
    from lethebench.build import load_sources

    ds = to_dict(load_config(["dataset=lethebench_heldout"]).dataset)
    assert ds["name"] == "lethebench_heldout" and ds["params"]["family"] == "heldout"
    src = load_sources(ds["loader"], [], {**ds["params"], "splits": {"test": 2, "train": 1, "dev": 1}})
    assert src.card["template_family"]["name"] == "heldout"
    roots = {r for r, _ in get_family("heldout").vocab.SERVICE_ROOTS}
    assert any(str(e).startswith(tuple(roots)) for e in src.sources["entities"].explode().dropna())
