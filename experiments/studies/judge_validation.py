"""The LLM judges validated on answer pairs whose right verdict is known from the data (issue 35, item 5).

``python -m experiments.studies.judge_validation dataset_folder=<processed LoCoMo or TechQA folder> [key=value ...]``
(settings: ``conf/judge_validation.yaml``). The pairs are :func:`analysis.judge_pairs.build_pairs` over the dataset's
questions with a gold answer: the gold answer against another question's gold answer, a copy with one number, date
or name changed, and a truncation. They are split dev/test by group (the scope, or where one scope holds the whole
collection, the question's first gold source document); only ``split`` (test) is judged and reported, at most
``per_perturbation`` pairs of each perturbation (a seeded sample). Nothing about a judge (prompt, decoding,
threshold) is chosen on these pairs: the judges run with the settings their studies and runs use.

**Pairwise judge** (``lethe.stages.pairwise_judge.PairwiseJudge``, seed 003's judge) on each pair, in both orders.
The gold answer is the better one on correctness by construction, so the verdict of ``criterion`` (default "Overall
Winner") is known. Per (judge, perturbation) and over all pairs: correct (the gold answer wins in both orders),
wrong (the other wins in both), ties (the orders disagree), unjudged (a call failed or did not parse); accuracy =
correct / judged and the tie rate, each with a Wilson interval; the sign test of correct against wrong; position
bias = the share of first-position verdicts over both orders (0.5 = none), with its Wilson interval and the sign
test against one half.

**Hallucination judge** (``lethe.stages.generation.HallucinationJudge``, iteration 4's) on items made from the same
pairs: the gold answer against the question's gold passages (its relevant docs' text, highest grade first, at
most ``context_docs``) is labelled supported; the other answer against the same passages is labelled unsupported
(another question's answer, a changed number, date or name). Truncations are left out (a true fragment is neither).
Per (judge, label side and perturbation) and over all items: judged, accuracy with a Wilson interval; over all
items also Cohen's kappa (``experiments.studies.judge_agreement.agreement_scores``).

Writes judge_validation.json (rows, pair counts), judge_validation.md, judgments.jsonl (every call) and
manifest.json to ``out_dir``.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from omegaconf import DictConfig

from analysis.formatting import fmt, fmt_p, markdown_table
from analysis.judge_pairs import build_pairs
from analysis.stats import proportion_cells, sign_test
from experiments.studies.common import command_line, manifest, study_llm
from experiments.studies.judge_agreement import agreement_scores
from lethe.core.arguments import check_arguments
from lethe.core.paths import Paths
from lethe.stages.generation import HallucinationJudge
from lethe.stages.pairwise_judge import CRITERIA, PairJudgment, PairwiseJudge, position_bias
from lethebench.schema import Dataset, read_dataset
from lethebench.studies import StudyFolder

ALL = "all"
NOT_A_CLAIM = ("truncation",)  # perturbations whose text is neither supported nor unsupported as a whole


def groups_of(ds: Dataset) -> dict[str, str] | None:
    """query_id -> the pairs' split unit: None (the scope) when the dataset has several scopes, else each question's
    first gold source document (a TechQA technote), so that no document's questions fall in both splits."""
    if ds.queries["scope_id"].nunique() > 1:
        return None
    source_of = dict(zip(ds.corpus["doc_id"], ds.corpus["source_id"], strict=True))
    return {q: min((source_of.get(d, d) for d in rel), default=q) for q, rel in ds.qrels.items()}


