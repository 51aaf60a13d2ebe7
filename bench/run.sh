#!/usr/bin/env bash
# Tidings benchmark (design.md §5): proves the performance targets in one run on this machine.
#
#   bench/run.sh                              # 1,000,000 subscribers, endpoints and notifications, 15 s per workload
#   BENCH_SUBSCRIBERS=10000 BENCH_ENDPOINTS=10000 BENCH_NOTIFICATIONS=10000 BENCH_DURATION=5 bench/run.sh
#                                             # a quick smoke run
#   BENCH_ONLY=triggers bench/run.sh          # one workload group alone (the health-check ceiling always runs)
#
# What it does:
#   1. installs the load generator (`wrk`, from Debian) when it is missing;
#   2. builds the release binary;
#   3. prepares a fresh database (SQLite in a temp folder by default), applies migrations, creates an
#      environment and seeds it with the hidden commands `tidings seed-subscribers`, `seed-channel-endpoints`
#      and `seed-notifications` (only what the selected workload groups read);
#   4. starts `tidings serve` on a free port and runs each workload with wrk after a short warm-up, while
#      bench/sample.py samples the server's RSS and the CPU used by the server, wrk and everything else
#      (other processes on the machine skew the figures; the report shows how much they took);
#   5. prints Markdown tables (req/s, p50, p99, share of the health-check ceiling, PASS/FAIL against the
#      targets) and writes them to bench/results/latest.md together with the raw wrk output. The ceiling is
#      measured at the start and again after each read group, and the shares are of the median of those runs
#      (a single run of it moves by up to ±20 % on this machine).
#
# Workload groups (BENCH_ONLY):
#   subscribers    GET /v2/subscribers/{id} and the email search over BENCH_SUBSCRIBERS subscribers
#   endpoints      GET /v1/channel-endpoints?limit=100 filtered by subscriberId and by contextKeys over
#                  BENCH_ENDPOINTS endpoints (endpoint n: subscriberId bench<n % 100000>, context tenant:t<n % 10000>)
#   notifications  GET /v1/notifications?limit=50, page 0 and a random page 0..199, over BENCH_NOTIFICATIONS
#                  notifications (each with one completed in-app job and two execution details)
#   triggers       POST /v1/events/trigger (and /v1/events/trigger/bulk) of a one-step in-app workflow created
#                  through the API, to random seeded subscribers. Besides req/s and latency it measures the
#                  events per second from the start of the load until the last in-app message was stored (read
#                  from the database: python3's sqlite3 module, or psql for PostgreSQL), after waiting for the
#                  backlog to drain. Seeds BENCH_SUBSCRIBERS subscribers, as the subscribers group does.
#   preview        POST /v2/workflows/{workflowId}/step/{stepId}/preview of a one-step email workflow created
#                  through the API: a ~5 KB HTML order confirmation (Liquid subject and body over payload and
#                  subscriber variables, a for loop over payload.items, ifs, filters such as upcase, date and
#                  default), rendered over a random previewPayload per request (bench/wrk/preview.lua). No
#                  target in design.md: the row reports req/s, latency and the share of the ceiling. Seeds
#                  nothing.
#   deliveries     email delivered to a local webhook receiver: starts examples/bench_receiver.rs on a free port
#                  (it answers every POST with 200 {"id": n} and counts them), creates through the API an active,
#                  primary email-webhook integration that posts to it and a one-step email workflow (a small
#                  HTML body over payload and subscriber variables), then sends bulk triggers
#                  (BENCH_TRIGGER_BULK events per request; bench/wrk/trigger.lua) to random seeded
#                  subscribers. Besides req/s and latency it measures the messages per second from the start of
#                  the load until the receiver counted the last one, after waiting for the backlog to drain; then
#                  it checks that every recorded event reached the receiver once and is stored as an email
#                  message with status sent (bench/deliveries.py), and fails loudly (exit status 1) if not.
#                  No target in design.md: report only. Seeds BENCH_SUBSCRIBERS subscribers.
#   webhooks       outbound webhooks (README "Webhooks") to a local receiver: starts a second
#                  examples/bench_receiver.rs (its own, so that its counts never mix with the deliveries group's),
#                  creates through the API a one-step in-app workflow and, through the Svix routes
#                  (POST /api/v1/app/{app}/endpoint, Bearer API key), an endpoint {"url": <receiver>,
#                  "filterTypes": ["message.sent"]}; one trigger must reach the receiver once, signed with the
#                  endpoint's secret (checked in Python: HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}").
#                  The endpoint is enabled only while this group runs (other groups' messages would reach it).
#                  The load: single-event POST /v1/events/trigger (bench/wrk/trigger.lua, as the triggers group)
#                  to random seeded subscribers over BENCH_CONNECTIONS keep-alive connections; besides req/s and
#                  latency it measures the webhook messages per second from the start of the load until the
#                  receiver counted the last one (after waiting for the backlog to drain), and the CPU-seconds
#                  per 1,000 messages (the server process; on PostgreSQL also the postgres processes serving the
#                  run's database and the shared ones: bench/sample.py --postgres) over the load and the drain. Then exactly once (bench/webhooks.py): the receiver's requests, the
#                  distinct webhook-id values it saw, the environment's message.sent webhook messages with
#                  status success and the workflow's notifications (sanity trigger, warm-up and measured run)
#                  must all be equal, else it fails loudly (exit status 1). Targets (issue 39): SQLite >= 10,000
#                  messages/s and <= 0.2 CPU-s per 1,000; PostgreSQL >= 4,000/s and <= 0.5 CPU-s per 1,000.
#                  Seeds BENCH_SUBSCRIBERS subscribers.
#   topics         one trigger of the in-app workflow (as the triggers group's) to a topic of BENCH_TOPIC_SIZE
#                  seeded subscribers (the hidden `tidings seed-topic`): recipients per second from the trigger
#                  until the last in-app message was stored, the server's RSS while it fans out (bench/sample.py),
#                  and the exact count (bench/fanout.py: one notification and one message per subscriber). Then
#                  the kill test: a second trigger to the topic, SIGKILL of the server once a third of the
#                  notifications are written (mid-expansion), a restart, and again exactly one notification and one message per
#                  subscriber once the expansion resumed (its lease expires first). Seeds BENCH_SUBSCRIBERS
#                  subscribers.
#   bulk_subscribers  POST /v1/subscribers/bulk: BENCH_BULK_TOTAL new subscribers (every profile field set, so
#                  every search index is written) in batches of 500 over BENCH_BULK_CONNECTIONS keep-alive
#                  connections (bench/bulk_subscribers.py); reports subscribers/s from the first request to the
#                  last answer and each request's p50/p99, and fails unless every subscriber was created.
#                  Seeds nothing.
#   inbox          one subscriber's in-app notifications, 10 a page, read as the Inbox reads them
#                  (GET /v1/inbox/notifications?limit=10 with a session's token) and with the API key
#                  (GET /v2/subscribers/{id}/notifications?limit=10, the same service path): BENCH_INBOX_MESSAGES
#                  messages of subscriber bench1, stored through bulk triggers of a one-step in-app workflow. No
#                  target in design.md; issue 38: the v2 list within 10 % of the Inbox list (the report gives the
#                  ratio). Seeds BENCH_SUBSCRIBERS subscribers.
#
# Settings (environment variables):
#   BENCH_ONLY          comma-separated workload groups to run (default: all of them)
#   BENCH_SUBSCRIBERS   subscribers to seed                   (default 1000000)
#   BENCH_ENDPOINTS     channel endpoints to seed             (default 1000000)
#   BENCH_NOTIFICATIONS notifications to seed                 (default 1000000)
#   BENCH_TOPIC_SIZE    subscribers of the topics group's topic (default 100000, at most BENCH_SUBSCRIBERS)
#   BENCH_INBOX_MESSAGES in-app messages of the inbox group's subscriber (default 1000)
#   BENCH_TRIGGER_BULK  events per bulk trigger request       (default 100, the API's maximum; 0 = no bulk row,
#                       and single triggers for the deliveries group; bulk rows use one connection per wrk
#                       thread: each request already carries many events; the webhooks group always sends
#                       single triggers)
#   BENCH_DRAIN_TIMEOUT seconds to wait for a trigger backlog to be stored, or a delivery or webhook backlog to
#                       reach its receiver                    (default 300)
#   BENCH_BULK_TOTAL    subscribers the bulk_subscribers group imports          (default 100000)
#   BENCH_BULK_CONNECTIONS  its connections                                      (default 4)
#   BENCH_DURATION      seconds per measured workload         (default 15)
#   BENCH_WARMUP        seconds of warm-up per workload       (default 3)
#   BENCH_THREADS       wrk threads                           (default 2)
#   BENCH_CONNECTIONS   wrk connections                       (default 32; the webhooks group's triggers too)
#   BENCH_TIMEOUT       wrk request timeout, seconds          (default 30; slower answers count as errors)
#   BENCH_DATABASE_URL  use this database instead of a temporary SQLite file, e.g. postgres://…
#                       (it should be an empty, dedicated database: the run adds an environment to it)
#   BENCH_PREWARM       1 = read the database files into the OS page cache before each workload (default 1;
#                       0 measures whatever the kernel kept cached, i.e. partly disk reads)
#   BENCH_QUIET_WAIT    before each workload, wait up to this many seconds for the machine to be quiet
#                       (>= 90 % idle over 3 s); 0 = don't wait                      (default 60)
#   BENCH_KEEP_TMP      1 = keep the temp folder (database, server and receiver logs) for inspection afterwards
#   BENCH_RUST_LOG      the server's RUST_LOG (default warn); for profiling, e.g. warn,sqlx::query=debug logs every
#                       statement with its execution time in server.log (and slows the server down)
#
# Progress goes to stderr; the results table goes to stdout.

set -euo pipefail

# ---------------------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------------------

ONLY="${BENCH_ONLY:-}"
SUBSCRIBERS="${BENCH_SUBSCRIBERS:-1000000}"
ENDPOINTS="${BENCH_ENDPOINTS:-1000000}"
NOTIFICATIONS="${BENCH_NOTIFICATIONS:-1000000}"
TRIGGER_BULK="${BENCH_TRIGGER_BULK:-100}"
TOPIC_SIZE="${BENCH_TOPIC_SIZE:-100000}"
INBOX_MESSAGES="${BENCH_INBOX_MESSAGES:-1000}"
DRAIN_TIMEOUT="${BENCH_DRAIN_TIMEOUT:-300}"
DURATION="${BENCH_DURATION:-15}"
WARMUP="${BENCH_WARMUP:-3}"
THREADS="${BENCH_THREADS:-2}"
CONNECTIONS="${BENCH_CONNECTIONS:-32}"
TIMEOUT="${BENCH_TIMEOUT:-30}"
DATABASE_URL_OVERRIDE="${BENCH_DATABASE_URL:-}"
KEEP_TMP="${BENCH_KEEP_TMP:-0}"
SERVER_LOG_FILTER="${BENCH_RUST_LOG:-warn}"
PREWARM="${BENCH_PREWARM:-1}"
QUIET_WAIT="${BENCH_QUIET_WAIT:-60}"
PREFIX="bench"             # subscriberId = bench<N>, email = user<N>@bench.example.com
WORKLOAD_GROUPS="subscribers endpoints notifications triggers preview deliveries webhooks topics bulk_subscribers inbox"   # BENCH_ONLY picks among these
ENDPOINT_OWNERS=100000     # endpoint n belongs to subscriberId bench<n % ENDPOINT_OWNERS> …
ENDPOINT_CONTEXTS=10000    # … and to the context tenant:t<n % ENDPOINT_CONTEXTS>
NOTIFICATION_SUBSCRIBERS=100000
NOTIFICATION_LIMIT=50
NOTIFICATION_PAGES=200     # the paged workload reads a random page 0..199
TRIGGER_SUBSCRIBERS=100000 # triggers go to bench1..bench100000 (at most BENCH_SUBSCRIBERS)
TRIGGER_WORKFLOW="bench-ping"
PREVIEW_WORKFLOW="bench-order" # the preview group's workflow and its email step
PREVIEW_STEP="confirmation"
DELIVERY_WORKFLOW="bench-mail" # the deliveries group's one-step email workflow (triggers to TRIGGER_SUBSCRIBERS)
DELIVERY_FROM="bench@example.com"
WEBHOOK_WORKFLOW="bench-hook" # the webhooks group's one-step in-app workflow (triggers to TRIGGER_SUBSCRIBERS)
WEBHOOK_EVENT="message.sent"  # the one event type its endpoint receives (filterTypes)
DRAIN_STALL=15             # seconds without a new stored message before a drain counts as stuck
TOPIC_KEY="bench-topic"    # the topics group's topic (subscribers bench1…bench<TOPIC_SIZE>)
INBOX_WORKFLOW="bench-inbox" # the inbox group's one-step in-app workflow (its messages go to bench1)

