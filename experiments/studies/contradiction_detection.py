"""How well the contradiction detectors (``rules``, ``llm``; lethe/stages/contradiction/detectors.py) find labelled conflicts.

- :func:`detection_scores`: precision, recall and F1 over *sets* of (stale_doc_id, current_doc_id)
  pairs (duplicates collapse). tp = |pred & gold|, fp = |pred - gold|, fn = |gold - pred|;
  precision = tp / (tp + fp) (0.0 when nothing is predicted), recall = tp / (tp + fn) (0.0 when
  there is no gold), F1 = harmonic mean (0.0 when both are 0).
- :func:`evaluate_detector`: runs a detector once per scope on *every* doc of the scope (not the
  prefix a query sees), predicts the (stale, current) pairs of all its conflicts, and scores them
  against the deduplicated pairs of ``contradictions.parquet`` whose stale doc lies in the evaluated
  scopes. **Precision is a lower bound**: LetheBench labels only the updates its ``updated_fact``
  queries ask about, so a correct detection of an unlabelled update counts as a false positive.
  Scores are reported overall and per split (the scope-id prefix before the first ``-``, e.g.
  ``dev``/``train``/``test``), with the detector's counters summed over scopes (pairs considered,
  judged, parse failures, timeouts, errors, not judged, cached responses, LLM time) and the wall
  time. For the ``llm`` backend the per-pair log also yields :func:`threshold_sweep` (the same
  judgments scored at other p(yes) thresholds, no extra calls) and the mean p(yes) of labelled vs
  other considered pairs.
- :func:`evaluate_rules_on_dataset`: ``rules`` on all scopes (kept for existing callers).
- :func:`sample_scopes`: a seeded sample of scope ids (optionally of one split), sorted.
- :func:`blocking_stats`: recall of the ``llm`` backend's candidate pairs on the labelled pairs
  (uncapped and capped at ``max_pairs``) and candidates per scope; no model involved.
- :func:`tables`: ``contradiction_detection.md`` and ``.json`` (one row per backend).

CLI (settings: ``conf/contradiction_detection.yaml``; writes ``contradiction_detection.{md,json}`` and
``manifest.json`` to ``out_dir``; :func:`study` does the work from a composed config)::

    python -m experiments.studies.contradiction_detection backends=[rules,llm] llms=[qwen_coder_0_5b] \\
        scopes=20 split=test seed=0 [dataset_folder=data/processed/lethebench/<key>] [max_pairs=30]

``rules`` is evaluated on the sample and (unless ``rules_all=false``) on all scopes; each of ``llms``
(``conf/llm/<name>.yaml``) is one ``llm`` row on the sample.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from analysis.formatting import markdown_table
from experiments.studies.common import command_line, manifest, study_llm
from lethe.core.arguments import check_arguments
from lethe.core.paths import Paths
from lethe.core.protocol import Doc
from lethe.stages.contradiction.detectors import RulesDetector, candidate_pairs
from lethebench.schema import read_dataset
from lethebench.studies import StudyFolder

SWEEP_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
COUNTERS = ("candidates", "pairs_considered", "judged", "parse_failures", "timeouts", "errors", "not_judged", "cached")
PRECISION_NOTE = (
    "LetheBench labels only the updates its updated_fact queries ask about, so a correct detection of an "
    "unlabelled update counts as a false positive: precision is a lower bound."
)


def detection_scores(predicted: Iterable[tuple[str, str]], gold: Iterable[tuple[str, str]]) -> dict[str, float | int]:
    """Set-based precision/recall/F1 of predicted vs gold (stale_doc_id, current_doc_id) pairs."""
    p, g = set(map(tuple, predicted)), set(map(tuple, gold))
    tp, fp, fn = len(p & g), len(p - g), len(g - p)
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"precision": prec, "recall": rec, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


def _split_of(scope_id: str) -> str:
    return scope_id.split("-", 1)[0]


def load_scopes(folder: Path) -> tuple[dict[str, list[Doc]], set[tuple[str, str]], str | None]:
    """({scope_id: docs sorted by position}, deduplicated gold pairs, build key) of a processed folder."""
    ds = read_dataset(Path(folder))
    gold: set[tuple[str, str]] = set()
    if ds.contradictions is not None:
        gold = set(zip(ds.contradictions["stale_doc_id"], ds.contradictions["current_doc_id"], strict=True))
    scopes: dict[str, list[Doc]] = {}
    corpus = ds.corpus.sort_values(["scope_id", "position", "doc_id"], kind="stable")
    for sid, grp in corpus.groupby("scope_id", sort=True):
        scopes[str(sid)] = [
            Doc(
                r.doc_id,
                r.text,
                int(r.position),
                r.kind,
                r.speaker if isinstance(r.speaker, str) else None,
                r.timestamp if isinstance(r.timestamp, str) else None,
            )
            for r in grp.itertuples(index=False)
        ]
    return scopes, gold, (ds.card.get("build") or {}).get("key")


def sample_scopes(scope_ids: Iterable[str], n: int | None = None, split: str | None = None, seed: int = 0) -> list[str]:
    """Sorted ids: those of ``split`` (all when None), then ``n`` of them drawn with ``random.Random(seed)``
    (all when None). ``n`` larger than the pool raises ValueError."""
    pool = sorted(s for s in set(scope_ids) if split is None or _split_of(s) == split)
    if not pool:
        raise ValueError(f"no scopes of split {split!r}")
    if n is None:
        return pool
    if n <= 0 or n > len(pool):
        raise ValueError(f"cannot sample {n} of {len(pool)} scopes (split {split!r})")
    return sorted(random.Random(seed).sample(pool, n))


def _gold_of(gold: set[tuple[str, str]], doc_scope: dict[str, str], chosen: set[str]) -> set[tuple[str, str]]:
    return {g for g in gold if doc_scope.get(g[0]) in chosen}


def threshold_sweep(
    log: Sequence[dict[str, Any]], gold: Iterable[tuple[str, str]], thresholds: Sequence[float] = SWEEP_THRESHOLDS
) -> list[dict[str, Any]]:
    """Scores of the logged judgments if a conflict were declared for every ``yes`` with p(yes) >= t."""
    yes = [e for e in log if e["decision"] in ("conflict", "yes_below_threshold") and e["p_yes"] is not None]
    out = []
    for t in thresholds:
        pred = {(e["stale"], e["current"]) for e in yes if e["p_yes"] >= t}
        out.append({"threshold": t, **detection_scores(pred, gold), "n_predicted": len(pred)})
    return out


def _auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    if not pos or not neg:
        return None
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


def evaluate_detector(
    detector: Any,
    folder: Path | None = None,
    scope_ids: Sequence[str] | None = None,
    *,
    loaded: tuple[dict[str, list[Doc]], set[tuple[str, str]], str | None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Scores and counters of ``detector`` (``.detect(docs) -> DetectionResult``) on ``scope_ids``
    (all scopes when None) of a processed LetheBench folder (or ``loaded`` = :func:`load_scopes`' output)."""
    scopes, gold_all, build_key = loaded if loaded is not None else load_scopes(Path(folder))
    chosen = sorted(scopes) if scope_ids is None else list(scope_ids)
    unknown = [s for s in chosen if s not in scopes]
    if unknown:
        raise ValueError(f"unknown scope ids {unknown[:5]}")
    doc_scope = {d.doc_id: sid for sid, docs in scopes.items() for d in docs}
    gold = _gold_of(gold_all, doc_scope, set(chosen))
    pred: set[tuple[str, str]] = set()
    counters = dict.fromkeys(COUNTERS, 0)
    llm_ms, budget_exhausted, log = 0.0, 0, []
    t0 = time.perf_counter()
    for k, sid in enumerate(chosen, 1):
        res = detector.detect(scopes[sid])
        pred.update((c.stale_doc_id, c.current_doc_id) for c in res.conflicts)
        for name in COUNTERS:
            counters[name] += int(getattr(res, name))
        llm_ms += res.llm_ms
        budget_exhausted += bool(res.budget_exhausted)
        log.extend(res.log)
        if progress is not None:
            progress(
                f"[{k}/{len(chosen)}] {sid}: {len(res.conflicts)} conflicts, {res.judged}/{res.pairs_considered} "
                f"judged, {res.llm_ms / 1000:.1f}s LLM, {time.perf_counter() - t0:.0f}s so far"
            )
    wall_s = time.perf_counter() - t0
    out: dict[str, Any] = dict(detection_scores(pred, gold))
    out.update(
        n_scopes=len(chosen),
        n_docs=sum(len(scopes[s]) for s in chosen),
        n_gold=len(gold),
        n_predicted=len(pred),
        build_key=build_key,
        **counters,
        llm_ms=llm_ms,
        budget_exhausted_scopes=budget_exhausted,
        wall_s=wall_s,
        detector=detector.describe() if callable(getattr(detector, "describe", None)) else {},
    )
    by_split: dict[str, dict[str, Any]] = {}
    for split in sorted({_split_of(s) for s in chosen}):
        ps = {p for p in pred if _split_of(doc_scope[p[0]]) == split}
        gs = {g for g in gold if _split_of(doc_scope[g[0]]) == split}
        by_split[split] = {**detection_scores(ps, gs), "n_gold": len(gs), "n_predicted": len(ps)}
    out["by_split"] = by_split
    if log:
        judged = [e for e in log if e["p_yes"] is not None]
        pos = [e["p_yes"] for e in judged if (e["stale"], e["current"]) in gold]
        neg = [e["p_yes"] for e in judged if (e["stale"], e["current"]) not in gold]
        considered = {(e["stale"], e["current"]) for e in log}
        out["pair_log_summary"] = {
            "gold_pairs_considered": len(considered & gold),
            "answers": {d: sum(e["decision"] == d for e in log) for d in sorted({e["decision"] for e in log})},
            "mean_p_yes_gold": sum(pos) / len(pos) if pos else None,
            "mean_p_yes_other": sum(neg) / len(neg) if neg else None,
            "auc_p_yes_gold_vs_other": _auc(pos, neg),
            "threshold_sweep": threshold_sweep(log, gold),
        }
    return out


