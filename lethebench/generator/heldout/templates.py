"""The held-out family's phrasing templates (``lethebench.generator.family``), written for this project after the
rule-based components were frozen, and never used to write or tune them.

Same placeholders as the dev family (``lethebench.generator.dev.templates``): ``{svc}`` service name, ``{SVC}`` its
SCREAMING_CASE form, ``{v}`` value (``{vl}`` lowercased), ``{old}`` superseded value, ``{env}`` environment phrase
(may be empty), ``{envw}`` the bare environment word, ``{alias}`` and ``{noun}`` a description of the service that
avoids its name, ``{envp}`` a paraphrased environment phrase. Every fact template writes ``{svc}`` and ``{v}``
verbatim, so labels stay checkable from the text.
"""

from __future__ import annotations

from lethebench.generator.family import Attribute

ATTRIBUTES: list[Attribute] = [
    Attribute(
        "port", "TCP port",
        prose=["{svc}{env} answers on TCP {v}.", "Note to self: {svc}{env} exposes {v}.",
               "If you want to hit {svc}{env} directly, use {v}.", "{svc}{env} binds {v}; nothing else should grab it.",
               "The socket {svc}{env} opens is {v}, per the runbook."],
        code=["listen_addr = \"0.0.0.0:{v}\"  # {svc}{env}",
              "[{svc}]\nbind = \":{v}\"\nenv = \"{envw}\"",
              "EXPOSE {v}\nCMD [\"/usr/local/bin/{svc}\", \"--env={envw}\"]"],
        tool=["$ nc -zv {svc}.{envw}.lan {v}\nConnection to {svc}.{envw}.lan port {v} [tcp] succeeded!",
              "$ nomad alloc status {svc}-{envw} | grep -A1 Ports\nhttp  yes  10.0.4.17:{v}",
              "time=12:04:51 svc={svc} env={envw} msg=\"accepting connections\" addr=:{v}"],
        mention=["Which TCP port was {svc} on again? I keep scrolling up for it.",
                 "Somebody should pin the {svc} port in the wiki.",
                 "The firewall rule for {svc} probably needs its port, we'll sort it out later.",
                 "I think the {svc} port clashes with something on my laptop."],
        update=["Heads-up: {svc}{env} is on {v} now, not {old}.",
                "Correction for {svc}{env}: the port went from {old} to {v} after the rebuild.",
                "$ nomad alloc status {svc}-{envw} | grep -A1 Ports\nhttp  yes  10.0.4.17:{v}   (previously :{old})",
                "listen_addr = \"0.0.0.0:{v}\"  # {svc}{env}, replaces :{old}"],
        question=["What TCP port does {svc}{env} expose?", "Remind me of the port for {svc}{env}?",
                  "Which port do I connect to for {svc}{env}?", "{svc}{env}: what port is it on?"],
        paraphrase=["To open a connection to the {alias} {noun}{envp}, which number goes after the host?",
                    "What socket is the {alias} {noun}{envp} waiting on?",
                    "Which endpoint number should a client target for the {alias} {noun}{envp}?"],
        env_aware=True,
    ),
    Attribute(
        "version", "build",
        prose=["{svc}{env} ships build {v} right now.", "Live build of {svc}{env} is {v}.",
               "We cut {v} for {svc}{env} yesterday and it's out.", "{svc}{env} carries tag {v} since the Monday rollout."],
        code=["FROM registry.internal/{svc}:{v}  # {envw}", "{{\"app\": \"{svc}\", \"tag\": \"{v}\", \"track\": \"{envw}\"}}",
              "helm upgrade {svc} ./chart --set image.tag={v} -n {envw}"],
        tool=["$ helm list -n {envw} | grep {svc}\n{svc}  {envw}  42  deployed  {svc}-chart  {v}",
              "time=08:15:02 svc={svc} env={envw} msg=\"boot\" build={v}",
              "$ {svc} --build-info  # {envw}\n{svc} {v} (linux/amd64)"],
        mention=["What build is {svc} on? The changelog doesn't say.",
                 "We really should roll {svc} forward, that build is old.",
                 "The build label for {svc} in Grafana looks wrong to me."],
        update=["{svc}{env} left {old} behind, it's on {v} now.",
                "Rollout finished: {svc}{env} went {old} -> {v}.",
                "$ helm history {svc} -n {envw} | tail -2\n41  superseded  {old}\n42  deployed    {v}"],
        question=["Which build of {svc}{env} is out?", "What tag is {svc}{env} on?",
                  "What build does {svc}{env} carry right now?"],
        paraphrase=["What release tag does the {alias} {noun}{envp} carry?",
                    "Which cut of the {alias} {noun}{envp} is serving at present?"],
        env_aware=True,
    ),
    Attribute(
        "workers", "worker count",
        prose=["{svc}{env} spawns {v} worker processes.", "{svc}{env} is set to {v} workers.",
               "We gave {svc}{env} {v} workers after the backlog last week."],
        code=["[{svc}]\nworkers = {v}  # {envw}", "gunicorn {svc}.wsgi --workers {v}  # {envw}"],
        tool=["$ pgrep -c -f '{svc} worker'  # {envw}\n{v}", "time=09:30:11 svc={svc} env={envw} msg=\"pool ready\" workers={v}"],
        mention=["Is {svc} running enough workers for the import job?",
                 "Let's double-check how many workers {svc} has before the migration."],
        update=["{svc}{env} runs {v} workers now; it had {old}.", "Worker bump for {svc}{env}: {old} became {v}.",
                "[{svc}]\nworkers = {v}  # {envw}; we had {old} before"],
        question=["How many workers does {svc}{env} run?", "What's the worker count on {svc}{env}?",
                  "{svc}{env}: how many worker processes?"],
        paraphrase=["How many parallel processes does the {alias} {noun}{envp} spin up?",
                    "What degree of concurrency is the {alias} {noun}{envp} running with?"],
        env_aware=True,
    ),
    Attribute(
        "owner", "maintainer squad",
        prose=["Squad {v} looks after {svc}.", "{svc} is squad {v}'s baby.", "For {svc}, go to squad {v}."],
        code=["# MAINTAINERS\n{svc}: squad-{vl}", "{{\"component\": \"{svc}\", \"squad\": \"{vl}\"}}"],
        tool=["$ git log -1 --format=%an -- services/{svc}/MAINTAINERS\nsquad-{vl}-bot",
              "$ backstage get component {svc} --field owner\nsquad-{vl}"],
        mention=["Who actually maintains {svc} now?", "Nobody seems sure who is responsible for {svc}."],
        update=["{svc} changed hands: squad {v} has it, squad {old} handed it off.",
                "Reorg note: {svc} now sits with squad {v}, no longer squad {old}."],
        question=["Which squad maintains {svc}?", "Who looks after {svc}?"],
        paraphrase=["Which crew should I bother about the {alias} {noun}?",
                    "Who is accountable for keeping the {alias} {noun} healthy?"],
        entity_value=True,
    ),
    Attribute(
        "zone", "datacenter",
        prose=["{svc} sits in {v}.", "Our {svc} boxes are racked in {v}.", "{svc} is hosted out of the {v} datacenter."],
        code=["datacenters = [\"{v}\"]  # {svc}", "[{svc}]\ndatacenter = \"{v}\""],
        tool=["$ nomad job status {svc} | grep Datacenters\nDatacenters = {v}", "time=07:01:44 svc={svc} msg=\"joined cluster\" dc={v}"],
        mention=["Is {svc} in the same datacenter as its cache?", "Which datacenter is {svc} even in? Pings look slow."],
        update=["{svc} was relocated to {v}; {old} is empty now.", "Datacenter move complete for {svc}: {old} -> {v}."],
        question=["Which datacenter hosts {svc}?", "Where is {svc} racked?"],
        paraphrase=["In which facility do the machines of the {alias} {noun} run?",
                    "What site physically hosts the {alias} {noun}?"],
        entity_value=True,
    ),
    Attribute(
        "queue", "topic",
        prose=["{svc} consumes from {v}.", "The topic {svc} reads is {v}.", "{svc} listens to {v} for its work items."],
        code=["consumer = Consumer(topic=\"{v}\", group=\"{svc}\")", "[{svc}.consumer]\ntopic = \"{v}\""],
        tool=["$ kcat -L | grep -B1 {svc}\n  topic \"{v}\" with 12 partitions\n    consumer group {svc}",
              "time=10:20:31 svc={svc} msg=\"subscribed\" topic={v}"],
        mention=["What topic does {svc} read from? I need it for the replay.",
                 "We might want {svc} off its topic once the new pipeline lands."],
        update=["{svc} now consumes {v} instead of {old}.", "Cut-over done: {svc} reads {v}; {old} is drained."],
        question=["Which topic does {svc} consume?", "What topic is {svc} subscribed to?"],
        paraphrase=["From which stream does the {alias} {noun} pull its work?",
                    "What event feed keeps the {alias} {noun} busy?"],
        entity_value=True,
    ),
    Attribute(
        "retention", "retention period",
        prose=["{svc} keeps its data for {v}.", "Retention on {svc} is {v}.", "We hold {svc} records {v} and then purge."],
        code=["[{svc}.storage]\nretention = \"{v}\"", "RETAIN = \"{v}\"  # {svc}"],
        tool=["$ {svc}-admin show-policy\nretention: {v}", "time=03:00:00 svc={svc} msg=\"purge ran\" keep=\"{v}\""],
        mention=["Do we know how long {svc} keeps things around?", "Legal asked about {svc} retention again."],
        update=["{svc} retention is {v} going forward (was {old}).", "Policy change: {svc} keeps data for {v} now; the old setting was {old}."],
        question=["How long does {svc} retain data?", "What's the retention on {svc}?"],
        paraphrase=["How long before the {alias} {noun} throws old records away?",
                    "For what span does the {alias} {noun} hold on to what it stores?"],
    ),
    Attribute(
        "cpu", "CPU limit",
        prose=["{svc} may use {v} of CPU.", "CPU for {svc} is capped at {v}.", "{svc} gets {v} CPU, no more."],
        code=["[{svc}.resources]\ncpu = \"{v}\"", "cpu_limit: {v}  # {svc}"],
        tool=["$ kubectl top pod -l app={svc}\nNAME  CPU(limit)\n{svc}-5c8d  {v}", "throttled: {svc} hit its {v} cpu ceiling"],
        mention=["{svc} gets throttled a lot, maybe the CPU limit is too low.", "Should {svc} have more CPU?"],
        update=["{svc} CPU limit is {v} from now on, it was {old}.", "Gave {svc} {v} of CPU instead of {old}."],
        question=["What CPU limit does {svc} have?", "How much CPU is {svc} allowed?"],
        paraphrase=["How much processor time may the {alias} {noun} consume?",
                    "What is the compute ceiling of the {alias} {noun}?"],
    ),
    Attribute(
        "pool", "connection pool size",
        prose=["{svc} opens at most {v} connections to its store.", "Pool size for {svc} is {v}.",
               "{svc} keeps a pool of {v} connections."],
        code=["pool = Pool(max_size={v})  # {svc}", "[{svc}.db]\nmax_connections = {v}"],
        tool=["$ {svc}-admin pool-stats\nmax={v} in_use=3 idle=2", "time=11:45:09 svc={svc} msg=\"pool init\" max={v}"],
        mention=["The connection pool of {svc} is probably why we see waits.", "Who tuned the pool on {svc}?"],
        update=["{svc} pool is now {v} connections (was {old}).", "Resized the {svc} pool: {old} to {v}."],
        question=["What is the connection pool size of {svc}?", "How many connections can {svc} hold open?"],
        paraphrase=["How many simultaneous links to storage does the {alias} {noun} keep?",
                    "What is the upper bound on open store connections for the {alias} {noun}?"],
    ),
]
ATTRIBUTE_BY_NAME = {a.name: a for a in ATTRIBUTES}