# Targets (design.md §5). Ratios are shares of the health check's req/s.
TARGET_BY_ID_RATIO=0.50
TARGET_BY_ID_P99_MS=10
TARGET_SEARCH_RATIO=0.10
TARGET_SEARCH_P99_MS=25
TARGET_ENDPOINTS_RATIO=0.10
TARGET_NOTIFICATIONS_RATIO=0.05
TARGET_TRIGGER_EPS_SQLITE=5000     # events/s from trigger to stored in-app message, sustained
TARGET_TRIGGER_EPS_POSTGRES=3000
TARGET_FANOUT_RPS_SQLITE=20000     # recipients/s from one trigger to a topic until the last in-app message is stored
TARGET_FANOUT_RPS_POSTGRES=8000
TARGET_WEBHOOK_MPS_SQLITE=10000    # webhook messages/s from trigger to the receiver, sustained (issue 39) …
TARGET_WEBHOOK_MPS_POSTGRES=4000
TARGET_WEBHOOK_CPU_SQLITE=0.2      # … costing at most this many CPU-seconds per 1,000 messages (server, + postgres)
TARGET_WEBHOOK_CPU_POSTGRES=0.5
TARGET_BULK_SQLITE=20000           # subscribers/s through POST /v1/subscribers/bulk, batches of 500
TARGET_BULK_POSTGRES=10000
BULK_TOTAL="${BENCH_BULK_TOTAL:-100000}"
BULK_CONNECTIONS="${BENCH_BULK_CONNECTIONS:-4}"
TARGET_RSS_IDLE_MB=64
TARGET_RSS_LOAD_MB=256

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_DIR="$REPO_ROOT/bench"
RESULTS_DIR="$BENCH_DIR/results"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
[[ "$TARGET_DIR" = /* ]] || TARGET_DIR="$REPO_ROOT/$TARGET_DIR"
BIN="$TARGET_DIR/release/tidings"
RECEIVER_BIN="$TARGET_DIR/release/examples/bench_receiver"

# State shared with the cleanup trap.
WORK_DIR=""
SERVER_PID=""
CLIENT_PID=""
RECEIVER_PID=""            # the deliveries group's webhook receiver
HOOK_RECEIVER_PID=""       # the webhooks group's receiver (another instance of the same program)

# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# The load generator comes from Debian's own package registry, never as a downloaded binary.
ensure_wrk() {
    command -v wrk >/dev/null 2>&1 && return
    command -v apt-get >/dev/null 2>&1 || die "wrk is missing and apt-get is not available; install wrk first"
    log "installing wrk from the Debian archive"
    as_root apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >&2
    command -v wrk >/dev/null 2>&1 || die "wrk is still missing after apt-get install"
}

# A TCP port that is free right now on 127.0.0.1.
free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# http_get URL [API_KEY]: prints the body; fails unless the answer is 200.
http_get() {
    python3 - "$@" <<'PY'
import sys, urllib.request, urllib.error
url = sys.argv[1]
req = urllib.request.Request(url)
if len(sys.argv) > 2:
    req.add_header("Authorization", "ApiKey " + sys.argv[2])
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    sys.stderr.write(f"{url}: HTTP {e.code}: {e.read().decode()[:300]}\n")
    sys.exit(1)
except OSError as e:
    sys.stderr.write(f"{url}: {e}\n")
    sys.exit(1)
PY
}

# http_post URL API_KEY JSON: posts JSON and prints the answer's body; fails unless the answer is 2xx.
http_post() {
    python3 - "$@" <<'PY'
import sys, urllib.request, urllib.error
url, key, body = sys.argv[1:4]
req = urllib.request.Request(url, data=body.encode(), method="POST")
req.add_header("Authorization", "ApiKey " + key)
req.add_header("Content-Type", "application/json")
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    sys.stderr.write(f"{url}: HTTP {e.code}: {e.read().decode()[:300]}\n")
    sys.exit(1)
except OSError as e:
    sys.stderr.write(f"{url}: {e}\n")
    sys.exit(1)
PY
}

# svix_request METHOD URL API_KEY [JSON]: a request to the Svix-compatible routes (/api/v1/app/…), which take
# the API key as `Authorization: Bearer`; prints the answer's body; fails unless the answer is 2xx.
svix_request() {
    python3 - "$@" <<'PY'
import sys, urllib.request, urllib.error
method, url, key = sys.argv[1:4]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
req = urllib.request.Request(url, data=body, method=method)
req.add_header("Authorization", "Bearer " + key)
if body is not None:
    req.add_header("Content-Type", "application/json")
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    sys.stderr.write(f"{method} {url}: HTTP {e.code}: {e.read().decode()[:300]}\n")
    sys.exit(1)
except OSError as e:
    sys.stderr.write(f"{method} {url}: {e}\n")
    sys.exit(1)
PY
}

# json_get FIELD: reads one JSON object on stdin and prints FIELD.
json_get() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# selected GROUP: whether BENCH_ONLY (empty = every group) includes the workload group.
selected() { [[ -z "$ONLY" || ",$ONLY," == *",$1,"* ]]; }

now_ms() { date +%s%3N; }

# rss_kb FIELD: VmRSS (current) or VmHWM (peak so far) of the server, in kB.
rss_kb() {
    awk -v f="$1:" '$1 == f { print $2 }' "/proc/$SERVER_PID/status" 2>/dev/null || true
}

kb_to_mb() { awk -v kb="$1" 'BEGIN { printf "%.1f", kb / 1024 }'; }

# ge A B / lt A B: float comparisons for the PASS/FAIL column.
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
verdict() { if "$@"; then echo PASS; else echo FAIL; fi; }

# idle_pct SECONDS: share of the machine left idle over the next SECONDS (from /proc/stat).
idle_pct() {
    local a b
    a="$(head -n 1 /proc/stat)"
    sleep "$1"
    b="$(head -n 1 /proc/stat)"
    awk -v a="$a" -v b="$b" 'BEGIN {
        n = split(a, x); split(b, y); total = 0
        for (i = 2; i <= 9 && i <= n; i++) total += y[i] - x[i]
        printf "%d", (total > 0 ? 100 * (y[5] - x[5]) / total : 100)
    }'
}

# Other work on a shared machine skews every figure: wait (boundedly) until it has calmed down.
wait_until_quiet() {
    ((QUIET_WAIT > 0)) || return 0
    local waited=0 idle
    while :; do
        idle="$(idle_pct 3)"
        ((idle >= 90)) && return 0
        if ((waited == 0)); then log "machine busy (${idle}% idle); waiting up to ${QUIET_WAIT}s for it to calm down"; fi
        waited=$((waited + 3))
        if ((waited >= QUIET_WAIT)); then
            log "still busy (${idle}% idle); measuring anyway"
            return 0
        fi
    done
}

cleanup() {
    local status=$?
    if [[ -n "$CLIENT_PID" ]]; then
        kill "$CLIENT_PID" 2>/dev/null || true
    fi
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        log "stopping the server (pid $SERVER_PID)"
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    local pid
    for pid in "$RECEIVER_PID" "$HOOK_RECEIVER_PID"; do
        if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
            log "stopping a bench receiver (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    if [[ -n "$WORK_DIR" && -d "$WORK_DIR" ]]; then
        if [[ "$KEEP_TMP" == 1 ]]; then
            log "kept $WORK_DIR (database, server and receiver logs)"
        else
            rm -rf "$WORK_DIR"
        fi
    fi
    exit "$status"
}

# ---------------------------------------------------------------------------------------------------------
# Database backends. Each provides db_<kind>_setup (sets DB_URL), db_<kind>_size (a human-readable size of
# the seeded data) and db_<kind>_prewarm (brings the data into memory the way a long-running server would
# have it). Add a backend by adding these functions and a case in select_backend (and, for the trigger
# workloads, a way to count stored messages in bench/messages.py; for the deliveries group, in
# bench/deliveries.py).
# ---------------------------------------------------------------------------------------------------------

DB_KIND=""
DB_URL=""
ENV_ID=""                  # the run's environment (set once it exists)

db_sqlite_setup() { DB_URL="sqlite://$WORK_DIR/tidings.db"; }

db_sqlite_size() {
    local f="$WORK_DIR/tidings.db" total=0 part
    for part in "$f" "$f-wal"; do
        if [[ -f "$part" ]]; then total=$((total + $(stat -c %s "$part"))); fi
    done
    awk -v b="$total" 'BEGIN { printf "%.0f MB (file + WAL)", b / 1048576 }'
}

# Reading the files fills the OS page cache. It matters on machines that reclaim idle file pages quickly
# (this VM pages out file data untouched for ~30 s): without it a workload would measure disk reads.
db_sqlite_prewarm() {
    local part
    for part in "$WORK_DIR/tidings.db" "$WORK_DIR/tidings.db-wal"; do
        if [[ -f "$part" ]]; then cat "$part" >/dev/null; fi
    done
}

PG_DATABASE=""             # the database's name, as its backends' process titles show it (bench/sample.py)
db_postgres_setup() {
    DB_URL="$DATABASE_URL_OVERRIDE"
    PG_DATABASE="${DB_URL##*/}"
    PG_DATABASE="${PG_DATABASE%%\?*}"
}

db_postgres_size() { echo "n/a"; }

db_postgres_prewarm() { :; }   # the server's own cache; pg_prewarm could be used here

select_backend() {
    case "$DATABASE_URL_OVERRIDE" in
        "") DB_KIND=sqlite ;;
        postgres://* | postgresql://*) DB_KIND=postgres ;;
        sqlite:*) die "BENCH_DATABASE_URL: leave it unset for SQLite (a fresh temporary database is used)" ;;
        *) die "BENCH_DATABASE_URL: unsupported URL (expected postgres://…)" ;;
    esac
}

# ---------------------------------------------------------------------------------------------------------
# Workloads: name | wrk script (bench/wrk/) | script arguments. Filled in after the API key exists.
# ---------------------------------------------------------------------------------------------------------

declare -a WORKLOADS=()     # names, in run order
declare -A LABEL=() SCRIPT=() ARGS=() RESULT=() SAMPLE=()
# Trigger workloads only: events per request (marks a workload as one), stored messages before the measured
# run, load start and end (ms since the epoch), the drain's outcome and its bench/sample.py line.
declare -A EVENTS=() BASELINE=() LOAD_START=() LOAD_END=() DRAIN=() DRAIN_SAMPLE=()
declare -A CONNS=()         # wrk connections of a workload, when not BENCH_CONNECTIONS
# Where a trigger workload's events are counted: "messages" (stored messages, the default) or "receiver" (the
# deliveries and webhooks groups: requests counted by a bench receiver, whose URL and pid are SINK_URL and
# SINK_PID). Receiver workloads also keep the receiver's share of the machine during the load and the drain,
# and the outcome of the final check (bench/deliveries.py, bench/webhooks.py).
declare -A SINK=() SINK_URL=() SINK_PID=() RECEIVER_CPU=() RECEIVER_DRAIN_CPU=() CHECK=()
# Workloads whose CPU figures include the database's own processes (the webhooks group on PostgreSQL:
# bench/sample.py --postgres).
declare -A DB_CPU=()

add_workload() {
    local name="$1"
    WORKLOADS+=("$name")
    LABEL[$name]="$2"
    SCRIPT[$name]="$3"
    ARGS[$name]="${4:-}"
}

# kv_field LINE KEY: the value of KEY in a line of KEY=VALUE words (0 when absent).
kv_field() {
    local kv
    local -a kvs=()
    read -r -a kvs <<<"$1"
    for kv in "${kvs[@]}"; do
        if [[ "${kv%%=*}" == "$2" ]]; then
            echo "${kv#*=}"
            return
        fi
    done
    echo 0
}

result_field() { kv_field "${RESULT[$1]}" "$2"; }   # from wrk's BENCH_RESULT line
sample_field() { kv_field "${SAMPLE[$1]:-}" "$2"; }  # from bench/sample.py
drain_field() { kv_field "${DRAIN[$1]:-}" "$2"; }    # from wait_for_messages
drain_sample_field() { kv_field "${DRAIN_SAMPLE[$1]:-}" "$2"; }

# run_wrk NAME SECONDS OUTPUT [SAMPLES]: one wrk run of a workload, its full output in OUTPUT; with SAMPLES,
# bench/sample.py watches the run and writes its summary line there.
run_wrk() {
    local name="$1" seconds="$2" out="$3" samples="${4:-}" script="$WORK_DIR/${1}.lua"
    # The shared prelude (thread seeding, result line) followed by the workload.
    cat "$BENCH_DIR/wrk/report.lua" "$BENCH_DIR/wrk/${SCRIPT[$name]}" >"$script"
    local -a args=()
    read -r -a args <<<"${ARGS[$name]}"
    wrk -t"$THREADS" -c"${CONNS[$name]:-$CONNECTIONS}" -d"${seconds}s" --timeout "${TIMEOUT}s" --latency \
        -s "$script" "$BASE_URL" -- "${args[@]}" >"$out" 2>&1 &
    CLIENT_PID=$!
    if [[ -n "$samples" ]]; then
        # shellcheck disable=SC2046 # sample_args prints whole words
        python3 "$BENCH_DIR/sample.py" "$SERVER_PID" "$CLIENT_PID" $(sample_args "$name") >"$samples"
    fi
    local status=0
    wait "$CLIENT_PID" || status=$?
    CLIENT_PID=""
    ((status == 0)) || { cat "$out" >&2; die "wrk failed for $name (exit $status)"; }
}

# Trigger workloads: the API answers 201 once the event is queued; the in-app message is stored later by the
# server's workers. The events are counted where they end up, in the messages table (bench/messages.py).

# accepted_events WRK_OUTPUT EVENTS_PER_REQUEST: events the API accepted in one wrk run (2xx answers).
accepted_events() {
    local line
    line="$(sed -n 's/^BENCH_RESULT //p' "$1")"
    echo $((($(kv_field "$line" requests) - $(kv_field "$line" status_errors)) * $2))
}

# wait_for_messages TARGET OUTPUT: waits until at least TARGET messages are stored and their count stopped
# growing, or it stalls for DRAIN_STALL seconds, or BENCH_DRAIN_TIMEOUT passes. Writes one line to OUTPUT:
#   first=<count at the first poll> count=<final count> newest_ms=<newest created_at> drained=<1 or 0>
wait_for_messages() {
    python3 "$BENCH_DIR/messages.py" "$DB_URL" "$ENV_ID" "$1" "$DRAIN_TIMEOUT" "$DRAIN_STALL" >"$2"
}

message_count() {
    local line
    line="$(python3 "$BENCH_DIR/messages.py" "$DB_URL" "$ENV_ID")" || die "could not count the stored messages"
    echo "${line%% *}"
}

# settle_messages TARGET OUTPUT: wait_for_messages in the foreground; prints the final count.
settle_messages() {
    wait_for_messages "$1" "$2" || die "could not count the stored messages"
    kv_field "$(cat "$2")" count
}

