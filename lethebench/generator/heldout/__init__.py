"""The held-out template family (``lethebench.generator.family``): written after the rule-based components were
frozen and never used to write or tune them. Dataset ``lethebench_heldout``."""

from __future__ import annotations

import random

from lethebench.generator.family import Attribute, Family
from lethebench.generator.heldout import templates, vocab


def draw_value(r: random.Random, attr: Attribute, root: str) -> tuple[str, dict[str, str]]:
    """One value of ``attr`` for the service with root word ``root`` (no extra template fields)."""
    if attr.name == "port":
        v = str(r.randint(2000, 60999))
    elif attr.name == "version":
        v = f"{r.randint(20, 26)}.{r.randint(1, 12)}.{r.randint(0, 9)}"
    elif attr.name == "workers":
        v = str(r.randint(1, 48))
    elif attr.name == "owner":
        v = r.choice(vocab.TEAMS)
    elif attr.name == "zone":
        v = r.choice(vocab.ZONES)
    elif attr.name == "queue":
        v = f"{root}.{r.choice(vocab.QUEUE_EVENTS)}.v{r.randint(1, 4)}"
    elif attr.name == "retention":
        v = f"{r.choice([3, 7, 14, 21, 30, 45, 60, 90, 180, 365])} days"
    elif attr.name == "cpu":
        v = f"{r.choice([100, 250, 500, 750, 1000, 1500, 2000, 3000, 4000])}m"
    elif attr.name == "pool":
        v = str(r.choice([5, 8, 10, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 200]))
    else:
        raise ValueError(f"held-out family: no value rule for attribute {attr.name!r}")
    return v, {}


def update_kind(text: str) -> str:
    """prose, code or tool: the kind of a rendered update template."""
    if text.startswith("$"):
        return "tool"
    first = text.split("\n")[0]
    return "code" if first.startswith("[") or " = " in first else "prose"


FAMILY = Family(
    name="heldout", templates=templates, vocab=vocab, draw_value=draw_value, update_kind=update_kind,
    env_phrase=" on {env}",
    env_paraphrase={"stable": [" serving everyone", " on the main rollout"],
                    "canary": [" in the early-access ring", " on the trial rollout"]},
    current_suffixes=[" as of now?", " currently?", " after the latest change?", " right now?"],
    written_against=("nothing: written after iteration 2's rewrite rules, the rules contradiction detector and the "
                     "boost's kind affinities were frozen (no rule changed in or after the commit that added this "
                     "family), and never used to write or tune any of them; learned components train on this "
                     "dataset's own train split and select on its dev split, as on every dataset"),
)
