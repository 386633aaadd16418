"""The dev family's phrasing templates: the family LetheBench was first written from, and the one the
rule-based components (iteration 2's rewrite rules, the rules contradiction detector, the boost's kind
affinities) were written and tuned against (``lethebench/generator/family.py``).

Each attribute of a service has several templates per turn kind (prose, code, tool output), for
mentions that hold no value (hard negatives), for updates, and for direct and paraphrased
questions, so that no method can win by matching one phrasing. Placeholders: ``{svc}`` service
name, ``{SVC}`` its SCREAMING_CASE form, ``{v}`` value, ``{old}`` superseded value, ``{env}``
environment phrase (may be empty), ``{alias}`` and ``{noun}`` a description of the service that
avoids its name, ``{envp}`` a paraphrased environment phrase.
"""

from __future__ import annotations

from lethebench.generator.family import Attribute

ATTRIBUTES: list[Attribute] = [
    Attribute(
        "port", "port",
        prose=["{svc}{env} listens on port {v}.", "Just checked: {svc}{env} is bound to port {v}.",
               "For the record, the port for {svc}{env} is {v}.", "I configured {svc}{env} to accept connections on {v}.",
               "Heads up, {svc}{env} serves traffic on port {v} now that the proxy is gone."],
        code=["# {svc}{env}\n{SVC}_PORT = {v}\n\napp.run(host='0.0.0.0', port={SVC}_PORT)",
              "services:\n  {svc}:\n    environment: {envw}\n    ports:\n      - \"{v}:{v}\"",
              "server.listen({v}, () => console.log('{svc}{env} ready'));"],
        tool=["$ ss -ltnp | grep {svc}\nLISTEN 0 4096 0.0.0.0:{v} users:((\"{svc}\",pid=4121))  # {envw}",
              "{{\"service\": \"{svc}\", \"env\": \"{envw}\", \"port\": {v}, \"healthy\": true}}",
              "INFO [{svc}] {envw}: http server started on :{v}"],
        mention=["Does anyone remember which port {svc} uses? I always forget.",
                 "We should document the port of {svc} somewhere obvious.",
                 "The port for {svc} is in the compose file, I'll look it up later.",
                 "I keep mixing up the ports of {svc} and the other services."],
        update=["We moved {svc}{env} from port {old} to port {v}.", "Update: {svc}{env} now listens on {v} instead of {old}.",
                "Port change for {svc}{env}: it is {v} from today, {old} is retired.",
                "$ ss -ltnp | grep {svc}\nLISTEN 0 4096 0.0.0.0:{v} users:((\"{svc}\",pid=5120))  # {envw}, was {old}"],
        question=["Which port does {svc}{env} listen on?", "What port is {svc}{env} running on?",
                  "What's the port number of {svc}{env}?", "On which port can I reach {svc}{env}?"],
        paraphrase=["Which socket number should clients dial to talk to the {alias} {noun}{envp}?",
                    "Where on the network does the {alias} {noun}{envp} accept connections?",
                    "What number do I put after the colon to reach the {alias} {noun}{envp}?"],
        env_aware=True,
    ),
    Attribute(
        "timeout", "timeout",
        prose=["{svc} gives up on a request after {v} ms.", "The timeout for {svc} is {v} milliseconds.",
               "I bumped the {svc} timeout to {v} ms because of slow upstreams.",
               "{svc} is configured with a {v} ms request timeout."],
        code=["{SVC}_TIMEOUT_MS = {v}  # {svc}", "client = HttpClient(base_url=URL_{SVC}, timeout_ms={v})  # {svc}",
              "{svc}:\n  request_timeout: {v}ms\n  retries: 2"],
        tool=["WARN [{svc}] request aborted after {v}ms (timeout)", "$ grep timeout /etc/{svc}/config.yaml\nrequest_timeout: {v}ms"],
        mention=["The {svc} timeout feels too aggressive, we should revisit it.",
                 "Is the timeout on {svc} the reason for those 504s?",
                 "Somebody changed the {svc} timeout without telling anyone."],
        update=["New timeout for {svc}: {v} ms (it used to be {old} ms).", "We raised the {svc} timeout from {old} ms to {v} ms.",
                "{SVC}_TIMEOUT_MS = {v}  # {svc}: was {old}, changed after the incident"],
        question=["What is the timeout of {svc}?", "How many milliseconds is the {svc} request timeout?",
                  "What timeout is {svc} configured with?"],
        paraphrase=["How long does the {alias} {noun} wait before it abandons a call?",
                    "After how much waiting does the {alias} {noun} stop and fail the request?"],
    ),
    Attribute(
        "version", "version",
        prose=["{svc}{env} is on version {v}.", "We deployed {svc} {v}{env} this morning.",
               "Current build of {svc}{env}: {v}.", "{svc}{env} runs release {v}, the one with the retry fix."],
        code=["{{\n  \"name\": \"{svc}\",\n  \"version\": \"{v}\",\n  \"env\": \"{envw}\"\n}}",
              "image: registry.local/{svc}:{v}  # {envw}", "__version__ = \"{v}\"  # {svc}"],
        tool=["$ curl -s {svc}/version  # {envw}\n{{\"version\": \"{v}\"}}",
              "INFO [{svc}] {envw}: starting version {v}", "deploy/{svc} ({envw}) rolled out: image tag {v}"],
        mention=["Which version of {svc} is out there right now? The release notes are confusing.",
                 "We need to bump {svc} soon, its version is ancient.",
                 "The {svc} version string is wrong in the dashboard."],
        update=["{svc}{env} was upgraded from {old} to {v}.", "Rolled {svc}{env} forward to {v}; {old} is gone.",
                "deploy/{svc} ({envw}) rolled out: image tag {v} (previous {old})"],
        question=["Which version of {svc}{env} is deployed?", "What version is {svc}{env} running?",
                  "What's the release number of {svc}{env}?"],
        paraphrase=["Which release of the {alias} {noun}{envp} is live?",
                    "What build number does the {alias} {noun}{envp} carry at the moment?"],
        env_aware=True,
    ),
    Attribute(
        "replicas", "replica count",
        prose=["{svc}{env} runs with {v} replicas.", "We scaled {svc}{env} to {v} pods.",
               "There are {v} instances of {svc}{env} behind the load balancer."],
        code=["apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {svc}\n  namespace: {envw}\nspec:\n  replicas: {v}",
              "resource \"aws_ecs_service\" \"{svc}\" {{\n  desired_count = {v}  # {envw}\n}}"],
        tool=["$ kubectl -n {envw} get deploy {svc}\nNAME  READY  UP-TO-DATE  AVAILABLE\n{svc}  {v}/{v}  {v}  {v}",
              "autoscaler: {svc} ({envw}) settled at {v} replicas"],
        mention=["Are there enough replicas of {svc} for the sale weekend?",
                 "Let's check the replica count of {svc} before the load test."],
        update=["{svc}{env} scaled from {old} to {v} replicas.", "autoscaler: {svc} ({envw}) moved from {old} to {v} replicas",
                "We changed {svc}{env} replicas to {v}, it was {old}."],
        question=["How many replicas does {svc}{env} have?", "What is the replica count of {svc}{env}?",
                  "How many pods of {svc}{env} are running?"],
        paraphrase=["How many copies of the {alias} {noun}{envp} are up?",
                    "How many instances serve the {alias} {noun}{envp}?"],
        env_aware=True,
    ),
    Attribute(
        "database", "database",
        prose=["{svc} stores its data in {v}.", "The database behind {svc} is {v}.",
               "{svc} talks to {v} for persistence."],
        code=["DATABASE_URL_{SVC} = \"{url}\"  # {svc}", "{svc}:\n  db: {url}"],
        tool=["INFO [{svc}] connected to {v}", "$ {svc} --print-config | grep db\ndb = {url}"],
        mention=["Which database does {svc} depend on? I need it for the migration plan.",
                 "We should move {svc} off its current database eventually."],
        update=["{svc} was migrated from {old} to {v}.", "Switched {svc} to {v}; the old {old} is read-only now."],
        question=["Which database does {svc} use?", "What database is {svc} connected to?"],
        paraphrase=["Where does the {alias} {noun} keep its records?",
                    "What storage engine holds the data of the {alias} {noun}?"],
        entity_value=True, entity_sep=" at ",
    ),
    Attribute(
        "owner", "owning team",
        prose=["Team {v} owns {svc}.", "{svc} belongs to team {v}.", "Ask team {v}, they maintain {svc}."],
        code=["# CODEOWNERS\n/services/{svc}/  @org/team-{vl}", "owners:\n  {svc}: team-{vl}"],
        tool=["$ cat services/{svc}/OWNERS\nteam-{vl}", "{{\"service\": \"{svc}\", \"owner\": \"team-{vl}\"}}"],
        mention=["Who even owns {svc} these days?", "The ownership of {svc} is unclear since the reorg."],
        update=["{svc} moved from team {old} to team {v}.", "Ownership change: team {v} takes over {svc} from team {old}."],
        question=["Which team owns {svc}?", "Who owns {svc}?"],
        paraphrase=["Which group is responsible for maintaining the {alias} {noun}?",
                    "Whose job is it to look after the {alias} {noun}?"],
        entity_value=True,
    ),
    Attribute(
        "region", "region",
        prose=["{svc} is deployed in {v}.", "We run {svc} out of {v}.", "{svc} lives in the {v} region."],
        code=["provider \"aws\" {{ region = \"{v}\" }}  # {svc}", "{svc}:\n  region: {v}"],
        tool=["$ aws ecs describe-services --services {svc} --query region\n\"{v}\"", "INFO [{svc}] booted in {v}"],
        mention=["Is {svc} in the same region as the database?", "Region of {svc}? Latency numbers look odd."],
        update=["{svc} was moved from {old} to {v}.", "Region migration done: {svc} now in {v} (was {old})."],
        question=["Which region is {svc} deployed in?", "In what region does {svc} run?"],
        paraphrase=["In which part of the world do the {alias} {noun} servers sit?",
                    "Where geographically is the {alias} {noun} hosted?"],
        entity_value=True,
    ),
    Attribute(
        "memory", "memory limit",
        prose=["{svc} has a memory limit of {v}.", "We capped {svc} at {v} of memory.",
               "The memory limit for {svc} is {v}."],
        code=["resources:\n  limits:\n    memory: {v}  # {svc}", "{SVC}_MEMORY_LIMIT = \"{v}\"  # {svc}"],
        tool=["OOMKilled: {svc} exceeded its {v} limit", "$ kubectl describe pod {svc}-7d9f | grep -i memory\n    memory:  {v}"],
        mention=["{svc} keeps getting close to its memory limit.", "Should we raise the memory limit of {svc}?"],
        update=["Raised the {svc} memory limit from {old} to {v}.", "{svc} memory limit is now {v} (previously {old})."],
        question=["What is the memory limit of {svc}?", "How much memory is {svc} allowed?"],
        paraphrase=["How much RAM may the {alias} {noun} use before it is killed?",
                    "What is the ceiling on working memory for the {alias} {noun}?"],
    ),
]
ATTRIBUTE_BY_NAME = {a.name: a for a in ATTRIBUTES}

