#!/usr/bin/env python3
"""Fault-and-load probe of the release binary (issue 21), loopback only, bounded in time and size.

    python3 bench/probe.py [--binary target/release/tidings] [--database-url postgres://…/db]

Starts `tidings serve` on a free port (a temp SQLite file unless --database-url names an empty database),
creates a second environment, and runs, reporting status counts per environment, latency and the server's
RSS before, during and after each phase:

  1. idle flood      more idle TCP connections than the connection cap, held past the header timeout,
                     while a client measures the health check;
  2. body flood      100 concurrent 7.9 MB trigger requests (declared length), with and without an
                     idempotency key, and 20 chunked ones without a length;
  3. mixed load      two environments triggering at once: A sends valid triggers, B sends bad ones (NUL
                     bytes) and large bulks (100 events x 100 recipients); A's latency is what matters;
  4. shutdown        SIGTERM while 200 keep-alive clients send triggers: every request written gets an
                     answer or a refused connection, and the process exits within the deadline.

Standard library only. Prints a Markdown report on stdout.
"""

import argparse
import asyncio
import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class Http:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, port):
        self.port = port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def close(self):
        if self.writer:
            self.writer.close()
            self.writer = None

    async def request(self, method, path, key=None, body=None, headers=None):
        """(status, headers text, body bytes); raises ConnectionError when the server closed the connection."""
        if self.writer is None:
            await self.open()
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        head = f"{method} {path} HTTP/1.1\r\nHost: probe\r\nContent-Length: {len(data)}\r\n"
        if key:
            head += f"Authorization: ApiKey {key}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        for k, v in (headers or {}).items():
            head += f"{k}: {v}\r\n"
        self.writer.write(head.encode() + b"\r\n" + data)
        await self.writer.drain()
        return await self.response()

    async def response(self):
        raw = await self.reader.readuntil(b"\r\n\r\n")
        text = raw.decode("latin-1")
        status = int(text.split(" ", 2)[1])
        m = re.search(r"(?im)^content-length:\s*(\d+)", text)
        body = await self.reader.readexactly(int(m.group(1))) if m else b""
        if re.search(r"(?im)^connection:\s*close", text):
            self.close()
        return status, text, body


class Server:
    def __init__(self, binary, database_url, extra_env):
        self.dir = tempfile.mkdtemp(prefix="tidings-probe-")
        self.port = free_port()
        self.url = database_url or f"sqlite://{self.dir}/tidings.db"
        self.env = dict(os.environ, TIDINGS_LISTEN=f"127.0.0.1:{self.port}", DATABASE_URL=self.url,
                        RUST_LOG="warn", **extra_env)
        self.binary = binary
        self.proc = None

    def start(self):
        self.out = open(f"{self.dir}/serve.out", "w+")
        self.err = open(f"{self.dir}/serve.err", "w+")
        self.proc = subprocess.Popen([self.binary, "serve"], env=self.env, stdout=self.out, stderr=self.err,
                                     cwd=self.dir)
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)
        self.out.seek(0)
        m = re.search(r"API key: (\S+)", self.out.read())
        if not m:
            sys.exit("no bootstrap key printed (is the database empty?)")
        self.key = m.group(1)
        created = subprocess.run([self.binary, "environments", "create", "Probe B"], env=self.env,
                                 capture_output=True, text=True, check=True, cwd=self.dir)
        self.key_b = json.loads(created.stdout)["apiKey"]

    def rss(self):
        return rss_mb(self.proc.pid)


async def setup_workflow(port, key, subscribers):
    c = Http(port)
    st, _, body = await c.request("POST", "/v2/workflows", key, {
        "name": "Probe", "workflowId": "probe",
        "steps": [{"type": "in_app", "name": "Inbox", "controlValues": {"body": "Hi {{ payload.n }}"}}]})
    assert st in (200, 201), body
    for i in range(subscribers):
        st, _, body = await c.request("POST", "/v2/subscribers", key, {"subscriberId": f"p{i}"})
        assert st in (200, 201, 409), body
    c.close()


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))] * 1000


