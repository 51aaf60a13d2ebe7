#!/usr/bin/env python3
"""The bulk import workload: TOTAL new subscribers through POST /v1/subscribers/bulk in batches of BATCH,
sent over CONNECTIONS keep-alive connections (one thread each, taking the next batch when its last one was
answered). Prints one line of key=value pairs: subscribers, created, updated, failed, errors, seconds,
per_second (subscribers created or updated per second of wall time, first request to last answer), and the
p50/p99 latency of a request in ms.

    bench/bulk_subscribers.py BASE_URL API_KEY [TOTAL] [BATCH] [CONNECTIONS] [PREFIX]

Batch n holds subscribers PREFIX<n*BATCH> … with a first and last name, an email, a phone, a locale, a
timezone and a small `data` object, so that every search index is written.
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse


def body(prefix, first, count):
    return json.dumps({"subscribers": [
        {
            "subscriberId": f"{prefix}{i}",
            "firstName": f"First{i}",
            "lastName": f"Last{i % 997}",
            "email": f"user{i}@bulk{i % 100}.example.com",
            "phone": f"+1555{i:07d}",
            "locale": "en-US",
            "timezone": "Europe/Paris",
            "data": {"plan": "pro" if i % 2 else "free", "n": i},
        }
        for i in range(first, first + count)
    ]}).encode()


def main():
    base, key = sys.argv[1], sys.argv[2]
    total = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 500
    connections = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    prefix = sys.argv[6] if len(sys.argv) > 6 else "bulk"
    url = urllib.parse.urlsplit(base)
    batches = [(first, min(batch, total - first)) for first in range(0, total, batch)]
    # Bodies are built before the clock starts: the client's JSON is not the server's time.
    bodies = [body(prefix, first, count) for first, count in batches]
    lock = threading.Lock()
    state = {"next": 0, "created": 0, "updated": 0, "failed": 0, "errors": 0, "latencies": []}
    headers = {"Authorization": f"ApiKey {key}", "Content-Type": "application/json", "Connection": "keep-alive"}

    def worker():
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(bodies):
                break
            start = time.perf_counter()
            conn.request("POST", "/v1/subscribers/bulk", body=bodies[i], headers=headers)
            res = conn.getresponse()
            payload = res.read()
            elapsed = time.perf_counter() - start
            with lock:
                state["latencies"].append(elapsed)
                if res.status != 201:
                    state["errors"] += 1
                    print(f"batch {i}: {res.status} {payload[:300]!r}", file=sys.stderr)
                    continue
                out = json.loads(payload)
                out = out.get("data", out)
                state["created"] += len(out["created"])
                state["updated"] += len(out["updated"])
                state["failed"] += len(out["failed"])
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    lat = sorted(state["latencies"]) or [0.0]
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000  # noqa: E731
    written = state["created"] + state["updated"]
    print(
        f"subscribers={total} created={state['created']} updated={state['updated']} failed={state['failed']} "
        f"errors={state['errors']} seconds={seconds:.2f} per_second={written / seconds:.0f} "
        f"batch={batch} connections={connections} p50_ms={pct(0.5):.1f} p99_ms={pct(0.99):.1f}"
    )
    sys.exit(1 if state["errors"] or state["failed"] or written != total else 0)


main()