# Multi-hop: squad -> escalation contact, squad -> ticket queue / room
ONCALL = ["Escalations for squad {t} go to {p} until Friday.", "{p} carries the squad {t} phone this rotation.",
          "If squad {t} breaks something, {p} is the contact right now.", "escalation: squad={t} contact={p}"]
CHANNEL = ["Squad {t} hangs out in #{c}.", "You'll find squad {t} in #{c}.", "Drop squad {t} a note in #{c}."]
MULTIHOP_Q = {
    "oncall": ["Who is the escalation contact for the squad maintaining {svc}?",
               "If {svc} breaks, which person do I ring?", "Which person covers escalations for {svc}'s squad?"],
    "channel": ["Where can I reach the squad that maintains {svc}?",
                "Which room does the squad responsible for {svc} use?"],
}
BROAD_Q = ["List everything that came up about {svc}.", "Recap {svc} for me.",
           "Brief me on {svc}: every detail we have.", "What have we established about {svc}?"]

# Temporal: actions on a service, in order
ACTIONS = ["cordoned the nodes of {svc}", "replayed the dead letters of {svc}", "swapped the base image of {svc}",
           "turned off {flag} for {svc}", "snapshotted the volumes of {svc}", "warmed the cache in front of {svc}",
           "reran the smoke suite against {svc}", "resized the disks of {svc}", "promoted the canary of {svc}",
           "pruned the stale branches of {svc}"]
