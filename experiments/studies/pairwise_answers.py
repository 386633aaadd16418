"""Pairwise LLM judgments of the answers two runs wrote for the same questions (seed 003), and of hand-labelled pairs.

``python -m experiments.studies.pairwise_answers`` (settings: conf/pairwise_answers.yaml). For each pair ``[name, a, b]`` of
``pairs`` (``a`` and ``b`` name entries of ``run_folders``, results folders of runs made with answers on), the
questions both runs answered (answer status ok on both sides, abstentions included) are judged by each judge model
of ``judges`` with ``lethe.stages.pairwise_judge.PairwiseJudge`` (both orders; a criterion's winner counts only when
both orders agree, else tie; failures unjudged). Per (judge, pair, criterion): counts of A wins, B wins, ties and
unjudged, and B's win rate, A's win rate and the tie rate among judged pairs, each with a 95% Wilson interval
(``analysis.stats.proportion_ci``). Beside them, per judge: its position bias (share of first-position verdicts,
over both orders of every pair) and its agreement with the hand-labelled pairs of ``labels_file``: per labelled
criterion, the judge's winner under the same rule against the label (agree / disagree / tie / unjudged; accuracy
= agree / (agree + disagree + tie)).

Writes pairwise_answers.json (rows and agreement), pairwise_answers.md, judgments.jsonl (every call's reply) and
manifest.json to ``out_dir``. A judge that leaves more than ``max_unjudged_share`` of the per-criterion outcomes of
any pair set (the labelled items or one pair of runs) unjudged fails the study after writing judgments.jsonl, so its
replies can be read; no tables are written (the replies are cached: a rerun replays them).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from omegaconf import DictConfig

from analysis.formatting import fmt_p, markdown_table
from analysis.stats import proportion_cells, sign_test
from experiments.studies.common import command_line, manifest, study_llm
from lethe.core.arguments import check_arguments
from lethe.core.hashing import sha256_file
from lethe.core.paths import Paths
from lethe.stages.pairwise_judge import CRITERIA, PairJudgment, PairwiseJudge, position_bias
from lethebench.runs import RunFolder
from lethebench.schema import read_table
from lethebench.studies import StudyFolder

OUTCOMES = ("A", "B", "tie", None)


def win_rates(winners: Sequence[Mapping[str, str | None]], confidence: float = 0.95) -> list[dict[str, Any]]:
    """Per criterion: pairs, judged, A/B wins, ties, unjudged, the two-sided sign test of B's wins against A's
    (``analysis.stats.sign_test``, ties left out), and B's win rate, A's win rate and the tie rate among judged pairs
    with Wilson intervals (``analysis.stats.proportion_ci``)."""
    rows = []
    for c in CRITERIA:
        got = [w.get(c) for w in winners]
        if any(x not in OUTCOMES for x in got):
            raise ValueError(f"unknown outcome for {c}: {sorted(set(map(str, got)))}; known: A, B, tie, None")
        a, b, tie = got.count("A"), got.count("B"), got.count("tie")
        judged = a + b + tie
        row: dict[str, Any] = {
            "criterion": c,
            "pairs": len(got),
            "judged": judged,
            "a_wins": a,
            "b_wins": b,
            "ties": tie,
            "unjudged": len(got) - judged,
            "sign_test_p": sign_test(b, a),
        }
        for key, k in (("b_win_rate", b), ("a_win_rate", a), ("tie_rate", tie)):
            row.update(proportion_cells(key, k, judged, confidence))
        rows.append(row)
    return rows


def agreement(judgments: Sequence[PairJudgment], items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The judge's winners on hand-labelled items against their labels (module docstring). Each item's ``label``
    maps criteria to "1" or "2" (the better answer's position in the file); criteria it leaves out are not scored."""
    counts = {"agree": 0, "disagree": 0, "tie": 0, "unjudged": 0}
    for j, it in zip(judgments, items, strict=True):
        for c, gold in it["label"].items():
            want = {"1": "A", "2": "B"}[str(gold)]
            got = j.winners.get(c)
            counts[
                "unjudged" if got is None else "tie" if got == "tie" else "agree" if got == want else "disagree"
            ] += 1
    scored = counts["agree"] + counts["disagree"] + counts["tie"]
    return {**counts, "labelled": sum(counts.values()), "accuracy": counts["agree"] / scored if scored else None}


def unjudged_shares(sets: Mapping[str, Sequence[PairJudgment]]) -> dict[str, float]:
    """Per pair set: the share of its per-criterion outcomes left unjudged (0.0 for an empty set)."""
    out = {}
    for name, got in sets.items():
        cells = [w for j in got for w in j.winners.values()]
        out[name] = sum(w is None for w in cells) / len(cells) if cells else 0.0
    return out