# receiver_count URL: the requests a bench receiver counted (bench/deliveries.py; the deliveries and webhooks
# groups count their events there).
receiver_count() {
    python3 "$BENCH_DIR/deliveries.py" count "$1" || die "could not read the receiver's count"
}

# event_count NAME: the events of a trigger workload counted so far where they end up.
event_count() {
    if [[ "${SINK[$1]:-}" == receiver ]]; then receiver_count "${SINK_URL[$1]}"; else message_count; fi
}

# sample_args NAME: the options bench/sample.py takes for a workload (--postgres DATABASE: count the CPU of
# the postgres processes serving the run's database, and of the shared ones).
sample_args() {
    if [[ -n "${DB_CPU[$1]:-}" ]]; then echo "--postgres $PG_DATABASE"; fi
}

# event_poller NAME TARGET TIMEOUT: sets POLLER to the command that waits (as wait_for_messages) until
# TARGET events of the workload are counted.
declare -a POLLER=()
event_poller() {
    if [[ "${SINK[$1]:-}" == receiver ]]; then
        POLLER=(python3 "$BENCH_DIR/deliveries.py" wait "${SINK_URL[$1]}" "$2" "$3" "$DRAIN_STALL")
    else
        POLLER=(python3 "$BENCH_DIR/messages.py" "$DB_URL" "$ENV_ID" "$2" "$3" "$DRAIN_STALL")
    fi
}

# settle_events NAME TARGET OUTPUT: settle_messages for any trigger workload; prints the final count.
settle_events() {
    event_poller "$1" "$2" "$DRAIN_TIMEOUT"
    "${POLLER[@]}" >"$3" || die "could not count the events of $1"
    kv_field "$(cat "$3")" count
}

# receiver_ticks PID: CPU ticks used so far by a bench receiver and by the whole machine (as bench/sample.py
# counts them: user, nice, system, idle, iowait, irq, softirq, steal). The receiver is neither the server nor
# the load generator; without this its work would count as other processes disturbing the run.
receiver_ticks() {
    local proc
    proc="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null)" || proc=""
    awk -v p="$proc" 'NR == 1 {
        split(p, f, " "); t = 0
        for (i = 2; i <= 9; i++) t += $i
        printf "%d %d\n", f[12] + f[13], t
    }' /proc/stat
}

# receiver_share PID TICKS_BEFORE: the receiver's share of the machine (%) since receiver_ticks printed
# TICKS_BEFORE.
receiver_share() {
    awk -v a="$2" -v b="$(receiver_ticks "$1")" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        printf "%.0f", (y[2] > x[2] ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0)
    }'
}

# measure_drain NAME: after a trigger workload's load stopped, waits (as wait_for_messages) until its events
# are stored (or, for the deliveries and webhooks groups, counted by the receiver) while bench/sample.py
# watches the server (the poller takes the load generator's place), and keeps the figures.
measure_drain() {
    local name="$1" target out="$WORK_DIR/$1.drain" status=0 ticks="" where=stored
    target=$((BASELINE[$name] + $(accepted_events "$WORK_DIR/$name.txt" "${EVENTS[$name]}")))
    if [[ "${SINK[$name]:-}" == receiver ]]; then
        where="counted by the receiver"
        ticks="$(receiver_ticks "${SINK_PID[$name]}")"
    fi
    log "$name: waiting for $((target - BASELINE[$name])) accepted events to be $where"
    event_poller "$name" "$target" "$DRAIN_TIMEOUT"
    "${POLLER[@]}" >"$out" &
    CLIENT_PID=$!
    # shellcheck disable=SC2046 # sample_args prints whole words
    python3 "$BENCH_DIR/sample.py" "$SERVER_PID" "$CLIENT_PID" $(sample_args "$name") \
        >"$WORK_DIR/$name.drain.samples"
    wait "$CLIENT_PID" || status=$?
    CLIENT_PID=""
    if ((status != 0)) || [[ ! -s "$out" ]]; then die "could not count the events of $name"; fi
    if [[ -n "$ticks" ]]; then RECEIVER_DRAIN_CPU[$name]="$(receiver_share "${SINK_PID[$name]}" "$ticks")"; fi
    DRAIN[$name]="$(cat "$out")"
    DRAIN_SAMPLE[$name]="$(cat "$WORK_DIR/$name.drain.samples")"
    if [[ "$(drain_field "$name" drained)" != 1 ]]; then
        log "warning: $name: only $(($(drain_field "$name" count) - BASELINE[$name])) of" \
            "$((target - BASELINE[$name])) events were $where"
    fi
}

# check_deliveries NAME: after the deliveries workload drained, compares the events the server recorded for
# the email workflow (sanity trigger, warm-up and measured load, including requests cut off when wrk stopped)
# with the receiver's count and with the email messages stored with status sent: all three must be equal, and
# the receiver must have counted at least the accepted events. Keeps the outcome in CHECK[NAME]
# ("ok=1 events=… received=… sent=… other=…") and says loudly what is wrong.
check_deliveries() {
    local name="$1" line received accepted ok=1
    received="$(receiver_count "$RECEIVER_URL")"
    line="$(python3 "$BENCH_DIR/deliveries.py" check "$DB_URL" "$ENV_ID" "$DELIVERY_WORKFLOW" "$received" \
        "$DRAIN_STALL")" || die "could not read the email messages of $name"
    accepted="$(accepted_events "$WORK_DIR/$name.txt" "${EVENTS[$name]}")"
    if (($(kv_field "$line" events) != received || $(kv_field "$line" sent) != received)); then
        ok=0
        log "ERROR: $name: the server recorded $(kv_field "$line" events) events of $DELIVERY_WORKFLOW, the" \
            "receiver counted $received requests, the database holds $(kv_field "$line" sent) email messages" \
            "with status sent (others: $(kv_field "$line" other)); they should all be equal"
    fi
    if ((received - BASELINE[$name] < accepted)); then
        ok=0
        log "ERROR: $name: the receiver counted $((received - BASELINE[$name])) requests during the measured" \
            "run, fewer than the $accepted accepted events"
    fi
    CHECK[$name]="ok=$ok received=$received $line"
}

# set_hook_endpoint enabled|disabled: enables or disables the webhooks group's endpoint (PATCH through the Svix
# route). While it is enabled, every message.sent of the environment reaches the group's receiver.
set_hook_endpoint() {
    local disabled=true
    [[ "$1" == enabled ]] && disabled=false
    svix_request PATCH "$HOOK_ENDPOINTS_URL/$HOOK_ENDPOINT" "$API_KEY" "{\"disabled\":$disabled}" >/dev/null \
        || die "could not set the webhook endpoint $1"
}

# check_webhooks NAME: after the webhooks workload drained, checks exactly once: the notifications of the
# workflow (sanity trigger, warm-up and measured load, including requests cut off when wrk stopped), the
# requests the receiver counted, the distinct webhook-id values among them and the environment's message.sent
# webhook messages with status success must all be equal, with no such message in another status (pending,
# sending, failed), and the receiver must have counted at least the accepted events. Keeps the outcome in
# CHECK[NAME] ("ok=1 received=… distinct=… events=… success=… other=…") and says loudly what is wrong.
check_webhooks() {
    local name="$1" line received distinct accepted ok=1
    received="$(receiver_count "$HOOK_RECEIVER_URL")"
    distinct="$(python3 "$BENCH_DIR/webhooks.py" distinct "$HOOK_RECEIVER_URL")" \
        || die "could not read the receiver's distinct webhook-id count"
    line="$(python3 "$BENCH_DIR/webhooks.py" check "$DB_URL" "$ENV_ID" "$WEBHOOK_WORKFLOW" "$WEBHOOK_EVENT" \
        "$received" "$DRAIN_STALL")" || die "could not read the webhook messages of $name"
    accepted="$(accepted_events "$WORK_DIR/$name.txt" "${EVENTS[$name]}")"
    if (($(kv_field "$line" events) != received || distinct != received || $(kv_field "$line" success) != received)) \
        || [[ "$(kv_field "$line" other)" != none ]]; then
        ok=0
        log "ERROR: $name: the server recorded $(kv_field "$line" events) notifications of $WEBHOOK_WORKFLOW, the" \
            "receiver counted $received requests with $distinct distinct webhook-id values, the database holds" \
            "$(kv_field "$line" success) $WEBHOOK_EVENT webhook messages with status success (others:" \
            "$(kv_field "$line" other)); they should all be equal, with no others"
    fi
    if ((received - BASELINE[$name] < accepted)); then
        ok=0
        log "ERROR: $name: the receiver counted $((received - BASELINE[$name])) requests during the measured" \
            "run, fewer than the $accepted accepted events"
    fi
    CHECK[$name]="ok=$ok received=$received distinct=$distinct $line"
}

# ---------------------------------------------------------------------------------------------------------
# Preview workload: the email step it renders, an order confirmation as a shop would write it (about 5 KB of
# HTML and CSS; bench/wrk/preview.lua sends the matching previewPayload).
# ---------------------------------------------------------------------------------------------------------

