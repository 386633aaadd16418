"""Template families: independent libraries of phrasings and vocabulary LetheBench sessions are written from.

A family holds everything a session's text is made of (attribute phrasings, question and follow-up wording,
update and contradiction wording, services, teams, tool output, filler) and how its values are drawn; the
session logic and the labels (``lethebench.generator.sessions``) are shared, so two families ask the same query
families with the same labelling rules in different words.

- ``dev`` (``lethebench.generator.dev``): the family LetheBench was first written from. The rule-based
  components were written and tuned against it: iteration 2's rewrite rules
  (``lethe/stages/understanding/rules.py``), the rules contradiction detector
  (``lethe/stages/contradiction/rules.py``) and the boost's kind affinities. Dataset ``lethebench``.
- ``heldout`` (``lethebench.generator.heldout``): written afterwards, from scratch, with those rules frozen
  (no rule changed in or after the commit that added it), and never used to write or tune any of them.
  Dataset ``lethebench_heldout``.
"""

from __future__ import annotations

import importlib
import random
from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable

FAMILIES = ("dev", "heldout")


@dataclass(frozen=True)
class Attribute:
    """One kind of fact about a service (port, timeout, ...), with all its phrasings."""

    name: str
    phrase: str  # how a question names it: "port", "timeout", ...
    prose: list[str]
    code: list[str]
    tool: list[str]
    mention: list[str]  # names service and attribute, holds no value
    update: list[str]
    question: list[str]
    paraphrase: list[str]
    env_aware: bool = False
    entity_value: bool = False  # the value is itself an entity (a team, a region, ...)
    extra: dict[str, list[str]] = field(default_factory=dict)
    entity_sep: str | None = None  # the value is several entities joined by this ("postgres at db-1.internal")


# (rng, attribute, service root) -> (value, extra template fields such as {url})
ValueDraw = Callable[[random.Random, Attribute, str], tuple[str, dict[str, str]]]


@dataclass(frozen=True)
class Family:
    """One family: its templates and vocabulary modules and the few rules that differ between families.

    ``templates`` must define ATTRIBUTES, ATTRIBUTE_BY_NAME, ONCALL, CHANNEL, MULTIHOP_Q, BROAD_Q, ACTIONS,
    ACTION_TURNS, TEMPORAL_Q, ERROR_TURNS, ERROR_Q, FUNC_TURNS, FUNC_Q, PIN_TURNS, PIN_Q, ELLIPSIS_ENTITY,
    ELLIPSIS_ATTR and HISTORY_ANSWER; ``vocab`` SERVICE_ROOTS, SERVICE_SUFFIXES, COMPONENT_NOUNS, TEAMS, PEOPLE,
    CHANNELS, ENVIRONMENTS, LIBRARIES, ERROR_MESSAGES, ERROR_PREFIXES, VERBS, NOUNS, RETURNS, FEATURE_FLAGS,
    SMALL_TALK, PROSE_FILLER, CODE_FILLER and TOOL_FILLER (``lethebench.generator.dev`` is the reference)."""

    name: str
    templates: ModuleType
    vocab: ModuleType
    draw_value: ValueDraw
    update_kind: Callable[[str], str]  # the turn kind (prose, code, tool) of a rendered update text
    env_phrase: str  # how a fact or question names its environment: " in {env}"
    env_paraphrase: dict[str, list[str]]  # environment -> phrases for paraphrase questions
    current_suffixes: list[str]  # appended to an updated-fact question ("... now?")
    written_against: str  # what was written against this family (the dataset card says it)


def get_family(name: str) -> Family:
    """The family called ``name`` (one of :data:`FAMILIES`)."""
    if name not in FAMILIES:
        raise ValueError(f"dataset.params.family={name!r}: unknown template family; known: {', '.join(FAMILIES)}")
    return importlib.import_module(f"lethebench.generator.{name}").FAMILY
