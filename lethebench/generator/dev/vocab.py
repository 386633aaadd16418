"""The dev family's entity pools (``lethebench.generator.family``), written for this project.

Every service has a root word and aliases that avoid the root (for paraphrase queries that share
little vocabulary with the turn that holds the answer). Lists, never sets, so that generation is
deterministic whatever PYTHONHASHSEED is.
"""

from __future__ import annotations

# root -> aliases (descriptions of what the service does, without its name)
SERVICE_ROOTS: list[tuple[str, list[str]]] = [
    ("billing", ["invoicing", "customer charges"]),
    ("auth", ["login", "sign-in"]),
    ("search", ["lookup", "full-text query"]),
    ("payments", ["card transactions", "checkout money flow"]),
    ("notify", ["push alerts", "outgoing messages"]),
    ("inventory", ["stock levels", "warehouse counts"]),
    ("shipping", ["parcel delivery", "courier dispatch"]),
    ("profile", ["customer accounts", "member records"]),
    ("reporting", ["analytics dashboards", "weekly metrics"]),
    ("media", ["image uploads", "photo storage"]),
    ("scheduler", ["cron jobs", "timed tasks"]),
    ("gateway", ["edge proxy", "front door routing"]),
    ("recommend", ["personalised suggestions", "similar-item picks"]),
    ("chat", ["live messaging", "support conversations"]),
    ("audit", ["compliance trail", "change history"]),
    ("pricing", ["discount rules", "price calculation"]),
    ("catalog", ["product listings", "item pages"]),
    ("geo", ["location lookup", "map tiles"]),
    ("ledger", ["bookkeeping", "account balances"]),
    ("tokens", ["credential minting", "access key issuing"]),
    ("export", ["CSV downloads", "bulk data dumps"]),
    ("ingest", ["event intake", "incoming telemetry"]),
    ("mailer", ["email sending", "newsletter delivery"]),
    ("fraud", ["risk scoring", "suspicious order checks"]),
    ("review", ["customer ratings", "product feedback"]),
    ("webhook", ["partner callbacks", "outbound hooks"]),
    ("translate", ["localisation", "language conversion"]),
    ("archive", ["cold storage", "old record keeping"]),
]
SERVICE_SUFFIXES = ["-api", "-service", "-worker", "-svc", "d", "-core"]
COMPONENT_NOUNS = ["backend", "component", "system", "piece", "subsystem", "microservice"]

TEAMS = ["Falcon", "Otter", "Lynx", "Heron", "Badger", "Marlin", "Puffin", "Bison", "Gecko", "Kestrel",
         "Walrus", "Ibis", "Jackal", "Mantis", "Narwhal", "Oriole", "Pika", "Quokka", "Raven", "Tapir"]
PEOPLE = ["Priya", "Mateo", "Aiko", "Jonas", "Fatima", "Liam", "Chen", "Olga", "Kwame", "Sofia", "Ravi",
          "Nadia", "Tomas", "Yuki", "Amara", "Felix", "Ingrid", "Omar", "Leila", "Dmitri", "Hana", "Bruno",
          "Zara", "Emeka", "Greta", "Pablo", "Mei", "Sven", "Noor", "Kai"]
CHANNELS = ["ops-war-room", "deploys", "infra-help", "oncall-pages", "release-train", "platform-chat",
            "db-admins", "sre-handoff", "incident-bridge", "build-cop"]
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1", "ap-northeast-1",
           "sa-east-1", "ca-central-1"]
DB_ENGINES = ["postgres", "mysql", "mongodb", "redis", "cassandra", "sqlite"]
DB_HOSTS = ["db-{n}.internal", "pg-{n}.prod.local", "store{n}.cluster", "data-{n}.svc"]
ENVIRONMENTS = [("production", ["prod", "live"]), ("staging", ["stage", "pre-prod"])]

LIBRARIES = ["requests", "numpy", "pydantic", "fastapi", "sqlalchemy", "celery", "boto3", "redis-py", "httpx",
             "uvicorn", "pandas", "protobuf", "grpcio", "jinja2", "alembic", "pytest", "lxml", "orjson"]
ERROR_MESSAGES = [
    "connection pool exhausted", "lock wait timeout exceeded", "TLS certificate expired",
    "disk quota exceeded", "schema version mismatch", "rate limit reached for tenant",
    "token signature invalid", "upstream reset by peer", "out of memory while decoding payload",
    "duplicate key on insert", "checksum mismatch in chunk", "DNS resolution failed for upstream",
    "message too large for queue", "deadlock detected in transaction", "clock skew too large",
    "permission denied on bucket", "unexpected end of JSON input", "migration already applied",
]
ERROR_PREFIXES = ["E", "ERR-", "ERR_", "X", "SVC"]
VERBS = ["parse", "load", "fetch", "build", "resolve", "compute", "render", "validate", "sync", "merge",
         "encode", "split", "flush", "retry", "normalize", "schedule"]
