"""Retrieval metric names: ranx's spelling (canonical, stored) and ir_measures' (accepted, printed).

Every place that names a retrieval metric (``run.metrics``, ``verify_metrics``, the report's settings,
:func:`analysis.metrics.evaluate_run`) accepts either spelling of the same measure:

================  ==============  ===============================================================
ranx              ir_measures     measure (k: a cutoff, an integer >= 1)
================  ==============  ===============================================================
``ndcg@k``        ``nDCG@k``      nDCG at k, linear gain (trec_eval's ``ndcg_cut_k``); ``ndcg``: no cutoff
``recall@k``      ``R@k``         recall at k
``mrr@k``         ``RR@k``        reciprocal rank of the first relevant doc within the top k; ``mrr``: no cutoff
``precision@k``   ``P@k``         precision at k
``map@k``         ``AP@k``        average precision at k (trec_eval's ``map_cut_k``); ``map``: no cutoff
``hit_rate@k``    ``Success@k``   1 if a relevant doc is in the top k, else 0
``r-precision``   ``Rprec``       precision at R, the query's number of relevant docs
================  ==============  ===============================================================

The ranx name is the canonical form: names are turned into it before anything is computed, so per-query columns,
``metrics.json`` and expected scores are the same whichever spelling a config used. Printed tables show the
ir_measures form (:func:`display_metric`). ir_measures names are read by ``ir_measures.parse_measure``, so its
aliases of the same measures work too (``NDCG@10``, ``Recall@50``, ``MRR@10``, ``Precision@10``). Each pair is checked
against ``ir_measures.calc_aggregate`` on real runs (tests/analysis/test_metric_names.py).

LongMemEval's ``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` (:mod:`analysis.longmemeval`, its official
definitions, on the run's own units) are names of their own.

Any other measure ir_measures computes offline through its ``pytrec_eval`` or ``judged`` provider
(:data:`IR_MEASURES_PROVIDERS`) is accepted too: ``Judged@10``, ``P(rel=2)@5``, ``AP(rel=2)``, ``nDCG@10`` with
``judged_only``, ``Bpref``, ``infAP``, ``SetP``, ``IPrec@0.5``, ... Its canonical name is ir_measures' own spelling
(``str(parse_measure(name))``), and :func:`analysis.metrics.evaluate_run` computes it through that provider. Anything
else is refused in one line naming the key and the accepted families.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any

import ir_measures

# ranx family -> ir_measures measure name; one entry per measure both libraries compute the same way
RANX_TO_IR_MEASURES: dict[str, str] = {
    "ndcg": "nDCG",
    "recall": "R",
    "mrr": "RR",
    "precision": "P",
    "map": "AP",
    "hit_rate": "Success",
    "r-precision": "Rprec",
}
_IR_MEASURES_TO_RANX = {v: k for k, v in RANX_TO_IR_MEASURES.items()}
# whether a family takes a cutoff: always, optionally (without one: the whole ranking) or never
CUTOFF = {
    "ndcg": "optional",
    "recall": "required",
    "mrr": "optional",
    "precision": "required",
    "map": "optional",
    "hit_rate": "required",
    "r-precision": "none",
}
_FAMILIES = "|".join(map(re.escape, RANX_TO_IR_MEASURES))
_RANX_NAME = re.compile(rf"^({_FAMILIES})(?:@([1-9][0-9]*))?$")
# LongMemEval's retrieval metrics (analysis/longmemeval.py: the official definitions, on a run's own units)
_LONGMEMEVAL_NAME = re.compile(r"^(recall_any|recall_all|ndcg_any)@([1-9][0-9]*)$")
# a ranx name with a cutoff inside free text (a column header such as "reranker ndcg@10")
_RANX_IN_TEXT = re.compile(rf"\b({_FAMILIES})@([1-9][0-9]*)\b")


def _spelling(family: str, names: dict[str, str]) -> str:
    return {"required": f"{names[family]}@k", "optional": f"{names[family]}[@k]", "none": names[family]}[CUTOFF[family]]


# ir_measures providers that compute offline from the installed packages, tried in this order for a measure ranx lacks
IR_MEASURES_PROVIDERS = ("pytrec_eval", "judged")

ACCEPTED = (
    "ranx names "
    + ", ".join(_spelling(f, {f: f for f in CUTOFF}) for f in CUTOFF)
    + " or ir_measures names "
    + ", ".join(_spelling(f, RANX_TO_IR_MEASURES) for f in CUTOFF)
    + " (k an integer >= 1, e.g. ndcg@10 = nDCG@10), or any measure ir_measures computes through "
    + " or ".join(IR_MEASURES_PROVIDERS)
    + " (e.g. Judged@10, P(rel=2)@5, AP(rel=2), Bpref, infAP), or LongMemEval's recall_any@k, recall_all@k,"
    + " ndcg_any@k"
)


def _with_cutoff(family: str | None, cutoff: Any) -> str | None:
    """``family@cutoff`` or ``family`` when the family takes that (None: no cutoff), else None."""
    if family is None:
        return None
    rule = CUTOFF[family]
    if cutoff is None:
        return family if rule != "required" else None
    if rule == "none" or type(cutoff) is not int or cutoff < 1:
        return None
    return f"{family}@{cutoff}"


class UnknownMetric(ValueError):
    """A metric name that is neither spelling of a supported retrieval metric; the message names the key."""


def ir_measures_provider(measure: Any) -> Any | None:
    """The first provider of :data:`IR_MEASURES_PROVIDERS` that computes the ir_measures ``measure``, or None."""
    for name in IR_MEASURES_PROVIDERS:
        provider = ir_measures.providers.registry[name]
        try:
            if provider.supports(measure):
                return provider
        except Exception:  # noqa: BLE001 - invalid parameters: this provider does not compute it
            continue
    return None


@cache
def _parse(name: str) -> str | None:
    """The canonical name of ``name``: the ranx name of a measure both libraries compute, else ir_measures' own
    spelling of a measure one of :data:`IR_MEASURES_PROVIDERS` computes; None for anything else."""
    m = _RANX_NAME.match(name)
    if m:
        return _with_cutoff(m.group(1), None if m.group(2) is None else int(m.group(2)))
    if _LONGMEMEVAL_NAME.match(name):
        return name
    try:
        measure = ir_measures.parse_measure(name)
    except Exception:  # noqa: BLE001 - whatever it cannot parse is not a name we accept
        return None
    if set(measure.params) <= {"cutoff"} and measure.NAME in _IR_MEASURES_TO_RANX:  # the pair's rule decides
        return _with_cutoff(_IR_MEASURES_TO_RANX[measure.NAME], measure.params.get("cutoff"))
    return str(measure) if ir_measures_provider(measure) is not None else None


def is_ir_measures_only(name: str) -> bool:
    """Whether a canonical name is a measure computed through ir_measures (not one of the ranx pairs)."""
    return _parse(name) == name and not _RANX_NAME.match(name) and not _LONGMEMEVAL_NAME.match(name)


def is_longmemeval(name: str) -> bool:
    """Whether a name is one of LongMemEval's metrics (``recall_any@k``, ``recall_all@k``, ``ndcg_any@k``), computed
    by :mod:`analysis.longmemeval` on the run's own units."""
    return isinstance(name, str) and bool(_LONGMEMEVAL_NAME.match(name))