async def health_probe(port, stop, latencies, errors):
    while not stop.is_set():
        c = Http(port)
        t = time.perf_counter()
        try:
            st, _, _ = await asyncio.wait_for(c.request("GET", "/v1/health-check"), 5)
            (latencies if st == 200 else errors).append(time.perf_counter() - t)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            errors.append(time.perf_counter() - t)
        c.close()
        await asyncio.sleep(0.05)


async def idle_flood(server, report, count, hold):
    before = server.rss()
    socks, failed = [], 0
    for _ in range(count):
        try:
            socks.append(await asyncio.open_connection("127.0.0.1", server.port))
        except OSError:
            failed += 1
    stop, lat, errs = asyncio.Event(), [], []
    probe = asyncio.create_task(health_probe(server.port, stop, lat, errs))
    await asyncio.sleep(1)
    during = server.rss()
    await asyncio.sleep(max(0, hold - 1))
    stop.set()
    await probe
    closed = 0
    for r, w in socks:
        try:
            data = await asyncio.wait_for(r.read(1), 0.01)
            closed += data == b""
        except (asyncio.TimeoutError, OSError):
            pass
        w.close()
    await asyncio.sleep(2)
    report.append(f"| idle flood | {count} connections opened ({failed} failed), held {hold} s; "
                  f"closed by the server: {closed}; health checks ok {len(lat)}, failed {len(errs)}, "
                  f"p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms | {before:.0f} | {during:.0f} | "
                  f"{server.rss():.0f} |")


async def big_body(port, key, idem, chunked):
    r = w = None
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        size = 7_900_000
        head = f"POST /v1/events/trigger HTTP/1.1\r\nHost: probe\r\nAuthorization: ApiKey {key}\r\n" \
               "Content-Type: application/json\r\n"
        if idem:
            head += f"Idempotency-Key: probe-{os.urandom(6).hex()}\r\n"
        head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {size}\r\n"
        w.write(head.encode() + b"\r\n")
        chunk = b'{"name":"probe","payload":{"x":"' + b"a" * (256 * 1024)
        sent = 0
        try:
            while sent < size:
                w.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunked else chunk)
                sent += len(chunk)
                await asyncio.wait_for(w.drain(), 2)
            if chunked:
                w.write(b"0\r\n\r\n")
                await asyncio.wait_for(w.drain(), 2)
        except (OSError, asyncio.TimeoutError):
            pass  # the server answered and stopped reading: its answer is in the read buffer
        raw = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
        return int(raw.split(b" ", 2)[1])
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, asyncio.LimitOverrunError):
        return "reset"
    finally:
        if w:
            w.close()


async def body_flood(server, report):
    for label, n, idem, chunked in [("7.9 MB x 100, Content-Length", 100, False, False),
                                    ("7.9 MB x 100, Content-Length + idempotency-key", 100, True, False),
                                    ("chunked x 20 + idempotency-key", 20, True, True)]:
        before, peak = server.rss(), 0.0
        tasks = [asyncio.create_task(big_body(server.port, server.key, idem, chunked)) for _ in range(n)]
        while not all(t.done() for t in tasks):
            peak = max(peak, server.rss())
            await asyncio.sleep(0.02)
        outcomes = {}
        for t in tasks:
            outcomes[t.result()] = outcomes.get(t.result(), 0) + 1
        await asyncio.sleep(3)
        report.append(f"| body flood: {label} | outcomes {outcomes} | {before:.0f} | {peak:.0f} | "
                      f"{server.rss():.0f} |")


async def trigger_loop(port, key, stop, body_fn, statuses, latencies):
    c = Http(port)
    n = 0
    while not stop.is_set():
        n += 1
        t = time.perf_counter()
        if c.writer is None:
            try:
                await c.open()
            except OSError:
                # Refused: the client knows its request was not sent.
                statuses["refused"] = statuses.get("refused", 0) + 1
                await asyncio.sleep(0.01)
                continue
        try:
            st, _, _ = await c.request("POST", *body_fn(key, n))
            statuses[st] = statuses.get(st, 0) + 1
            latencies.append(time.perf_counter() - t)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            # Written, and no answer: the client cannot tell whether it took effect.
            statuses["lost"] = statuses.get("lost", 0) + 1
            c.close()
    c.close()


