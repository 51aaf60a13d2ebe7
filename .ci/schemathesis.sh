#!/usr/bin/env bash
# Fuzzes the release binary through its own /openapi.json with schemathesis, once on SQLite and once on
# PostgreSQL (a database made for the run and dropped after it), in three passes: the API-key operations with
# the API key, the Svix-compatible webhook operations (tag Webhooks) with the key as a `Bearer` token, then the
# Inbox's operations (tag Inbox) with a session token opened by `POST /v1/inbox/session` (with the API key's
# HMAC of the subscriberId, so that it opens whether the environment asks for one or not).
# Fails on any 5xx and on any status, content type or body that the document does not describe. Needs
# target/release/tidings (cargo build --release).
#
# ST_MAX_EXAMPLES (default 40) bounds the cases per operation; the whole script takes 1 to 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

EXAMPLES="${ST_MAX_EXAMPLES:-40}"
source .ci/serve.sh

if [ ! -x .venv-st/bin/schemathesis ]; then
    python3 -m venv .venv-st
fi
.venv-st/bin/python -m pip install --quiet -r tests/schemathesis/requirements.txt

api_key="st-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
encryption_key="$(head -c 32 /dev/urandom | base64)"

# pass NAME WHAT AUTHORIZATION [FILTER...]: runs schemathesis against the served document with the
# Authorization header given, on the operations FILTER selects.
pass_() {
    local name="$1" what="$2" authorization="$3" started status=0
    shift 3
    started=$SECONDS
    timeout 150 .venv-st/bin/schemathesis run "http://127.0.0.1:${port}/openapi.json" \
        --header "Authorization: ${authorization}" \
        "$@" \
        --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
        --phases examples,coverage,fuzzing \
        --max-examples "$EXAMPLES" \
        --generation-allow-x00 true \
        --generation-database none \
        --request-timeout 10 \
        --workers 2 \
        --suppress-health-check filter_too_much \
        --report junit --report-junit-path "$workdir/junit.xml" \
        --no-color 2>&1 | tee "$workdir/st.out" || status=$?
    echo "schemathesis on ${name} (${what}): exit ${status} in $((SECONDS - started)) s"
    # An error inside schemathesis itself (a crash of its generator, a health check) is not a finding about
    # the server: it is shown above, and the run passes when no check failed.
    if [ "$status" = 1 ] && [ -s "$workdir/junit.xml" ] && ! grep -q '<failure' "$workdir/junit.xml" \
        && ! grep -q '^Failures:' "$workdir/st.out"; then
        echo "schemathesis on ${name} (${what}): no check failed; its own errors are listed above"
        status=0
    fi
    rm -f "$workdir/junit.xml" "$workdir/st.out"
    return "$status"
}

# inbox_token: a session token of the subscriber st-inbox in the served environment (the API key's).
inbox_token() {
    local base="http://127.0.0.1:${port}" identifier hash
    identifier="$(curl -fsS -H "Authorization: ApiKey ${api_key}" "${base}/v1/environments/me" \
        | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("data", d)["identifier"])')"
    hash="$(python3 -c 'import hashlib, hmac, sys; print(hmac.new(sys.argv[1].encode(), b"st-inbox", hashlib.sha256).hexdigest())' "$api_key")"
    curl -fsS -X POST -H 'content-type: application/json' \
        -d "{\"applicationIdentifier\": \"${identifier}\", \"subscriberId\": \"st-inbox\", \"subscriberHash\": \"${hash}\"}" \
        "${base}/v1/inbox/session" | python3 -c 'import json, sys; print(json.load(sys.stdin)["data"]["token"])'
}

# fuzz NAME DATABASE_URL: serves DATABASE_URL from a fresh folder and runs both passes against it.
fuzz() {
    local name="$1" database_url="$2" status=0 token
    serve "$database_url" TIDINGS_API_KEY="$api_key" TIDINGS_ENCRYPTION_KEY="$encryption_key" TIDINGS_WORKERS=2 \
        RUST_LOG=warn
    pass_ "$name" "API key" "ApiKey ${api_key}" --exclude-tag Inbox --exclude-tag Webhooks || status=$?
    pass_ "$name" "API key as a Svix client sends it" "Bearer ${api_key}" --include-tag Webhooks || status=$?
    if token="$(inbox_token)" && [ -n "$token" ]; then
        pass_ "$name" "Inbox session" "Bearer ${token}" --include-tag Inbox || status=$?
    else
        echo "FAIL: no Inbox session could be opened on ${name}"
        status=1
    fi
    stop "$name" "$status"
}

failed=0
fuzz SQLite "sqlite://tidings-data/tidings.db" || failed=1

fresh_pg_database tidings_st
fuzz PostgreSQL "$pg_db_url" || failed=1
exit "$failed"
