"""Whether the measuring instruments (the LLM judges) passed their validation, and what rests on them.

The hallucination judge (``lethe.stages.generation.HallucinationJudge`` with the pinned prompt, the model
``instruments.hallucination_judge.model``) is validated by the judges tier's studies
(``experiments/studies/judge_validation.py``): items whose right label is known from the data, the gold answer
against its gold passages (label supported) and copies with a changed date, name or number, or another question's
answer (label unsupported). Each study's JSON document holds one row per (judge, model, item group) with ``correct``
and ``judged``, and over all items (``perturbation == "all"``) Cohen's kappa.

The rule (config ``instruments.hallucination_judge``, :func:`hallucination_judge_unfit`): on every declared study,
the lower bound of the Wilson interval of the judge's accuracy on the supported (gold) items and, separately, on the
unsupported (perturbed) items pooled is at least ``min_accuracy``, and its kappa over all items is at least
``min_kappa``. An unfinished study, or one without the model, leaves the judge "not validated".

- :func:`wilson_pass`: the one Wilson-lower-bound check (k of n at least a bound), for any judge's accuracy;
- :func:`hallucination_judge_unfit`: why the judge cannot count as evidence, or None when it passed;
- :func:`judge_mark` / :func:`judge_footnote`: the mark a number resting on the judge carries, and its footnote;
- :func:`validation_table` / :func:`validation_section`: the report's section "Instruments: judge validation".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from analysis import stats
from analysis.formatting import fmt, markdown_table

NOT_VALIDATED = "not validated"  # how hallucination_judge_unfit's reason starts when no finished study could decide
FAILED, UNVALIDATED = "judge failed validation", "judge not validated"
MARK_FAILED, MARK_UNVALIDATED = f"⚠ {FAILED}", f"⚠ {UNVALIDATED}"
SUPPORTED, UNSUPPORTED, ALL = "supported", "unsupported", "all"


def wilson_pass(correct: int, n: int, need: float, confidence: float = 0.95) -> tuple[dict[str, Any], bool]:
    """(:func:`analysis.stats.proportion_ci` of ``correct`` / ``n``, whether its Wilson lower bound is at least
    ``need``); n == 0 never passes (nothing was judged)."""
    ci = stats.proportion_ci(int(correct), int(n), confidence)
    return ci, bool(n > 0 and ci["ci_low"] >= need)


def _rule(cfg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return (cfg.get("instruments") or {}).get("hallucination_judge")


def _rows(doc: Mapping[str, Any], model: str) -> list[Mapping[str, Any]]:
    return [r for r in doc.get("rows") or [] if r.get("judge") == "hallucination" and r.get("model") == model]


def study_scores(doc: Mapping[str, Any], model: str, confidence: float = 0.95) -> dict[str, Any] | None:
    """The hallucination judge ``model``'s scores in one validation study's JSON document: per item side
    (``supported``: the gold items; ``unsupported``: every perturbation pooled; ``all``) correct, judged, n and the
    Wilson interval of accuracy = correct / judged; ``kappa`` (Cohen's, over all items; None if undefined) and
    ``groups`` (the study's per-group rows); None when the study did not judge ``model``."""
    rows = _rows(doc, model)
    if not rows:
        return None
    out: dict[str, Any] = {"groups": [r for r in rows if r.get("perturbation") != ALL]}
    for side in (SUPPORTED, UNSUPPORTED):
        got = [r for r in out["groups"] if r.get("label") == side]
        correct, judged = sum(int(r["correct"]) for r in got), sum(int(r["judged"]) for r in got)
        out[side] = {
            "correct": correct,
            "judged": judged,
            "n": sum(int(r["n"]) for r in got),
            "groups": [str(r["perturbation"]) for r in got],
            **stats.proportion_ci(correct, judged, confidence),
        }
    every = [r for r in rows if r.get("perturbation") == ALL]
    if every:
        r = every[0]
        out[ALL] = {
            "correct": int(r["correct"]),
            "judged": int(r["judged"]),
            "n": int(r["n"]),
            **stats.proportion_ci(int(r["correct"]), int(r["judged"]), confidence),
        }
        kappa = r.get("cohen_kappa")
        out["kappa"] = None if kappa is None or kappa != kappa else float(kappa)
    else:
        out[ALL], out["kappa"] = None, None
    return out


def _acc(s: Mapping[str, Any]) -> str:
    return f"{s['share']:.2f} [{s['ci_low']:.2f}, {s['ci_high']:.2f}]"


def study_failures(sc: Mapping[str, Any], rule: Mapping[str, Any], confidence: float = 0.95) -> list[str]:
    """What fails the rule in one study's scores (:func:`study_scores`): phrases with the numbers; [] = it passed."""
    need, kmin = float(rule["min_accuracy"]), rule.get("min_kappa")
    out = []
    for side, what in ((SUPPORTED, "gold (supported) answers"), (UNSUPPORTED, "perturbed (unsupported) answers")):
        s = sc[side]
        if s["judged"] == 0:
            out.append(f"it judged none of the {what}")
            continue
        if not wilson_pass(s["correct"], s["judged"], need, confidence)[1]:
            out.append(f"accuracy {_acc(s)} on {s['judged']} {what} (lower bound below {need:g})")
    if kmin is not None:
        k = sc["kappa"]
        if k is None:
            out.append("Cohen's kappa undefined")
        elif not k >= float(kmin):
            out.append(f"Cohen's kappa {k:.2f} < {float(kmin):g}")
    return out


def hallucination_judge_unfit(cfg: Mapping[str, Any], studies: Mapping[str, Mapping[str, Any]] | None) -> str | None:
    """Why the pinned hallucination judge cannot count as evidence (a sentence naming the studies and numbers), or
    None when it passed the rule ``cfg["instruments"]["hallucination_judge"]`` on every declared study (or no rule is
    declared). ``studies``: each finished study's JSON document by name (``{"rows": [...]}``); a declared study
    missing from it (not run, unfinished), or one that did not judge the model, gives a reason starting with
    :data:`NOT_VALIDATED`."""
    rule = _rule(cfg)
    if not rule:
        return None
    model, conf = str(rule["model"]), float(cfg.get("confidence", 0.95))
    failed = []
    for name in rule["studies"]:
        doc = (studies or {}).get(name)
        if doc is None:
            return f"{NOT_VALIDATED}: its validation study {name} has not finished (tier judges)"
        sc = study_scores(doc, model, conf)
        if sc is None:
            return f"{NOT_VALIDATED}: study {name} did not judge {model}"
        why = study_failures(sc, rule, conf)
        if why:
            failed.append(f"on {name}, {' and '.join(why)}")
    if failed:
        return f"the hallucination judge {model} failed its validation: " + "; ".join(failed)
    return None


def judge_mark(unfit: str | None) -> str:
    """The mark a number resting on the hallucination judge carries: "" when the judge passed, else
    :data:`MARK_FAILED` or :data:`MARK_UNVALIDATED`."""
    if unfit is None:
        return ""
    return MARK_UNVALIDATED if unfit.startswith(NOT_VALIDATED) else MARK_FAILED


def judge_footnote(unfit: str | None) -> str:
    """The footnote under a table whose hallucination rates carry :func:`judge_mark`; "" when the judge passed."""
    mark = judge_mark(unfit)
    if not mark:
        return ""
    return (
        f"{mark}: the hallucination rate (unsupported / judged answers, 95% Wilson interval, n judged) rests on the "
        f"pinned hallucination judge, which cannot count as evidence here: {unfit}. Read the rate as inconclusive "
        "(section 'Instruments: judge validation')."
    )


def rule_text(rule: Mapping[str, Any], confidence: float = 0.95) -> str:
    """The rule in words."""
    kappa = f", and Cohen's kappa over all items at least {float(rule['min_kappa']):g}" if rule.get("min_kappa") else ""
    return (
        f"the judge {rule['model']} passes when, on every validation study ({', '.join(rule['studies'])}), the lower "
        f"bound of the {confidence:.0%} Wilson interval of its accuracy is at least {float(rule['min_accuracy']):g} on "
        f"the gold answers (label supported) and, separately, on the perturbed answers pooled (label unsupported){kappa}"
    )


def validation_table(cfg: Mapping[str, Any], studies: Mapping[str, Mapping[str, Any]] | None) -> pd.DataFrame:
    """One row per (declared study, item group) of the judge the rule names: the gold items, each perturbation, the
    perturbations pooled and all items, with n, judged, accuracy [Wilson CI], kappa (all items) and, on the rows the
    rule reads, its criterion and whether it holds. A study not finished gets one n/m† row."""
    rule = _rule(cfg)
    if not rule:
        return pd.DataFrame()
    model, conf, need = str(rule["model"]), float(cfg.get("confidence", 0.95)), float(rule["min_accuracy"])
    kmin = rule.get("min_kappa")
    rows = []
    for name in rule["studies"]:
        doc = (studies or {}).get(name)
        sc = study_scores(doc, model, conf) if doc is not None else None
        if sc is None:
            why = "not run (n/m†)" if doc is None else f"did not judge {model}"
            rows.append({"study": name, "items": why})
            continue

        def line(
            items: str,
            label: str,
            s: Mapping[str, Any],
            kappa: str = "",
            crit: str = "",
            ok: str = "",
            name: str = name,
        ) -> None:
            rows.append(
                {
                    "study": name,
                    "items": items,
                    "label": label,
                    "n": s["n"],
                    "judged": s["judged"],
                    "accuracy [95% Wilson CI]": f"{fmt(s['share'])} [{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]",
                    "Cohen's kappa": kappa,
                    "criterion": crit,
                    "holds": ok,
                }
            )

        s = sc[SUPPORTED]
        ok = "yes" if s["judged"] and s["ci_low"] >= need else "NO"
        line("gold answers", SUPPORTED, s, "", f"lower bound >= {need:g}", ok)
        for g in sc["groups"]:
            if g.get("label") == UNSUPPORTED:
                ci = stats.proportion_ci(int(g["correct"]), int(g["judged"]), conf)
                line(f"perturbed: {g['perturbation']}", UNSUPPORTED, {**ci, "n": g["n"], "judged": g["judged"]})
        s = sc[UNSUPPORTED]
        line(
            "perturbed, pooled",
            UNSUPPORTED,
            s,
            "",
            f"lower bound >= {need:g}",
            "yes" if s["judged"] and s["ci_low"] >= need else "NO",
        )
        if sc[ALL] is not None:
            k = sc["kappa"]
            kok = "" if kmin is None else ("yes" if k is not None and k >= float(kmin) else "NO")
            line(
                "all items",
                "both",
                sc[ALL],
                fmt(k),
                f"kappa >= {float(kmin):g}" if kmin is not None else "",
                kok,
            )
    return pd.DataFrame(rows).fillna("")


def validation_section(cfg: Mapping[str, Any], studies: Mapping[str, Mapping[str, Any]] | None) -> str:
    """Markdown: the rule, its basis, the validation table and the verdict in plain words, and what is marked."""
    rule = _rule(cfg)
    if not rule:
        return "No validation rule is declared for the hallucination judge (`analysis.instruments`).\n"
    conf = float(cfg.get("confidence", 0.95))
    table = validation_table(cfg, studies)
    unfit = hallucination_judge_unfit(cfg, studies)
    if unfit is None:
        verdict = (
            f"Verdict: the hallucination judge {rule['model']} **passed** its validation; the hallucination rates are "
            "printed without a mark."
        )
    else:
        verdict = (
            f"Verdict: **{UNVALIDATED if unfit.startswith(NOT_VALIDATED) else FAILED}**: {unfit}. Every hallucination rate printed (Table 1's "
            f"column Hallucination, the iteration-4 table) carries the mark `{judge_mark(unfit)}` and is inconclusive: "
            "it says what this judge answered, not how often the answers were unsupported."
        )
    header = list(table.columns)
    body = markdown_table(header, table.astype(str).itertuples(index=False)) if not table.empty else []
    return "\n".join(
        [
            "The hallucination judge (pinned prompt) is an instrument: its rates count only if it tells supported from "
            "unsupported answers on items whose label is known from the data (the judges tier's studies, "
            "`experiments/studies/judge_validation.py`: a gold answer against its gold passages is supported; a copy "
            "with a changed date, name or number, or another question's answer, is unsupported). Accuracy = correct "
            f"/ judged with its {conf:.0%} Wilson interval; Cohen's kappa against the labels over all items (a point "
            "estimate: the studies store no interval for it). Each study's own table is listed under 'Studies'.",
            "",
            f"Rule (`analysis.instruments.hallucination_judge`, declared in config): {rule_text(rule, conf)}. "
            + str(rule.get("basis", "")).strip(),
            "",
            *body,
            "",
            verdict,
            "",
        ]
    )


def marked_footnote(table: pd.DataFrame, unfit: str | None) -> str:
    """:func:`judge_footnote` when some cell of ``table`` carries :func:`judge_mark` (a table without a
    hallucination rate needs none), else ""."""
    mark = judge_mark(unfit)
    if not mark or table.empty:
        return ""
    hit = table.astype(str).apply(lambda col: col.str.contains(mark, regex=False)).to_numpy().any()
    return judge_footnote(unfit) if hit else ""