def evaluate_rules_on_dataset(folder: Path) -> dict[str, Any]:
    """Scores of ``rules`` (``lethe.stages.contradiction.rules.detect``) on a processed LetheBench folder, all scopes.

    Keys: the :func:`detection_scores` keys, ``n_scopes``, ``n_docs``, ``n_gold``, ``n_predicted``,
    ``build_key`` and ``by_split`` ({split: scores with n_gold / n_predicted}), plus the counters of
    :func:`evaluate_detector`.
    """
    return evaluate_detector(RulesDetector(), Path(folder))


def blocking_stats(
    scopes: dict[str, list[Doc]],
    gold: set[tuple[str, str]],
    scope_ids: Sequence[str] | None = None,
    max_pairs: int | None = None,
    blocking: str = "entity_value",
    max_df_share: float = 0.5,
) -> dict[str, Any]:
    """Recall of the candidate pairs on the labelled pairs of ``scope_ids`` (all when None) and pairs per scope."""
    chosen = sorted(scopes) if scope_ids is None else list(scope_ids)
    doc_scope = {d.doc_id: sid for sid in chosen for d in scopes[sid]}
    g = {p for p in gold if p[0] in doc_scope}
    cand: set[tuple[str, str]] = set()
    capped: set[tuple[str, str]] = set()
    n_cand, n_capped = [], []
    for sid in chosen:
        pairs = [(p.earlier.doc_id, p.later.doc_id) for p in candidate_pairs(scopes[sid], blocking, max_df_share)]
        top = pairs if max_pairs is None else pairs[:max_pairs]
        cand.update(pairs)
        capped.update(top)
        n_cand.append(len(pairs))
        n_capped.append(len(top))
    n = max(1, len(chosen))
    return {
        "n_scopes": len(chosen),
        "n_gold": len(g),
        "blocking": blocking,
        "max_df_share": max_df_share,
        "max_pairs": max_pairs,
        "gold_recall_uncapped": len(g & cand) / len(g) if g else None,
        "gold_recall_capped": len(g & capped) / len(g) if g else None,
        "mean_candidates_per_scope": sum(n_cand) / n,
        "max_candidates_per_scope": max(n_cand, default=0),
        "mean_considered_per_scope": sum(n_capped) / n,
    }