PREVIEW_SUBJECT='Order {{ payload.orderId | upcase }} confirmed, {{ subscriber.firstName | default: "there" }}'
PREVIEW_BODY="$(cat <<'HTML'
<!DOCTYPE html>
<html lang="{{ subscriber.locale | default: 'en' | slice: 0, 2 }}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="x-apple-disable-message-reformatting">
<title>Order {{ payload.orderId | upcase }}</title>
<style>
  body { margin: 0; padding: 0; background: #f4f5f7; font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; color: #1f2933; }
  .wrapper { width: 100%; background: #f4f5f7; padding: 24px 0; }
  .container { max-width: 600px; margin: 0 auto; background: #ffffff; border-radius: 8px; overflow: hidden; }
  .header { background: #0f4c81; color: #ffffff; padding: 24px 32px; }
  .content { padding: 24px 32px; font-size: 15px; line-height: 1.6; }
  table.items { width: 100%; border-collapse: collapse; margin: 16px 0; }
  table.items th { text-align: left; font-size: 12px; text-transform: uppercase; color: #7b8794; border-bottom: 1px solid #e4e7eb; padding: 8px 0; }
  table.items td { border-bottom: 1px solid #f0f2f4; padding: 12px 0; vertical-align: top; }
  .num { text-align: right; white-space: nowrap; }
  .muted { font-size: 12px; color: #7b8794; }
  .button { display: inline-block; background: #0f4c81; color: #ffffff !important; text-decoration: none; padding: 12px 24px; border-radius: 6px; font-weight: 600; }
  .footer { padding: 16px 32px 32px; font-size: 12px; color: #9aa5b1; text-align: center; }
  @media only screen and (max-width: 620px) { .content, .header, .footer { padding-left: 16px !important; padding-right: 16px !important; } }
</style>
</head>
<body>
<div class="wrapper">
 <div class="container">
  <div class="header">
   <h1 style="margin:0;font-size:22px;">Thanks for your order, {{ subscriber.firstName | default: "there" }}!</h1>
   <p style="margin:4px 0 0;font-size:13px;opacity:.85;">Order {{ payload.orderId | upcase }} &middot; placed {{ payload.createdAt | date: "%b %d, %Y at %H:%M" }} UTC</p>
  </div>
  <div class="content">
   <p>Hi {{ subscriber.firstName | default: "there" }} {{ subscriber.lastName }},</p>
   <p>We have received your order and are getting it ready. You will get another email with a tracking link as soon as it ships{% if payload.shipping.method == "express" %}; express orders usually leave our warehouse the same day{% endif %}.</p>
   <table class="items" role="presentation" cellpadding="0" cellspacing="0">
    <thead><tr><th>Item</th><th class="num">Qty</th><th class="num">Price</th></tr></thead>
    <tbody>
    {% for item in payload.items %}
     <tr>
      <td>
       <img src="{{ item.imageUrl | default: 'https://shop.example.com/img/placeholder.png' }}" alt="{{ item.name | escape }}" width="48" height="48" style="float:left;margin-right:12px;border-radius:4px;">
       <strong>{{ item.name | escape }}</strong><br>
       <span class="muted">SKU {{ item.sku | upcase }}{% if item.variant %} &middot; {{ item.variant | capitalize }}{% endif %}</span>
      </td>
      <td class="num">{{ item.qty | default: 1 }}</td>
      <td class="num">{{ payload.currency | default: "USD" }} {{ item.price | times: item.qty | round: 2 }}</td>
     </tr>
    {% endfor %}
    </tbody>
   </table>
   <table role="presentation" cellpadding="0" cellspacing="0" style="width:100%;font-size:14px;">
    <tr><td>Subtotal ({{ payload.items | size }} items)</td><td class="num">{{ payload.currency | default: "USD" }} {{ payload.subtotal }}</td></tr>
    {% if payload.coupon %}<tr><td>Coupon {{ payload.coupon.code | upcase }}</td><td class="num">&minus; {{ payload.currency | default: "USD" }} {{ payload.coupon.amount }}</td></tr>{% endif %}
    <tr><td>Shipping ({{ payload.shipping.method | default: "standard" | capitalize }})</td><td class="num">{% if payload.shipping.cost > 0 %}{{ payload.currency | default: "USD" }} {{ payload.shipping.cost }}{% else %}Free{% endif %}</td></tr>
    <tr><td><strong>Total</strong></td><td class="num"><strong>{{ payload.currency | default: "USD" }} {{ payload.total }}</strong></td></tr>
   </table>
   <h2 style="font-size:16px;margin:24px 0 8px;">Shipping to</h2>
   <p style="margin:0;">{{ payload.shipping.address.name | default: subscriber.firstName }}<br>
   {{ payload.shipping.address.line1 }}<br>
   {% if payload.shipping.address.line2 %}{{ payload.shipping.address.line2 }}<br>{% endif %}
   {{ payload.shipping.address.postcode }} {{ payload.shipping.address.city }}<br>
   {{ payload.shipping.address.country | upcase }}</p>
   <p style="margin:24px 0;text-align:center;"><a class="button" href="{{ payload.orderUrl | default: 'https://shop.example.com/account/orders' }}">View your order</a></p>
   <p>Need to change something? Orders can be edited or cancelled until they ship from the order page. Questions? Reply to this email or write to <a href="mailto:support@shop.example.com">support@shop.example.com</a> and quote order {{ payload.orderId | upcase }}.</p>
  </div>
  <div class="footer">
   <p>You receive this email because you placed an order with Example Shop as {{ subscriber.email | default: "a guest" }}.</p>
   <p>Example Shop &middot; 1 Market Street &middot; San Francisco, CA 94105 &middot; <a href="https://shop.example.com/preferences?s={{ subscriber.subscriberId }}" style="color:#9aa5b1;">Email preferences</a></p>
  </div>
 </div>
</div>
</body>
</html>
HTML
)"

# preview_workflow_json: the body of POST /v2/workflows that creates the preview group's workflow.
preview_workflow_json() {
    python3 -c 'import json, sys
workflow, step, subject, body = sys.argv[1:5]
print(json.dumps({"name": "Bench order confirmation", "workflowId": workflow, "steps": [
    {"name": "Order confirmation", "stepId": step, "type": "email",
     "controlValues": {"subject": subject, "body": body}}]}))' \
        "$PREVIEW_WORKFLOW" "$PREVIEW_STEP" "$PREVIEW_SUBJECT" "$PREVIEW_BODY"
}

# check_preview ANSWER_FILE: the preview answer is a rendered email (no result.error, no Liquid left, every
# item of the sample payload present); prints the rendered body's size.
check_preview() {
    python3 -c 'import json, sys
out = json.load(open(sys.argv[1]))
result = out.get("result", {})
if result.get("type") != "email" or "error" in result:
    sys.exit(f"preview: expected a rendered email, got {json.dumps(result)[:500]}")
subject, body = result["preview"].get("subject", ""), result["preview"].get("body", "")
if subject != "Order A-1 confirmed, Ada":
    sys.exit(f"preview: subject {subject!r}")
missing = [s for s in ["Thanks for your order, Ada!", "Nov 22, 2026", "SKU LMP-204", "Walnut", "EUR 41.8",
                       "Coupon WELCOME10", "Express", "Flat 3<br>", "GB</p>"] if s not in body]
if missing or "{{" in body or "{%" in body:
    sys.exit(f"preview: the body lacks {missing} or still holds Liquid:\n{body[:2000]}")
print(len(body))' "$1"
}

# ---------------------------------------------------------------------------------------------------------
# Deliveries workload: the email step it delivers (bench/wrk/trigger.lua with "order" sends payload.order and
# payload.total) and the integration that posts it to the bench receiver.
# ---------------------------------------------------------------------------------------------------------

DELIVERY_SUBJECT='Order {{payload.order}}'
DELIVERY_BODY='<html><body><p>Hi {{ subscriber.firstName }},</p>
<p>Thanks for your order {{ payload.order }} ({{ payload.total }} EUR). We will write to
{{ subscriber.email }} as soon as it ships.</p><p>Example Shop</p></body></html>'

# delivery_workflow_json: the body of POST /v2/workflows that creates the deliveries group's workflow.
delivery_workflow_json() {
    python3 -c 'import json, sys
workflow, subject, body = sys.argv[1:4]
print(json.dumps({"name": "Bench order email", "workflowId": workflow, "steps": [
    {"name": "Order email", "type": "email", "controlValues": {"subject": subject, "body": body}}]}))' \
        "$DELIVERY_WORKFLOW" "$DELIVERY_SUBJECT" "$DELIVERY_BODY"
}

# delivery_integration_json: the body of POST /v1/integrations: the first active email integration of the
# environment, hence its primary one, posting each email to the receiver.
delivery_integration_json() {
    python3 -c 'import json, sys
url, sender = sys.argv[1:3]
print(json.dumps({"providerId": "email-webhook", "channel": "email", "active": True,
                  "credentials": {"webhookUrl": url, "from": sender}}))' "$RECEIVER_URL/mail" "$DELIVERY_FROM"
}

# ---------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------

for v in SUBSCRIBERS ENDPOINTS NOTIFICATIONS TRIGGER_BULK DRAIN_TIMEOUT DURATION WARMUP THREADS CONNECTIONS TIMEOUT \
    QUIET_WAIT INBOX_MESSAGES; do
    is_uint "${!v}" || die "BENCH_$v must be a non-negative integer, got '${!v}'"
done
ONLY="${ONLY// /}"
declare -a only_groups=()
IFS=, read -r -a only_groups <<<"$ONLY"
for g in "${only_groups[@]}"; do
    [[ " $WORKLOAD_GROUPS " == *" $g "* ]] \
        || die "BENCH_ONLY: unknown workload group '$g' (expected some of: ${WORKLOAD_GROUPS// /, })"
done
((SUBSCRIBERS >= 1)) || die "BENCH_SUBSCRIBERS must be at least 1"
((ENDPOINTS >= 1)) || die "BENCH_ENDPOINTS must be at least 1"
((NOTIFICATIONS >= 1)) || die "BENCH_NOTIFICATIONS must be at least 1"
((TRIGGER_BULK <= 100)) || die "BENCH_TRIGGER_BULK must be at most 100 (the API's limit per request)"
((DRAIN_TIMEOUT >= 1)) || die "BENCH_DRAIN_TIMEOUT must be at least 1"
((DURATION >= 1)) || die "BENCH_DURATION must be at least 1"
((CONNECTIONS >= THREADS)) || die "BENCH_CONNECTIONS must be >= BENCH_THREADS"

# Smaller seeds keep the full run's page shapes: 10 endpoints per owner, 100 per context, 200 pages of 50
# notifications, triggers to existing subscribers.
min() { echo $(($1 < $2 ? $1 : $2)); }
max() { echo $(($1 > $2 ? $1 : $2)); }
ENDPOINT_OWNERS="$(min "$ENDPOINT_OWNERS" "$(max 1 $((ENDPOINTS / 10)))")"
ENDPOINT_CONTEXTS="$(min "$ENDPOINT_CONTEXTS" "$(max 1 $((ENDPOINTS / 100)))")"
NOTIFICATION_PAGES="$(min "$NOTIFICATION_PAGES" "$(max 1 $((NOTIFICATIONS / NOTIFICATION_LIMIT)))")"
TRIGGER_SUBSCRIBERS="$(min "$TRIGGER_SUBSCRIBERS" "$SUBSCRIBERS")"
TOPIC_SIZE="$(min "$TOPIC_SIZE" "$SUBSCRIBERS")"

command -v python3 >/dev/null 2>&1 || die "python3 is required"
command -v cargo >/dev/null 2>&1 || die "cargo (the Rust toolchain) is required"
select_backend
if { selected triggers || selected deliveries || selected webhooks || selected topics || selected inbox; } \
    && [[ "$DB_KIND" == postgres ]]; then
    command -v psql >/dev/null 2>&1 || die "psql is required to count stored messages on PostgreSQL" \
        "(BENCH_ONLY without triggers, deliveries, webhooks, topics and inbox avoids it)"
fi
ensure_wrk

# Other work on this machine skews every figure; say so in the report instead of hiding it.
LOAD_AT_START="$(cut -d ' ' -f 1-3 /proc/loadavg)"
if ge "${LOAD_AT_START%% *}" 1.0; then
    log "warning: load average is $LOAD_AT_START; other processes will compete with the benchmark"
fi

log "building the release binary"
(cd "$REPO_ROOT" && cargo build --release) >&2
[[ -x "$BIN" ]] || die "$BIN was not built"
if selected deliveries || selected webhooks; then
    log "building the bench receiver (examples/bench_receiver.rs)"
    (cd "$REPO_ROOT" && cargo build --release --example bench_receiver) >&2
    [[ -x "$RECEIVER_BIN" ]] || die "$RECEIVER_BIN was not built"
fi

WORK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/tidings-bench.XXXXXX")"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"db_${DB_KIND}_setup"
# Required with PostgreSQL; with SQLite it only avoids writing secret.key. An existing value is kept.
: "${TIDINGS_ENCRYPTION_KEY:=$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')}"
export TIDINGS_ENCRYPTION_KEY
export DATABASE_URL="$DB_URL" RUST_LOG="$SERVER_LOG_FILTER"
unset TIDINGS_API_KEY TIDINGS_LISTEN

log "database: $DB_KIND; applying migrations"
"$BIN" migrate --database-url "$DB_URL" >&2

# A dedicated environment per run (a unique name, so a shared PostgreSQL database can be reused). Its key
# is then the server's bootstrap key, which start-up finds already present.
ENV_NAME="Bench $(date -u +%Y%m%dT%H%M%SZ)-$$"
ENV_JSON="$("$BIN" environments create "$ENV_NAME" --database-url "$DB_URL")"
API_KEY="$(json_get apiKey <<<"$ENV_JSON")"
ENV_ID="$(json_get environmentId <<<"$ENV_JSON")"
[[ -n "$API_KEY" && -n "$ENV_ID" ]] || die "could not create the benchmark environment"
export TIDINGS_API_KEY="$API_KEY"

# seed WHAT COUNT SUBCOMMAND [ARGS…]: runs a hidden seed command against the run's environment, timed.
declare -a SEEDED=()
seed() {
    local what="$1" count="$2" start seconds
    shift 2
    log "seeding $count $what"
    start=$(date +%s.%N)
    "$BIN" "$@" --api-key "$API_KEY" --count "$count" --prefix "$PREFIX" --database-url "$DB_URL" >&2
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    SEEDED+=("$count $what in ${seconds}s")
    log "seeded $count $what in ${seconds}s"
}

# Triggers go to existing subscribers, so that they measure the trigger path rather than subscriber creation.
if selected subscribers || selected triggers || selected deliveries || selected webhooks || selected topics \
    || selected inbox; then
    seed subscribers "$SUBSCRIBERS" seed-subscribers
fi
if selected topics; then
    seed "topic subscriptions" "$TOPIC_SIZE" seed-topic --key "$TOPIC_KEY"
fi
if selected endpoints; then
    seed "channel endpoints" "$ENDPOINTS" seed-channel-endpoints \
        --subscribers "$ENDPOINT_OWNERS" --contexts "$ENDPOINT_CONTEXTS"
fi
if selected notifications; then
    seed notifications "$NOTIFICATIONS" seed-notifications --subscribers "$NOTIFICATION_SUBSCRIBERS"
fi
DB_SIZE="$("db_${DB_KIND}_size")"
log "database $DB_SIZE"

PORT="$(free_port)"
BASE_URL="http://127.0.0.1:$PORT"
log "starting tidings serve on $BASE_URL"
# The workloads send far more than the default rate limits per environment allow (e.g. 10,000 triggers/s
# against 6,000, bulk requests costing 100 each): the limits are raised out of reach, not turned off, so the
# limiter's cost is still measured.
export TIDINGS_RATE_LIMIT_EVENTS=10000000 TIDINGS_RATE_LIMIT_CONFIGURATION=10000000 \
    TIDINGS_RATE_LIMIT_GLOBAL=10000000 TIDINGS_RATE_LIMIT_INBOX=10000000 \
    TIDINGS_RATE_LIMIT_INBOX_PER_ADDRESS=10000000 TIDINGS_RATE_LIMIT_INBOX_PER_SUBSCRIBER=10000000
# The deliveries and webhooks groups' receivers listen on loopback, which workers and the webhook sender refuse
# to call by default.
export TIDINGS_ALLOW_PRIVATE_NETWORKS=true
# start_receiver PID_VAR URL_VAR LOG: starts a bench receiver (examples/bench_receiver.rs) on a free port, its
# output in WORK_DIR/LOG; sets the variables named PID_VAR (for the cleanup trap, at once) and URL_VAR, and
# waits until it answers with a zero count.
start_receiver() {
    local port url
    port="$(free_port)"
    url="http://127.0.0.1:$port"
    log "starting a bench receiver on $url"
    "$RECEIVER_BIN" "127.0.0.1:$port" >"$WORK_DIR/$3" 2>&1 &
    printf -v "$1" '%s' "$!"
    printf -v "$2" '%s' "$url"
    for _ in $(seq 1 50); do
        kill -0 "${!1}" 2>/dev/null || { cat "$WORK_DIR/$3" >&2; die "the receiver exited"; }
        http_get "$url/count" >/dev/null 2>&1 && break
        sleep 0.2
    done
    [[ "$(http_get "$url/count")" == 0 ]] || die "the bench receiver did not come up with a zero count"
}

# start_server: starts `tidings serve` on PORT (its log appended to server.log) and waits until it answers.
start_server() {
    "$BIN" serve --listen "127.0.0.1:$PORT" --database-url "$DB_URL" >>"$WORK_DIR/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 150); do
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK_DIR/server.log" >&2; die "the server exited during start-up"; }
        http_get "$BASE_URL/v1/health-check" >/dev/null 2>&1 && break
        sleep 0.2
    done
    http_get "$BASE_URL/v1/health-check" >/dev/null || die "the server did not come up"
}
start_server

# Idle memory: after start-up on the seeded database, before any request touches the data.
sleep 2
RSS_IDLE_KB="$(rss_kb VmRSS)"
log "idle RSS: $(kb_to_mb "$RSS_IDLE_KB") MB"

# app_identifier: the environment's public identifier (the Inbox's applicationIdentifier, the Svix app id).
app_identifier() {
    http_get "$BASE_URL/v1/environments/me" "$API_KEY" | python3 -c 'import json, sys
body = json.load(sys.stdin)
print(body.get("data", body)["identifier"])'
}

# Sanity: the workloads must measure real answers, not 401/404s or empty pages.
if selected subscribers; then
    http_get "$BASE_URL/v2/subscribers/${PREFIX}1" "$API_KEY" >/dev/null || die "subscriber ${PREFIX}1 not found"
    http_get "$BASE_URL/v2/subscribers/${PREFIX}${SUBSCRIBERS}" "$API_KEY" >/dev/null \
        || die "subscriber ${PREFIX}${SUBSCRIBERS} not found"
    http_get "$BASE_URL/v2/subscribers?email=user${SUBSCRIBERS}%40" "$API_KEY" \
        | python3 -c 'import json, sys
page = json.load(sys.stdin)
ids = [s["subscriberId"] for s in page["data"]]
sys.exit(0 if ids == [sys.argv[1]] else f"email search returned {ids}, expected [{sys.argv[1]}]")' "${PREFIX}${SUBSCRIBERS}"
fi

# check_page URL FIELD VALUE EXPECTED: the page at URL holds EXPECTED items, each with FIELD equal to VALUE
# (FIELD "-" skips that test).
check_page() {
    http_get "$1" "$API_KEY" | python3 -c 'import json, sys
url, field, value, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
data = json.load(sys.stdin)["data"]
if len(data) != expected:
    sys.exit(f"{url}: {len(data)} items, expected {expected}")
wrong = [item.get(field) for item in data if field != "-" and item.get(field) != json.loads(value)]
if wrong:
    sys.exit(f"{url}: {field} {wrong[0]!r}, expected {value}")' "$1" "$2" "$3" "$4"
}

# Among endpoints 1..N, those with n % m == 1 (subscriberId bench1, context tenant:t1).
endpoints_of_first() { echo $((($1 - 1) / $2 + 1)); }

if selected endpoints; then
    check_page "$BASE_URL/v1/channel-endpoints?limit=100&subscriberId=${PREFIX}1" subscriberId "\"${PREFIX}1\"" \
        "$(min 100 "$(endpoints_of_first "$ENDPOINTS" "$ENDPOINT_OWNERS")")"
    check_page "$BASE_URL/v1/channel-endpoints?limit=100&contextKeys=tenant:t1" contextKeys '["tenant:t1"]' \
        "$(min 100 "$(endpoints_of_first "$ENDPOINTS" "$ENDPOINT_CONTEXTS")")"
fi
if selected notifications; then
    check_page "$BASE_URL/v1/notifications?limit=$NOTIFICATION_LIMIT" - - \
        "$(min "$NOTIFICATION_LIMIT" "$NOTIFICATIONS")"
    check_page "$BASE_URL/v1/notifications?limit=$NOTIFICATION_LIMIT&page=$((NOTIFICATION_PAGES - 1))" - - \
        "$(min "$NOTIFICATION_LIMIT" $((NOTIFICATIONS - (NOTIFICATION_PAGES - 1) * NOTIFICATION_LIMIT)))"
fi
if selected inbox; then
    # BENCH_INBOX_MESSAGES in-app messages of bench1 (bulk triggers of 100), then an Inbox session of bench1.
    http_post "$BASE_URL/v2/workflows" "$API_KEY" "{\"name\":\"Bench inbox\",\"workflowId\":\"$INBOX_WORKFLOW\",
        \"steps\":[{\"name\":\"Inbox\",\"type\":\"in_app\",\"controlValues\":{\"body\":\"Hello {{ payload.n }}\"}}]}" \
        >/dev/null || die "could not create the $INBOX_WORKFLOW workflow"
    base="$(kv_field "$(python3 "$BENCH_DIR/messages.py" "$DB_URL" "$ENV_ID")" count)"
    for ((i = 0; i < INBOX_MESSAGES; i += 100)); do
        n=$(min 100 $((INBOX_MESSAGES - i)))
        events="$(python3 -c 'import json, sys
w, to, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(json.dumps({"events": [{"name": w, "to": to, "payload": {"n": i}} for i in range(n)]}))' \
            "$INBOX_WORKFLOW" "${PREFIX}1" "$n")"
        http_post "$BASE_URL/v1/events/trigger/bulk" "$API_KEY" "$events" >/dev/null \
            || die "could not trigger the inbox group's messages"
    done
    stored="$(settle_messages $((base + INBOX_MESSAGES)) "$WORK_DIR/inbox.drain")"
    ((stored >= base + INBOX_MESSAGES)) || die "the inbox group stored $((stored - base)) messages, expected $INBOX_MESSAGES"
    app_id="$(app_identifier)" || die "could not read the environment's applicationIdentifier"
    INBOX_TOKEN="$(python3 - "$BASE_URL" "$app_id" "${PREFIX}1" <<'PY'
import json, sys, urllib.request
url, app, subscriber = sys.argv[1:4]
body = json.dumps({"applicationIdentifier": app, "subscriber": {"subscriberId": subscriber}}).encode()
req = urllib.request.Request(url + "/v1/inbox/session", data=body, method="POST",
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=10) as r:
    print(json.load(r)["data"]["token"])
PY
)" || die "could not open an Inbox session for ${PREFIX}1"
    INBOX_LIST="/v1/inbox/notifications?limit=10"
    V2_LIST="/v2/subscribers/${PREFIX}1/notifications?limit=10"
    check_page "$BASE_URL$V2_LIST" - - "$(min 10 "$INBOX_MESSAGES")"
fi
if selected triggers || selected topics; then
    # A one-step in-app workflow, then one event followed all the way to its stored message.
    http_post "$BASE_URL/v2/workflows" "$API_KEY" "{\"name\":\"Bench ping\",\"workflowId\":\"$TRIGGER_WORKFLOW\",
        \"steps\":[{\"name\":\"Inbox\",\"type\":\"in_app\",\"controlValues\":{\"body\":\"Hello {{ payload.n }}\"}}]}" \
        >/dev/null || die "could not create the $TRIGGER_WORKFLOW workflow"
    # Counted from what is stored already (the inbox group's messages, when it ran).
    base="$(message_count)"
    http_post "$BASE_URL/v1/events/trigger" "$API_KEY" \
        "{\"name\":\"$TRIGGER_WORKFLOW\",\"to\":\"${PREFIX}1\",\"payload\":{\"n\":1}}" >/dev/null \
        || die "the trigger was refused"
    stored="$(DRAIN_TIMEOUT=30 settle_messages $((base + 1)) "$WORK_DIR/sanity.drain")"
    ((stored == base + 1)) || die "one trigger stored $((stored - base)) in-app messages, expected 1"
fi

if selected preview; then
    # The email workflow, then one preview with a fixed payload of the shape bench/wrk/preview.lua sends.
    http_post "$BASE_URL/v2/workflows" "$API_KEY" "$(preview_workflow_json)" >/dev/null \
        || die "could not create the $PREVIEW_WORKFLOW workflow"
    http_post "$BASE_URL/v2/workflows/$PREVIEW_WORKFLOW/step/$PREVIEW_STEP/preview" "$API_KEY" '{"previewPayload": {
        "payload": {"orderId": "a-1", "createdAt": "2026-11-22T08:15:00.000Z", "currency": "EUR",
            "items": [{"name": "Walnut desk lamp", "sku": "lmp-204", "qty": 2, "price": 20.9, "variant": "walnut",
                       "imageUrl": "https://shop.example.com/img/lmp-204.png"},
                      {"name": "Wool desk mat", "sku": "mat-12", "qty": 1, "price": 35}],
            "subtotal": 76.8, "total": 66.8, "coupon": {"code": "welcome10", "amount": 10},
            "shipping": {"method": "express", "cost": 0, "address": {"name": "Ada Lovelace",
                "line1": "12 St James'"'"'s Square", "line2": "Flat 3", "postcode": "SW1Y 4JH", "city": "London",
                "country": "gb"}}},
        "subscriber": {"subscriberId": "bench1", "firstName": "Ada", "lastName": "Lovelace"}}}' \
        >"$WORK_DIR/preview.json" || die "the preview request was refused"
    rendered="$(check_preview "$WORK_DIR/preview.json")" || die "the preview did not render"
    log "preview: the ${#PREVIEW_BODY}-byte template rendered to $rendered bytes"
fi

if selected deliveries; then
    # The receiver, the integration posting to it and the email workflow, then one event followed all the way
    # to the receiver and to its stored message.
    start_receiver RECEIVER_PID RECEIVER_URL receiver.log
    http_post "$BASE_URL/v1/integrations" "$API_KEY" "$(delivery_integration_json)" \
        >"$WORK_DIR/integration.json" || die "could not create the email-webhook integration"
    python3 -c 'import json, sys
i = json.load(open(sys.argv[1]))
i = i.get("data", i)
if not (i.get("active") and i.get("primary") and i.get("channel") == "email"):
    sys.exit(f"the email-webhook integration is not the active, primary email integration: {json.dumps(i)[:500]}")' \
        "$WORK_DIR/integration.json" || die "unexpected integration"
    http_post "$BASE_URL/v2/workflows" "$API_KEY" "$(delivery_workflow_json)" >/dev/null \
        || die "could not create the $DELIVERY_WORKFLOW workflow"
    http_post "$BASE_URL/v1/events/trigger" "$API_KEY" \
        "{\"name\":\"$DELIVERY_WORKFLOW\",\"to\":\"${PREFIX}1\",\"payload\":{\"order\":\"A-1\",\"total\":\"12.50\"}}" \
        >/dev/null || die "the email trigger was refused"
    python3 "$BENCH_DIR/deliveries.py" wait "$RECEIVER_URL" 1 30 "$DRAIN_STALL" >"$WORK_DIR/sanity.deliveries" \
        || die "could not read the receiver's count"
    received="$(kv_field "$(cat "$WORK_DIR/sanity.deliveries")" count)"
    if ((received != 1)); then
        tail -n 20 "$WORK_DIR/server.log" >&2
        die "one email trigger reached the receiver $received times, expected 1"
    fi
    line="$(python3 "$BENCH_DIR/deliveries.py" check "$DB_URL" "$ENV_ID" "$DELIVERY_WORKFLOW" 1 30)" \
        || die "could not read the email messages"
    [[ "$line" == "events=1 sent=1 other=none "* ]] || die "after one email trigger: $line"
    http_get "$BASE_URL/v1/messages?channel=email&subscriberId=${PREFIX}1" "$API_KEY" | python3 -c 'import json, sys
page = json.load(sys.stdin)
m = page["data"][0] if page.get("data") else {}
want = {"status": "sent", "providerId": "email-webhook", "subject": "Order A-1", "email": "user1@bench.example.com"}
wrong = {k: m.get(k) for k, v in want.items() if m.get(k) != v}
content = m.get("content", "")
if wrong or "Hi First1," not in content or "12.50 EUR" not in content or "{{" in content:
    sys.exit(f"the delivered email message: {wrong or json.dumps(m)[:800]}")' || die "the email was not rendered as expected"
    log "deliveries: one email trigger reached the receiver and is stored as sent"
fi

if selected webhooks; then
    # Its own receiver, the in-app workflow and the endpoint (message.sent only), then one event followed all
    # the way to the receiver: received once, signed with the endpoint's secret, recorded as a success. The
    # endpoint is then disabled until the group's workload (set_hook_endpoint), so that the other groups'
    # messages never reach it.
    start_receiver HOOK_RECEIVER_PID HOOK_RECEIVER_URL hook-receiver.log
    http_post "$BASE_URL/v2/workflows" "$API_KEY" "{\"name\":\"Bench hook\",\"workflowId\":\"$WEBHOOK_WORKFLOW\",
        \"steps\":[{\"name\":\"Inbox\",\"type\":\"in_app\",\"controlValues\":{\"body\":\"Hello {{ payload.n }}\"}}]}" \
        >/dev/null || die "could not create the $WEBHOOK_WORKFLOW workflow"
    HOOK_APP="$(app_identifier)" || die "could not read the environment's applicationIdentifier"
    HOOK_ENDPOINTS_URL="$BASE_URL/api/v1/app/$HOOK_APP/endpoint"
    svix_request POST "$HOOK_ENDPOINTS_URL" "$API_KEY" "{\"url\":\"$HOOK_RECEIVER_URL/hooks\",
        \"filterTypes\":[\"$WEBHOOK_EVENT\"],\"description\":\"bench/run.sh webhooks group\"}" \
        >"$WORK_DIR/endpoint.json" || die "could not create the webhook endpoint"
    python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))
if not (e.get("id", "").startswith("ep_") and e.get("eventTypes") == [sys.argv[2]] and not e.get("disabled")):
    sys.exit(f"unexpected endpoint: {json.dumps(e)[:500]}")' "$WORK_DIR/endpoint.json" "$WEBHOOK_EVENT" \
        || die "the endpoint was not created as asked"
    HOOK_ENDPOINT="$(json_get id <"$WORK_DIR/endpoint.json")"
    HOOK_SECRET="$(svix_request GET "$HOOK_ENDPOINTS_URL/$HOOK_ENDPOINT/secret" "$API_KEY" | json_get key)" \
        || die "could not read the endpoint's secret"
    http_post "$BASE_URL/v1/events/trigger" "$API_KEY" \
        "{\"name\":\"$WEBHOOK_WORKFLOW\",\"to\":\"${PREFIX}1\",\"payload\":{\"n\":1}}" >/dev/null \
        || die "the $WEBHOOK_WORKFLOW trigger was refused"
    python3 "$BENCH_DIR/deliveries.py" wait "$HOOK_RECEIVER_URL" 1 30 "$DRAIN_STALL" >"$WORK_DIR/sanity.webhooks" \
        || die "could not read the receiver's count"
    received="$(kv_field "$(cat "$WORK_DIR/sanity.webhooks")" count)"
    distinct="$(python3 "$BENCH_DIR/webhooks.py" distinct "$HOOK_RECEIVER_URL")" || die "could not read /distinct"
    if ((received != 1 || distinct != 1)); then
        tail -n 20 "$WORK_DIR/server.log" >&2
        die "one trigger reached the webhook receiver $received times ($distinct distinct webhook-id), expected 1"
    fi
    python3 "$BENCH_DIR/webhooks.py" verify "$HOOK_RECEIVER_URL" "$HOOK_SECRET" "$WEBHOOK_EVENT" "${PREFIX}1" \
        "$HOOK_APP" >/dev/null || die "the webhook request is not the signed $WEBHOOK_EVENT event expected"
    line="$(python3 "$BENCH_DIR/webhooks.py" check "$DB_URL" "$ENV_ID" "$WEBHOOK_WORKFLOW" "$WEBHOOK_EVENT" 1 30)" \
        || die "could not read the webhook messages"
    [[ "$line" == "events=1 success=1 other=none" ]] || die "after one $WEBHOOK_WORKFLOW trigger: $line"
    set_hook_endpoint disabled
    log "webhooks: one trigger reached the receiver once, signed, and is recorded as a success"
fi

# The ceiling is measured at the start and again after each read group: from one run to the next on this
# machine it moves by up to ±20 %, so the shares are taken of the median of those runs (see the report).
CEILING_RUNS=()
add_ceiling_run() {
    local name="health$((${#CEILING_RUNS[@]} + 1))"
    CEILING_RUNS+=("$name")
    add_workload "$name" "GET /v1/health-check (ceiling run ${#CEILING_RUNS[@]})" health.lua
}
add_ceiling_run
if selected subscribers; then
    add_workload by_id "GET /v2/subscribers/{id}" subscriber_by_id.lua "$API_KEY $SUBSCRIBERS $PREFIX"
    add_workload email "GET /v2/subscribers?email=user<N>@" email_search.lua "$API_KEY $SUBSCRIBERS"
    add_ceiling_run
fi
if selected endpoints; then
    add_workload ep_subscriber "GET /v1/channel-endpoints?limit=100&subscriberId=bench<N>" \
        endpoints_by_subscriber.lua "$API_KEY $ENDPOINT_OWNERS $PREFIX"
    add_workload ep_context "GET /v1/channel-endpoints?limit=100&contextKeys=tenant:t<N>" \
        endpoints_by_context.lua "$API_KEY $ENDPOINT_CONTEXTS"
    add_ceiling_run
fi
if selected notifications; then
    add_workload notif_first "GET /v1/notifications?limit=$NOTIFICATION_LIMIT" notifications.lua \
        "$API_KEY $NOTIFICATION_LIMIT 1"
    add_workload notif_pages "GET /v1/notifications?limit=$NOTIFICATION_LIMIT&page=<0..$((NOTIFICATION_PAGES - 1))>" \
        notifications.lua "$API_KEY $NOTIFICATION_LIMIT $NOTIFICATION_PAGES"
    add_ceiling_run
fi
if selected inbox; then
    add_workload inbox_list "GET $INBOX_LIST (Inbox session)" get.lua "Bearer $INBOX_TOKEN $INBOX_LIST"
    add_workload v2_list "GET /v2/subscribers/{id}/notifications?limit=10 (API key)" get.lua \
        "ApiKey $API_KEY $V2_LIST"
    add_ceiling_run
fi
if selected triggers; then
    add_workload trigger "POST /v1/events/trigger" trigger.lua \
        "$API_KEY $TRIGGER_WORKFLOW $TRIGGER_SUBSCRIBERS $PREFIX 1"
    EVENTS[trigger]=1
    if ((TRIGGER_BULK > 0)); then
        add_workload trigger_bulk "POST /v1/events/trigger/bulk ($TRIGGER_BULK events, -c$THREADS)" trigger.lua \
            "$API_KEY $TRIGGER_WORKFLOW $TRIGGER_SUBSCRIBERS $PREFIX $TRIGGER_BULK"
        EVENTS[trigger_bulk]="$TRIGGER_BULK"
        # Each request carries many events: one connection per thread keeps the events in flight comparable.
        CONNS[trigger_bulk]="$THREADS"
    fi
fi
if selected preview; then
    add_workload preview "step preview (email, 5 KB template)" preview.lua \
        "$API_KEY $PREVIEW_WORKFLOW $PREVIEW_STEP"
fi
if selected deliveries; then
    if ((TRIGGER_BULK > 0)); then
        add_workload deliveries "POST /v1/events/trigger/bulk ($TRIGGER_BULK events, -c$THREADS)" trigger.lua \
            "$API_KEY $DELIVERY_WORKFLOW $TRIGGER_SUBSCRIBERS $PREFIX $TRIGGER_BULK order"
        EVENTS[deliveries]="$TRIGGER_BULK"
        CONNS[deliveries]="$THREADS"   # as the trigger group's bulk row
    else
        add_workload deliveries "POST /v1/events/trigger" trigger.lua \
            "$API_KEY $DELIVERY_WORKFLOW $TRIGGER_SUBSCRIBERS $PREFIX 1 order"
        EVENTS[deliveries]=1
    fi
    SINK[deliveries]=receiver
    SINK_URL[deliveries]="$RECEIVER_URL"
    SINK_PID[deliveries]="$RECEIVER_PID"
fi
if selected webhooks; then
    add_workload webhooks "POST /v1/events/trigger → $WEBHOOK_EVENT webhook" trigger.lua \
        "$API_KEY $WEBHOOK_WORKFLOW $TRIGGER_SUBSCRIBERS $PREFIX 1"
    EVENTS[webhooks]=1
    SINK[webhooks]=receiver
    SINK_URL[webhooks]="$HOOK_RECEIVER_URL"
    SINK_PID[webhooks]="$HOOK_RECEIVER_PID"
    if [[ "$DB_KIND" == postgres ]]; then DB_CPU[webhooks]=1; fi
fi

RAW="$WORK_DIR/raw.txt"
: >"$RAW"
ticks=""                   # the receiver's CPU ticks when a deliveries load started
for name in "${WORKLOADS[@]}"; do
    if [[ "$name" == webhooks ]]; then set_hook_endpoint enabled; fi
    wait_until_quiet
    if [[ "$PREWARM" == 1 ]]; then
        "db_${DB_KIND}_prewarm"
    fi
    if [[ -n "${EVENTS[$name]:-}" ]]; then
        BASELINE[$name]="$(event_count "$name")"
    fi
    if ((WARMUP > 0)); then
        log "$name: warm-up ${WARMUP}s"
        run_wrk "$name" "$WARMUP" "$WORK_DIR/$name.warmup.txt"
        if [[ -n "${EVENTS[$name]:-}" ]]; then
            # The warm-up's backlog is stored (or delivered) before the measured run starts.
            log "$name: waiting for the warm-up's events to be $(
                [[ "${SINK[$name]:-}" == receiver ]] && echo "counted by the receiver" || echo stored)"
            BASELINE[$name]="$(settle_events "$name" \
                $((BASELINE[$name] + $(accepted_events "$WORK_DIR/$name.warmup.txt" "${EVENTS[$name]}"))) \
                "$WORK_DIR/$name.warmup.drain")"
        fi
    fi
    log "$name: measuring ${DURATION}s (-t$THREADS -c${CONNS[$name]:-$CONNECTIONS})"
    if [[ "${SINK[$name]:-}" == receiver ]]; then ticks="$(receiver_ticks "${SINK_PID[$name]}")"; fi
    LOAD_START[$name]="$(now_ms)"
    run_wrk "$name" "$DURATION" "$WORK_DIR/$name.txt" "$WORK_DIR/$name.samples"
    LOAD_END[$name]="$(now_ms)"
    if [[ "${SINK[$name]:-}" == receiver ]]; then
        RECEIVER_CPU[$name]="$(receiver_share "${SINK_PID[$name]}" "$ticks")"
    fi
    RESULT[$name]="$(sed -n 's/^BENCH_RESULT //p' "$WORK_DIR/$name.txt")"
    [[ -n "${RESULT[$name]}" ]] || { cat "$WORK_DIR/$name.txt" >&2; die "no result line from wrk for $name"; }
    SAMPLE[$name]="$(cat "$WORK_DIR/$name.samples")"
    if [[ -n "${EVENTS[$name]:-}" ]]; then
        measure_drain "$name"
    fi
    case "$name" in
        deliveries) check_deliveries "$name" ;;
        webhooks)
            check_webhooks "$name"
            set_hook_endpoint disabled   # the later groups' messages (topics) must not reach it
            ;;
    esac
    {
        printf '### %s\n\n```\n' "${LABEL[$name]}"
        cat "$WORK_DIR/$name.txt"
        if [[ -n "${EVENTS[$name]:-}" ]]; then
            printf '%s: baseline=%s %s load_start_ms=%s load_end_ms=%s\n' \
                "$([[ "${SINK[$name]:-}" == receiver ]] && echo "receiver count" || echo "stored messages")" \
                "${BASELINE[$name]}" "${DRAIN[$name]}" "${LOAD_START[$name]}" "${LOAD_END[$name]}"
        fi
        if [[ -n "${CHECK[$name]:-}" ]]; then
            printf 'check: %s receiver_cpu_pct=%s receiver_drain_cpu_pct=%s\n' "${CHECK[$name]}" \
                "${RECEIVER_CPU[$name]}" "${RECEIVER_DRAIN_CPU[$name]}"
            printf 'samples: load: %s; drain: %s\n' "${SAMPLE[$name]}" "${DRAIN_SAMPLE[$name]}"
        fi
        printf '```\n\n'
    } >>"$RAW"
