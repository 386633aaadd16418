"""The held-out family's entity pools (``lethebench.generator.family``), written for this project after the
rule-based components were frozen. No service, team, person, channel, tool or filler line is shared with the dev
family. Lists, never sets, so that generation is deterministic whatever PYTHONHASHSEED is.
"""

from __future__ import annotations

# root -> aliases (descriptions of what the service does, without its name)
SERVICE_ROOTS: list[tuple[str, list[str]]] = [
    ("routing", ["route planning", "path finding"]),
    ("thumbnails", ["image resizing", "preview generation"]),
    ("consent", ["privacy preferences", "cookie choices"]),
    ("onboarding", ["new-user setup", "welcome flow"]),
    ("subscriptions", ["recurring plans", "renewal handling"]),
    ("loyalty", ["reward points", "member perks"]),
    ("returns", ["refund requests", "product send-backs"]),
    ("forecast", ["demand prediction", "sales projections"]),
    ("presence", ["online status", "who-is-online tracking"]),
    ("transcode", ["video conversion", "media re-encoding"]),
    ("picking", ["shelf retrieval", "order assembly in the depot"]),
    ("tax", ["VAT calculation", "levy rules"]),
    ("kyc", ["identity verification", "document checks"]),
    ("feeds", ["activity timelines", "news streams"]),
    ("captcha", ["bot challenges", "human checks"]),
    ("quotas", ["usage limits", "rate allowances"]),
    ("ads", ["sponsored placements", "banner serving"]),
    ("survey", ["questionnaires", "poll results"]),
    ("labels", ["shipping stickers", "barcode printing"]),
    ("payouts", ["seller settlements", "merchant disbursements"]),
    ("rostering", ["shift planning", "staff schedules"]),
    ("sitemap", ["crawl hints", "index files for crawlers"]),
    ("vault", ["secret storage", "key custody"]),
    ("metering", ["usage counting", "consumption tracking"]),
]
SERVICE_SUFFIXES = ["-gw", "-daemon", "-proc", "-engine", "-srv", "-hub"]
COMPONENT_NOUNS = ["service", "app", "job", "module", "engine", "deployment"]

TEAMS = ["Basalt", "Cobalt", "Quartz", "Onyx", "Garnet", "Jasper", "Topaz", "Opal", "Slate", "Flint",
         "Amber", "Beryl", "Mica", "Pyrite", "Zircon", "Agate", "Galena", "Jade", "Talc", "Umber"]
PEOPLE = ["Anouk", "Bastian", "Carmen", "Dario", "Elif", "Farid", "Gita", "Hiro", "Isla", "Joaquin", "Kalinda",
          "Lars", "Mira", "Nikolai", "Oona", "Pedro", "Qiu", "Rosa", "Soren", "Tanvi", "Uri", "Vera", "Wen",
          "Ximena", "Yosef", "Zofia", "Arjun", "Beatriz", "Cyrus", "Dagny"]
CHANNELS = ["squad-lounge", "prod-alerts", "help-backend", "escalations", "ship-it", "eng-support", "triage",
            "release-notes", "capacity", "ask-platform"]
ZONES = ["fra1", "ams3", "nyc3", "sfo2", "sgp1", "blr1", "lon1", "tor1", "syd1"]
QUEUE_EVENTS = ["created", "updated", "expired", "failed", "settled", "requested"]
ENVIRONMENTS = [("stable", ["the general-availability track", "the main rollout"]),
                ("canary", ["the early-access ring", "the trial rollout"])]

LIBRARIES = ["lodash", "express", "axios", "zod", "tokio", "serde", "gin", "zap", "cobra", "viper", "react",
             "webpack", "rayon", "clap", "chi", "testify", "date-fns", "immer"]
ERROR_MESSAGES = [
    "quota exhausted for caller", "stale read from replica", "certificate chain incomplete",
    "write-ahead log full", "payload signature mismatch", "backpressure limit hit",
    "nonce already used", "peer closed stream early", "heap limit reached during render",
    "unique constraint violated", "partition leader unavailable", "SRV lookup returned no targets",
    "batch exceeds frame size", "optimistic lock conflict", "token expired before use",
    "bucket policy forbids write", "unterminated string in config", "snapshot restore aborted",
]
ERROR_PREFIXES = ["ORD-", "PAY", "Q", "F-", "K"]
VERBS = ["hydrate", "dispatch", "reconcile", "emit", "collect", "derive", "persist", "evict", "batch", "stream",
         "tally", "route", "stamp", "prune", "settle", "expand"]
