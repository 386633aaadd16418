"""What a method learns from: the ``supervision`` entry every method config declares (``conf/method/*.yaml``).

A comparison is fair only between methods that saw as much: the report chooses the best baseline of a method among
the baselines with the same or more label supervision (:func:`at_least`), and shows the supervision of every row.

Kinds, in the order of the labels they read (a method may declare several, e.g. ``[in_domain, llm]``):

- ``none``: no label and no language model; hand-set parameters only (BM25's k1 and b, the fixed hybrid's alpha);
- ``dev_labels``: rules and constants written and tuned against a development set and its labels (Lethe iterations
  1 and 2: LetheBench's dev family, ``lethebench.generator.dev``), applied unchanged to every dataset;
- ``other_datasets``: trained on other datasets' labels (the cross-encoder's ``transfer`` and ``lethebench`` regimes);
- ``in_domain``: trained or tuned on the evaluated dataset's own labels, cross-fitted (the test queries' fold is
  never read: the cross-encoder's ``in_domain`` regime, iteration 3's learned fusion, the tuned hybrids);
- ``llm``: a language model at run time or LLM-written training data (no label); listed beside the label kinds, it
  does not rank.

The cross-encoder's supervision depends on its training regime: its configs declare ``supervision: regime``, and
:func:`method_supervision` reads the regime (:data:`REGIME_SUPERVISION`). The key is a description, not a
parameter: it is left out of the run's identity (``experiments.run_identity``) and recorded in its manifest.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import yaml

from lethe.core.paths import CONF_DIR
from lethe.core.typed_config import ConfigError

KEY = "supervision"
FROM_REGIME = "regime"
RANK = {"none": 0, "dev_labels": 1, "other_datasets": 1, "in_domain": 2}  # label supervision, least to most
LLM = "llm"
KINDS = (*RANK, LLM)
LABELS = {
    "none": "none",
    "dev_labels": "dev labels (rules tuned on a dev set)",
    "other_datasets": "other datasets' labels",
    "in_domain": "in-domain labels, cross-fitted",
    LLM: "LLM",
}
REGIME_SUPERVISION = {
    "in_domain": ("in_domain",),
    "transfer": ("other_datasets",),
    "lethebench": ("other_datasets",),
    "label_free": (LLM,),
}


def parse(value: Any, where: str = "method.supervision") -> tuple[str, ...]:
    """The kinds a ``supervision`` entry names (a kind or a list of kinds), in :data:`KINDS` order; ConfigError naming
    ``where`` for a missing or unknown one."""
    kinds = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if not kinds or any(k not in KINDS for k in kinds):
        raise ConfigError(f"{where}={value!r}: must be one of {list(KINDS)} or a list of them")
    if "none" in kinds and len(kinds) > 1:
        raise ConfigError(f"{where}={value!r}: 'none' cannot be combined with another kind")
    return tuple(k for k in KINDS if k in kinds)


def method_supervision(method: Mapping[str, Any]) -> tuple[str, ...]:
    """The supervision kinds of a resolved method config (``supervision: regime`` read from
    ``model.train.regime``); ConfigError naming the key when it is missing or unknown."""
    value = method.get(KEY)
    if value is None:
        raise ConfigError(
            f"method {method.get('name')!r} declares no `{KEY}` (one of {list(KINDS)}; lethebench/supervision.py)"
        )
    if value == FROM_REGIME:
        regime = ((method.get("model") or {}).get("train") or {}).get("regime")
        if regime not in REGIME_SUPERVISION:
            raise ConfigError(
                f"method.{KEY}=regime needs method.model.train.regime in {list(REGIME_SUPERVISION)}, got {regime!r}"
            )
        return REGIME_SUPERVISION[regime]
    return parse(value, f"method.{KEY}")


@cache
def declared(name: str) -> Any:
    """The ``supervision`` entry ``conf/method/<name>.yaml`` declares (None when there is no such file or entry): what
    the analysis reads for a run made before the key existed (it is not part of the run's identity)."""
    path = CONF_DIR / "method" / f"{name}.yaml"
    return (yaml.safe_load(path.read_text()) or {}).get(KEY) if path.is_file() else None


def of_run(method: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The supervision of a finished run from its manifest's method config: the config's own entry, else its
    method's declaration (:func:`declared`); None when neither says."""
    value = method.get(KEY)
    if value is None:
        value = declared(str(method.get("name")))
    return None if value is None else method_supervision({**method, KEY: value})


def rank(kinds: tuple[str, ...]) -> int:
    """The label supervision of ``kinds``: the highest :data:`RANK` among them (0 for ``llm`` alone)."""
    return max((RANK[k] for k in kinds if k in RANK), default=0)


def at_least(baseline: tuple[str, ...], method: tuple[str, ...]) -> bool:
    """Whether a baseline with supervision ``baseline`` saw the same or more labels than a method with ``method``."""
    return rank(baseline) >= rank(method)


def label(kinds: tuple[str, ...]) -> str:
    """Display text, e.g. ``in-domain labels, cross-fitted + LLM``."""
    return " + ".join(LABELS[k] for k in kinds)