def select_pairs(ds: Dataset, split: str, per_perturbation: int | None, seed: int) -> pd.DataFrame:
    """The judged pairs: ``split``'s pairs of ``ds`` (questions with a gold answer), at most ``per_perturbation`` of
    each perturbation (seeded sample, kept in pair order)."""
    q = ds.queries[ds.queries["query_id"].isin(ds.qrels)]
    pairs = build_pairs(q, ds.name, seed=seed, groups=groups_of(ds))
    pairs = pairs[pairs["split"] == split]
    if per_perturbation is not None:
        keep: list[Any] = []
        for _, g in pairs.groupby("perturbation", sort=True):
            keep += list(g.sample(n=min(len(g), int(per_perturbation)), random_state=seed).index)
        pairs = pairs.loc[sorted(keep)]
    return pairs.reset_index(drop=True)


def gold_contexts(ds: Dataset, query_id: str, context_docs: int) -> list[str]:
    """The texts of ``query_id``'s relevant docs, highest grade first (then doc id), at most ``context_docs``."""
    text = dict(zip(ds.corpus["doc_id"], ds.corpus["text"], strict=True))
    rel = sorted((ds.qrels.get(query_id) or {}).items(), key=lambda x: (-x[1], x[0]))
    return [text[d] for d, _ in rel if d in text][:context_docs]


def pairwise_rows(
    model: str, pairs: pd.DataFrame, judgments: Sequence[PairJudgment], criterion: str, confidence: float = 0.95
) -> list[dict[str, Any]]:
    """Per perturbation and over all pairs (module docstring): the pairwise judge against the known winner."""
    if criterion not in CRITERIA:
        raise ValueError(f"criterion={criterion!r}: not one of {list(CRITERIA)}")
    outcome = []
    for better, j in zip(pairs["better"], judgments, strict=True):
        w = j.winners.get(criterion)  # "A" = answer_1, "B" = answer_2
        outcome.append(
            None
            if w is None
            else "tie"
            if w == "tie"
            else "correct"
            if {"A": "1", "B": "2"}[w] == str(better)
            else "wrong"
        )
    frame = pairs.assign(outcome=outcome, judgment=list(judgments))
    rows = []
    for pert, g in [*frame.groupby("perturbation", sort=True), (ALL, frame)]:
        got = list(g["outcome"])
        correct, wrong, tie = got.count("correct"), got.count("wrong"), got.count("tie")
        judged = correct + wrong + tie
        bias = position_bias(g["judgment"], [criterion])
        first, total = bias["first_position"], bias["verdicts"]
        rows.append(
            {
                "judge": "pairwise",
                "model": model,
                "perturbation": pert,
                "criterion": criterion,
                "n": len(got),
                "judged": judged,
                "correct": correct,
                "wrong": wrong,
                "ties": tie,
                "unjudged": len(got) - judged,
                **proportion_cells("accuracy", correct, judged, confidence),
                **proportion_cells("tie_rate", tie, judged, confidence),
                "sign_test_p": sign_test(correct, wrong),
                "verdicts": total,
                **proportion_cells("first_position", first, total, confidence),
                "position_p": sign_test(first, total - first),
            }
        )
    return rows


def hallucination_items(ds: Dataset, pairs: pd.DataFrame, context_docs: int) -> list[dict[str, Any]]:
    """Two items per pair that is not a truncation: the gold answer (supported) and the other (unsupported), each
    against the question's gold passages; a question's gold item appears once."""
    items, seen = [], set()
    for p in pairs.itertuples(index=False):
        if p.perturbation in NOT_A_CLAIM:
            continue
        ctx = gold_contexts(ds, p.query_id, context_docs)
        if p.query_id not in seen:
            seen.add(p.query_id)
            items.append(
                {
                    "id": f"{p.query_id}:gold",
                    "query": p.question,
                    "contexts": ctx,
                    "answer": p.gold,
                    "label": "supported",
                    "perturbation": "gold",
                }
            )
        items.append(
            {
                "id": f"{p.pair_id}",
                "query": p.question,
                "contexts": ctx,
                "answer": p.other,
                "label": "unsupported",
                "perturbation": p.perturbation,
            }
        )
    return items