# ---------------------------------------------------------------- tables
_MD_COLS = [
    ("backend", "backend"),
    ("model", "model"),
    ("scopes", "scopes"),
    ("n_gold", "gold"),
    ("n_predicted", "predicted"),
    ("tp", "tp"),
    ("fp", "fp"),
    ("fn", "fn"),
    ("precision", "P"),
    ("recall", "R"),
    ("f1", "F1"),
    ("pairs_considered", "pairs considered"),
    ("judged", "judged"),
    ("failed", "parse fail / timeout / error"),
    ("not_judged", "not judged"),
    ("llm_s", "LLM s"),
    ("wall_s", "wall s"),
]


def table_row(label: str, model: str | None, scopes_desc: str, res: dict[str, Any]) -> dict[str, Any]:
    """One table row from an :func:`evaluate_detector` result."""
    row = {"backend": label, "model": model or "-", "scopes": scopes_desc}
    for k in (
        "n_scopes",
        "n_docs",
        "n_gold",
        "n_predicted",
        "tp",
        "fp",
        "fn",
        "precision",
        "recall",
        "f1",
        *COUNTERS,
        "budget_exhausted_scopes",
        "build_key",
        "by_split",
        "detector",
    ):
        row[k] = res.get(k)
    row["failed"] = f"{res['parse_failures']} / {res['timeouts']} / {res['errors']}"
    row["llm_s"] = res["llm_ms"] / 1000.0
    row["wall_s"] = res["wall_s"]
    if "pair_log_summary" in res:
        row["pair_log_summary"] = res["pair_log_summary"]
    return row


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if not math.isnan(v) else "nan"
    return str(v)


