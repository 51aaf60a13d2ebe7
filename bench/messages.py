#!/usr/bin/env python3
"""Counts the in-app messages stored in one environment (used by bench/run.sh for the trigger workloads).

usage: messages.py DATABASE_URL ENVIRONMENT_ID
       messages.py DATABASE_URL ENVIRONMENT_ID TARGET TIMEOUT_S STALL_S

sqlite://PATH is read with Python's sqlite3 module over a read-only connection (in WAL mode it neither blocks
nor waits for the server's writer); postgres://… with psql.

The first form prints "<count> <newest created_at in ms>" once. The second polls every 0.5 s, in this one
process so that waiting costs the machine next to nothing, until there are at least TARGET messages and the
count has not grown for 1 s (requests cut off at the end of a load may still land), or until the count has not
grown for STALL_S seconds or TIMEOUT_S seconds have passed. It then prints one line:

    first=<count at the first poll> count=<final count> newest_ms=<newest created_at> drained=<1 or 0>
"""

import sqlite3
import subprocess
import sys
import time

INTERVAL = 0.5
SETTLE_POLLS = 2  # unchanged polls after reaching TARGET

QUERY = "select count(*), coalesce(max(created_at), 0) from messages where environment_id = {}"


def counter(url, environment_id):
    """A function returning (count, newest created_at) of the environment's messages."""
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):].split("?", 1)[0]
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        sql = QUERY.format("?")

        def count_sqlite():
            n, newest = db.execute(sql, (environment_id,)).fetchone()
            return int(n), int(newest)

        return count_sqlite
    if url.startswith(("postgres://", "postgresql://")):
        sql = QUERY.format(":'env'")

        def count_postgres():
            args = ["psql", url, "-X", "-q", "-A", "-t", "-F", " ", "-v", "ON_ERROR_STOP=1", "-v", f"env={environment_id}"]
            out = subprocess.run(args, input=sql, capture_output=True, text=True, check=True).stdout.split()
            return int(out[0]), int(out[1])

        return count_postgres
    sys.exit(f"messages.py: unsupported database URL: {url}")


def main():
    count = counter(sys.argv[1], sys.argv[2])
    if len(sys.argv) == 3:
        print(*count())
        return
    target, timeout, stall = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    deadline = time.monotonic() + timeout
    first, newest = count()
    n, last, still, drained = first, first, 0, 0
    while True:
        if n >= target and still >= SETTLE_POLLS:
            drained = 1
            break
        if still * INTERVAL >= stall or time.monotonic() >= deadline:
            break
        time.sleep(INTERVAL)
        n, newest = count()
        still = still + 1 if n == last else 0
        last = n
    print(f"first={first} count={n} newest_ms={newest} drained={drained}")


if __name__ == "__main__":
    main()