def good(key, n):
    return "/v1/events/trigger", key, {"name": "probe", "to": f"p{n % 50}", "payload": {"n": n}}


def bad(key, n):
    if n % 4 == 0:
        return "/v1/events/trigger/bulk", key, {"events": [
            {"name": "probe", "to": [f"p{i}" for i in range(100)], "payload": {"n": j}} for j in range(100)]}
    return "/v1/events/trigger", key, {"name": "probe", "to": "p1", "payload": {"bad\u0000key": "nul\u0000"}}


async def mixed(server, report, seconds):
    before = server.rss()
    stop = asyncio.Event()
    a_st, a_lat, b_st, b_lat = {}, [], {}, []
    tasks = [asyncio.create_task(trigger_loop(server.port, server.key, stop, good, a_st, a_lat))
             for _ in range(8)]
    tasks += [asyncio.create_task(trigger_loop(server.port, server.key_b, stop, bad, b_st, b_lat))
              for _ in range(4)]
    await asyncio.sleep(seconds / 2)
    during = server.rss()
    await asyncio.sleep(seconds / 2)
    stop.set()
    await asyncio.gather(*tasks)
    await asyncio.sleep(2)
    report.append(f"| mixed, environment A (valid triggers, 8 clients) | {a_st}; p50 {pct(a_lat, 50):.1f} ms, "
                  f"p99 {pct(a_lat, 99):.1f} ms, max {max(a_lat) * 1000:.0f} ms | {before:.0f} | {during:.0f} | "
                  f"{server.rss():.0f} |")
    report.append(f"| mixed, environment B (NUL bytes; every 4th a 100x100 bulk, 4 clients) | {b_st} | | | |")


async def shutdown(server, report, clients):
    stop = asyncio.Event()
    statuses, lat = {}, []
    tasks = [asyncio.create_task(trigger_loop(server.port, server.key, stop, good, statuses, lat))
             for _ in range(clients)]
    await asyncio.sleep(2)
    t = time.perf_counter()
    server.proc.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.5)
    stop.set()
    await asyncio.gather(*tasks)
    code = await asyncio.get_running_loop().run_in_executor(None, server.proc.wait)
    report.append(f"| SIGTERM under load ({clients} keep-alive clients) | exit {code} after "
                  f"{time.perf_counter() - t:.2f} s; answers {statuses} | | | |")


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/tidings")
    ap.add_argument("--database-url")
    ap.add_argument("--idle", type=int, default=12000, help="idle connections in the flood")
    ap.add_argument("--max-connections", type=int, default=10000)
    ap.add_argument("--hold", type=int, default=12, help="seconds the idle flood is held")
    ap.add_argument("--mixed", type=int, default=10, help="seconds of mixed load")
    ap.add_argument("--phases", default="idle,body,mixed,shutdown", help="comma-separated phases to run")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    server = Server(os.path.abspath(a.binary), a.database_url,
                    {"TIDINGS_MAX_CONNECTIONS": str(a.max_connections)})
    server.start()
    try:
        await setup_workflow(server.port, server.key, 50)
        await setup_workflow(server.port, server.key_b, 100)
        idle = server.rss()
        report = [f"Server: {a.binary} on {server.url.split('@')[-1]}; RSS at idle {idle:.0f} MB; "
                  f"connection cap {a.max_connections}", "",
                  "| phase | outcome | RSS before (MB) | during / peak | after |", "|---|---|---|---|---|"]
        phases = a.phases.split(",")
        if "idle" in phases:
            await idle_flood(server, report, a.idle, a.hold)
        if "body" in phases:
            await body_flood(server, report)
        if "mixed" in phases:
            await mixed(server, report, a.mixed)
        if "shutdown" in phases:
            await shutdown(server, report, 200)
        print("\n".join(report))
    finally:
        if server.proc.poll() is None:
            server.proc.kill()


if __name__ == "__main__":
    asyncio.run(main())