done

# topic_trigger TRANSACTION_ID: one trigger of the in-app workflow to the benchmark topic.
topic_trigger() {
    http_post "$BASE_URL/v1/events/trigger" "$API_KEY" "{\"name\":\"$TRIGGER_WORKFLOW\",
        \"to\":[{\"type\":\"Topic\",\"topicKey\":\"$TOPIC_KEY\"}],\"payload\":{\"n\":1},\"transactionId\":\"$1\"}" \
        >/dev/null || die "the trigger to $TOPIC_KEY was refused"
}

# fanout_counts TRANSACTION_ID: "notifications=… recipients=… messages=… status=…" of one fan-out.
fanout_counts() {
    python3 "$BENCH_DIR/fanout.py" "$DB_URL" "$ENV_ID" "$1" || die "could not count the fan-out $1"
}

# exactly_once LINE: whether a fan-out's counts show one notification and one message per topic subscriber.
exactly_once() {
    [[ "$1" == "notifications=$TOPIC_SIZE recipients=$TOPIC_SIZE messages=$TOPIC_SIZE status=completed" ]]
}

FANOUT=""          # the measured fan-out: messages.py's line, then its counts
KILL=""            # the kill test: when it killed, and the counts after the restart
if selected topics; then
    wait_until_quiet
    [[ "$PREWARM" == 1 ]] && "db_${DB_KIND}_prewarm"
    base="$(message_count)"
    tx="bench-fanout-$$"
    RSS_BEFORE_FANOUT_KB="$(rss_kb VmRSS)"
    log "topics: one trigger to $TOPIC_KEY ($TOPIC_SIZE subscribers)"
    FANOUT_START="$(now_ms)"
    topic_trigger "$tx"
    python3 "$BENCH_DIR/messages.py" "$DB_URL" "$ENV_ID" $((base + TOPIC_SIZE)) "$DRAIN_TIMEOUT" "$DRAIN_STALL" \
        >"$WORK_DIR/topics.drain" &
    CLIENT_PID=$!
    python3 "$BENCH_DIR/sample.py" "$SERVER_PID" "$CLIENT_PID" >"$WORK_DIR/topics.samples"
    wait "$CLIENT_PID" || die "could not count the messages of the fan-out"
    CLIENT_PID=""
    FANOUT="$(cat "$WORK_DIR/topics.drain") base=$base start_ms=$FANOUT_START $(fanout_counts "$tx")"
    FANOUT_SAMPLE="$(cat "$WORK_DIR/topics.samples")"
    log "topics: $FANOUT"

    # The kill test: SIGKILL once a third of the messages are stored, restart, and count.
    base="$(message_count)"
    tx="bench-kill-$$"
    log "topics: kill test: a second trigger, SIGKILL once $((TOPIC_SIZE / 3)) notifications are written"
    topic_trigger "$tx"
    deadline=$(($(date +%s) + DRAIN_TIMEOUT))
    while (($(kv_field "$(fanout_counts "$tx")" notifications) < TOPIC_SIZE / 3)); do
        (($(date +%s) < deadline)) || die "the kill test's fan-out did not get a third of the way"
        sleep 0.05
    done
    kill -KILL "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    killed_at="$(fanout_counts "$tx")"
    log "topics: killed at $killed_at; restarting"
    start_server
    settle_messages $((base + TOPIC_SIZE)) "$WORK_DIR/topics.kill.drain" >/dev/null
    KILL="killed_at: $killed_at; after the restart: $(fanout_counts "$tx")"
    log "topics: $KILL"