def check_unjudged(judge: str, shares: Mapping[str, float], max_share: float) -> None:
    """Raise SystemExit naming every pair set whose unjudged share exceeds ``max_share``."""
    over = {k: v for k, v in shares.items() if v > max_share}
    if over:
        listed = ", ".join(f"{k} {100 * v:.0f}%" for k, v in over.items())
        raise SystemExit(
            f"judge {judge}: unjudged share above max_unjudged_share={max_share:g} for {listed}; the "
            "replies are in judgments.jsonl (failed calls, unparsed replies or criteria named by neither "
            "answer)"
        )


def load_labels(path: Path) -> list[dict[str, Any]]:
    """The hand-labelled pairs: JSONL rows {id, query, answer1, answer2, label: {criterion: "1"|"2"}, note}."""
    items = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        it = json.loads(line)
        missing = {"id", "query", "answer1", "answer2", "label"} - set(it)
        bad = set(it.get("label", {})) - set(CRITERIA) or {
            v for v in it.get("label", {}).values() if str(v) not in "12"
        }
        if missing or bad:
            raise ValueError(
                f"{path}:{i}: missing {sorted(missing)} or bad labels {sorted(map(str, bad))} "
                f"(criteria {CRITERIA}, values '1' or '2')"
            )
        items.append(it)
    return items


def answered_pairs(folder_a: Path, folder_b: Path) -> pd.DataFrame:
    """query_id, query text, answer_a, answer_b for the questions both runs answered (status ok)."""
    pa, pb = RunFolder(folder_a), RunFolder(folder_b)
    for f in (pa, pb):
        if not f.is_done:
            raise FileNotFoundError(
                f"{f.path}: not a finished run (no DONE); run it first (its tier's runs come before its studies)"
            )
    qa, qb = pa.per_query, pb.per_query
    for f, q in ((pa, qa), (pb, qb)):
        if "answer_status" not in q:
            raise ValueError(f"{f.path} has no answers: make the run with answers.enabled=true")
    ok = lambda q: q[q["answer_status"] == "ok"].set_index("query_id")["answer"]  # noqa: E731
    both = pd.concat({"answer_a": ok(qa), "answer_b": ok(qb)}, axis=1, join="inner").sort_index()
    queries = read_table(pa.dataset_folder, "queries").set_index("query_id")
    both.insert(0, "query", queries.loc[both.index, "text"])
    return both.reset_index()


def _record(judge: str, pair: str, qid: str, j: PairJudgment) -> dict[str, Any]:
    return {
        "judge": judge,
        "pair": pair,
        "query_id": qid,
        "winners": j.winners,
        "orders": [
            {
                "first": o.first,
                "status": o.status,
                "verdicts": o.verdicts,
                "llm_ms": round(o.llm_ms, 1),
                "cached": o.cached,
                "raw_text": o.raw_text,
                "error": o.error,
            }
            for o in j.orders
        ],
    }


