// The Inbox's socket under a flood (issue 36): the release server runs under a descriptor limit of 1024
// (`ulimit -n`), and while a client polls `GET /v1/health-check` without pause,
//   - FLOOD_BAD (5,000) upgrades with a forged token are made, FLOOD_WIDTH (100) at a time;
//   - FLOOD_VALID (2,000) valid sockets are opened: first FLOOD_PER (20) subscribers open 12 sockets each, one
//     after the other (TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER is 10: each subscriber's 2 oldest must be told `41`
//     and lose their connection), then the rest, 10 per subscriber, FLOOD_WIDTH at a time, well past the cap
//     of open sockets (TIDINGS_MAX_SOCKETS, lowered to what 1024 descriptors allow).
// It checks that the health check's p99 stays under 50 ms with no failure; that no bad token was upgraded
// (each got a 401, or its connection closed at the connection cap); that every socket past the process's cap
// got a 503 before any upgrade (or its connection closed at the connection cap), and that the sockets open at the end
// (held by this client, and `tidings_sockets_open`) are exactly the cap; that each subscriber of the first
// phase kept exactly its 10 newest sockets. Prints the figures (and, with FLOOD_JSON, writes them to a file);
// exits 1 when a check fails.
//
//   node bench/socket_flood.mjs
//       starts target/release/tidings (FLOOD_BIN) on a fresh SQLite file in a temporary folder and a free port,
//       under `ulimit -n 1024` (FLOOD_NOFILE), and stops it at the end. Needs tests/sdk-ts/node_modules (`ws`).

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import http from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(ROOT, "tests/sdk-ts/package.json"));
const WebSocket = require("ws");

const num = (name, dflt) => (process.env[name] ? Number(process.env[name]) : dflt);
const NOFILE = num("FLOOD_NOFILE", 1024);
const BAD = num("FLOOD_BAD", 5000);
const VALID = num("FLOOD_VALID", 2000);
const PER = num("FLOOD_PER", 20); // subscribers of the per-subscriber phase
const PER_SUBSCRIBER = 10; // TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER
const EACH = PER_SUBSCRIBER + 2; // sockets each of them opens
const WIDTH = num("FLOOD_WIDTH", 100);
const P99_MAX_MS = 50;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();
const failures = [];
const check = (ok, what) => {
  if (!ok) failures.push(what);
};

// ------------------------------------------------------------------------------------------- the server

let server; // { url, key, pid, child, dir, log }

async function startServer() {
  const bin = process.env.FLOOD_BIN ?? join(ROOT, "target/release/tidings");
  const dir = mkdtempSync(join(tmpdir(), "tidings-socket-flood-"));
  const key = `sk_flood_${randomBytes(16).toString("hex")}`;
  const env = {
    ...process.env,
    DATABASE_URL: `sqlite://${dir}/tidings.db`,
    TIDINGS_LISTEN: "127.0.0.1:0",
    TIDINGS_API_KEY: key,
    TIDINGS_COMPAT: "novu",
    TIDINGS_MAX_SOCKETS_PER_SUBSCRIBER: String(PER_SUBSCRIBER),
    RUST_LOG: "info,tidings::request=warn",
  };
  delete env.TIDINGS_LOG;
  // The soft and hard limits both: the server raises its soft limit to the hard one at start.
  const child = spawn("sh", ["-c", `ulimit -n ${NOFILE} && exec "$0" serve`, bin], { env, stdio: ["ignore", "ignore", "pipe"] });
  const log = [];
  let buffered = "";
  child.stderr.on("data", (chunk) => {
    buffered += chunk;
    const lines = buffered.split("\n");
    buffered = lines.pop();
    log.push(...lines);
  });
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const line = log.find((l) => l.includes("tidings is serving"));
    if (line) {
      const addr = line.split("listen=")[1].split(/\s/)[0];
      return { url: `http://${addr}`, host: addr, key, pid: child.pid, child, dir, log };
    }
    if (child.exitCode !== null) throw new Error(`${bin} serve exited ${child.exitCode}:\n${log.join("\n")}`);
    await sleep(100);
  }
  throw new Error(`${bin} serve does not serve after 60 s:\n${log.join("\n")}`);
}