NOUNS = ["Invoice", "Token", "UserProfile", "Order", "Cart", "Session", "Payload", "Manifest", "Batch",
         "Ledger", "Quote", "Shipment", "Webhook", "Report", "Cursor", "Snapshot"]
RETURNS = ["a list of invoice ids", "a dict keyed by tenant", "the number of retried rows",
           "None after writing to disk", "a signed URL string", "a pandas DataFrame", "a tuple of (ok, error)",
           "the parsed header as bytes", "an iterator over pages", "a boolean health flag",
           "the new cursor position", "a frozen dataclass", "the elapsed time in ms", "a sorted list of SKUs"]
FEATURE_FLAGS = ["new_checkout", "fast_path", "dark_mode", "lazy_sync", "batch_writes", "v2_routing",
                 "smart_retry", "strict_auth"]
FILE_NAMES = ["config.yaml", "settings.toml", "app.ini", "service.json", ".env", "values.yaml"]

# Chat filler that names no service and holds no fact.
SMALL_TALK = [
    "Thanks, that helps a lot.", "Give me a minute, I'm reading through it.", "Sounds good to me.",
    "Let's keep going with the next item on the list.", "I'll grab a coffee and come back to this.",
    "Can you keep the answers short? I'm on my phone.", "Good catch, I missed that completely.",
    "Honestly this week has been chaos, so bear with me.", "Okay, noted.", "Let me think about that for a second.",
    "Perfect, moving on.", "That's what I suspected but it's nice to have it confirmed.",
    "I'll write this down in the runbook later.", "Wait, one more thing before we continue.",
    "Let's not go down that rabbit hole today.", "Makes sense.", "We can revisit this after the standup.",
    "I don't remember who set that up originally.", "Sure, whatever is simplest.",
    "This is the kind of thing that always bites us on Fridays.",
]
PROSE_FILLER = [
    "The general idea is to keep each deployment small so a rollback is cheap, and to make sure the dashboards "
    "show the change before anyone declares victory.",
    "I think the bigger risk is not the code but the process: nobody owns the checklist, so steps get skipped "
    "when people are in a hurry.",
    "We talked about moving to a monorepo last quarter but the build times scared everyone off, so we parked it.",
    "Documentation is mostly tribal knowledge at this point; half of it lives in old chat threads.",
    "My rule of thumb is that anything touched by more than two teams needs a written design note first.",
    "The on-call rotation has been rough lately, mostly because alerts fire for things nobody can act on.",
    "Let's aim to have the load test numbers before the planning meeting so we argue about data, not feelings.",
    "A lot of the flakiness comes from tests that depend on wall-clock time instead of an injected clock.",
    "We should budget some time next sprint for paying down the tech debt in the deployment scripts.",
    "If we can't explain the change in two sentences to the support team, it probably isn't ready to ship.",
    "Caching would help latency, but invalidation is where these things usually go wrong for us.",
    "Our incident reviews are blameless on paper; in practice people still get defensive.",
]
CODE_FILLER = [
    "def chunked(items, size):\n    for i in range(0, len(items), size):\n        yield items[i:i + size]",
    "import logging\n\nlog = logging.getLogger(__name__)\nlog.setLevel(logging.INFO)",
    "for attempt in range(3):\n    try:\n        return call()\n    except TimeoutError:\n        sleep(2 ** attempt)",
    "class Config:\n    def __init__(self, path):\n        self.path = path\n        self.values = {}",
    "with open(path) as fh:\n    rows = [line.rstrip('\\n').split(',') for line in fh]",
    "assert response.status_code == 200, response.text",
    "SELECT id, created_at FROM events WHERE created_at > now() - interval '1 day' ORDER BY id;",
    "const retry = async (fn, n = 3) => { for (let i = 0; i < n; i++) { try { return await fn(); } catch (e) {} } };",
    "git rebase -i HEAD~3\n# squash the fixup commits before pushing",
    "@pytest.fixture\ndef client(app):\n    return app.test_client()",
]
TOOL_FILLER = [
    "$ git status\nOn branch main\nYour branch is up to date with 'origin/main'.\nnothing to commit, working tree clean",
    "$ df -h /\nFilesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        50G   31G   17G  65% /",
    "============ 142 passed, 3 skipped in 48.21s ============",
    "$ uptime\n 10:42:07 up 23 days,  4:11,  2 users,  load average: 0.42, 0.51, 0.48",
    "INFO  healthcheck ok (12 ms)\nINFO  healthcheck ok (11 ms)\nINFO  healthcheck ok (13 ms)",
    "$ docker ps --format '{{.Names}}'\nredis\nnginx\nprometheus",
    "{\"status\": \"ok\", \"checks\": 14, \"failed\": 0}",
    "$ make lint\nruff check . \nAll checks passed!",
    "WARN  slow query detected (1204 ms), see query log for details",
    "$ pip list | wc -l\n87",
]