def tables(
    rows: Sequence[dict[str, Any]], meta: dict[str, Any] | None = None, stem: str = "contradiction_detection"
) -> dict[str, str]:
    """``<stem>.md`` (one line per row, plus blocking and sweep notes) and ``<stem>.json`` (rows + meta): file name ->
    text."""
    meta = dict(meta or {})
    lines = ["# Contradiction detection: precision / recall per backend", ""]
    if meta.get("dataset"):
        lines.append(
            f"Dataset: LetheBench build `{meta['dataset'].get('build_key')}`; pairs = labelled "
            f"(stale_doc_id, current_doc_id) of `contradictions.parquet` in the evaluated scopes."
        )
    if meta.get("sample"):
        s = meta["sample"]
        lines.append(f"Sample: {s.get('n_scopes')} scopes of split `{s.get('split')}`, seed {s.get('seed')}.")
    lines += ["", f"Note: {PRECISION_NOTE} P is n/a when nothing is predicted (0.0 in the JSON).", ""]
    table = []
    for r in rows:
        cells = [_fmt(r.get(k, "")) for k, _ in _MD_COLS]
        if not r.get("n_predicted"):  # precision is 0/0: shown as n/a (0.0 in the JSON, see detection_scores)
            cells[[k for k, _ in _MD_COLS].index("precision")] = "n/a"
        table.append(cells)
    lines += markdown_table([h for _, h in _MD_COLS], table)
    if meta.get("blocking"):
        b = meta["blocking"]
        lines += ["", "Blocking of the `llm` backend (candidate pairs; no model): "]
        for name, st in b.items():
            cap = (
                f"{_fmt(st['gold_recall_capped'])} with max_pairs={st['max_pairs']}"
                if st["max_pairs"] is not None
                else "no cap"
            )
            lines.append(
                f"- {name}: gold recall {_fmt(st['gold_recall_uncapped'])} uncapped, {cap}; "
                f"{st['mean_candidates_per_scope']:.1f} candidates/scope (max {st['max_candidates_per_scope']}), "
                f"{st['mean_considered_per_scope']:.1f} considered/scope; {st['n_gold']} gold pairs, "
                f"{st['n_scopes']} scopes."
            )
    for r in rows:
        s = r.get("pair_log_summary")
        if not s:
            continue
        lines += [
            "",
            f"`{r['backend']}` ({r['model']}): answers {s['answers']}; labelled pairs considered "
            f"{s['gold_pairs_considered']}; mean p(yes) labelled {_fmt(s['mean_p_yes_gold'])} vs other "
            f"{_fmt(s['mean_p_yes_other'])} (AUC {_fmt(s['auc_p_yes_gold_vs_other'])}). Same judgments at other "
            f"thresholds (answer yes and p(yes) >= t):",
            "",
        ]
        lines += markdown_table(
            ["t", "predicted", "tp", "P", "R", "F1"],
            (
                [
                    sw["threshold"],
                    sw["n_predicted"],
                    sw["tp"],
                    _fmt(sw["precision"]),
                    _fmt(sw["recall"]),
                    _fmt(sw["f1"]),
                ]
                for sw in s["threshold_sweep"]
            ),
        )
    if meta.get("command"):
        lines += ["", f"Command: `{meta['command']}`"]
    return {
        f"{stem}.md": "\n".join(lines) + "\n",
        f"{stem}.json": json.dumps(
            {"meta": {**meta, "precision_note": PRECISION_NOTE}, "rows": list(rows)}, indent=2, default=str
        )
        + "\n",
    }