# Multi-hop: team -> on-call person, team -> channel
ONCALL = ["{p} is on call for team {t} this week.", "This week's pager for team {t} is with {p}.",
          "Rotation update: {p} covers on-call for team {t}.", "{{\"team\": \"{t}\", \"oncall\": \"{p}\"}}"]
CHANNEL = ["Team {t} coordinates in #{c}.", "If you need team {t}, post in #{c}.", "Team {t}'s channel is #{c}."]
MULTIHOP_Q = {
    "oncall": ["Who is on call for the team that owns {svc}?", "Which person should I page about {svc} this week?",
               "Who holds the pager for the owners of {svc}?"],
    "channel": ["Which channel should I use to reach the owners of {svc}?",
                "Where do I post to get help from the team behind {svc}?"],
}
BROAD_Q = ["Give me an overview of everything we discussed about {svc}.", "What do we know about {svc} so far?",
           "Summarize the setup of {svc}.", "Collect all the facts about {svc} from this conversation."]

# Temporal: actions on a service, in order
ACTIONS = ["restarted {svc}", "ran the database migration for {svc}", "rolled back {svc} to the previous release",
           "drained traffic from {svc}", "rotated the API keys of {svc}", "flushed the cache of {svc}",
           "enabled the {flag} flag on {svc}", "re-indexed the data of {svc}", "paused the consumers of {svc}",
           "bumped the dependencies of {svc}"]
