"""How well the ``rules`` contradiction detector (``lethe.contradiction.detect``) finds labelled conflicts.

- :func:`detection_scores`: precision, recall and F1 over *sets* of (stale_doc_id, current_doc_id)
  pairs (duplicates collapse). tp = |pred & gold|, fp = |pred - gold|, fn = |gold - pred|;
  precision = tp / (tp + fp) (0.0 when nothing is predicted), recall = tp / (tp + fn) (0.0 when
  there is no gold), F1 = harmonic mean (0.0 when both are 0).
- :func:`evaluate_rules_on_dataset`: runs ``detect`` once per scope on *every* doc of the scope
  (not the prefix a query sees), predicts the (stale, current) pairs of all its conflicts, and
  scores them against the deduplicated pairs of ``contradictions.parquet``. Because LetheBench
  labels only the updates its ``updated_fact`` queries ask about, a correct detection of an
  unlabelled update counts as a false positive; the precision is a lower bound in that sense.
  Scores are reported overall and per split (the scope-id prefix before the first ``-``, e.g.
  ``dev``/``train``/``test``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from lethe.contradiction import detect
from lethe.method import Doc
from lethebench.schema import read_dataset


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


def evaluate_rules_on_dataset(folder: Path) -> dict[str, Any]:
    """Scores of ``detect`` on a processed LetheBench folder, overall and per split, plus counts.

    Keys: the :func:`detection_scores` keys, ``n_scopes``, ``n_docs``, ``n_gold``, ``n_predicted``,
    ``build_key`` and ``by_split`` ({split: scores with n_gold / n_predicted}).
    """
    ds = read_dataset(Path(folder))
    gold: set[tuple[str, str]] = set()
    if ds.contradictions is not None:
        gold = set(zip(ds.contradictions["stale_doc_id"], ds.contradictions["current_doc_id"]))
    doc_scope = dict(zip(ds.corpus["doc_id"], ds.corpus["scope_id"]))
    pred: set[tuple[str, str]] = set()
    corpus = ds.corpus.sort_values(["scope_id", "position", "doc_id"], kind="stable")
    for _, grp in corpus.groupby("scope_id", sort=True):
        docs = [Doc(r.doc_id, r.text, int(r.position), r.kind,
                    r.speaker if isinstance(r.speaker, str) else None,
                    r.timestamp if isinstance(r.timestamp, str) else None) for r in grp.itertuples(index=False)]
        pred.update((c.stale_doc_id, c.current_doc_id) for c in detect(docs))
    out: dict[str, Any] = dict(detection_scores(pred, gold))
    out.update(n_scopes=int(ds.corpus["scope_id"].nunique()), n_docs=int(len(ds.corpus)), n_gold=len(gold),
               n_predicted=len(pred), build_key=(ds.card.get("build") or {}).get("key"))
    by_split: dict[str, dict[str, Any]] = {}
    for split in sorted({_split_of(s) for s in doc_scope.values()}):
        ps = {p for p in pred if _split_of(doc_scope[p[0]]) == split}
        gs = {g for g in gold if _split_of(doc_scope[g[0]]) == split}
        by_split[split] = {**detection_scores(ps, gs), "n_gold": len(gs), "n_predicted": len(ps)}
    out["by_split"] = by_split
    return out


if __name__ == "__main__":  # pragma: no cover
    import json
    import sys

    for arg in sys.argv[1:]:
        print(json.dumps(evaluate_rules_on_dataset(Path(arg)), indent=2))
