#!/usr/bin/env python3
"""Checks the webhooks workload (used by bench/run.sh): at its bench receiver (examples/bench_receiver.rs, which
counts every POST and the distinct `webhook-id` values they carry) and in the database.

usage: webhooks.py distinct RECEIVER_URL
       webhooks.py verify RECEIVER_URL SECRET EVENT_TYPE SUBSCRIBER_ID APP_IDENTIFIER
       webhooks.py check DATABASE_URL ENVIRONMENT_ID WORKFLOW EVENT_TYPE EXPECTED TIMEOUT_S

distinct prints how many distinct `webhook-id` values the receiver saw.

verify checks the last request the receiver got as Standard Webhooks defines it: one of the space-separated
`v1,<base64>` values of `webhook-signature` is the HMAC-SHA256, keyed with SECRET (`whsec_<base64>`, as
GET /api/v1/app/{app}/endpoint/{id}/secret answers), of "{webhook-id}.{webhook-timestamp}.{body}"; the
timestamp is within 5 minutes of now; the body is an event envelope of EVENT_TYPE (`id` = `evt_` + the
webhook-id's ObjectId) for an in-app message of SUBSCRIBER_ID in the environment APP_IDENTIFIER. It prints
"id=<webhook-id> type=<type>", or exits with an error saying what is wrong.

check reads the environment's database (sqlite://PATH with Python's sqlite3 module over a read-only
connection, postgres://… with psql; as bench/deliveries.py), polling every 0.5 s for up to TIMEOUT_S seconds
until the webhook messages of EVENT_TYPE with status `success` number at least EXPECTED (the receiver answers
before the server records the attempt). It prints:

    events=<notifications of WORKFLOW> success=<EVENT_TYPE webhook messages with status success>
    other=<status:count,… of the other EVENT_TYPE webhook messages, or none>
"""

import base64
import hashlib
import hmac
import json
import sys
import time
import urllib.request

from deliveries import database

DB_INTERVAL = 0.5
TOLERANCE_S = 300

QUERIES = {
    "events": "select count(*) from notifications where environment_id = {env} and workflow_identifier = {wf}",
    "statuses": "select status, count(*) from webhook_messages "
    "where environment_id = {env} and event_type = {kind} group by status order by status",
}


def get(url, path):
    with urllib.request.urlopen(url.rstrip("/") + path, timeout=10) as r:
        return r.read().decode()


def verify(url, secret, kind, subscriber, app):
    last = json.loads(get(url, "/last"))
    if not last:
        sys.exit("the receiver got no request with a webhook-id")
    msg_id, timestamp, signatures, body = last["id"], last["timestamp"], last["signature"], last["body"]
    if not secret.startswith("whsec_"):
        sys.exit(f"the endpoint's secret does not start with whsec_: {secret[:10]}…")
    key = base64.b64decode(secret[len("whsec_"):])
    signed = f"{msg_id}.{timestamp}.{body}".encode()
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    given = [s.split(",", 1)[1] for s in signatures.split() if s.startswith("v1,")]
    if not any(hmac.compare_digest(expected, g) for g in given):
        sys.exit(f"webhook-signature {signatures!r} does not sign {msg_id}.{timestamp}.<body> with the "
                 f"endpoint's secret (expected v1,{expected})")
    if not timestamp.isdigit() or abs(int(timestamp) - time.time()) > TOLERANCE_S:
        sys.exit(f"webhook-timestamp {timestamp!r} is not within {TOLERANCE_S} s of now")
    event = json.loads(body)
    m = event.get("data", {}).get("object", {})
    wrong = {k: v for k, v in {
        "type": event.get("type") == kind,
        "id": msg_id.startswith("msg_") and event.get("id") == "evt_" + msg_id[len("msg_"):],
        "environmentId": event.get("environmentId") == app,
        "data.object.subscriberId": m.get("subscriberId") == subscriber,
        "data.object.channel": m.get("channel") == "in_app",
    }.items() if not v}
    if wrong:
        sys.exit(f"unexpected {', '.join(wrong)} in the event (webhook-id {msg_id}): {body[:800]}")
    print(f"id={msg_id} type={event['type']}")


def check(url, environment_id, workflow, kind, expected, timeout):
    run = database(url, QUERIES, {"env": environment_id, "wf": workflow, "kind": kind})
    deadline = time.monotonic() + timeout
    while True:
        statuses = {str(s): int(n) for s, n in run("statuses")}
        success = statuses.pop("success", 0)
        if success >= expected or time.monotonic() >= deadline:
            break
        time.sleep(DB_INTERVAL)
    events = int(run("events")[0][0])
    other = ",".join(f"{s}:{n}" for s, n in sorted(statuses.items())) or "none"
    print(f"events={events} success={success} other={other}")


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "distinct":
        print(int(get(args[0], "/distinct")))
    elif command == "verify":
        verify(*args[:5])
    elif command == "check":
        check(args[0], args[1], args[2], args[3], int(args[4]), float(args[5]))
    else:
        sys.exit(f"webhooks.py: unknown command {command!r}")


if __name__ == "__main__":
    main()
