#!/usr/bin/env python3
"""Counts what one transaction of a topic fan-out left in the database (used by bench/run.sh, topics group).

usage: fanout.py DATABASE_URL ENVIRONMENT_ID TRANSACTION_ID

Prints one line:

    notifications=<count> recipients=<distinct subscribers> messages=<in-app messages> status=<fan-out status>

sqlite://PATH is read with Python's sqlite3 module over a read-only connection; postgres://… with psql.
"""

import sqlite3
import subprocess
import sys

QUERY = """
select (select count(*) from notifications where environment_id = {env} and transaction_id = {tx}),
       (select count(distinct subscriber_ref) from notifications where environment_id = {env} and transaction_id = {tx}),
       (select count(*) from messages where environment_id = {env} and transaction_id = {tx}),
       (select coalesce(max(status), 'none') from fanouts where environment_id = {env} and transaction_id = {tx})
"""


def main():
    url, env, tx = sys.argv[1:4]
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):].split("?", 1)[0]
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        row = db.execute(QUERY.format(env="?1", tx="?2"), (env, tx)).fetchone()
    elif url.startswith(("postgres://", "postgresql://")):
        args = ["psql", url, "-X", "-q", "-A", "-t", "-F", " ", "-v", "ON_ERROR_STOP=1",
                "-v", f"env={env}", "-v", f"tx={tx}"]
        sql = QUERY.format(env=":'env'", tx=":'tx'")
        row = subprocess.run(args, input=sql, capture_output=True, text=True, check=True).stdout.split()
    else:
        sys.exit(f"fanout.py: unsupported database URL: {url}")
    notifications, recipients, messages, status = row
    print(f"notifications={notifications} recipients={recipients} messages={messages} status={status}")


if __name__ == "__main__":
    main()
