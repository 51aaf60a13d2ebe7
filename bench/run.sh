#!/usr/bin/env bash
# Tidings benchmark (design.md §5): proves the performance targets in one run on this machine.
#
#   bench/run.sh                              # 1,000,000 subscribers, 15 s per workload, SQLite
#   BENCH_SUBSCRIBERS=10000 BENCH_DURATION=5 bench/run.sh   # a quick smoke run
#
# What it does:
#   1. installs the load generator (`wrk`, from Debian) when it is missing;
#   2. builds the release binary;
#   3. prepares a fresh database (SQLite in a temp folder by default), applies migrations, creates an
#      environment and seeds N subscribers with the hidden `tidings seed-subscribers` command;
#   4. starts `tidings serve` on a free port and runs each workload with wrk after a short warm-up, while
#      bench/sample.py samples the server's RSS and the CPU used by the server, wrk and everything else
#      (other processes on the machine skew the figures; the report shows how much they took);
#   5. prints a Markdown table (req/s, p50, p99, share of the health-check ceiling, PASS/FAIL against the
#      targets) and writes it to bench/results/latest.md together with the raw wrk output.
#
# Settings (environment variables):
#   BENCH_SUBSCRIBERS   subscribers to seed                   (default 1000000)
#   BENCH_DURATION      seconds per measured workload         (default 15)
#   BENCH_WARMUP        seconds of warm-up per workload       (default 3)
#   BENCH_THREADS       wrk threads                           (default 2)
#   BENCH_CONNECTIONS   wrk connections                       (default 32)
#   BENCH_TIMEOUT       wrk request timeout, seconds          (default 30; slower answers count as errors)
#   BENCH_DATABASE_URL  use this database instead of a temporary SQLite file, e.g. postgres://…
#                       (it should be an empty, dedicated database: the run adds an environment to it)
#   BENCH_PREWARM       1 = read the database files into the OS page cache before each workload (default 1;
#                       0 measures whatever the kernel kept cached, i.e. partly disk reads)
#   BENCH_KEEP_TMP      1 = keep the temp folder (database, server log) for inspection afterwards
#
# Progress goes to stderr; the results table goes to stdout.

set -euo pipefail

# ---------------------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------------------

SUBSCRIBERS="${BENCH_SUBSCRIBERS:-1000000}"
DURATION="${BENCH_DURATION:-15}"
WARMUP="${BENCH_WARMUP:-3}"
THREADS="${BENCH_THREADS:-2}"
CONNECTIONS="${BENCH_CONNECTIONS:-32}"
TIMEOUT="${BENCH_TIMEOUT:-30}"
DATABASE_URL_OVERRIDE="${BENCH_DATABASE_URL:-}"
KEEP_TMP="${BENCH_KEEP_TMP:-0}"
PREWARM="${BENCH_PREWARM:-1}"
PREFIX="bench"             # subscriberId = bench<N>, email = user<N>@bench.example.com

