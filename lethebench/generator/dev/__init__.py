"""The dev template family (``lethebench.generator.family``): the family the rule-based components were written
and tuned against. Dataset ``lethebench``."""

from __future__ import annotations

import random

from lethebench.generator.dev import templates, vocab
from lethebench.generator.family import Attribute, Family


def draw_value(r: random.Random, attr: Attribute, root: str) -> tuple[str, dict[str, str]]:
    """One value of ``attr`` for the service with root word ``root``, and its extra template fields."""
    extra: dict[str, str] = {}
    if attr.name == "port":
        v = str(r.randint(1025, 9999))
    elif attr.name == "timeout":
        v = str(r.choice([250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 8000, 10000, 15000, 30000]))
    elif attr.name == "version":
        v = f"{r.randint(0, 4)}.{r.randint(0, 19)}.{r.randint(0, 29)}"
    elif attr.name == "replicas":
        v = str(r.randint(2, 24))
    elif attr.name == "database":
        engine = r.choice(vocab.DB_ENGINES)
        host = r.choice(vocab.DB_HOSTS).format(n=r.randint(1, 40))
        v = f"{engine} at {host}"
        extra["url"] = f"{engine}://{host}/{root}"
    elif attr.name == "owner":
        v = r.choice(vocab.TEAMS)
    elif attr.name == "region":
        v = r.choice(vocab.REGIONS)
    else:  # memory
        v = r.choice(["256Mi", "384Mi", "512Mi", "768Mi", "1Gi", "2Gi", "3Gi", "4Gi", "6Gi", "8Gi"])
    return v, extra


def update_kind(text: str) -> str:
    """prose, code or tool: the kind of a rendered update template."""
    if text.startswith(("$", "autoscaler", "deploy/")):
        return "tool"
    return "code" if "=" in text.split("\n")[0] and "_" in text else "prose"


FAMILY = Family(
    name="dev", templates=templates, vocab=vocab, draw_value=draw_value, update_kind=update_kind,
    env_phrase=" in {env}",
    env_paraphrase={"production": [" on the live side", " that customers hit"],
                    "staging": [" in pre-prod", " on the rehearsal cluster"]},
    current_suffixes=[" now?", " at the moment?", " after the change?", " these days?"],
    written_against=("iteration 2's rewrite rules (lethe/stages/understanding/rules.py), the rules contradiction "
                     "detector (lethe/stages/contradiction/rules.py) and the boost's kind affinities were written and "
                     "tuned against this family; read its numbers as in-sample for those components"),
)