def study(cfg: DictConfig, command: str | None = None) -> dict[str, Any]:
    """Judge every pair and the labelled items with each judge; write the tables and manifest to ``cfg.out_dir``."""
    paths = Paths.of(cfg)
    started = dt.datetime.now(dt.UTC)
    folders = {str(k): paths.resolve(v) for k, v in (cfg.run_folders or {}).items()}
    pairs = [tuple(str(x) for x in p) for p in cfg.pairs]
    for p in pairs:
        if len(p) != 3 or p[1] not in folders or p[2] not in folders:
            raise SystemExit(
                f"pairs entry {list(p)}: needs [name, a, b] with a and b in run_folders ({sorted(folders)})"
            )
    if not cfg.judges:
        raise SystemExit("judges is empty: name at least one conf/llm/<name>.yaml, e.g. judges=[qwen_coder_1_5b]")
    max_unjudged = float(cfg.max_unjudged_share)
    if not 0.0 <= max_unjudged <= 1.0:
        raise SystemExit(f"max_unjudged_share={cfg.max_unjudged_share!r}: must be a number in [0, 1]")
    labels_path = paths.resolve(cfg.labels_file)
    items = load_labels(labels_path)
    data = {name: answered_pairs(folders[a], folders[b]) for name, a, b in pairs}
    folder = StudyFolder(paths.resolve(cfg.out_dir))
    rows, judges_doc, records = [], [], []
    for jname in [str(x) for x in cfg.judges]:
        llm = study_llm(jname, cfg)
        try:
            judge = PairwiseJudge(
                llm,
                prompt_version=str(cfg.prompt_version),
                max_answer_chars=int(cfg.max_answer_chars),
                max_tokens=int(cfg.max_tokens),
                timeout_s=cfg.timeout_s,
                constrained=bool(cfg.constrained),
            )
            t0 = time.perf_counter()
            labelled = [judge.judge(it["query"], it["answer1"], it["answer2"]) for it in items]
            label_s = time.perf_counter() - t0
            records += [_record(jname, "labels", it["id"], j) for it, j in zip(items, labelled, strict=True)]
            every: list[PairJudgment] = list(labelled)
            sets: dict[str, list[PairJudgment]] = {"labels": labelled}
            for name, a, b in pairs:
                df = data[name]
                t1 = time.perf_counter()
                got = [judge.judge(r.query, r.answer_a, r.answer_b) for r in df.itertuples()]
                secs = time.perf_counter() - t1
                every += got
                sets[name] = got
                records += [_record(jname, name, q, j) for q, j in zip(df["query_id"], got, strict=True)]
                for row in win_rates([j.winners for j in got]):
                    rows.append(
                        {
                            "judge": jname,
                            "pair": name,
                            "a": a,
                            "b": b,
                            **row,
                            "seconds_per_pair": secs / len(got) if got else None,
                        }
                    )
                print(f"{jname} {name}: {len(got)} pairs in {secs:.0f} s", flush=True)
            judges_doc.append(
                {
                    "judge": jname,
                    "describe": judge.describe(),
                    "llm": llm.describe(),
                    "agreement": agreement(labelled, items),
                    "labels_seconds": round(label_s, 1),
                    "unjudged_share": unjudged_shares(sets),
                    "position_bias": position_bias(every),
                    "position_bias_labels": position_bias(labelled),
                }
            )
        finally:
            llm.close()
    replies = {"judgments.jsonl": "".join(json.dumps(r, default=str) + "\n" for r in records)}
    try:
        for j in judges_doc:
            check_unjudged(j["judge"], j["unjudged_share"], max_unjudged)
    except SystemExit:
        folder.write_failed(replies)  # the replies alone, to inspect; an earlier run's tables must not sit beside them
        raise
    doc = {
        "pairs": [
            {
                "name": n,
                "a": a,
                "b": b,
                "folder_a": str(folders[a]),
                "folder_b": str(folders[b]),
                "questions": int(len(data[n])),
            }
            for n, a, b in pairs
        ],
        "labels_file": str(cfg.labels_file),
        "labels_sha256": sha256_file(labels_path),
        "n_labelled_items": len(items),
        "judges": judges_doc,
        "rows": rows,
    }
    folder.write(
        {
            **replies,
            "pairwise_answers.json": json.dumps(doc, indent=2, default=str) + "\n",
            "pairwise_answers.md": to_markdown(doc),
        },
        manifest(cfg, command, started, run_folders={k: str(v) for k, v in folders.items()}),
    )
    return doc


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.0f}%"


def to_markdown(doc: Mapping[str, Any]) -> str:
    """Win rates per (judge, pair, criterion) with intervals and ties, then each judge's agreement and position bias."""
    lines = markdown_table(
        [
            "judge",
            "pair (A vs B)",
            "criterion",
            "judged",
            "B wins",
            "A wins",
            "ties",
            "unjudged",
            "sign test p",
            "B win rate [95% CI]",
            "A win rate [95% CI]",
        ],
        (
            [
                r["judge"],
                f"{r['pair']} ({r['a']} vs {r['b']})",
                r["criterion"],
                f"{r['judged']}/{r['pairs']}",
                r["b_wins"],
                r["a_wins"],
                r["ties"],
                r["unjudged"],
                fmt_p(r["sign_test_p"]),
                f"{_pct(r['b_win_rate'])} [{_pct(r['b_win_rate_low'])}, {_pct(r['b_win_rate_high'])}]",
                f"{_pct(r['a_win_rate'])} [{_pct(r['a_win_rate_low'])}, {_pct(r['a_win_rate_high'])}]",
            ]
            for r in doc["rows"]
        ),
    )
    lines += [
        "",
        *markdown_table(
            [
                "judge",
                "agreement with hand labels (agree / disagree / tie / unjudged)",
                "accuracy",
                "position bias: first-position share (verdicts)",
            ],
            (
                [
                    j["judge"],
                    f"{j['agreement']['agree']} / {j['agreement']['disagree']} / {j['agreement']['tie']} / "
                    f"{j['agreement']['unjudged']} of {j['agreement']['labelled']}",
                    _pct(j["agreement"]["accuracy"]),
                    f"{_pct(j['position_bias']['share_first'])} ({j['position_bias']['verdicts']})",
                ]
                for j in doc["judges"]
            ),
        ),
    ]
    lines += [
        "",
        "Each pair is judged twice with the answers swapped; a criterion's winner counts only when both orders "
        "name the same answer, otherwise it is a tie; a failed call or unparsed reply leaves it unjudged (never "
        "guessed). Sign test: the two-sided exact binomial p of B's wins against A's, ties left out (uncorrected). "
        "Win rates are shares of the judged pairs with Wilson intervals. Position bias: the share of all "
        "parsed verdicts that named the answer shown first (0.5 = none). Rules: experiments/studies/pairwise_answers.py.",
    ]
    return "\n".join(lines) + "\n"


@hydra.main(config_path="../../conf", config_name="pairwise_answers", version_base="1.3")
def main(cfg: DictConfig) -> None:
    study(cfg, command_line("experiments.studies.pairwise_answers"))


if __name__ == "__main__":  # pragma: no cover
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