async function stopServer() {
  if (!server?.child) return;
  server.child.kill("SIGTERM");
  await new Promise((r) => (server.child.exitCode !== null ? r() : server.child.on("exit", r)));
  rmSync(server.dir, { recursive: true, force: true });
}

/** The server's memory (kB), CPU time (s) and open descriptors, from /proc. */
function serverStats() {
  try {
    const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
    const kb = (field) => Number(status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"))?.[1]);
    const stat = readFileSync(`/proc/${server.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cpu = (Number(fields[11]) + Number(fields[12])) / 100;
    const limits = readFileSync(`/proc/${server.pid}/limits`, "utf8").match(/^Max open files\s+(\d+)/m)?.[1];
    return { rssKb: kb("VmRSS"), hwmKb: kb("VmHWM"), cpuSeconds: cpu, nofile: Number(limits) };
  } catch {
    return null;
  }
}

// ------------------------------------------------------------------------------------------- HTTP

async function call(method, path, body, authorization) {
  const headers = { Accept: "application/json" };
  if (authorization) headers.Authorization = authorization;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, text };
}

/** Runs `fn(i)` for i in 0..n, `width` at a time. */
async function pool(n, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, n) }, async () => {
    while (next < n) await fn(next++);
  }));
}

/** Polls the health check of `url` one request after another, each on a new connection (as a load
 *  balancer's probe does: the connection must be accepted too), until told to stop; answers its figures. Runs
 *  in a thread of its own, so that the flood's own work in this process does not delay its timings. */
function pollHealth(url, port) {
  const latencies = [];
  let errors = 0;
  let running = true;
  port.on("message", () => (running = false));
  const once = () =>
    new Promise((resolve) => {
      const start = performance.now();
      const req = http.get(`${url}/v1/health-check`, { agent: false, timeout: 5000 }, (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode === 200) latencies.push(performance.now() - start);
          else errors++;
          resolve();
        });
      });
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", () => {
        errors++;
        resolve();
      });
    });
  (async () => {
    while (running) {
      await once();
      await sleep(2);
    }
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
    port.postMessage({ requests: latencies.length, errors, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? NaN });
  })();
}

if (!isMainThread) pollHealth(workerData.url, parentPort);

/** Starts polling the health check in a worker thread; `stop()` answers its figures. */
function healthPoller() {
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { url: server.url } });
  const figures = new Promise((resolve) => worker.once("message", resolve));
  return {
    async stop() {
      worker.postMessage("stop");
      const f = await figures;
      await worker.terminate();
      return f;
    },
  };
}

// ------------------------------------------------------------------------------------------- the sockets

/**
 * Opens a socket as `@novu/js` does (WebSocket transport, the token in the query) and joins the main
 * namespace. Resolves to { status } for a refusal before the upgrade (`status`: the HTTP status, or 0 when
 * the connection was closed without an answer), or to { socket } once admitted (`40`), or { told } if the
 * namespace refused it. An admitted socket records `told41` and `closedAt` when that happens.
 */
function openSocket(token) {
  return new Promise((resolve) => {
    const url = `ws://${server.host}/socket.io/?EIO=4&transport=websocket&token=${encodeURIComponent(token)}`;
    const ws = new WebSocket(url, { handshakeTimeout: 10_000 });
    const s = { ws, told41: false, closedAt: null, admitted: false };
    let settled = false;
    const settle = (v) => {
      if (!settled) {
        settled = true;
        resolve(v);
      }
    };
    ws.on("unexpected-response", (req, res) => {
      settle({ status: res.statusCode });
      res.resume();
      req.destroy();
    });
    ws.on("error", () => settle({ status: 0 }));
    ws.on("message", (data) => {
      const m = data.toString();
      if (m === "2") ws.send("3");
      else if (m.startsWith("0{")) ws.send("40");
      else if (m.startsWith("40{")) {
        s.admitted = true;
        settle({ socket: s });
      } else if (m.startsWith("41")) {
        s.told41 = true;
        settle({ told: m });
      } else if (m.startsWith("44")) settle({ told: m });
    });
    ws.on("close", () => {
      s.closedAt = now();
      settle({ status: 0 });
    });
  });
}

async function session(app, subscriberId) {
  const r = await call("POST", "/v1/inbox/session", { applicationIdentifier: app, subscriber: { subscriberId } });
  if (r.status !== 201) throw new Error(`session of ${subscriberId}: ${r.status} ${r.text.slice(0, 200)}`);
  return JSON.parse(r.text).data.token;
}

async function gauge(name) {
  const r = await call("GET", "/metrics");
  const line = r.text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

async function main() {
  server = await startServer();
  const capLine = server.log.find((l) => l.includes("lowered to what the descriptor limit allows"));
  const cap = Number(capLine?.match(/ sockets=(\d+)/)?.[1] ?? NaN);
  check(Number.isFinite(cap), `the start-up warning names the lowered socket cap: ${capLine}`);
  const envs = JSON.parse((await call("GET", "/v1/environments", undefined, `ApiKey ${server.key}`)).text);
  const app = envs.data[0].identifier;

  // Sessions first (each creates its subscriber): the per-subscriber phase's, then the others', 10 each.
  const others = Math.ceil((VALID - PER * EACH) / PER_SUBSCRIBER);
  const tokens = [];
  await pool(PER + others, 20, async (i) => {
    tokens[i] = await session(app, `flood-${i}`);
  });
  const forged = tokens[0].slice(0, -4) + (tokens[0].endsWith("AAAA") ? "BBBB" : "AAAA");
  const before = serverStats();
  const health = healthPoller();
  const started = now();

  // The forged tokens, all along.
  const bad = { attempts: 0, statuses: {} };
  const badFlood = pool(BAD, WIDTH, async () => {
    const r = await openSocket(forged);
    bad.attempts++;
    const status = r.status ?? "upgraded";
    bad.statuses[status] = (bad.statuses[status] ?? 0) + 1;
    r.socket?.ws.terminate();
  });

  // Per subscriber: each of PER subscribers opens EACH sockets in turn.
  const perSubscriber = Array.from({ length: PER }, () => []);
  await pool(PER, PER, async (i) => {
    for (let n = 0; n < EACH; n++) {
      const r = await openSocket(tokens[i]);
      perSubscriber[i].push(r);
    }
  });
  await sleep(3000); // the oldest are told at once and closed a second later
  let perOk = 0;
  for (const opened of perSubscriber) {
    const sockets = opened.map((r) => r.socket);
    const closed = sockets.filter((s) => s?.told41 && s.closedAt !== null).length;
    const open = sockets.filter((s) => s?.admitted && s.closedAt === null).length;
    const oldestClosed = sockets.slice(0, EACH - PER_SUBSCRIBER).every((s) => s?.told41 && s.closedAt !== null);
    if (closed === EACH - PER_SUBSCRIBER && open === PER_SUBSCRIBER && oldestClosed) perOk++;
  }
  check(perOk === PER, `every subscriber kept its ${PER_SUBSCRIBER} newest sockets and lost its 2 oldest: ${perOk} of ${PER}`);

  // The rest, past the process's cap.
  const rest = { attempts: 0, admitted: 0, statuses: {} };
  const restSockets = [];
  await pool(others * PER_SUBSCRIBER, WIDTH, async (n) => {
    const r = await openSocket(tokens[PER + Math.floor(n / PER_SUBSCRIBER)]);
    rest.attempts++;
    if (r.socket) {
      rest.admitted++;
      restSockets.push(r.socket);
    } else {
      const status = r.status ?? r.told;
      rest.statuses[status] = (rest.statuses[status] ?? 0) + 1;
    }
  });
  await badFlood;
  const floodSeconds = (now() - started) / 1000;
  const healthFigures = await health.stop();
  await sleep(1500);

  const held = [...perSubscriber.flat().map((r) => r.socket), ...restSockets].filter((s) => s?.admitted && s.closedAt === null).length;
  const openGauge = await gauge("tidings_sockets_open");
  const during = serverStats();
  check(
    (bad.statuses[401] ?? 0) + (bad.statuses[0] ?? 0) === BAD && (bad.statuses[401] ?? 0) > 0,
    `every forged token was refused (401, or closed at the connection cap): ${JSON.stringify(bad.statuses)}`,
  );
  check(held === cap, `the sockets held are the cap: ${held} held, cap ${cap}`);
  check(openGauge === cap, `tidings_sockets_open is the cap: ${openGauge}, cap ${cap}`);
  check(
    Object.keys(rest.statuses).every((s) => s === "503" || s === "0") && (rest.statuses[503] ?? 0) > 0,
    `every socket past the cap was refused before its upgrade (503, or closed at the connection cap): ${JSON.stringify(rest.statuses)}`,
  );
  check(healthFigures.errors === 0, `no health check failed: ${healthFigures.errors} failed`);
  check(healthFigures.p99 < P99_MAX_MS, `health check p99 ${healthFigures.p99.toFixed(1)} ms < ${P99_MAX_MS} ms`);

  // Everything closes: the gauge goes back to 0.
  for (const s of [...perSubscriber.flat().map((r) => r.socket), ...restSockets]) s?.ws.terminate();
  let after = -1;
  for (let i = 0; i < 50 && after !== 0; i++) {
    await sleep(100);
    after = await gauge("tidings_sockets_open");
  }
  check(after === 0, `tidings_sockets_open is 0 once every socket closed: ${after}`);
  const end = serverStats();
  const opened = server.log.filter((l) => l.includes("Inbox socket opened")).length;

  const figures = {
    nofile: during?.nofile,
    socketCap: cap,
    floodSeconds: Number(floodSeconds.toFixed(1)),
    badTokens: bad,
    perSubscriber: { subscribers: PER, socketsEach: EACH, keptTheirNewest: perOk },
    pastTheCap: rest,
    socketsHeld: held,
    tidingsSocketsOpen: openGauge,
    socketsOpenedLogged: opened,
    health: {
      requests: healthFigures.requests,
      errors: healthFigures.errors,
      p50Ms: Number(healthFigures.p50.toFixed(2)),
      p99Ms: Number(healthFigures.p99.toFixed(2)),
      maxMs: Number(healthFigures.max.toFixed(2)),
    },
    server: {
      rssStartMb: Math.round((before?.rssKb ?? 0) / 1024),
      rssWithSocketsMb: Math.round((during?.rssKb ?? 0) / 1024),
      rssEndMb: Math.round((end?.rssKb ?? 0) / 1024),
      peakMb: Math.round((end?.hwmKb ?? 0) / 1024),
      cpuSeconds: Number(((end?.cpuSeconds ?? 0) - (before?.cpuSeconds ?? 0)).toFixed(1)),
    },
    failures,
  };
  console.log(JSON.stringify(figures, null, 2));
  if (process.env.FLOOD_JSON) writeFileSync(process.env.FLOOD_JSON, JSON.stringify(figures, null, 2));
  const accepting = server.log.filter((l) => l.includes("accepting a connection failed")).length;
  check(accepting === 0, `the accept loop never ran out of descriptors: ${accepting} failures logged`);
}

if (isMainThread) {
  try {
    await main();
  } catch (e) {
    failures.push(String(e?.stack ?? e));
  } finally {
    await stopServer();
  }
  if (failures.length) {
    console.error(`socket flood: ${failures.length} check(s) failed:\n- ${failures.join("\n- ")}`);
    process.exit(1);
  }
  console.log("socket flood: every check passed");
}
