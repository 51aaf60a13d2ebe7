#!/usr/bin/env bash
# The Inbox scenario of the official in-app client (`@novu/js`, tests/sdk-ts/inbox.mjs) against the release
# binary, on SQLite and on PostgreSQL (a database made for the run and dropped after it). Each run serves a fresh
# database with the `novu` wire profile; start-up creates "Development" and "Production" and prints their keys,
# which the scenario uses as its two environments. Needs target/release/tidings and tests/sdk-ts/node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/serve.sh

# scenario NAME DATABASE_URL: serves DATABASE_URL from a fresh folder and runs inbox.mjs against it.
scenario() {
    local name="$1" database_url="$2" key_a key_b status=0
    serve "$database_url" TIDINGS_COMPAT=novu TIDINGS_ENCRYPTION_KEY="$(head -c 32 /dev/urandom | base64)" \
        RUST_LOG=warn
    key_a="$(grep 'Created environment "Development"' "$workdir/serve.out" | awk '{print $NF}')"
    key_b="$(grep 'Created environment "Production"' "$workdir/serve.out" | awk '{print $NF}')"
    [ -n "$key_a" ] && [ -n "$key_b" ] || { cat "$workdir/serve.out" "$workdir/serve.err"; return 1; }
    TIDINGS_URL="http://127.0.0.1:${port}" TIDINGS_KEY="$key_a" TIDINGS_KEY_B="$key_b" \
        node tests/sdk-ts/inbox.mjs || status=$?
    echo "@novu/js Inbox scenario on ${name}: exit ${status}"
    stop "$name" "$status"
}

failed=0
scenario SQLite "sqlite://tidings-data/tidings.db" || failed=1

fresh_pg_database tidings_inbox
scenario PostgreSQL "$pg_db_url" || failed=1

exit "$failed"
