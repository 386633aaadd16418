"""Agreement of the hallucination judge (``lethe.stages.generation.HallucinationJudge``) with hand labels.

Items (``load_items``; default ``tests/data/judge_labels.jsonl``, see tests/data/README.md): JSON
objects with ``id``, ``query``, ``contexts`` (list of str), ``answer`` and ``label`` in
{``"supported"``, ``"unsupported"``}; a missing field or another label raises ``ValueError``.

``judge_agreement(judge, items)`` calls ``judge.judge(answer, contexts, query)`` once per item, in
order. Rules:

- An item is **judged** when the judge's ``supported`` is a bool (status ``ok``, or ``abstention``,
  which the judge decides by rule without the model; counted in ``abstentions``); its prediction is
  ``"supported"`` if ``supported`` else ``"unsupported"``. Every other item (parse failure, timeout,
  error, no answer) is **unjudged**: it is left out of every score below and counted in
  ``unjudged`` and per status in ``by_status``, never guessed.
- ``accuracy`` = agreeing judged items / judged (None when nothing was judged).
- ``cohen_kappa`` (Cohen, 1960) over the judged items: ``p_o`` = accuracy,
  ``p_e = sum_c (pred_c / judged) * (gold_c / judged)`` over c in {supported, unsupported},
  ``kappa = (p_o - p_e) / (1 - p_e)``; None when nothing was judged or ``p_e == 1`` (both label
  sequences use one and the same class, so kappa is undefined). A judge that always gives the
  same answer gets kappa 0.
- ``confusion``: ``{"gold_supported": {"pred_supported": a, "pred_unsupported": b},
  "gold_unsupported": {"pred_supported": c, "pred_unsupported": d}}`` over judged items.
- ``auc``: threshold-free ranking quality of ``p_supported`` against the gold label, over the items
  with a model probability (status ok): the probability that a random gold-supported item gets a
  higher ``p_supported`` than a random gold-unsupported one, ties counting 1/2 (Mann-Whitney U /
  (n_pos * n_neg)); None when either class is missing.
- ``verdict_accuracy``: agreement of the judge's parsed word alone (``verdict`` "yes" = supported),
  before the probability threshold, over status-ok items with a verdict (None when there are none).
  It differs from ``accuracy`` when a "yes"/"no" token's probability puts ``p_supported`` on the
  other side of the threshold.
- Timing over model calls (status ok / parse_failure / timeout / error): ``llm_ms_mean`` (wall clock
  per call; the first uncached call also loads the model), ``model_ms_mean`` / ``model_ms_median``
  (the backend's ``timings_ms["total"]``, no loading; for cache hits the original call's time) and
  ``cached`` (response-cache hits).

CLI: ``python -m experiments.studies.judge_agreement llms=[qwen_coder_0_5b,qwen_coder_1_5b]`` (settings:
``conf/judge_agreement.yaml``; :func:`study` does the work from a composed config) builds each
``conf/llm/<name>.yaml`` backend with ``lethe.llm.backends.make_llm`` (under ``cache_dir``, with
``n_threads``), runs the judge on the items and writes ``judge_agreement.{md,json}`` and
``manifest.json`` to ``out_dir``: one row per model, with the model file's sha256, the prompt's
name/version/sha256, temperature, the scores above and the wall-clock time. The folder is written whole
(lethebench.studies.StudyFolder): a new run replaces it, rows of models it did not judge included.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from analysis.formatting import markdown_table
from experiments.studies.common import command_line, manifest, study_llm
from lethe.core.arguments import check_arguments
from lethe.core.hashing import sha256_file
from lethe.core.paths import PROJECT_ROOT, Paths
from lethebench.studies import StudyFolder

DEFAULT_ITEMS = PROJECT_ROOT / "tests" / "data" / "judge_labels.jsonl"
LABELS = ("supported", "unsupported")
_REQUIRED = ("id", "query", "contexts", "answer", "label")
_CALL_STATUSES = ("ok", "parse_failure", "timeout", "error")


def load_items(path: str | Path = DEFAULT_ITEMS) -> list[dict[str, Any]]:
    """The labelled items of a JSONL file (blank lines skipped), validated (module docstring)."""
    items = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        it = json.loads(line)
        missing = [k for k in _REQUIRED if k not in it]
        if missing:
            raise ValueError(f"{path}:{n}: missing fields {missing}")
        if it["label"] not in LABELS:
            raise ValueError(f"{path}:{n}: label {it['label']!r} not in {LABELS}")
        if not isinstance(it["contexts"], list) or not all(isinstance(c, str) for c in it["contexts"]):
            raise ValueError(f"{path}:{n}: contexts must be a list of strings")
        items.append(it)
    ids = [it["id"] for it in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate ids")
    return items


def cohen_kappa(gold: Sequence[str], pred: Sequence[str]) -> float | None:
    """Cohen's kappa of two equally long label sequences over ``LABELS`` (module docstring)."""
    if len(gold) != len(pred):
        raise ValueError("gold and pred differ in length")
    n = len(gold)
    if n == 0:
        return None
    p_o = sum(g == p for g, p in zip(gold, pred, strict=True)) / n
    p_e = sum((sum(p == c for p in pred) / n) * (sum(g == c for g in gold) / n) for c in LABELS)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def roc_auc(gold: Sequence[str], p_supported: Sequence[float]) -> float | None:
    """P(p of a gold-supported item > p of a gold-unsupported item), ties 1/2; None if a class is missing."""
    pos = [p for g, p in zip(gold, p_supported, strict=True) if g == "supported"]
    neg = [p for g, p in zip(gold, p_supported, strict=True) if g == "unsupported"]
    if not pos or not neg:
        return None
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def agreement_scores(gold: Sequence[str], pred: Sequence[str | None]) -> dict[str, Any]:
    """n, judged, unjudged, accuracy, cohen_kappa and confusion from gold labels and predictions
    (None = unjudged)."""
    if len(gold) != len(pred):
        raise ValueError("gold and pred differ in length")
    for x in list(gold) + [p for p in pred if p is not None]:
        if x not in LABELS:
            raise ValueError(f"label {x!r} not in {LABELS}")
    pairs = [(g, p) for g, p in zip(gold, pred, strict=True) if p is not None]
    g_j, p_j = [g for g, _ in pairs], [p for _, p in pairs]
    conf = {f"gold_{g}": {f"pred_{p}": sum(1 for a, b in pairs if a == g and b == p) for p in LABELS} for g in LABELS}
    return {
        "n": len(gold),
        "judged": len(pairs),
        "unjudged": len(gold) - len(pairs),
        "accuracy": sum(a == b for a, b in pairs) / len(pairs) if pairs else None,
        "cohen_kappa": cohen_kappa(g_j, p_j),
        "confusion": conf,
    }