# Targets (design.md §5). Ratios are shares of the health check's req/s.
TARGET_BY_ID_RATIO=0.50
TARGET_BY_ID_P99_MS=10
TARGET_SEARCH_RATIO=0.10
TARGET_SEARCH_P99_MS=25
TARGET_RSS_IDLE_MB=64
TARGET_RSS_LOAD_MB=256

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_DIR="$REPO_ROOT/bench"
RESULTS_DIR="$BENCH_DIR/results"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
[[ "$TARGET_DIR" = /* ]] || TARGET_DIR="$REPO_ROOT/$TARGET_DIR"
BIN="$TARGET_DIR/release/tidings"

# State shared with the cleanup trap.
WORK_DIR=""
SERVER_PID=""
CLIENT_PID=""

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

# json_get FIELD: reads one JSON object on stdin and prints FIELD.
json_get() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# rss_kb FIELD: VmRSS (current) or VmHWM (peak so far) of the server, in kB.
rss_kb() {
    awk -v f="$1:" '$1 == f { print $2 }' "/proc/$SERVER_PID/status" 2>/dev/null || true
}

kb_to_mb() { awk -v kb="$1" 'BEGIN { printf "%.1f", kb / 1024 }'; }

# ge A B / lt A B: float comparisons for the PASS/FAIL column.
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
verdict() { if "$@"; then echo PASS; else echo FAIL; fi; }

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
    if [[ -n "$WORK_DIR" && -d "$WORK_DIR" ]]; then
        if [[ "$KEEP_TMP" == 1 ]]; then
            log "kept $WORK_DIR (database, server log)"
        else
            rm -rf "$WORK_DIR"
        fi
    fi
    exit "$status"
}

# ---------------------------------------------------------------------------------------------------------
# Database backends. Each provides db_<kind>_setup (sets DB_URL), db_<kind>_size (a human-readable size of
# the seeded data) and db_<kind>_prewarm (brings the data into memory the way a long-running server would
# have it). Add a backend by adding these functions and a case in select_backend.
# ---------------------------------------------------------------------------------------------------------

DB_KIND=""
DB_URL=""

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

db_postgres_setup() { DB_URL="$DATABASE_URL_OVERRIDE"; }

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

# run_wrk NAME SECONDS OUTPUT [SAMPLES]: one wrk run of a workload, its full output in OUTPUT; with SAMPLES,
# bench/sample.py watches the run and writes its summary line there.
run_wrk() {
    local name="$1" seconds="$2" out="$3" samples="${4:-}" script="$WORK_DIR/${1}.lua"
    # The shared prelude (thread seeding, result line) followed by the workload.
    cat "$BENCH_DIR/wrk/report.lua" "$BENCH_DIR/wrk/${SCRIPT[$name]}" >"$script"
    local -a args=()
    read -r -a args <<<"${ARGS[$name]}"
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${seconds}s" --timeout "${TIMEOUT}s" --latency -s "$script" \
        "$BASE_URL" -- "${args[@]}" >"$out" 2>&1 &
    CLIENT_PID=$!
    if [[ -n "$samples" ]]; then
        python3 "$BENCH_DIR/sample.py" "$SERVER_PID" "$CLIENT_PID" >"$samples"
    fi
    local status=0
    wait "$CLIENT_PID" || status=$?
    CLIENT_PID=""
    ((status == 0)) || { cat "$out" >&2; die "wrk failed for $name (exit $status)"; }
}

# ---------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------

for v in SUBSCRIBERS DURATION WARMUP THREADS CONNECTIONS TIMEOUT; do
    is_uint "${!v}" || die "BENCH_$v must be a non-negative integer, got '${!v}'"
done
((SUBSCRIBERS >= 1)) || die "BENCH_SUBSCRIBERS must be at least 1"
((DURATION >= 1)) || die "BENCH_DURATION must be at least 1"
((CONNECTIONS >= THREADS)) || die "BENCH_CONNECTIONS must be >= BENCH_THREADS"

command -v python3 >/dev/null 2>&1 || die "python3 is required"
command -v cargo >/dev/null 2>&1 || die "cargo (the Rust toolchain) is required"
select_backend
ensure_wrk

# Other work on this machine skews every figure; say so in the report instead of hiding it.
LOAD_AT_START="$(cut -d ' ' -f 1-3 /proc/loadavg)"
if ge "${LOAD_AT_START%% *}" 1.0; then
    log "warning: load average is $LOAD_AT_START; other processes will compete with the benchmark"
fi

log "building the release binary"
(cd "$REPO_ROOT" && cargo build --release) >&2
[[ -x "$BIN" ]] || die "$BIN was not built"

WORK_DIR="$(mktemp -d "${TMPDIR:-/tmp}/tidings-bench.XXXXXX")"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"db_${DB_KIND}_setup"
# Required with PostgreSQL; with SQLite it only avoids writing secret.key. An existing value is kept.
: "${TIDINGS_ENCRYPTION_KEY:=$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')}"
export TIDINGS_ENCRYPTION_KEY
export DATABASE_URL="$DB_URL" RUST_LOG=warn
unset TIDINGS_API_KEY TIDINGS_LISTEN

log "database: $DB_KIND; applying migrations"
"$BIN" migrate --database-url "$DB_URL" >&2

# A dedicated environment per run (a unique name, so a shared PostgreSQL database can be reused). Its key
# is then the server's bootstrap key, which start-up finds already present.
ENV_NAME="Bench $(date -u +%Y%m%dT%H%M%SZ)-$$"
API_KEY="$("$BIN" environments create "$ENV_NAME" --database-url "$DB_URL" | json_get apiKey)"
[[ -n "$API_KEY" ]] || die "could not create the benchmark environment"
export TIDINGS_API_KEY="$API_KEY"

log "seeding $SUBSCRIBERS subscribers"
seed_start=$(date +%s.%N)
"$BIN" seed-subscribers --api-key "$API_KEY" --count "$SUBSCRIBERS" --prefix "$PREFIX" --database-url "$DB_URL" >&2
SEED_SECONDS=$(awk -v a="$seed_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
DB_SIZE="$("db_${DB_KIND}_size")"
log "seeded in ${SEED_SECONDS}s; database $DB_SIZE"

PORT="$(free_port)"
BASE_URL="http://127.0.0.1:$PORT"
log "starting tidings serve on $BASE_URL"
"$BIN" serve --listen "127.0.0.1:$PORT" --database-url "$DB_URL" >"$WORK_DIR/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 150); do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK_DIR/server.log" >&2; die "the server exited during start-up"; }
    http_get "$BASE_URL/v1/health-check" >/dev/null 2>&1 && break
    sleep 0.2
done
http_get "$BASE_URL/v1/health-check" >/dev/null || die "the server did not come up"

# Idle memory: after start-up on the seeded database, before any request touches the data.
sleep 2
RSS_IDLE_KB="$(rss_kb VmRSS)"
log "idle RSS: $(kb_to_mb "$RSS_IDLE_KB") MB"

# Sanity: the workloads must measure real answers, not 401/404s.
http_get "$BASE_URL/v2/subscribers/${PREFIX}1" "$API_KEY" >/dev/null || die "subscriber ${PREFIX}1 not found"
http_get "$BASE_URL/v2/subscribers/${PREFIX}${SUBSCRIBERS}" "$API_KEY" >/dev/null \
    || die "subscriber ${PREFIX}${SUBSCRIBERS} not found"
http_get "$BASE_URL/v2/subscribers?email=user${SUBSCRIBERS}%40" "$API_KEY" \
    | python3 -c 'import json, sys
page = json.load(sys.stdin)
ids = [s["subscriberId"] for s in page["data"]]
sys.exit(0 if ids == [sys.argv[1]] else f"email search returned {ids}, expected [{sys.argv[1]}]")' "${PREFIX}${SUBSCRIBERS}"

add_workload health "GET /v1/health-check (ceiling)" health.lua
add_workload by_id "GET /v2/subscribers/{id}" subscriber_by_id.lua "$API_KEY $SUBSCRIBERS $PREFIX"
add_workload email "GET /v2/subscribers?email=user<N>@" email_search.lua "$API_KEY $SUBSCRIBERS"

RAW="$WORK_DIR/raw.txt"
: >"$RAW"
for name in "${WORKLOADS[@]}"; do
    if [[ "$PREWARM" == 1 ]]; then
        "db_${DB_KIND}_prewarm"
    fi
    if ((WARMUP > 0)); then
        log "$name: warm-up ${WARMUP}s"
        run_wrk "$name" "$WARMUP" "$WORK_DIR/$name.warmup.txt"
    fi
    log "$name: measuring ${DURATION}s (-t$THREADS -c$CONNECTIONS)"
    run_wrk "$name" "$DURATION" "$WORK_DIR/$name.txt" "$WORK_DIR/$name.samples"
    RESULT[$name]="$(sed -n 's/^BENCH_RESULT //p' "$WORK_DIR/$name.txt")"
    [[ -n "${RESULT[$name]}" ]] || { cat "$WORK_DIR/$name.txt" >&2; die "no result line from wrk for $name"; }
    SAMPLE[$name]="$(cat "$WORK_DIR/$name.samples")"
    { printf '### %s\n\n```\n' "${LABEL[$name]}"; cat "$WORK_DIR/$name.txt"; printf '```\n\n'; } >>"$RAW"
done

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

CEILING_RPS="$(rps_of health)"
VALID=1
DISTURBED=0
MAX_OTHER_CPU_PCT=10   # above this share of the machine, other processes are said to skew the run

# One table row: workload, req/s, p50, p99, share of the ceiling, errors, peak RSS, CPU, target, verdict.
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
    if [[ -z "$min_ratio" ]]; then
        result="—"
    elif ((errors > 0)); then
        result="FAIL (errors)"
        VALID=0
    else
        min_pct="$(percent "$min_ratio")"
        if ge "$ratio" "$min_pct" && lt "$p99" "$max_p99"; then result=PASS; else result=FAIL; fi
    fi
    printf '| %s | %s | %s ms | %s ms | %s %% | %s | %s MB | %s | %s | **%s** |\n' "${LABEL[$name]}" "$rps" "$p50" \
        "$p99" "$ratio" "$errors" "$(kb_to_mb "$(sample_field "$name" rss_peak_kb)")" "$cpu" "$target" "$result"
}

COMMIT="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$REPO_ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    COMMIT="$COMMIT (with uncommitted changes)"
fi
CPU="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
idle_mb="$(kb_to_mb "$RSS_IDLE_KB")"
hwm_mb="$(kb_to_mb "$RSS_HWM_KB")"

REPORT="$WORK_DIR/report.md"
{
    echo "# Tidings benchmark"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "- machine: $(nproc) cores (nproc), ${CPU:-unknown CPU}; load average at start: $LOAD_AT_START"
    echo "- commit: $COMMIT"
    echo "- database: $DB_KIND, $SUBSCRIBERS subscribers (seeded in ${SEED_SECONDS}s, $DB_SIZE)"
    if [[ "$PREWARM" == 1 ]]; then
        echo "- database files pre-read into the OS page cache before each workload (BENCH_PREWARM=1)"
    else
        echo "- no pre-warming of the OS page cache (BENCH_PREWARM=0)"
    fi
    echo "- load: $(wrk --version 2>&1 | head -n 1 | cut -d ' ' -f 1-2), -t$THREADS -c$CONNECTIONS, ${WARMUP}s warm-up + ${DURATION}s per workload, same machine"
    echo
    echo "| workload | req/s | p50 | p99 | of ceiling | errors | peak RSS | CPU server / wrk / other | target | result |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
    row health "ceiling" "" ""
    row by_id "≥ $(percent "$TARGET_BY_ID_RATIO") %, p99 < $TARGET_BY_ID_P99_MS ms" \
        "$TARGET_BY_ID_RATIO" "$TARGET_BY_ID_P99_MS"
    row email "≥ $(percent "$TARGET_SEARCH_RATIO") %, p99 < $TARGET_SEARCH_P99_MS ms" \
        "$TARGET_SEARCH_RATIO" "$TARGET_SEARCH_P99_MS"
    echo
    echo "| memory (server RSS) | measured | target | result |"
    echo "|---|---:|---|---|"
    echo "| idle, after seeding, before load | $idle_mb MB | < $TARGET_RSS_IDLE_MB MB | **$(verdict lt "$idle_mb" "$TARGET_RSS_IDLE_MB")** |"
    echo "| peak under load (VmHWM) | $hwm_mb MB | < $TARGET_RSS_LOAD_MB MB | **$(verdict lt "$hwm_mb" "$TARGET_RSS_LOAD_MB")** |"
    echo "| idle, 3 s after load | $(kb_to_mb "$RSS_AFTER_KB") MB | — | — |"
    echo
    echo "CPU: shares of the whole machine ($(nproc) cores = 100 %) during each measured run."
    if ((VALID == 0)); then
        echo
        echo "**Some requests failed (non-2xx or socket errors): see the raw wrk output below.**"
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
