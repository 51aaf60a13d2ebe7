# Sourced by the scripts that run a client against the release binary (.ci/schemathesis.sh, .ci/inbox.sh):
# `serve` starts target/release/tidings on a fresh database in a fresh folder, `stop` ends it (failing when the
# server panicked), `fresh_pg_database` makes a PostgreSQL database for one run; whatever is left is removed
# on exit. Expects to run from the repository's root with `set -euo pipefail`.

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

# serve DATABASE_URL [VARIABLE=VALUE ...]: serves DATABASE_URL with the variables given from a fresh folder
# ($workdir, holding serve.out and serve.err) on a random port ($port) below the kernel's ephemeral range,
# and waits until it answers. A server that exits before it answers (its port taken meanwhile) is started
# again on another port, up to three times; what it printed is shown.
serve() {
    local database_url="$1" try
    shift
    workdir="$(mktemp -d)"
    for try in 1 2 3; do
        port=$((20000 + RANDOM % 12000))
        (cd "$workdir" && exec env DATABASE_URL="$database_url" TIDINGS_LISTEN="127.0.0.1:${port}" "$@" \
            "$BIN" serve >serve.out 2>serve.err) &
        server=$!
        for _ in $(seq 1 300); do
            curl -fsS "http://127.0.0.1:${port}/v1/health-check" >/dev/null 2>&1 && return 0
            kill -0 "$server" 2>/dev/null || break
            sleep 0.1
        done
        echo "the server on port ${port} did not answer (try ${try}); it printed:"
        tail -n 20 "$workdir/serve.err" || true
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    done
    server=""
    return 1
}

# stop NAME STATUS: stops the server and removes its folder; answers STATUS, or 1 when the server panicked.
stop() {
    local name="$1" status="$2"
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

# fresh_pg_database PREFIX: creates a database named after PREFIX ($pg_db, dropped on exit) and sets $pg_db_url.
fresh_pg_database() {
    pg_db="${1}_$$_${RANDOM}"
    psql "$PG_URL" -qtAc "create database $pg_db" >/dev/null
    pg_db_url="$(printf '%s' "$PG_URL" | sed -E "s#/[^/?]*(\\?|\$)#/${pg_db}\\1#")"
}