def canonical_metric(name: str, key: str = "metric") -> str:
    """The canonical (ranx) name of a retrieval metric given in either spelling: ``nDCG@10`` -> ``ndcg@10``.

    Raises :class:`UnknownMetric` naming ``key`` (the config key or argument that held it) and listing the
    accepted forms."""
    canon = _parse(name) if isinstance(name, str) else None
    if canon is None:
        raise UnknownMetric(f"{key}: unknown retrieval metric {name!r}; accepted: {ACCEPTED}")
    return canon


def metric_cutoff(name: str) -> int | None:
    """The cutoff of a retrieval metric in either spelling (``R@50`` -> 50); None for one without a cutoff
    (``ndcg``, ``r-precision``) and for any other name."""
    canon = _parse(name) if isinstance(name, str) else None
    if canon is None:
        return None
    if is_ir_measures_only(canon):
        cutoff = ir_measures.parse_measure(canon).params.get("cutoff")
        return cutoff if isinstance(cutoff, int) else None
    return int(canon.rpartition("@")[2]) if "@" in canon else None


def deeper_than(names: Iterable[str], depth: int) -> list[str]:
    """The metrics of ``names`` whose cutoff exceeds ``depth`` documents (a run's ``run.k``): on a ranking cut at
    ``depth`` they see only its top ``depth`` documents, so ``recall@1000`` of a depth-100 run is its recall@100."""
    return [n for n in names if (metric_cutoff(n) or 0) > depth]


def canonical_metrics(names: Iterable[str], key: str = "metrics") -> tuple[str, ...]:
    """:func:`canonical_metric` of each name, in order; two spellings of one metric are refused (they
    would give one column twice)."""
    if isinstance(names, str):
        raise UnknownMetric(f"{key}: expected a list of metric names, got the string {names!r}")
    out = tuple(canonical_metric(n, key) for n in names)
    dupes = sorted({m for m in out if out.count(m) > 1})
    if dupes:
        raise UnknownMetric(f"{key}: {dupes} named more than once (in either spelling) in {list(names)}")
    return out


def is_retrieval_metric(name: str) -> bool:
    """Whether ``name`` is either spelling of a supported retrieval metric."""
    return isinstance(name, str) and _parse(name) is not None


def canonical_or_other(name: str) -> str:
    """The canonical name of a retrieval metric in either spelling; any other name (``coverage@10``,
    ``contradiction@10``, an answer metric) unchanged."""
    return (_parse(name) or name) if isinstance(name, str) else name


def display_metric(name: str) -> str:
    """The ir_measures form of a retrieval metric in either spelling (``recall@50`` -> ``R@50``); any
    other name unchanged."""
    canon = _parse(name) if isinstance(name, str) else None
    if canon is None or is_ir_measures_only(canon) or is_longmemeval(canon):
        return name if canon is None else canon
    family, _, cutoff = canon.partition("@")
    return str(ir_measures.parse_measure(RANX_TO_IR_MEASURES[family] + (f"@{cutoff}" if cutoff else "")))


def display_text(text: str) -> str:
    """``text`` with every ranx metric name in it printed in ir_measures form
    (``"reranker ndcg@10"`` -> ``"reranker nDCG@10"``)."""
    return _RANX_IN_TEXT.sub(lambda m: display_metric(m.group(0)), text)