def hallucination_rows(
    model: str, items: Sequence[Mapping[str, Any]], preds: Sequence[str | None], confidence: float = 0.95
) -> list[dict[str, Any]]:
    """Per item group (gold, each perturbation) and over all items: the hallucination judge against the labels
    (``experiments.studies.judge_agreement.agreement_scores``)."""
    groups: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(str(it["perturbation"]), []).append(i)
    rows = []
    for pert, idx in [*sorted(groups.items()), (ALL, list(range(len(items))))]:
        labels = [items[i]["label"] for i in idx]
        sc = agreement_scores(labels, [preds[i] for i in idx])
        correct = sum(sc["confusion"][f"gold_{c}"][f"pred_{c}"] for c in ("supported", "unsupported"))
        row = {
            "judge": "hallucination",
            "model": model,
            "perturbation": pert,
            "label": "/".join(sorted(set(labels))),
            "n": sc["n"],
            "judged": sc["judged"],
            "correct": correct,
            "wrong": sc["judged"] - correct,
            "unjudged": sc["unjudged"],
            **proportion_cells("accuracy", correct, sc["judged"], confidence),
        }
        if pert == ALL:
            row["cohen_kappa"] = sc["cohen_kappa"]
        rows.append(row)
    return rows


def to_markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """The two tables (pairwise, hallucination) with their counts and intervals."""

    def ci(r: Mapping[str, Any], k: str) -> str:
        return f"{fmt(r.get(k))} [{fmt(r.get(k + '_low'))}, {fmt(r.get(k + '_high'))}]"

    out = [
        f"Judge validation on {meta['dataset']} ({meta['split']} pairs; build {meta['build_key']}): "
        f"{meta['pairs']} pairs ({', '.join(f'{k} {v}' for k, v in meta['pairs_by_perturbation'].items())}).",
        "",
    ]
    pw = [r for r in rows if r["judge"] == "pairwise"]
    if pw:
        out += markdown_table(
            [
                "model",
                "perturbation",
                "n",
                "correct",
                "wrong",
                "ties",
                "unjudged",
                "accuracy [95% CI]",
                "tie rate",
                "sign p",
                "first position [95% CI]",
                "position p",
            ],
            (
                [
                    r["model"],
                    r["perturbation"],
                    r["n"],
                    r["correct"],
                    r["wrong"],
                    r["ties"],
                    r["unjudged"],
                    ci(r, "accuracy"),
                    fmt(r["tie_rate"]),
                    fmt_p(r["sign_test_p"]),
                    ci(r, "first_position"),
                    fmt_p(r["position_p"]),
                ]
                for r in pw
            ),
        )
        out.append("")
    hj = [r for r in rows if r["judge"] == "hallucination"]
    if hj:
        out += markdown_table(
            ["model", "items", "label", "n", "judged", "correct", "accuracy [95% CI]", "kappa"],
            (
                [
                    r["model"],
                    r["perturbation"],
                    r["label"],
                    r["n"],
                    r["judged"],
                    r["correct"],
                    ci(r, "accuracy"),
                    fmt(r.get("cohen_kappa")),
                ]
                for r in hj
            ),
        )
        out.append("")
    return "\n".join(out)


def _judge_each(
    key: str, cfg: DictConfig, described: dict[str, Any], make: Callable[[Any], Any], args: Sequence[tuple[Any, ...]]
) -> list[Any]:
    """``make(llm).judge(*a)`` for each ``a`` of ``args`` with the LLM of ``key`` ("<judge>/<conf/llm name>"), its
    description stored in ``described[key]``; the LLM is closed afterwards."""
    llm = study_llm(key.split("/", 1)[1], cfg)
    try:
        judge = make(llm)
        described[key] = judge.describe()
        t0 = time.perf_counter()
        out = [judge.judge(*a) for a in args]
    finally:
        llm.close()
    print(f"judge_validation: {key}: {len(out)} judgments in {time.perf_counter() - t0:.0f} s")
    return out