# ---------------------------------------------------------------- CLI
def dataset_folder(cfg: DictConfig) -> Path:
    """``cfg.dataset_folder``, or the only processed LetheBench build under ``cfg.processed_dir``."""
    paths = Paths.of(cfg)
    if cfg.dataset_folder:
        return paths.resolve(cfg.dataset_folder)
    base = paths.resolve(cfg.processed_dir)
    found = sorted(p for p in base.glob("*") if (p / "card.json").is_file()) if base.is_dir() else []
    if len(found) != 1:
        raise SystemExit(
            f"set dataset_folder=<processed LetheBench folder>: {len(found)} builds under {base}: "
            f"{[p.name for p in found]}"
        )
    return found[0]


def study(cfg: DictConfig, command: str | None = None) -> dict[str, Any]:
    """Evaluate ``cfg.backends`` (settings: ``conf/contradiction_detection.yaml``), write the tables and
    ``manifest.json`` to ``cfg.out_dir`` (unless ``blocking_only``); return ``{"meta", "rows"}``."""
    started = dt.datetime.now(dt.UTC)
    backends = [str(b) for b in cfg.backends]
    bad = [b for b in backends if b not in ("rules", "llm")]
    if bad:
        raise SystemExit(f"unknown backends {bad}; known: rules, llm")
    folder = dataset_folder(cfg)
    loaded = load_scopes(folder)
    scopes, gold, build_key = loaded
    split, seed, max_pairs = cfg.split, int(cfg.seed), int(cfg.max_pairs)
    sample = sample_scopes(scopes, None if cfg.scopes is None else int(cfg.scopes), split, seed)
    all_scopes = len(sample) == len(scopes)
    sample_desc = "all" if all_scopes else f"{split or 'any'} n={len(sample)} seed={seed}"
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    meta: dict[str, Any] = {
        "dataset": {"folder": str(folder), "build_key": build_key, "n_scopes": len(scopes), "n_gold": len(gold)},
        "sample": {"split": split, "n_scopes": len(sample), "seed": seed, "scope_ids": sample},
        "command": command,
        "blocking": {
            "all scopes, uncapped": blocking_stats(scopes, gold, None, None),
            f"all scopes, max_pairs={max_pairs}": blocking_stats(scopes, gold, None, max_pairs),
            f"sample ({sample_desc}), max_pairs={max_pairs}": blocking_stats(scopes, gold, sample, max_pairs),
        },
    }
    rows: list[dict[str, Any]] = []
    if cfg.blocking_only:
        print(json.dumps(meta["blocking"], indent=2))
        return {"meta": meta, "rows": rows}
    if "rules" in backends:
        if not all_scopes and cfg.rules_all:
            rows.append(
                table_row("rules", None, f"all ({len(scopes)})", evaluate_detector(RulesDetector(), loaded=loaded))
            )
        rows.append(
            table_row("rules", None, sample_desc, evaluate_detector(RulesDetector(), scope_ids=sample, loaded=loaded))
        )
    if "llm" in backends:
        from lethe.llm.base import Decoding, Message
        from lethe.stages.contradiction.detectors import make_detector

        for name in [str(n) for n in cfg.llms]:
            llm = study_llm(name, cfg)
            try:
                t_load = time.perf_counter()
                llm.chat([Message("user", "hi")], Decoding(max_tokens=1))  # load the model outside the timing
                log(f"{name}: loaded in {time.perf_counter() - t_load:.1f}s")
                det = make_detector(
                    "llm",
                    llm,
                    prompt_version=str(cfg.prompt_version),
                    threshold=float(cfg.threshold),
                    max_pairs=max_pairs,
                    max_doc_chars=int(cfg.max_doc_chars),
                    budget_ms=None if cfg.budget_ms is None else float(cfg.budget_ms),
                )
                res = evaluate_detector(det, scope_ids=sample, loaded=loaded, progress=log)
                row = table_row("llm", str(getattr(llm, "name", None) or name), sample_desc, res)
                row["llm_config"] = name
                row["n_threads"] = int(cfg.n_threads)
                row["response_cache"] = bool(cfg.llm_cache)
                rows.append(row)
            finally:
                llm.close()
    written = StudyFolder(Paths.of(cfg).resolve(cfg.out_dir)).write(
        tables(rows, meta), manifest(cfg, command, started, dataset=meta["dataset"])
    )
    log(f"wrote {written.path}")
    return {"meta": meta, "rows": rows}


@hydra.main(config_path="../../conf", config_name="contradiction_detection", version_base="1.3")
def main(cfg: DictConfig) -> None:
    study(cfg, command_line("experiments.studies.contradiction_detection"))


if __name__ == "__main__":  # pragma: no cover
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
