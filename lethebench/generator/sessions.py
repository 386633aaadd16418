"""Build one LetheBench session: turns, queries asked mid-session, and their labels.

Labels come from the generator's own knowledge (which turn states which fact), never from
regexes over the text. Rules (also in the dataset card):
- grades: 2 = the turn holds the answer; 1 = context needed for it (the other hop of a multi-hop
  question, the anchor step of an order question);
- complexity: score = (hops - 1) + ellipsis + [>= 4 eligible non-relevant turns name the query's
  service]; 0 low, 1 medium, >= 2 high;
- plan label from the query family: verify = identifier, updated_fact; explore = broad,
  multi_hop, paraphrase; exploit = single_hop, temporal, elliptical.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from lethebench.generator.family import Attribute, Family, get_family

CATEGORIES = ["single_hop", "multi_hop", "temporal", "updated_fact", "elliptical", "identifier", "paraphrase", "broad"]
PLAN_LABEL = {"identifier": "verify", "updated_fact": "verify", "broad": "explore", "multi_hop": "explore",
              "paraphrase": "explore", "single_hop": "exploit", "temporal": "exploit", "elliptical": "exploit"}
DOMAINS = ["code_heavy", "chatty_prose", "tool_results", "mixed"]
# probability of rendering a fact as prose / code / tool output, per domain
KIND_WEIGHTS = {"code_heavy": (0.25, 0.55, 0.20), "chatty_prose": (0.85, 0.05, 0.10),
                "tool_results": (0.15, 0.15, 0.70), "mixed": (0.34, 0.33, 0.33)}


@dataclass
class Service:
    name: str
    root: str
    alias: str
    noun: str


@dataclass
class Turn:
    role: str
    kind: str
    text: str
    entities: list[str]
    block: int = -1  # turns of one block keep their relative order
    pos: int = -1


@dataclass
class Fact:
    svc: Service
    attr: Attribute
    value: str
    env: str | None
    turn: int
    updated: bool = False  # superseded later: not usable as a plain lookup
    used: bool = False


@dataclass
class GenQuery:
    category: str
    text: str
    answer: str
    rel: dict[int, int]  # turn index -> grade
    gold_entities: list[str]
    subject: str | None
    history: list[str] = field(default_factory=list)
    stale: list[tuple[int, int]] = field(default_factory=list)  # (stale turn, current turn)
    hops: int = 1
    ellipsis: int = 0
    position: int = -1
    complexity: str = ""


def _snake(s: str) -> str:
    return s.replace("-", "_").upper()


class SessionBuilder:
    """Generates one session from a template family (default: dev); see :meth:`build`."""

    def __init__(self, rng: random.Random, domain: str, family: Family | None = None):
        self.rng = rng
        self.domain = domain
        self.family = family or get_family("dev")
        self.T, self.V = self.family.templates, self.family.vocab
        self.turns: list[Turn] = []
        self.facts: list[Fact] = []
        self.blocks = 0
        self.services: list[Service] = []
        self.team_of: dict[str, Fact] = {}

    # ---------- turns ----------
    def _kind(self) -> str:
        return self.rng.choices(["prose", "code", "tool"], weights=KIND_WEIGHTS[self.domain])[0]

    def _add(self, role: str, kind: str, text: str, entities: list[str], block: int = -1) -> int:
        if kind == "prose" and self.domain == "chatty_prose" and self.rng.random() < 0.7:
            text = f"{self.rng.choice(self.V.PROSE_FILLER)} {text} {self.rng.choice(self.V.SMALL_TALK)}"
        self.turns.append(Turn(role, kind, text, entities, block))
        return len(self.turns) - 1

    def _new_block(self) -> int:
        self.blocks += 1
        return self.blocks

    @staticmethod
    def _role(kind: str, rng: random.Random) -> str:
        return "tool" if kind == "tool" else rng.choice(["user", "assistant"])

    # ---------- values ----------
    def _value(self, attr: Attribute, svc: Service, avoid: str | None = None) -> tuple[str, dict[str, str]]:
        for _ in range(50):
            v, extra = self.family.draw_value(self.rng, attr, svc.root)
            if v != avoid:
                return v, extra
        raise RuntimeError("could not draw a distinct value")

    def _fmt(self, tpl: str, f: Fact, extra: dict[str, str], old: str | None = None) -> str:
        env = self.family.env_phrase.format(env=f.env) if f.env else ""
        return tpl.format(svc=f.svc.name, SVC=_snake(f.svc.name), v=f.value, old=old or "", env=env,
                          envw=f.env or "default", vl=f.value.lower(), url=extra.get("url", f.value))

    def _fact_entities(self, f: Fact) -> list[str]:
        if f.attr.entity_sep:  # "engine at host": written as a URL in some templates
            return [f.svc.name, *f.value.split(f.attr.entity_sep)]
        return [f.svc.name] + ([f.value] if f.attr.entity_value else [])

    def _state_fact(self, f: Fact, extra: dict[str, str], block: int = -1) -> int:
        kind = self._kind()
        tpl = self.rng.choice({"prose": f.attr.prose, "code": f.attr.code, "tool": f.attr.tool}[kind])
        return self._add(self._role(kind, self.rng), kind, self._fmt(tpl, f, extra), self._fact_entities(f), block)

    # ---------- universe ----------
    def make_universe(self) -> None:
        r = self.rng
        roots = r.sample(self.V.SERVICE_ROOTS, r.randint(4, 6))
        for root, aliases in roots:
            self.services.append(Service(root + r.choice(self.V.SERVICE_SUFFIXES), root, r.choice(aliases), r.choice(self.V.COMPONENT_NOUNS)))
        for svc in self.services:
            attrs = r.sample(self.T.ATTRIBUTES, r.randint(3, 5))
            if not any(a.name == "owner" for a in attrs):
                attrs.append(self.T.ATTRIBUTE_BY_NAME["owner"])
            for attr in attrs:
                envs = [e for e, _ in self.V.ENVIRONMENTS] if attr.env_aware else [None]
                used: list[str] = []
                for env in envs:
                    v, extra = self._value(attr, svc, avoid=used[0] if used else None)
                    used.append(v)
                    f = Fact(svc, attr, v, env, -1)
                    f.turn = self._state_fact(f, extra)
                    f.extra = extra  # type: ignore[attr-defined]
                    self.facts.append(f)
                    if attr.name == "owner":
                        self.team_of[svc.name] = f
            # a hard negative: names the service and an attribute, holds no value
            for attr in r.sample(attrs, min(2, len(attrs))):
                self._add(r.choice(["user", "assistant"]), "prose", r.choice(attr.mention).format(svc=svc.name), [svc.name])

    def _pick_fact(self, pred=lambda f: True) -> Fact | None:
        cands = [f for f in self.facts if not f.updated and not f.used and pred(f)]
        if not cands:
            return None
        f = self.rng.choice(cands)
        f.used = True
        return f

    def _question(self, f: Fact, paraphrase: bool = False) -> str:
        r = self.rng
        if paraphrase:
            envp = r.choice(self.family.env_paraphrase[f.env]) if f.env else ""
            return r.choice(f.attr.paraphrase).format(alias=f.svc.alias, noun=f.svc.noun, envp=envp)
        env = self.family.env_phrase.format(env=f.env) if f.env else ""
        return r.choice(f.attr.question).format(svc=f.svc.name, env=env)

    # ---------- query families ----------
    def q_single_hop(self) -> GenQuery | None:
        f = self._pick_fact()
        if f is None:
            return None
        return GenQuery("single_hop", self._question(f), f.value, {f.turn: 2}, self._fact_entities(f), f.svc.name)

    def q_paraphrase(self) -> GenQuery | None:
        f = self._pick_fact(lambda f: f.attr.name != "owner")
        if f is None:
            return None
        return GenQuery("paraphrase", self._question(f, paraphrase=True), f.value, {f.turn: 2}, self._fact_entities(f), f.svc.name)

    def q_updated_fact(self) -> GenQuery | None:
        f = self._pick_fact(lambda f: f.env is None)
        if f is None:
            return None
        r = self.rng
        new, _ = self._value(f.attr, f.svc, avoid=f.value)
        block = self._new_block()
        self.turns[f.turn].block = block
        cur = Fact(f.svc, f.attr, new, f.env, -1)
        text = self._fmt(r.choice(f.attr.update), cur, getattr(f, "extra", {}), old=f.value)
        kind = self.family.update_kind(text)
        cur.turn = self._add(self._role(kind, r), kind, text, self._fact_entities(cur), block)
        f.updated = True
        q = self._question(f)
        suffix = r.choice(self.family.current_suffixes)
        q = q[:-1] + suffix if q.endswith("?") else q + suffix
        return GenQuery("updated_fact", q, new, {cur.turn: 2}, self._fact_entities(cur), f.svc.name, stale=[(f.turn, cur.turn)])

    def q_multi_hop(self) -> GenQuery | None:
        r = self.rng
        svc_names = [s for s, f in self.team_of.items() if not f.updated]
        if not svc_names:
            return None
        svc = r.choice(svc_names)
        owner = self.team_of[svc]
        team = owner.value
        kind = r.choice(["oncall", "channel"])
        # the answer, plus the same fact for other teams (distractors naming people/channels)
        others = [t for t in self.V.TEAMS if t != team]
        if kind == "oncall":
            person = r.choice(self.V.PEOPLE)
            ans_turn = self._add(r.choice(["user", "assistant"]), "prose", r.choice(self.T.ONCALL).format(p=person, t=team), [team, person])
            for t in r.sample(others, 2):
                p = r.choice([x for x in self.V.PEOPLE if x != person])
                self._add(r.choice(["user", "assistant"]), "prose", r.choice(self.T.ONCALL).format(p=p, t=t), [t, p])
            answer, ents = person, [svc, team, person]
        else:
            ch = r.choice(self.V.CHANNELS)
            ans_turn = self._add(r.choice(["user", "assistant"]), "prose", r.choice(self.T.CHANNEL).format(c=ch, t=team), [team, ch])
            for t in r.sample(others, 2):
                c = r.choice([x for x in self.V.CHANNELS if x != ch])
                self._add(r.choice(["user", "assistant"]), "prose", r.choice(self.T.CHANNEL).format(c=c, t=t), [t, c])
            answer, ents = "#" + ch, [svc, team, ch]
        q = r.choice(self.T.MULTIHOP_Q[kind]).format(svc=svc)
        return GenQuery("multi_hop", q, answer, {ans_turn: 2, owner.turn: 1}, ents, svc, hops=2)

    def q_temporal(self) -> GenQuery | None:
        r = self.rng
        block = self._new_block()
        steps = []
        for a in r.sample(self.T.ACTIONS, 4):
            svc = r.choice(self.services).name
            action = a.format(svc=svc, flag=r.choice(self.V.FEATURE_FLAGS))
            kind = r.choice(["prose", "tool"]) if self.domain != "chatty_prose" else "prose"
            text = r.choice(self.T.ACTION_TURNS).format(a=action)
            steps.append((self._add(self._role(kind, r), kind, text, [svc], block), action, svc))
        if r.random() < 0.5:
            i = r.randrange(0, 3)
            anchor, target = steps[i], steps[i + 1]
            q = r.choice(self.T.TEMPORAL_Q["after"]).format(a=anchor[1])
        else:
            i = r.randrange(1, 4)
            anchor, target = steps[i], steps[i - 1]
            q = r.choice(self.T.TEMPORAL_Q["before"]).format(a=anchor[1])
        ents = list(dict.fromkeys([target[2], anchor[2]]))
        return GenQuery("temporal", q, target[1], {target[0]: 2, anchor[0]: 1}, ents, anchor[2], hops=2)

    def q_identifier(self) -> GenQuery | None:
        r = self.rng
        svc = r.choice(self.services).name
        sub = r.choice(["error", "function", "pin"])
        if sub == "error":
            prefix = r.choice(self.V.ERROR_PREFIXES)
            digits = [r.randint(1, 9) for _ in range(4)]
            variants = []
            for _ in range(3):  # near-duplicate codes: one digit changed or two swapped
                d = digits[:]
                i, j = r.sample(range(4), 2)
                if r.random() < 0.5 and d[i] != d[j]:
                    d[i], d[j] = d[j], d[i]
                else:
                    d[i] = (d[i] % 9) + 1
                variants.append(d)
            codes = [prefix + "".join(map(str, digits))] + [prefix + "".join(map(str, d)) for d in variants]
            codes = list(dict.fromkeys(codes))
            msgs = r.sample(self.V.ERROR_MESSAGES, len(codes))
            turn_ids = []
            for c, m in zip(codes, msgs):
                text = r.choice(self.T.ERROR_TURNS).format(ts=f"2024-0{r.randint(1, 9)}-1{r.randint(0, 9)}T{r.randint(10, 23)}:{r.randint(10, 59)}:0{r.randint(0, 9)}Z",
                                                      svc=svc, code=c, msg=m, ln=r.randint(20, 400))
                turn_ids.append(self._add("tool", "tool", text, [svc, c]))
            q = r.choice(self.T.ERROR_Q).format(code=codes[0])
            return GenQuery("identifier", q, msgs[0], {turn_ids[0]: 2}, [codes[0]], svc)
        if sub == "function":
            verb, noun = r.choice(self.V.VERBS), r.choice(self.V.NOUNS)
            style = r.choice(["camel", "snake"])

            def name(v: str, n: str) -> str:
                return v + n if style == "camel" else f"{v}_{n[0].lower()}{''.join('_' + c.lower() if c.isupper() else c for c in n[1:])}"

            fns = [name(verb, noun), name(verb, noun + "s"), name(r.choice([x for x in self.V.VERBS if x != verb]), noun),
                   name(verb, r.choice([x for x in self.V.NOUNS if x != noun]))]
            fns = list(dict.fromkeys(fns))
            rets = r.sample(self.V.RETURNS, len(fns))
            turn_ids = []
            for fn, ret in zip(fns, rets):
                kind, tpl = r.choice(self.T.FUNC_TURNS)  # the template declares its kind (code or prose)
                turn_ids.append(self._add(self._role(kind, r), kind, tpl.format(fn=fn, svc=svc, ret=ret), [svc, fn]))
            q = r.choice(self.T.FUNC_Q).format(fn=fns[0])
            return GenQuery("identifier", q, rets[0], {turn_ids[0]: 2}, [fns[0]], svc)
        libs = r.sample(self.V.LIBRARIES, 3)
        major, minor = r.randint(0, 5), r.randint(0, 30)
        patches = r.sample(range(0, 20), 3)
        turn_ids = []
        for lib, p in zip(libs, patches):
            kind = r.choice(["prose", "code", "tool"])
            tpl = r.choice(self.T.PIN_TURNS)
            turn_ids.append(self._add(self._role(kind, r), kind, tpl.format(lib=lib, ver=f"{major}.{minor}.{p}", svc=svc), [svc, lib]))
        q = r.choice(self.T.PIN_Q).format(ver=f"{major}.{minor}.{patches[0]}")
        return GenQuery("identifier", q, libs[0], {turn_ids[0]: 2}, [libs[0]], svc)

    def q_elliptical(self) -> GenQuery | None:
        r = self.rng
        f1 = self._pick_fact()
        if f1 is None:
            return None
        if r.random() < 0.5:  # same attribute, other service
            f2 = self._pick_fact(lambda f: f.attr is f1.attr and f.svc is not f1.svc and f.env == f1.env)
            text = r.choice(self.T.ELLIPSIS_ENTITY).format(svc=f2.svc.name) if f2 else None
        else:  # same service, other attribute
            f2 = self._pick_fact(lambda f: f.svc is f1.svc and f.attr is not f1.attr and f.env in (None, f1.env))
            text = r.choice(self.T.ELLIPSIS_ATTR).format(phrase=f2.attr.phrase) if f2 else None
        if f2 is None or text is None:
            f1.used = False
            return None
        history = [self._question(f1),
                   r.choice(self.T.HISTORY_ANSWER).format(phrase=f1.attr.phrase, svc=f1.svc.name, v=f1.value)]
        return GenQuery("elliptical", text, f2.value, {f2.turn: 2}, self._fact_entities(f2), f2.svc.name,
                        history=history, ellipsis=1)

    def q_broad(self) -> GenQuery | None:
        r = self.rng
        svc = r.choice(self.services)
        facts = [f for f in self.facts if f.svc is svc and not f.updated]
        if len(facts) < 3:
            return None
        answer = "; ".join(f"{f.attr.phrase}{' (' + f.env + ')' if f.env else ''}: {f.value}" for f in facts)
        ents = list(dict.fromkeys(e for f in facts for e in self._fact_entities(f)))
        return GenQuery("broad", r.choice(self.T.BROAD_Q).format(svc=svc.name), answer, {f.turn: 2 for f in facts}, ents, svc.name)

    # ---------- assembly ----------
    def _fill(self, target: int) -> None:
        r = self.rng
        small = {"code_heavy": self.V.CODE_FILLER, "chatty_prose": self.V.PROSE_FILLER, "tool_results": self.V.TOOL_FILLER,
                 "mixed": self.V.CODE_FILLER + self.V.PROSE_FILLER + self.V.TOOL_FILLER}[self.domain]
        while len(self.turns) < target:
            if r.random() < 0.35:
                self._add(r.choice(["user", "assistant"]), "chat", r.choice(self.V.SMALL_TALK), [])
            else:
                text = r.choice(small)
                kind = "code" if text in self.V.CODE_FILLER else "tool" if text in self.V.TOOL_FILLER else "prose"
                self._add(self._role(kind, r), kind, text, [])

    def _order(self) -> None:
        r = self.rng
        keys = [r.random() for _ in self.turns]
        by_block: dict[int, list[int]] = {}
        for i, t in enumerate(self.turns):
            if t.block >= 0:
                by_block.setdefault(t.block, []).append(i)
        for ids in by_block.values():
            for i, k in zip(ids, sorted(keys[i] for i in ids)):
                keys[i] = k
        for pos, i in enumerate(sorted(range(len(self.turns)), key=lambda i: (keys[i], i))):
            self.turns[i].pos = pos

    def build(self, categories: list[str], target_len: int) -> list[GenQuery]:
        """Make the universe, one query per requested category (when possible), fill and order."""
        self.make_universe()
        queries: list[GenQuery] = []
        for cat in categories:
            q = getattr(self, f"q_{cat}")()
            if q is not None:
                queries.append(q)
        self._fill(max(target_len, len(self.turns) + 10))
        self._order()
        n = len(self.turns)
        r = self.rng
        for q in queries:
            needed = [self.turns[i].pos for i in q.rel] + [self.turns[s].pos for s, _ in q.stale]
            q.position = r.randint(max(needed) + 1, n)
            mentions = sum(1 for i, t in enumerate(self.turns)
                           if t.pos < q.position and i not in q.rel and q.subject and q.subject in t.entities)
            score = (q.hops - 1) + q.ellipsis + (1 if mentions >= 4 else 0)
            q.complexity = ["low", "medium", "high"][min(score, 2)]
        return queries