fi

if selected bulk_subscribers; then
    wait_until_quiet
    log "bulk_subscribers: $BULK_TOTAL subscribers in batches of 500 over $BULK_CONNECTIONS connections"
    python3 "$BENCH_DIR/bulk_subscribers.py" "$BASE_URL" "$API_KEY" "$BULK_TOTAL" 500 "$BULK_CONNECTIONS" \
        "bulk$$-" >"$WORK_DIR/bulk.out" &
    CLIENT_PID=$!
    python3 "$BENCH_DIR/sample.py" "$SERVER_PID" "$CLIENT_PID" >"$WORK_DIR/bulk.samples"
    wait "$CLIENT_PID" || BULK_FAILED=1
    CLIENT_PID=""
    BULK="$(tail -n 1 "$WORK_DIR/bulk.out")"
    BULK_SAMPLE="$(cat "$WORK_DIR/bulk.samples")"
    log "bulk_subscribers: $BULK"
fi

RSS_HWM_KB="$(rss_kb VmHWM)"
sleep 3
RSS_AFTER_KB="$(rss_kb VmRSS)"

# ---------------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------------

rps_of() {
    awk -v n="$(result_field "$1" requests)" -v us="$(result_field "$1" duration_us)" \
        'BEGIN { printf "%.0f", (us > 0 ? n / (us / 1e6) : 0) }'
}
percent() { awk -v r="$1" 'BEGIN { print 100 * r }'; }
ms_of() { awk -v us="$(result_field "$1" "$2")" 'BEGIN { printf "%.2f", us / 1000 }'; }

