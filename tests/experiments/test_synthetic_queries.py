"""experiments/synthetic_queries.py (regime label_free): which documents are sampled, failures recorded per
document and fatal past their share, the cache, and the synthetic training set; on a small real corpus with a
scripted model (the real model's run is in tests/baselines/test_cross_encoder.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from experiments import synthetic_queries as SQ
from lethe.llm.base import LLMError, LLMResponse
from lethebench.schema import Dataset

SETTINGS = {
    "llm": "unused",
    "prompt": {"name": "synthetic_query", "version": "v1"},
    "docs": 6,
    "min_chars": 20,
    "max_doc_chars": 50,
    "max_tokens": 16,
    "timeout_s": None,
    "dev_share": 0.25,
    "failure_share": 0.4,
    "seed": 0,
}


class ScriptedLLM:
    name = "scripted"

    def __init__(self, replies):
        self.replies, self.calls = list(replies), []

    def chat(self, messages, decoding, timeout_s=None):
        self.calls.append(messages[-1].content)
        r = self.replies[(len(self.calls) - 1) % len(self.replies)]
        if isinstance(r, Exception):
            raise r
        return LLMResponse(r)

    def describe(self):
        return {"name": self.name, "model_sha256": "f" * 64}

    def close(self):
        pass


def _corpus() -> pd.DataFrame:
    rows = []
    for scope, split in (("s1", "train"), ("s2", "dev"), ("s3", "test")):
        for p in range(6):
            text = f"turn {p} of {scope}: the deploy of service alpha-{p} failed on port {8000 + p}" if p != 2 else "ok"
            rows.append(
                {
                    "doc_id": f"{scope}:{p}",
                    "scope_id": scope,
                    "position": p,
                    "text": text,
                    "kind": "turn",
                    "speaker": None,
                    "timestamp": None,
                    "source_id": f"{scope}:{p}",
                    "entities": [],
                    "meta": json.dumps({"split": split}),
                }
            )
    return pd.DataFrame(rows)


def _dataset() -> Dataset:
    q = pd.DataFrame(
        {
            "query_id": ["real1"],
            "scope_id": ["s3"],
            "position": [6],
            "text": ["which port?"],
            "history": [[]],
            "domain": None,
            "category": None,
            "complexity": None,
            "plan_label": None,
            "answer": None,
            "split": ["test"],
            "meta": ["{}"],
        }
    )
    return Dataset("tiny", _corpus(), q, {"real1": {"s3:1": 1}})


def test_documents_come_from_non_test_scopes_with_enough_text():
    docs = SQ.sample_docs(_corpus(), 100, 20, 0)
    assert len(docs) == 10 and set(docs["scope_id"]) == {"s1", "s2"} and "s1:2" not in set(docs["doc_id"])
    assert SQ.sample_docs(_corpus(), 4, 20, 0).equals(SQ.sample_docs(_corpus(), 4, 20, 0))
    with pytest.raises(ValueError, match="no document"):
        SQ.sample_docs(_corpus(), 4, 10_000, 0)


def test_generation_records_each_failure_and_is_cached(tmp_path):
    llm = ScriptedLLM(
        ["Question: Which port did alpha use?", "ok", LLMError("boom")] + ["Why did the deploy fail?"] * 3
    )
    folder = SQ.generate(_dataset(), "bk", SETTINGS, tmp_path, progress=False, llm=llm)
    t = pd.read_parquet(folder / SQ.QUERIES)
    assert t["status"].tolist() == ["ok", "unparsable", "llm_error", "ok", "ok", "ok"]
    assert t.loc[0, "text"] == "Which port did alpha use?" and t["query_id"].str.startswith(SQ.ID_PREFIX).all()
    assert all(len(c) < 400 for c in llm.calls) and "real1" not in " ".join(llm.calls)
    m = SQ.manifest(folder)
    assert m["failed"] == 2 and m["prompt"]["name"] == "synthetic_query" and m["documents"] == 6
    again = ScriptedLLM(["never asked"])
    assert SQ.generate(_dataset(), "bk", SETTINGS, tmp_path, progress=False, llm=again) == folder and not again.calls


def test_too_many_failures_fail_loudly_and_store_nothing(tmp_path):
    llm = ScriptedLLM(["no", "Which port did alpha use?"])
    with pytest.raises(RuntimeError, match=r"3 of 6 generations failed \(50% > train.label_free.failure_share=0.4\)"):
        SQ.generate(_dataset(), "bk", SETTINGS, tmp_path, progress=False, llm=llm)
    assert not list((tmp_path / "synthetic_queries").rglob(SQ.MANIFEST))


def test_the_synthetic_set_has_only_generated_questions_after_their_scope(tmp_path):
    llm = ScriptedLLM(["Which port did alpha use?"])
    folder = SQ.generate(_dataset(), "bk", SETTINGS, tmp_path, progress=False, llm=llm)
    syn = SQ.synthetic_dataset(_dataset(), folder, 0.25, 0)
    assert "real1" not in set(syn.queries["query_id"]) and "real1" not in syn.qrels
    assert sorted(syn.queries["split"].value_counts().to_dict().items()) == [("dev", 2), ("train", 4)]
    assert (syn.queries["position"] == 6).all()  # after each scope's last document (positions 0-5)
    for _q, d in syn.qrels.items():
        assert len(d) == 1 and next(iter(d)).split(":")[0] in {"s1", "s2"}


@pytest.mark.parametrize(
    "text, want",
    [
        ("Question: Which port did alpha use?\nAnd more", "Which port did alpha use?"),
        ('"Why did the deploy of alpha fail?"', "Why did the deploy of alpha fail?"),
        ("```\nq: what broke the build\n```", "what broke the build"),
    ],
)
def test_parse_question_takes_the_first_line_without_prefix_or_quotes(text, want):
    from lethe.llm.parsing import parse_question

    assert parse_question(text) == want


@pytest.mark.parametrize("text, reason", [("", "empty"), ("Question: alpha?", "too_short"), ("x " * 200, "too_long")])
def test_parse_question_rejects(text, reason):
    from lethe.llm.parsing import ParseError, parse_question

    with pytest.raises(ParseError) as e:
        parse_question(text)
    assert e.value.reason == reason