ACTION_TURNS = ["Done: {a}.", "Okay, I {a}.", "Step complete, {a}.", "Next step finished: {a}.", "Just {a}, looks fine so far."]
TEMPORAL_Q = {
    "after": ["What did we do right after we {a}?", "Which step came immediately after we {a}?",
              "After we {a}, what was the next step?"],
    "before": ["What did we do just before we {a}?", "Which step came right before we {a}?"],
}

# Exact identifiers
ERROR_TURNS = ["{ts} ERROR [{svc}] {code}: {msg}", "Traceback (most recent call last):\n  File \"{svc}/handler.py\", line {ln}, in handle\n"
               "ServiceError: {code} {msg}", "{{\"level\": \"error\", \"service\": \"{svc}\", \"code\": \"{code}\", \"msg\": \"{msg}\"}}",
               "We hit {code} on {svc} again: {msg}."]
ERROR_Q = ["What does error {code} mean?", "What was the message logged with {code}?", "Why did {code} fire?",
           "What's behind {code}?"]
# (kind, template): each template declares whether it is code or prose (the turn's `kind` label)
FUNC_TURNS = [("code", "def {fn}(batch):\n    \"\"\"Used by {svc}.\"\"\"\n    ...\n    return result  # {ret}"),
              ("prose", "`{fn}` in {svc} returns {ret}."), ("prose", "I read the code: {fn}() gives back {ret}."),
              ("code", "function {fn}(input) {{\n  // {svc}: returns {ret}\n}}")]
FUNC_Q = ["What does {fn} return?", "What is the return value of {fn}?", "What comes back from calling {fn}()?"]
PIN_TURNS = ["We pinned {lib} to {ver} in {svc}.", "requirements.txt for {svc}:\n{lib}=={ver}",
             "$ pip show {lib} | grep Version  # {svc}\nVersion: {ver}"]
PIN_Q = ["Which package did we pin to {ver}?", "What library is locked at version {ver}?"]

# Elliptical follow-ups (need the history to make sense)
ELLIPSIS_ENTITY = ["And for {svc}?", "What about {svc}?", "Same question for {svc}.", "And {svc}?"]
ELLIPSIS_ATTR = ["What about its {phrase}?", "And its {phrase}?", "Its {phrase} too, please.",
                 "How about the {phrase}?"]
HISTORY_ANSWER = ["The {phrase} of {svc} is {v}.", "{svc}: {v}.", "It's {v} for {svc}."]