NOUNS = ["Refund", "Voucher", "Member", "Parcel", "Consent", "Quota", "Shift", "Payout", "Thumbnail", "Feed",
         "Survey", "Label", "Forecast", "Rule", "Plan", "Frame"]
RETURNS = ["a map of squad to count", "an error or nil", "a channel of events", "the number of evicted keys",
           "a Result with the new id", "a slice of timestamps", "an empty struct on success", "a JSON string",
           "the retry delay in seconds", "a promise of a boolean", "a byte buffer", "a sorted vector of ids",
           "the checksum as hex", "an Option holding the match"]
FEATURE_FLAGS = ["fast_refunds", "eager_hydration", "compact_feed", "async_labels", "strict_consent", "edge_cache",
                 "bulk_payouts", "shadow_reads"]

# Chat filler that names no service and holds no fact.
SMALL_TALK = [
    "Cool, cheers.", "Hang on, reading.", "Works for me.", "Next one then.", "Brb, stand-up.",
    "Short answers please, I'm in a meeting.", "Oh nice, didn't see that.", "Long day, sorry if I'm slow.",
    "Got it.", "Hmm, let me think.", "Great, next.", "Yep, as I thought.", "I'll add it to the notes.",
    "Oh wait, one more.", "Let's park that.", "Fair enough.", "Let's pick it up tomorrow.",
    "No idea who built that originally.", "Whatever's quickest.", "Classic end-of-sprint surprise.",
]
PROSE_FILLER = [
    "Small, frequent releases are easier on everyone; the big-bang ones are where our weekends went last year.",
    "The checklist exists, but nobody reads it when the pager is going off, so we should automate the top items.",
    "We trialled trunk-based development for a month and the merge conflicts basically disappeared.",
    "Half of what new people need to know is only in someone's head, which is a bus-factor problem.",
    "Anything that crosses three squads should get a short RFC, even a one-pager.",
    "Alert fatigue is real here; a third of the pages last month had no runbook at all.",
    "Let's bring numbers from the soak test to the review so the discussion stays concrete.",
    "Most of the flaky tests sleep for a fixed time instead of waiting on a condition.",
    "We keep promising ourselves a cleanup sprint and it keeps getting eaten by features.",
    "If support can't explain a change to a customer, it's not ready.",
    "A cache in front would fix the p99, but then we own invalidation forever.",
    "Post-mortems are supposed to be blameless, but the tone in the last one wasn't.",
]
CODE_FILLER = [
    "func retry(n int, f func() error) error {\n\tvar err error\n\tfor i := 0; i < n; i++ {\n\t\tif err = f(); err == nil {\n\t\t\treturn nil\n\t\t}\n\t}\n\treturn err\n}",
    "const sleep = (ms) => new Promise((r) => setTimeout(r, ms));",
    "let total: u64 = items.iter().map(|x| x.size).sum();",
    "type Config struct {\n\tPath   string\n\tValues map[string]string\n}",
    "for line in sys.stdin:\n    key, _, value = line.partition('=')",
    "expect(res.status).toBe(200);",
    "UPDATE jobs SET state = 'queued' WHERE state = 'stuck' AND updated_at < now() - interval '1 hour';",
    "#[derive(Debug, Clone)]\nstruct Window { start: u64, end: u64 }",
    "git switch -c fix/typo && git commit -am 'fix typo'",
    "describe('parser', () => {\n  it('handles empty input', () => expect(parse('')).toEqual([]));\n});",
]
TOOL_FILLER = [
    "$ go test ./...\nok  \tinternal/parse\t0.412s\nok  \tinternal/store\t1.087s",
    "$ free -h\n              total        used        free\nMem:           31Gi        12Gi        19Gi",
    "Tests: 211 passed, 211 total\nTime:        19.84 s",
    "$ systemctl is-active nginx\nactive",
    "ok: [web-3]\nok: [web-4]\nPLAY RECAP *** web-3 : ok=12 changed=0 failed=0",
    "$ terraform plan\nNo changes. Your infrastructure matches the configuration.",
    "{\"uptime_s\": 88213, \"goroutines\": 57}",
    "$ npm run lint\n> eslint .\n✔ no problems",
    "notice: GC pause 212 ms (young gen)",
    "$ cargo build --release\n    Finished release [optimized] target(s) in 41.03s",
]