# The median of the ceiling runs (the mean of the middle two for an even count).
CEILING_VALUES="$(for name in "${CEILING_RUNS[@]}"; do rps_of "$name"; echo; done | tr '\n' ' ')"
CEILING_RPS="$(echo "$CEILING_VALUES" | tr ' ' '\n' | sed '/^$/d' | sort -n | tr '\n' ' ' |
    awk '{ n = NF; if (n % 2) printf "%.0f", $((n + 1) / 2); else printf "%.0f", ($(n / 2) + $(n / 2 + 1)) / 2 }')"
VALID=1
DISTURBED=0
MAX_OTHER_CPU_PCT=10   # above this share of the machine, other processes are said to skew the run

# One table row: workload, req/s, p50, p99, share of the ceiling, errors, peak RSS, CPU, target, verdict.
# An empty MIN_RATIO means there is no target (the verdict is "—" unless requests failed); an empty MAX_P99
# means the target sets no latency bound.
row() {
    local name="$1" target="$2" min_ratio="$3" max_p99="$4"
    local rps p50 p99 ratio errors result min_pct cpu other
    rps="$(rps_of "$name")"
    p50="$(ms_of "$name" p50_us)"
    p99="$(ms_of "$name" p99_us)"
    ratio="$(awk -v a="$rps" -v b="$CEILING_RPS" 'BEGIN { printf "%.1f", (b > 0 ? 100 * a / b : 0) }')"
    errors=$(($(result_field "$name" status_errors) + $(result_field "$name" socket_errors)))
    other="$(sample_field "$name" other_cpu_pct)"
    ((other <= MAX_OTHER_CPU_PCT)) || DISTURBED=1
    cpu="$(sample_field "$name" server_cpu_pct) / $(sample_field "$name" client_cpu_pct) / $other %"
    if ((errors > 0)); then
        result="FAIL (errors)"
        VALID=0
    elif [[ -z "$min_ratio" ]]; then
        result="—"
    else
        min_pct="$(percent "$min_ratio")"
        if ge "$ratio" "$min_pct" && { [[ -z "$max_p99" ]] || lt "$p99" "$max_p99"; }; then
            result=PASS
        else
            result=FAIL
        fi
    fi
    printf '| %s | %s | %s ms | %s ms | %s %% | %s | %s MB | %s | %s | **%s** |\n' "${LABEL[$name]}" "$rps" "$p50" \
        "$p99" "$ratio" "$errors" "$(kb_to_mb "$(sample_field "$name" rss_peak_kb)")" "$cpu" "$target" "$result"
}

INCOMPLETE=0
TARGET_TRIGGER_EPS="$TARGET_TRIGGER_EPS_SQLITE"
[[ "$DB_KIND" != postgres ]] || TARGET_TRIGGER_EPS="$TARGET_TRIGGER_EPS_POSTGRES"

# One row of the trigger table. The API side: req/s, events/s accepted (2xx answers × events per request),
# p50, p99, errors. The stored side: events stored as in-app messages, the backlog when the load stopped,
# how long storing went on after it, and the end-to-end rate (events stored ÷ time from the start of the load
# until the newest message's created_at). CPU during the load and during the drain, target, verdict.
# The figures trigger_row and delivery_row share, set in the caller's locals (bash scoping): the API side (rps,
# accepted, eps, p50, p99, errors) and the drain (count: events stored or delivered during the run, backlog,
# drain_s, e2e).
load_and_drain() {
    local name="$1" newest
    rps="$(rps_of "$name")"
    accepted="$(accepted_events "$WORK_DIR/$name.txt" "${EVENTS[$name]}")"
    eps="$(awk -v n="$accepted" -v us="$(result_field "$name" duration_us)" \
        'BEGIN { printf "%.0f", (us > 0 ? n / (us / 1e6) : 0) }')"
    p50="$(ms_of "$name" p50_us)"
    p99="$(ms_of "$name" p99_us)"
    errors=$(($(result_field "$name" status_errors) + $(result_field "$name" socket_errors)))
    count=$(($(drain_field "$name" count) - BASELINE[$name]))
    backlog="$(max 0 $((accepted - $(drain_field "$name" first) + BASELINE[$name])))"
    newest="$(drain_field "$name" newest_ms)"
    drain_s="$(awk -v t="$newest" -v end="${LOAD_END[$name]}" \
        'BEGIN { printf "%.1f", (t > end ? (t - end) / 1000 : 0) }')"
    e2e="$(awk -v n="$count" -v t="$newest" -v start="${LOAD_START[$name]}" \
        'BEGIN { printf "%.0f", (t > start ? n / ((t - start) / 1000) : 0) }')"
}

trigger_row() {
    local name="$1" rps accepted eps p50 p99 errors count backlog drain_s e2e other drain_other cpu
    local drain_cpu result
    load_and_drain "$name"
    other="$(sample_field "$name" other_cpu_pct)"
    drain_other="$(drain_sample_field "$name" other_cpu_pct)"
    ((other <= MAX_OTHER_CPU_PCT && drain_other <= MAX_OTHER_CPU_PCT)) || DISTURBED=1
    cpu="$(sample_field "$name" server_cpu_pct) / $(sample_field "$name" client_cpu_pct) / $other %"
    drain_cpu="$(drain_sample_field "$name" server_cpu_pct) / $(drain_sample_field "$name" client_cpu_pct)"
    drain_cpu="$drain_cpu / $drain_other %"
    if ((errors > 0)); then
        result="FAIL (errors)"
        VALID=0
    elif ((accepted == 0)); then
        result="FAIL (no answer within ${DURATION}s)"
    elif [[ "$(drain_field "$name" drained)" != 1 ]]; then
        result="FAIL (not all stored)"
        INCOMPLETE=1
    else
        result="$(verdict ge "$e2e" "$TARGET_TRIGGER_EPS")"
    fi
    printf '| %s | %s | %s | %s ms | %s ms | %s | %s | %s | %s s | %s | %s | %s | ≥ %s events/s | **%s** |\n' \
        "${LABEL[$name]}" "$rps" "$eps" "$p50" "$p99" "$errors" "$count" "$backlog" "$drain_s" "$e2e" "$cpu" \
        "$drain_cpu" "$TARGET_TRIGGER_EPS" "$result"
}

# The CPU shares delivery_row and webhook_row show beside the server's, set in the caller's locals (bash
# scoping): the bench receiver's during the load and the drain (recv, drain_recv) and the other processes'
# without it (other, drain_other); a run where the others took too much is marked DISTURBED.
receiver_shares() {
    local name="$1"
    recv="${RECEIVER_CPU[$name]:-0}"
    drain_recv="${RECEIVER_DRAIN_CPU[$name]:-0}"
    other="$(max 0 $(($(sample_field "$name" other_cpu_pct) - recv)))"
    drain_other="$(max 0 $(($(drain_sample_field "$name" other_cpu_pct) - drain_recv)))"
    ((other <= MAX_OTHER_CPU_PCT && drain_other <= MAX_OTHER_CPU_PCT)) || DISTURBED=1
}

# One row of the deliveries table, as trigger_row: the API side (req/s, events/s accepted, p50, p99, errors),
# then the receiver's side: messages it counted during the measured run (requests cut off when wrk stopped
# may add up to one request's events per connection), the backlog when the load stopped, how long delivering
# went on after it, and the end-to-end rate (messages counted ÷ time from the start of the load until the
# receiver counted the last one). The receiver's CPU is shown apart from the other processes. No target: the
# result is "—" unless requests failed, the backlog did not drain or check_deliveries found a mismatch.
UNDELIVERED=0
MISMATCH=0
delivery_row() {
    local name="$1" rps accepted eps p50 p99 errors count backlog drain_s e2e recv drain_recv
    local other drain_other cpu drain_cpu result
    load_and_drain "$name"
    receiver_shares "$name"
    cpu="$(sample_field "$name" server_cpu_pct) / $(sample_field "$name" client_cpu_pct) / $recv / $other %"
    drain_cpu="$(drain_sample_field "$name" server_cpu_pct) / $(drain_sample_field "$name" client_cpu_pct)"
    drain_cpu="$drain_cpu / $drain_recv / $drain_other %"
    if ((errors > 0)); then
        result="FAIL (errors)"
        VALID=0
    elif ((accepted == 0)); then
        result="FAIL (no answer within ${DURATION}s)"
    elif [[ "$(drain_field "$name" drained)" != 1 ]]; then
        result="FAIL (not all delivered)"
        UNDELIVERED=1
    elif [[ "$(kv_field "${CHECK[$name]:-}" ok)" != 1 ]]; then
        result="FAIL (count mismatch)"
        MISMATCH=1
    else
        result="—"
    fi
    printf '| %s | %s | %s | %s ms | %s ms | %s | %s | %s | %s s | %s | %s | %s | %s | **%s** |\n' \
        "${LABEL[$name]}" "$rps" "$eps" "$p50" "$p99" "$errors" "$count" "$backlog" "$drain_s" "$e2e" "$cpu" \
        "$drain_cpu" "report only (no target)" "$result"
}

# One row of the webhooks table, as delivery_row: the API side, then the receiver's side (messages it counted
# during the measured run, backlog, drain, end-to-end messages/s), and the cost: CPU-seconds per 1,000
# messages = the server's CPU time (on PostgreSQL plus that of the postgres processes serving the run's
# database and the shared ones) over the load and the drain ÷ messages counted × 1,000. Two targets, each
# with its verdict: the end-to-end rate and the CPU cost. A drain that did not finish or a failed
# check_webhooks fails both.
HOOK_FAILED=0
webhook_row() {
    local name="$1" rps accepted eps p50 p99 errors count backlog drain_s e2e recv drain_recv
    local other drain_other cpu drain_cpu server db drain_db cpu_s per_k target_mps target_cpu result
    load_and_drain "$name"
    receiver_shares "$name"
    server="$(sample_field "$name" server_cpu_pct)"
    db=""
    drain_db=""
    if [[ -n "${DB_CPU[$name]:-}" ]]; then
        db=" + $(sample_field "$name" db_cpu_pct)"
        drain_db=" + $(drain_sample_field "$name" db_cpu_pct)"
    fi
    cpu="$server$db / $(sample_field "$name" client_cpu_pct) / $recv / $other %"
    drain_cpu="$(drain_sample_field "$name" server_cpu_pct)$drain_db / $(drain_sample_field "$name" client_cpu_pct)"
    drain_cpu="$drain_cpu / $drain_recv / $drain_other %"
    cpu_s="$(awk -v a="$(sample_field "$name" server_cpu_s)" -v b="$(drain_sample_field "$name" server_cpu_s)" \
        -v c="$(sample_field "$name" db_cpu_s)" -v d="$(drain_sample_field "$name" db_cpu_s)" \
        'BEGIN { printf "%.2f", a + b + c + d }')"
    per_k="$(awk -v s="$cpu_s" -v n="$count" 'BEGIN { printf "%.3f", (n > 0 ? 1000 * s / n : 0) }')"
    target_mps="$TARGET_WEBHOOK_MPS_SQLITE"
    target_cpu="$TARGET_WEBHOOK_CPU_SQLITE"
    if [[ "$DB_KIND" == postgres ]]; then
        target_mps="$TARGET_WEBHOOK_MPS_POSTGRES"
        target_cpu="$TARGET_WEBHOOK_CPU_POSTGRES"
    fi
    if ((errors > 0)); then
        result="FAIL (errors)"
        VALID=0
    elif ((accepted == 0)); then
        result="FAIL (no answer within ${DURATION}s)"
    elif [[ "$(drain_field "$name" drained)" != 1 ]]; then
        result="FAIL (not all delivered)"
        HOOK_FAILED=1
    elif [[ "$(kv_field "${CHECK[$name]:-}" ok)" != 1 ]]; then
        result="FAIL (not exactly once)"
        HOOK_FAILED=1
    else
        result="rate $(verdict ge "$e2e" "$target_mps"), CPU $(verdict le "$per_k" "$target_cpu")"
    fi
    printf '| %s | %s | %s | %s ms | %s ms | %s | %s | %s | %s s | %s | %s (%s CPU-s) | %s | %s | %s | **%s** |\n' \
        "${LABEL[$name]}" "$rps" "$eps" "$p50" "$p99" "$errors" "$count" "$backlog" "$drain_s" "$e2e" "$per_k" \
        "$cpu_s" "$cpu" "$drain_cpu" "≥ $target_mps messages/s, ≤ $target_cpu CPU-s per 1,000" "$result"
}

COMMIT="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    COMMIT="$COMMIT (with uncommitted changes)"
fi
CPU="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
idle_mb="$(kb_to_mb "$RSS_IDLE_KB")"
hwm_mb="$(kb_to_mb "$RSS_HWM_KB")"

read -r -a ceiling_values <<<"$CEILING_VALUES"
CEILING_LIST="$(printf '%s, ' "${ceiling_values[@]}")"
CEILING_LIST="${CEILING_LIST%, }"   # "a, b, c"