ACTION_TURNS = ["Checkpoint: {a}.", "Alright, {a} and it went through.", "Log entry: {a} (ok).",
                "That's done too: {a}.", "Moving on, {a} without errors."]
TEMPORAL_Q = {
    "after": ["Once we {a}, what came next?", "What was our next move after we {a}?",
              "What followed once we {a}?"],
    "before": ["What had we done immediately before we {a}?", "What preceded the moment we {a}?"],
}

# Exact identifiers
ERROR_TURNS = ["panic: {svc}: {code} ({msg})\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/{svc}/main.go:{ln}",
               "{ts} {svc}[{ln}]: <err> {code} {msg}",
               "alert fired: {code} on {svc} - {msg}",
               "Exception in thread \"main\" {svc}.Failure: [{code}] {msg}\n\tat {svc}.Main.run(Main.java:{ln})"]
ERROR_Q = ["Explain {code}.", "{code} showed up in the logs; what did it say?", "What text came with {code}?",
           "Which failure does {code} stand for?"]
# (kind, template): each template declares whether it is code or prose (the turn's `kind` label)
FUNC_TURNS = [("code", "func {fn}(ctx context.Context) error {{\n\t// {svc}: yields {ret}\n}}"),
              ("prose", "Heads-up from the {svc} review: {fn} hands back {ret}."),
              ("code", "fn {fn}(input: &Request) -> Response {{ /* {svc}, gives {ret} */ }}"),
              ("prose", "Per the {svc} docs, {fn}() produces {ret}.")]
FUNC_Q = ["What does {fn} give back?", "What's the output of {fn}?", "When I call {fn}, what do I get?"]
PIN_TURNS = ["\"{lib}\": \"{ver}\"  // package.json of {svc}", "{svc}/go.mod: require {lib} v{ver}",
             "[dependencies] # {svc}\n{lib} = \"={ver}\""]
PIN_Q = ["Which dependency is held at {ver}?", "What package sits at exactly {ver}?"]

# Elliptical follow-ups (need the history to make sense)
ELLIPSIS_ENTITY = ["Now {svc}?", "Ditto for {svc}.", "Repeat that for {svc}.", "{svc} as well?", "Could you check {svc} too?",
                   "Likewise for {svc}?"]
ELLIPSIS_ATTR = ["And the {phrase}?", "Its {phrase}, also?", "Also need its {phrase}.", "Plus the {phrase}?",
                 "Then the {phrase}?"]
HISTORY_ANSWER = ["{svc} -> {v}", "{v} ({svc}, {phrase})", "Looks like {v} for the {phrase} of {svc}."]