def judge_agreement(judge: Any, items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Run ``judge`` on every item and score it against the labels (module docstring)."""
    items = list(items)
    rows, gold, pred = [], [], []
    for it in items:
        r = judge.judge(it["answer"], list(it["contexts"]), it["query"])
        p = None if r.supported is None else ("supported" if r.supported else "unsupported")
        gold.append(it["label"])
        pred.append(p)
        rows.append(
            {
                "id": it["id"],
                "label": it["label"],
                "pred": p,
                "status": r.status,
                "p_supported": r.p_supported,
                "verdict": getattr(r, "verdict", None),
                "raw_text": r.raw_text,
                "llm_ms": r.llm_ms,
                "model_ms": r.model_ms,
                "cached": r.cached,
            }
        )
    out = agreement_scores(gold, pred)
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    with_p = [r for r in rows if r["status"] == "ok" and r["p_supported"] is not None]
    calls = [r for r in rows if r["status"] in _CALL_STATUSES]
    with_verdict = [r for r in rows if r["status"] == "ok" and r["verdict"] in ("yes", "no")]
    model_ms = [r["model_ms"] for r in calls if r["model_ms"] is not None]
    out.update(
        by_status=by_status,
        abstentions=by_status.get("abstention", 0),
        auc=roc_auc([r["label"] for r in with_p], [r["p_supported"] for r in with_p]),
        verdict_accuracy=(
            sum((r["verdict"] == "yes") == (r["label"] == "supported") for r in with_verdict) / len(with_verdict)
        )
        if with_verdict
        else None,
        pred_supported_share=(sum(p == "supported" for p in pred) / out["judged"]) if out["judged"] else None,
        calls=len(calls),
        cached=sum(bool(r["cached"]) for r in calls),
        llm_ms_mean=statistics.fmean(r["llm_ms"] for r in calls) if calls else None,
        model_ms_mean=statistics.fmean(model_ms) if model_ms else None,
        model_ms_median=statistics.median(model_ms) if model_ms else None,
        items=rows,
    )
    return out


# ----------------------------------------------------------------------------- CLI


def _f(x: Any, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def to_markdown(doc: Mapping[str, Any]) -> str:
    """The table of ``judge_agreement.json``'s rows, with the rules in a footnote."""
    head = [
        "model",
        "model sha256",
        "prompt",
        "prompt sha256",
        "temp.",
        "threshold",
        "n",
        "judged",
        "unjudged",
        "accuracy",
        "verdict acc.",
        "kappa",
        "AUC",
        "confusion (gS:pS/pU, gU:pS/pU)",
        "pred. supported",
        "ms/judgment (mean, median)",
        "wall s",
    ]
    lines = [
        f"**Hallucination judge vs hand labels** ({doc['items_file']}, sha256 {doc['items_sha256'][:12]}, "
        f"{doc['n_items']} items)",
        "",
    ]
    cells_of = []
    for r in doc["rows"]:
        c = r["confusion"]
        conf = (
            f"{c['gold_supported']['pred_supported']}/{c['gold_supported']['pred_unsupported']}, "
            f"{c['gold_unsupported']['pred_supported']}/{c['gold_unsupported']['pred_unsupported']}"
        )
        cells = [
            r["llm"],
            r["model_sha256"][:12] if r.get("model_sha256") else "n/a",
            f"{r['prompt']['name']}.{r['prompt']['version']}",
            r["prompt"]["sha256"][:12],
            f"{r['temperature']:g}",
            f"{r['threshold']:g}",
            r["n"],
            r["judged"],
            r["unjudged"],
            _f(r["accuracy"]),
            _f(r.get("verdict_accuracy")),
            _f(r["cohen_kappa"]),
            _f(r["auc"]),
            conf,
            _f(r["pred_supported_share"], 2),
            f"{_f(r['model_ms_mean'], 0)}, {_f(r['model_ms_median'], 0)}",
            _f(r["wall_s"], 1),
        ]
        cells_of.append(cells)
    lines += markdown_table(head, cells_of)
    lines += [
        "",
        "Judged = the judge said yes/no (unjudged = parse failures, timeouts, errors; left out of "
        "the scores). Accuracy and Cohen's kappa over judged items; kappa = 0 for a judge that always "
        "gives the same answer. Verdict acc.: the yes/no word alone, before the threshold on p(supported). AUC: p(supported) from the first token's logprob ranked against the gold "
        "label. ms/judgment: llama.cpp's own time per call (model loading excluded; cached = "
        "original time). Wall s: the whole run including model loading. Rules: experiments/studies/judge_agreement.py.",
    ]
    return "\n".join(lines) + "\n"


def _run_one(name: str, items: list[dict[str, Any]], cfg: DictConfig) -> dict[str, Any]:
    from lethe.stages.generation import HallucinationJudge

    t0 = time.perf_counter()
    llm = study_llm(name, cfg)
    try:
        judge = HallucinationJudge(
            llm, threshold=float(cfg.threshold), timeout_s=None if cfg.timeout_s is None else float(cfg.timeout_s)
        )
        res = judge_agreement(judge, items)
        wall = time.perf_counter() - t0
        d = llm.describe()
    finally:
        llm.close()
    desc = judge.describe()
    return {
        "config": name,
        "llm": desc["llm"],
        "model_sha256": d.get("model_sha256"),
        "load_ms": d.get("load_ms"),
        "n_threads": int(cfg.n_threads),
        "prompt": desc["prompt"],
        "temperature": desc["temperature"],
        "decoding": desc["decoding"],
        "threshold": desc["threshold"],
        "timeout_s": desc["timeout_s"],
        "wall_s": wall,
        **res,
    }


def study(cfg: DictConfig, command: str | None = None) -> dict[str, Any]:
    """Judge the items with each of ``cfg.llms`` (settings: ``conf/judge_agreement.yaml``), write the
    tables and ``manifest.json`` to ``cfg.out_dir``; return the JSON document."""
    paths = Paths.of(cfg)
    started = dt.datetime.now(dt.UTC)
    names = [str(n) for n in cfg.llms]
    if not names:
        raise SystemExit("llms is empty: name at least one conf/llm/<name>.yaml, e.g. llms=[smollm2]")
    items_path, out_dir = paths.resolve(cfg.items_file), paths.resolve(cfg.out_dir)
    items = load_items(items_path)
    items_sha = sha256_file(items_path)
    try:
        items_file = str(items_path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        items_file = str(items_path)
    rows = []
    for name in names:
        row = _run_one(name, items, cfg)
        print(
            f"{name}: accuracy={_f(row['accuracy'])} kappa={_f(row['cohen_kappa'])} auc={_f(row['auc'])} "
            f"judged={row['judged']}/{row['n']} by_status={row['by_status']} "
            f"model_ms_mean={_f(row['model_ms_mean'], 0)} wall={row['wall_s']:.1f}s",
            flush=True,
        )
        rows.append(row)
    doc = {
        "items_file": items_file,
        "items_sha256": items_sha,
        "n_items": len(items),
        "rows": sorted(rows, key=lambda r: r["config"]),
    }
    folder = StudyFolder(out_dir).write(
        {"judge_agreement.json": json.dumps(doc, indent=2) + "\n", "judge_agreement.md": to_markdown(doc)},
        manifest(cfg, command, started, items={"file": items_file, "sha256": items_sha}),
    )
    print(f"wrote {folder.path}")
    return doc


@hydra.main(config_path="../../conf", config_name="judge_agreement", version_base="1.3")
def main(cfg: DictConfig) -> None:
    study(cfg, command_line("experiments.studies.judge_agreement"))


if __name__ == "__main__":  # pragma: no cover
    check_arguments(sys.argv[1:])  # before Hydra: no credential, every override parseable
    main()