REPORT="$WORK_DIR/report.md"
{
    echo "# Tidings benchmark"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- machine: $(nproc) cores (nproc), ${CPU:-unknown CPU}; load average at start: $LOAD_AT_START"
    echo "- commit: $COMMIT"
    echo "- workload groups: ${ONLY:-all} (BENCH_ONLY)"
    seeded="nothing seeded"   # the preview group alone seeds nothing
    if ((${#SEEDED[@]} > 0)); then
        seeded="$(printf '%s, ' "${SEEDED[@]}")"
        seeded="seeded ${seeded%, }"
    fi
    echo "- database: $DB_KIND, $DB_SIZE; $seeded"
    if [[ "$PREWARM" == 1 ]]; then
        echo "- database files pre-read into the OS page cache before each workload (BENCH_PREWARM=1)"
    else
        echo "- no pre-warming of the OS page cache (BENCH_PREWARM=0)"
    fi
    echo "- load: $(wrk --version 2>&1 | head -n 1 | cut -d ' ' -f 1-2), -t$THREADS -c$CONNECTIONS, ${WARMUP}s warm-up + ${DURATION}s per workload, same machine"
    echo "- ceiling: $CEILING_RPS req/s, the median of ${#CEILING_RUNS[@]} health-check run(s) (at the start and after each read group: $CEILING_LIST req/s); every share is of this median"
    echo
    echo "| workload | req/s | p50 | p99 | of ceiling | errors | peak RSS | CPU server / wrk / other | target | result |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
    for name in "${CEILING_RUNS[@]}"; do row "$name" "ceiling" "" ""; done
    if selected subscribers; then
        row by_id "≥ $(percent "$TARGET_BY_ID_RATIO") %, p99 < $TARGET_BY_ID_P99_MS ms" \
            "$TARGET_BY_ID_RATIO" "$TARGET_BY_ID_P99_MS"
        row email "≥ $(percent "$TARGET_SEARCH_RATIO") %, p99 < $TARGET_SEARCH_P99_MS ms" \
            "$TARGET_SEARCH_RATIO" "$TARGET_SEARCH_P99_MS"
    fi
    if selected endpoints; then
        row ep_subscriber "≥ $(percent "$TARGET_ENDPOINTS_RATIO") %" "$TARGET_ENDPOINTS_RATIO" ""
        row ep_context "≥ $(percent "$TARGET_ENDPOINTS_RATIO") %" "$TARGET_ENDPOINTS_RATIO" ""
    fi
    if selected notifications; then
        row notif_first "≥ $(percent "$TARGET_NOTIFICATIONS_RATIO") %" "$TARGET_NOTIFICATIONS_RATIO" ""
        row notif_pages "≥ $(percent "$TARGET_NOTIFICATIONS_RATIO") %" "$TARGET_NOTIFICATIONS_RATIO" ""
    fi
    if selected preview; then
        row preview "report only (no target)" "" ""
    fi
    if selected inbox; then
        row inbox_list "report only (no target)" "" ""
        row v2_list "within 10 % of the Inbox list (below)" "" ""
    fi
    echo
    if selected inbox; then
        v2_result=FAIL
        v2_share="$(awk -v a="$(rps_of v2_list)" -v b="$(rps_of inbox_list)" \
            'BEGIN { printf "%.1f", (b > 0 ? 100 * a / b : 0) }')"
        ge "$v2_share" 90 && v2_result=PASS
        echo "Inbox: the v2 list (API key) answers $v2_share % of the Inbox list's req/s over $INBOX_MESSAGES messages of one subscriber (issue 38: at least 90 %): **$v2_result**."
        echo
    fi
    if selected triggers; then
        echo "| trigger → stored in-app message | req/s | events/s accepted | p50 | p99 | errors | events stored | backlog at load end | drain | end to end, events/s | CPU server / wrk / other | CPU draining: server / poller / other | target | result |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
        for name in trigger trigger_bulk; do
            if [[ -n "${EVENTS[$name]:-}" ]]; then trigger_row "$name"; fi
        done
        echo
        echo "Triggers: req/s, events/s accepted and latency are the API's (201 once the event is queued; a bulk request's latency covers all its events). *End to end* = events stored as in-app messages ÷ time from the start of the load until the newest message was stored; *drain* = how long storing went on after the load stopped. The server's workers run in the same process."
        echo
    fi
    if selected deliveries; then
        echo "| email delivered to a local webhook receiver | req/s | events/s accepted | p50 | p99 | errors | messages delivered | backlog at load end | drain | end to end, messages/s | CPU server / wrk / receiver / other | CPU draining: server / poller / receiver / other | target | result |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
        delivery_row deliveries
        echo
        echo "Deliveries: each event of a one-step email workflow is rendered and POSTed by the \`email-webhook\` provider to examples/bench_receiver.rs on this machine (200 {\"id\": n} at once). *Messages delivered* = requests the receiver counted during the measured run (it may exceed the accepted events by the requests wrk cut off when it stopped); *end to end* = messages delivered ÷ time from the start of the load until the receiver counted the last one (polled every 0.05 s). Checked afterwards: $(kv_field "${CHECK[deliveries]:-}" events) events recorded for the workflow (sanity trigger, warm-up and measured run), $(kv_field "${CHECK[deliveries]:-}" received) requests counted by the receiver, $(kv_field "${CHECK[deliveries]:-}" sent) email messages stored with status sent (other email messages: $(kv_field "${CHECK[deliveries]:-}" other))."
        echo
    fi
    if selected webhooks; then
        db_label=""
        [[ "$DB_KIND" == postgres ]] && db_label=" + postgres"
        echo "| $WEBHOOK_EVENT webhook to a local receiver | req/s | events/s accepted | p50 | p99 | errors | messages delivered | backlog at load end | drain | end to end, messages/s | CPU-s per 1,000 messages (total) | CPU server$db_label / wrk / receiver / other | CPU draining: server$db_label / poller / receiver / other | target | result |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
        webhook_row webhooks
        echo
        hook_check="${CHECK[webhooks]:-}"
        echo "Webhooks: each single-event trigger of the one-step in-app workflow \`$WEBHOOK_WORKFLOW\` emits one \`$WEBHOOK_EVENT\` event, recorded in the job's own transaction as one webhook message for the environment's one endpoint (\`filterTypes: [\"$WEBHOOK_EVENT\"]\`), then signed and POSTed by the server's webhook sender to examples/bench_receiver.rs on this machine (200 at once). *Messages delivered* = requests the receiver counted during the measured run (it may exceed the accepted events by the requests wrk cut off when it stopped); *end to end* = messages delivered ÷ time from the start of the load until the receiver counted the last one (polled every 0.05 s); *CPU-s per 1,000 messages* = the server's CPU time$([[ "$DB_KIND" == postgres ]] && echo " plus that of the postgres processes (the run database's backends and the shared background processes)") over the load and the drain ÷ messages delivered × 1,000."
        echo
        echo "Exactly once: $(kv_field "$hook_check" events) notifications of $WEBHOOK_WORKFLOW (sanity trigger, warm-up and measured run), $(kv_field "$hook_check" received) requests counted by the receiver, $(kv_field "$hook_check" distinct) distinct webhook-id values among them, $(kv_field "$hook_check" success) $WEBHOOK_EVENT webhook messages with status success (in another status: $(kv_field "$hook_check" other)): **$([[ "$(kv_field "$hook_check" ok)" == 1 ]] && echo PASS || echo FAIL)**. The sanity trigger's request was checked against the endpoint's secret (HMAC-SHA256 of \"{webhook-id}.{webhook-timestamp}.{body}\")."
        echo
    fi
    if selected topics; then
        stored=$(($(kv_field "$FANOUT" count) - $(kv_field "$FANOUT" base)))
        elapsed_ms=$(($(kv_field "$FANOUT" newest_ms) - $(kv_field "$FANOUT" start_ms)))
        rate="$(awk -v n="$stored" -v ms="$elapsed_ms" 'BEGIN { printf "%.0f", (ms > 0 ? n * 1000 / ms : 0) }')"
        target="$TARGET_FANOUT_RPS_SQLITE"
        [[ "$DB_KIND" == postgres ]] && target="$TARGET_FANOUT_RPS_POSTGRES"
        counts="$(kv_field "$FANOUT" notifications) notifications, $(kv_field "$FANOUT" recipients) subscribers, $(kv_field "$FANOUT" messages) messages"
        killed="${KILL#*after the restart: }"
        echo "| topic fan-out → stored in-app messages | recipients | time | recipients/s | RSS before / peak | CPU server / other | exactly once | target | result |"
        echo "|---|---:|---:|---:|---:|---:|---|---|---|"
        echo "| one trigger to a topic of $TOPIC_SIZE | $stored | $(awk -v ms="$elapsed_ms" 'BEGIN { printf "%.1f s", ms / 1000 }') | $rate | $(kb_to_mb "$RSS_BEFORE_FANOUT_KB") / $(kb_to_mb "$(kv_field "$FANOUT_SAMPLE" rss_peak_kb)") MB | $(kv_field "$FANOUT_SAMPLE" server_cpu_pct) % / $(kv_field "$FANOUT_SAMPLE" other_cpu_pct) % | $counts | ≥ $target/s | **$(if exactly_once "$(echo "$FANOUT" | grep -o 'notifications=.*')" && ge "$rate" "$target"; then echo PASS; else echo FAIL; fi)** |"
        echo "| kill test: SIGKILL at a third, restart | $TOPIC_SIZE | — | — | — | — | ${KILL%%; after*}; after the restart $killed | exactly once | **$(verdict exactly_once "$killed")** |"
        echo
        echo "Topics: *time* runs from the trigger request until the newest in-app message of the fan-out was stored; the fan-out is expanded by the server's workers in batches while the same workers store the messages."
        echo
    fi
    if selected bulk_subscribers; then
        target="$TARGET_BULK_SQLITE"
        [[ "$DB_KIND" == postgres ]] && target="$TARGET_BULK_POSTGRES"
        rate="$(kv_field "$BULK" per_second)"
        echo "| bulk import → stored subscribers | subscribers | time | subscribers/s | p50 / p99 per request | CPU server / other | target | result |"
        echo "|---|---:|---:|---:|---:|---:|---|---|"
        echo "| POST /v1/subscribers/bulk, batches of 500, $BULK_CONNECTIONS connections | $(kv_field "$BULK" created) created, $(kv_field "$BULK" failed) failed, $(kv_field "$BULK" errors) errors | $(kv_field "$BULK" seconds) s | $rate | $(kv_field "$BULK" p50_ms) / $(kv_field "$BULK" p99_ms) ms | $(kv_field "$BULK_SAMPLE" server_cpu_pct) % / $(kv_field "$BULK_SAMPLE" other_cpu_pct) % | ≥ $target/s | **$(if [[ -z "${BULK_FAILED:-}" ]] && ge "$rate" "$target"; then echo PASS; else echo FAIL; fi)** |"
        echo
    fi
    echo "| memory (server RSS) | measured | target | result |"
    echo "|---|---:|---|---|"
    echo "| idle, after seeding, before load | $idle_mb MB | < $TARGET_RSS_IDLE_MB MB | **$(verdict lt "$idle_mb" "$TARGET_RSS_IDLE_MB")** |"
    echo "| peak under load (VmHWM) | $hwm_mb MB | < $TARGET_RSS_LOAD_MB MB | **$(verdict lt "$hwm_mb" "$TARGET_RSS_LOAD_MB")** |"
    echo "| idle, 3 s after load | $(kb_to_mb "$RSS_AFTER_KB") MB | — | — |"
    echo
    echo "CPU: shares of the whole machine ($(nproc) cores = 100 %) during each measured run (and, for triggers, deliveries and webhooks, while the backlog drained)."
    if ((VALID == 0)); then
        echo
        echo "**Some requests failed (non-2xx or socket errors): see the raw wrk output below.**"
    fi
    if ((INCOMPLETE == 1)); then
        echo
        echo "**Not every accepted trigger became a stored in-app message within BENCH_DRAIN_TIMEOUT ($DRAIN_TIMEOUT s) or before storing stalled for $DRAIN_STALL s: see the server log (BENCH_KEEP_TMP=1).**"
    fi
    if ((UNDELIVERED == 1)); then
        echo
        echo "**Not every accepted event reached the bench receiver within BENCH_DRAIN_TIMEOUT ($DRAIN_TIMEOUT s) or before delivering stalled for $DRAIN_STALL s: see the server log (BENCH_KEEP_TMP=1).**"
    fi
    if ((MISMATCH == 1)); then
        echo
        echo "**Deliveries do not add up: the events recorded for $DELIVERY_WORKFLOW, the requests the receiver counted and the email messages stored as sent differ, or the receiver counted fewer than the accepted events ($(kv_field "${CHECK[deliveries]:-}" events) / $(kv_field "${CHECK[deliveries]:-}" received) / $(kv_field "${CHECK[deliveries]:-}" sent), other: $(kv_field "${CHECK[deliveries]:-}" other)): see the server log (BENCH_KEEP_TMP=1).**"
    fi
    if ((HOOK_FAILED == 1)); then
        echo
        echo "**Webhooks: not every accepted event reached the receiver exactly once and is recorded as a success, within BENCH_DRAIN_TIMEOUT ($DRAIN_TIMEOUT s) or before delivering stalled for $DRAIN_STALL s (check: ${CHECK[webhooks]:-none}): see the server log (BENCH_KEEP_TMP=1).**"
    fi
    if ((DISTURBED == 1)); then
        echo
        echo "**Other processes used more than $MAX_OTHER_CPU_PCT % of the machine during a run: the figures are skewed; run again on a quiet machine.**"
    fi
} >"$REPORT"

mkdir -p "$RESULTS_DIR"
{
    cat "$REPORT"
    printf '\n<details><summary>Raw wrk output</summary>\n\n'
    cat "$RAW"
    printf '</details>\n'
} >"$RESULTS_DIR/latest.md"

cat "$REPORT"
log "written to ${RESULTS_DIR#"$REPO_ROOT"/}/latest.md"
if ((UNDELIVERED == 1 || MISMATCH == 1)); then
    die "deliveries: not every accepted event was delivered once and stored as sent (see above)"
fi
if ((HOOK_FAILED == 1)); then
    die "webhooks: not every accepted event reached the receiver exactly once as a successful webhook message (see above)"
fi
if selected topics && ! { exactly_once "$(echo "$FANOUT" | grep -o 'notifications=.*')" \
    && exactly_once "${KILL#*after the restart: }"; }; then
    die "topics: a fan-out did not reach every subscriber of the topic exactly once (see above)"
fi
