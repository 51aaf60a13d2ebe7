#!/usr/bin/env bash
# Runs the README's curl quickstart verbatim against a running server and checks that the subscriber's feed
# holds the welcome message. The commands are the `sh` block between `<!-- quickstart:begin -->` and
# `<!-- quickstart:end -->` in README.md, read from there at every run so that the README cannot rot.
#
#   .ci/quickstart.sh URL API_KEY        e.g. .ci/quickstart.sh http://127.0.0.1:3000 "$key"
#
# Needs a fresh database (the quickstart creates the workflow `welcome`), bash, awk and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

export TIDINGS_URL="${1:?usage: .ci/quickstart.sh URL API_KEY}"
export TIDINGS_API_KEY="${2:?usage: .ci/quickstart.sh URL API_KEY}"

quickstart="$(awk '
    /<!-- quickstart:begin -->/ { inside = 1; next }
    /<!-- quickstart:end -->/   { inside = 0 }
    inside && /^```/            { fenced = !fenced; next }
    inside && fenced
' README.md)"
if [ -z "$quickstart" ]; then
    echo "FAIL: README.md has no sh block between the quickstart markers"
    exit 1
fi

feed=""
eval "$quickstart"
echo
case "$feed" in
    *'Welcome, Ada!'*) echo "quickstart OK: the feed holds the in-app message" ;;
    *) echo "FAIL: the in-app message never reached the feed: $feed"; exit 1 ;;
esac