def study(cfg: DictConfig, command: str | None = None) -> dict[str, Any]:
    """Run every judge of ``cfg`` on the pairs, write the tables and manifest to ``cfg.out_dir``; return the doc."""
    paths = Paths.of(cfg)
    started = dt.datetime.now(dt.UTC)
    if not cfg.dataset_folder:
        raise SystemExit("set dataset_folder=<a processed dataset folder with gold answers (LoCoMo, TechQA)>")
    folder = paths.resolve(cfg.dataset_folder)
    ds = read_dataset(Path(folder))
    pairs = select_pairs(ds, str(cfg.split), cfg.per_perturbation, int(cfg.seed))
    if pairs.empty:
        raise SystemExit(f"{folder}: no {cfg.split} pair (no question with a gold answer?)")
    conf = float(cfg.confidence)
    rows: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    described: dict[str, Any] = {}
    for name in cfg.pairwise.judges or []:
        got = _judge_each(
            f"pairwise/{name}",
            cfg,
            described,
            lambda llm: PairwiseJudge(
                llm,
                str(cfg.pairwise.prompt_version),
                int(cfg.pairwise.max_answer_chars),
                int(cfg.pairwise.max_tokens),
                cfg.timeout_s,
            ),
            [(p.question, p.answer_1, p.answer_2) for p in pairs.itertuples(index=False)],
        )
        rows += pairwise_rows(str(name), pairs, got, str(cfg.pairwise.criterion), conf)
        calls += [
            {
                "judge": "pairwise",
                "model": str(name),
                "pair_id": p,
                "winners": j.winners,
                "orders": [
                    {"first": o.first, "status": o.status, "raw_text": o.raw_text, "llm_ms": o.llm_ms} for o in j.orders
                ],
            }
            for p, j in zip(pairs["pair_id"], got, strict=True)
        ]
    items = hallucination_items(ds, pairs, int(cfg.hallucination.context_docs))
    for name in cfg.hallucination.judges or []:
        res = _judge_each(
            f"hallucination/{name}",
            cfg,
            described,
            lambda llm: HallucinationJudge(
                llm,
                str(cfg.hallucination.prompt_version),
                int(cfg.hallucination.max_doc_chars),
                float(cfg.hallucination.threshold),
                cfg.timeout_s,
            ),
            [(it["answer"], list(it["contexts"]), it["query"]) for it in items],
        )
        preds = [None if r.supported is None else "supported" if r.supported else "unsupported" for r in res]
        rows += hallucination_rows(str(name), items, preds, conf)
        calls += [
            {
                "judge": "hallucination",
                "model": str(name),
                "item_id": it["id"],
                "label": it["label"],
                "pred": p,
                "status": r.status,
                "p_supported": r.p_supported,
                "raw_text": r.raw_text,
            }
            for it, p, r in zip(items, preds, res, strict=True)
        ]
    meta = {
        "dataset": ds.card.get("name") or ds.name,
        "build_key": (ds.card.get("build") or {}).get("key"),
        "split": str(cfg.split),
        "pairs": len(pairs),
        "pairs_by_perturbation": pairs["perturbation"].value_counts().sort_index().to_dict(),
        "hallucination_items": len(items),
        "judges": described,
    }
    doc = {"meta": meta, "rows": rows}
    StudyFolder(paths.resolve(cfg.out_dir)).write(
        {
            "judgments.jsonl": "".join(json.dumps(c, default=str) + "\n" for c in calls),
            "judge_validation.json": json.dumps(doc, indent=2, default=str) + "\n",
            "judge_validation.md": to_markdown(rows, meta),
        },
        manifest(cfg, command, started, dataset_build_key=meta["build_key"]),
    )
    return doc


@hydra.main(config_path="../../conf", config_name="judge_validation", version_base="1.3")
def main(cfg: DictConfig) -> None:
    study(cfg, command_line("experiments.studies.judge_validation"))


if __name__ == "__main__":
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
