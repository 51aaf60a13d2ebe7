#!/usr/bin/env python3
"""Counts the emails of the deliveries workload (used by bench/run.sh): at the bench receiver
(examples/bench_receiver.rs, which counts every POST and answers GET /count) and in the database.

usage: deliveries.py count RECEIVER_URL
       deliveries.py wait RECEIVER_URL TARGET TIMEOUT_S STALL_S
       deliveries.py check DATABASE_URL ENVIRONMENT_ID WORKFLOW EXPECTED TIMEOUT_S

count prints the receiver's count once.

wait polls the receiver every 0.05 s until it counted at least TARGET requests and the count has not grown for
1 s (requests cut off at the end of a load may still land), or until the count has not grown for STALL_S
seconds or TIMEOUT_S seconds have passed. It then prints one line in the format of bench/messages.py:

    first=<count at the first poll> count=<final count> newest_ms=<when the final count was first seen> drained=<1 or 0>

newest_ms (ms since the epoch) is the receiver's "last one counted" time, to within the poll interval.

check reads the environment's database (sqlite://PATH with Python's sqlite3 module over a read-only
connection, postgres://… with psql), polling every 0.5 s for up to TIMEOUT_S seconds until the email messages
with status `sent` number EXPECTED (the receiver answers before the server stores the message). It prints:

    events=<notifications of WORKFLOW> sent=<email messages with status sent> other=<status:count,… of the
    other email messages, or none> newest_delivered_ms=<newest delivered_at of a sent email>
"""

import sqlite3
import subprocess
import sys
import time
import urllib.request

RECEIVER_INTERVAL = 0.05
SETTLE_S = 1.0
DB_INTERVAL = 0.5

QUERIES = {
    "events": "select count(*) from notifications where environment_id = {env} and workflow_identifier = {wf}",
    "statuses": "select status, count(*), coalesce(max(delivered_at), 0) from messages "
    "where environment_id = {env} and channel = 'email' group by status order by status",
}


def receiver_count(url):
    with urllib.request.urlopen(url.rstrip("/") + "/count", timeout=10) as r:
        return int(r.read().decode().strip())


def wait(url, target, timeout, stall):
    deadline = time.monotonic() + timeout
    first = receiver_count(url)
    n, newest_ms, changed, drained = first, int(time.time() * 1000), time.monotonic(), 0
    while True:
        now = time.monotonic()
        if n >= target and now - changed >= SETTLE_S:
            drained = 1
            break
        if now - changed >= stall or now >= deadline:
            break
        time.sleep(RECEIVER_INTERVAL)
        seen = receiver_count(url)
        if seen != n:
            n, newest_ms, changed = seen, int(time.time() * 1000), time.monotonic()
    print(f"first={first} count={n} newest_ms={newest_ms} drained={drained}")


def database(url, queries, params):
    """A function running one of `queries` (SQL with {name} placeholders for the values of `params`) and
    returning its rows (tuples of strings or numbers). bench/webhooks.py uses it too."""
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):].split("?", 1)[0]
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)

        def run_sqlite(name):
            sql = queries[name].format(**{k: f":{k}" for k in params})
            return db.execute(sql, params).fetchall()

        return run_sqlite
    if url.startswith(("postgres://", "postgresql://")):

        def run_postgres(name):
            args = ["psql", url, "-X", "-q", "-A", "-t", "-F", " ", "-v", "ON_ERROR_STOP=1"]
            for k, v in params.items():
                args += ["-v", f"{k}={v}"]
            sql = queries[name].format(**{k: f":'{k}'" for k in params})
            out = subprocess.run(args, input=sql, capture_output=True, text=True, check=True).stdout
            return [tuple(line.split()) for line in out.splitlines() if line.strip()]

        return run_postgres
    sys.exit(f"unsupported database URL: {url}")


def check(url, environment_id, workflow, expected, timeout):
    run = database(url, QUERIES, {"env": environment_id, "wf": workflow})
    deadline = time.monotonic() + timeout
    while True:
        statuses = {str(s): (int(n), int(newest)) for s, n, newest in run("statuses")}
        sent, newest = statuses.pop("sent", (0, 0))
        if sent >= expected or time.monotonic() >= deadline:
            break
        time.sleep(DB_INTERVAL)
    events = int(run("events")[0][0])
    other = ",".join(f"{s}:{n}" for s, (n, _) in sorted(statuses.items())) or "none"
    print(f"events={events} sent={sent} other={other} newest_delivered_ms={newest}")


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "count":
        print(receiver_count(args[0]))
    elif command == "wait":
        wait(args[0], int(args[1]), float(args[2]), float(args[3]))
    elif command == "check":
        check(args[0], args[1], args[2], int(args[3]), float(args[4]))
    else:
        sys.exit(f"deliveries.py: unknown command {command!r}")


if __name__ == "__main__":
    main()
