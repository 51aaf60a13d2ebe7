#!/usr/bin/env bash
# The Inbox scenario of the official in-app client (`@novu/js`, tests/sdk-ts/inbox.mjs) against the release
# binary, on SQLite and on PostgreSQL (a database made for the run and dropped after it). Each run serves a fresh
# database with the `novu` wire profile; start-up creates "Development" and "Production" and prints their keys,
# which the scenario uses as its two environments. Needs target/release/tidings and tests/sdk-ts/node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_URL="${TIDINGS_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
BIN="$PWD/target/release/tidings"
[ -x "$BIN" ] || { echo "FAIL: $BIN is missing: run cargo build --release first"; exit 1; }

server=""
workdir=""
pg_db=""
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    if [ -n "$workdir" ]; then rm -rf "$workdir"; fi
    if [ -n "$pg_db" ]; then psql "$PG_URL" -qtAc "drop database if exists $pg_db with (force)" >/dev/null || true; fi
}
trap cleanup EXIT

# scenario NAME DATABASE_URL: serves DATABASE_URL from a fresh folder and runs inbox.mjs against it.
scenario() {
    local name="$1" database_url="$2" port key_a key_b status=0
    workdir="$(mktemp -d)"
    port=$((20000 + RANDOM % 20000))
    (cd "$workdir" && exec env DATABASE_URL="$database_url" TIDINGS_LISTEN="127.0.0.1:${port}" TIDINGS_COMPAT=novu \
        TIDINGS_ENCRYPTION_KEY="$(head -c 32 /dev/urandom | base64)" RUST_LOG=warn \
        "$BIN" serve >serve.out 2>serve.err) &
    server=$!
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:${port}/v1/health-check" >/dev/null 2>&1 && break
        sleep 0.1
    done
    key_a="$(grep 'Created environment "Development"' "$workdir/serve.out" | awk '{print $NF}')"
    key_b="$(grep 'Created environment "Production"' "$workdir/serve.out" | awk '{print $NF}')"
    [ -n "$key_a" ] && [ -n "$key_b" ] || { cat "$workdir/serve.out" "$workdir/serve.err"; return 1; }
    TIDINGS_URL="http://127.0.0.1:${port}" TIDINGS_KEY="$key_a" TIDINGS_KEY_B="$key_b" \
        node tests/sdk-ts/inbox.mjs || status=$?
    echo "@novu/js Inbox scenario on ${name}: exit ${status}"
    if grep -q 'panicked' "$workdir/serve.err"; then
        echo "FAIL: the server panicked on ${name}"; grep -m5 -A3 'panicked' "$workdir/serve.err"; status=1
    fi
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=""
    rm -rf "$workdir"
    workdir=""
    return "$status"
}

failed=0
scenario SQLite "sqlite://tidings-data/tidings.db" || failed=1

pg_db="tidings_inbox_$$_${RANDOM}"
psql "$PG_URL" -qtAc "create database $pg_db" >/dev/null
scenario PostgreSQL "${PG_URL%/*}/${pg_db}" || failed=1

exit "$failed"
