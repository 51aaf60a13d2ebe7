// The Inbox's real-time socket under load: BENCH_SOCKETS (1,000) subscribers each hold one socket.io
// connection while in-app triggers arrive for BENCH_SECONDS (60) at BENCH_RATE per second (50), round robin
// over the subscribers. Every socket counts the `notification_received` events it hears against the triggers
// sent for its subscriber, and checks each one is its own (subscriber, transaction, body) and that its last
// `unread_count_changed` total equals what it received. Reports sockets connected, events expected and
// received (equal, else exit 1), the latency from sending a trigger to its event's receipt (p50, p90, p99,
// max), and the server's RSS (start, peak, end) and CPU.
//
// Most sockets are raw `socket.io-client` 4.8.3 connections (what `@novu/js` dials: WebSocket transport, the
// session's token in the query string), each session opened with `POST /v1/inbox/session`; BENCH_NOVU (20)
// of the subscribers use the official client `@novu/js` instead (its session, its socket, its events). Both
// come from tests/sdk-ts/node_modules (`npm ci` there first).
//
//   node bench/inbox_sockets.mjs
//       starts target/release/tidings (BENCH_BIN) on a fresh SQLite file in a temporary folder and a free port,
//       or on BENCH_DATABASE_URL (a fresh PostgreSQL database, e.g. postgres://postgres@127.0.0.1:5432/bench_inbox;
//       a random TIDINGS_ENCRYPTION_KEY is generated), and stops it at the end;
//   TIDINGS_URL=http://127.0.0.1:3000 TIDINGS_KEY=<key> TIDINGS_PID=<server pid> node bench/inbox_sockets.mjs
//       against a running server (`--compat novu` or spec; TIDINGS_PID for RSS and CPU, optional).
//
// Settings: BENCH_SOCKETS (1000), BENCH_NOVU (20), BENCH_SECONDS (60), BENCH_RATE (50 triggers/s), BENCH_BULK
// (0: one POST /v1/events/trigger per event; n: POST /v1/events/trigger/bulk of n events, BENCH_RATE/n times a
// second), BENCH_DRAIN (30: seconds to wait after the last trigger for the last events), BENCH_JSON (a file
// for the figures as JSON).

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(ROOT, "tests/sdk-ts/package.json"));
const { io } = require("socket.io-client");
const { Novu } = require("@novu/js");

const num = (name, dflt) => (process.env[name] ? Number(process.env[name]) : dflt);
const SOCKETS = num("BENCH_SOCKETS", 1000);
const NOVU = Math.min(num("BENCH_NOVU", 20), SOCKETS);
const SECONDS = num("BENCH_SECONDS", 60);
const RATE = num("BENCH_RATE", 50);
const BULK = num("BENCH_BULK", 0);
const DRAIN = num("BENCH_DRAIN", 30);
const RUN = Date.now().toString(36);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();

// ------------------------------------------------------------------------------------------- the server

const CLK_TCK = 100; // Linux's USER_HZ
let server; // { url, key, pid, child?, dir?, log? }

async function startServer() {
  const bin = process.env.BENCH_BIN ?? join(ROOT, "target/release/tidings");
  const dir = mkdtempSync(join(tmpdir(), "tidings-inbox-bench-"));
  const key = `sk_bench_${randomBytes(16).toString("hex")}`;
  const database = process.env.BENCH_DATABASE_URL ?? `sqlite://${dir}/tidings.db`;
  const env = {
    ...process.env,
    DATABASE_URL: database,
    TIDINGS_LISTEN: "127.0.0.1:0",
    TIDINGS_API_KEY: key,
    TIDINGS_COMPAT: "novu",
    RUST_LOG: "info,tidings::request=warn",
    // Every simulated browser comes from 127.0.0.1: the Inbox's limit per client address is raised out of
    // reach (the limits per environment and per subscriber stay as they are).
    TIDINGS_RATE_LIMIT_INBOX_PER_ADDRESS: "10000000",
  };
  if (database.startsWith("postgres") && !env.TIDINGS_ENCRYPTION_KEY) env.TIDINGS_ENCRYPTION_KEY = randomBytes(32).toString("base64");
  const child = spawn(bin, ["serve"], { env, stdio: ["ignore", "ignore", "pipe"] });
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
      return { url: `http://${addr}`, key, pid: child.pid, child, dir, log, database };
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

/** The server's memory (`VmRSS`, `VmHWM`, kB) and CPU time (seconds), from /proc. */
function serverStats() {
  if (!server.pid) return null;
  try {
    const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
    const kb = (field) => Number(status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"))?.[1]);
    const stat = readFileSync(`/proc/${server.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cpu = (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime + stime (fields 14 and 15)
    return { rss: kb("VmRSS"), hwm: kb("VmHWM"), cpu, threads: Number(status.match(/^Threads:\s+(\d+)/m)?.[1]) };
  } catch {
    return null;
  }
}

// ------------------------------------------------------------------------------------------- HTTP

async function http(method, path, body, authorization = `ApiKey ${server.key}`) {
  const headers = { Accept: "application/json" };
  if (authorization) headers.Authorization = authorization;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: res.status, json };
}

async function ok(method, path, body, status, authorization) {
  const r = await http(method, path, body, authorization);
  if (r.status !== status) throw new Error(`${method} ${path}: expected ${status}, got ${r.status} ${JSON.stringify(r.json).slice(0, 300)}`);
  return r.json?.data !== undefined && Object.keys(r.json).length === 1 ? r.json.data : r.json;
}

/** Runs `fn(i)` for i in 0..n, `width` at a time. */
async function pool(n, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, n) }, async () => {
    while (next < n) await fn(next++);
  }));
}

// ------------------------------------------------------------------------------------------- the sockets

/** What one subscriber's socket heard. */
class Listener {
  constructor(i) {
    this.i = i;
    this.subscriberId = `bench-${RUN}-${i}`;
    this.expected = 0;
    this.received = 0;
    this.wrong = []; // events that were not this subscriber's, or not what was triggered
    this.unread = null; // the last unread total heard
    this.unreadEvents = 0;
    this.unseenEvents = 0;
    this.connected = false;
    this.disconnects = 0;
  }

  heard(transactionId, subscriberId, body, at) {
    const sent = triggers.get(transactionId);
    if (!sent || subscriberId !== this.subscriberId || sent.subscriber !== this.i || body !== `Bench ${sent.seq}`) {
      this.wrong.push({ transactionId, subscriberId, body });
      return;
    }
    if (sent.heardAt !== undefined) {
      this.wrong.push({ transactionId, duplicate: true });
      return;
    }
    sent.heardAt = at;
    latencies.push(at - sent.at);
    this.received++;
  }
}

const listeners = [];
const triggers = new Map(); // transactionId -> { seq, subscriber, at, heardAt? }
const latencies = [];

/** A raw socket.io connection as @novu/js opens it, with a session opened raw. */
async function rawSocket(l, app) {
  const session = await ok("POST", "/v1/inbox/session", { applicationIdentifier: app, subscriber: { subscriberId: l.subscriberId } }, 201, null);
  await new Promise((resolve, reject) => {
    const socket = io(server.url, { transports: ["websocket"], query: { token: session.token }, forceNew: true, reconnectionDelayMax: 10_000 });
    l.close = () => socket.disconnect();
    socket.on("connect", () => {
      l.connected = true;
      resolve();
    });
    socket.on("connect_error", (e) => reject(new Error(`${l.subscriberId}: connect_error ${e.message}`)));
    socket.on("disconnect", () => {
      l.connected = false;
      l.disconnects++;
    });
    socket.on("notification_received", ({ message }) => l.heard(message?.transactionId, message?.subscriber?.subscriberId, message?.content, now()));
    socket.on("unread_count_changed", (data) => {
      l.unreadEvents++;
      l.unread = data?.counts?.total;
    });
    socket.on("unseen_count_changed", () => l.unseenEvents++);
  });
}

/** The official client: its own session and socket, its mapped events. */
async function novuSocket(l, app) {
  const novu = new Novu({ applicationIdentifier: app, subscriber: l.subscriberId, apiUrl: server.url, socketUrl: server.url, useCache: false });
  l.close = () => novu.socket.disconnect();
  const session = await new Promise((r) => novu.on("session.initialize.resolved", r));
  if (session?.error) throw new Error(`${l.subscriberId}: @novu/js session: ${session.error.message}`);
  const connected = new Promise((r) => novu.on("socket.connect.resolved", r));
  novu.on("notifications.notification_received", ({ result }) => l.heard(result?.transactionId, result?.to?.subscriberId, result?.body, now()));
  novu.on("notifications.unread_count_changed", ({ result }) => {
    l.unreadEvents++;
    l.unread = result?.total;
  });
  novu.on("notifications.unseen_count_changed", () => l.unseenEvents++);
  const c = await connected;
  if (c?.error) throw new Error(`${l.subscriberId}: @novu/js socket: ${c.error.message}`);
  l.connected = true;
}

// ------------------------------------------------------------------------------------------- the run

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);
const mb = (kb) => (kb / 1024).toFixed(1);

async function main() {
  server = process.env.TIDINGS_URL
    ? { url: process.env.TIDINGS_URL.replace(/\/$/, ""), key: process.env.TIDINGS_KEY, pid: Number(process.env.TIDINGS_PID) || null }
    : await startServer();
  const out = { sockets: SOCKETS, novuClients: NOVU, seconds: SECONDS, rate: RATE, bulk: BULK, database: server.database ?? "(running server)" };
  console.log(`server ${server.url} (pid ${server.pid ?? "unknown"}), ${out.database}`);

  const me = await ok("GET", "/v1/environments/me", undefined, 200);
  const app = me.identifier ?? me.data?.identifier;
  const workflowId = `bench-inbox-${RUN}`;
  await ok("POST", "/v2/workflows", {
    name: "Bench inbox", workflowId, active: true,
    steps: [{ name: "inbox", stepId: "inbox", type: "in_app", controlValues: { subject: "Bench", body: "Bench {{payload.seq}}" } }],
  }, 201);

  // 1. subscribers
  let t = now();
  for (let i = 0; i < SOCKETS; i++) listeners.push(new Listener(i));
  await pool(SOCKETS, 16, (i) => ok("POST", "/v2/subscribers", { subscriberId: listeners[i].subscriberId, firstName: `B${i}` }, 201));
  console.log(`created ${SOCKETS} subscribers in ${((now() - t) / 1000).toFixed(1)} s`);
  const start = serverStats();

  // 2. sockets: the first NOVU through @novu/js, the others raw
  t = now();
  const failures = [];
  await pool(SOCKETS, 32, async (i) => {
    try {
      await (i < NOVU ? novuSocket : rawSocket)(listeners[i], app);
    } catch (e) {
      failures.push(String(e.message ?? e));
    }
  });
  const connectSeconds = (now() - t) / 1000;
  const connected = listeners.filter((l) => l.connected).length;
  const afterConnect = serverStats();
  console.log(`connected ${connected}/${SOCKETS} sockets (${NOVU} through @novu/js) in ${connectSeconds.toFixed(1)} s` +
    (failures.length ? `; ${failures.length} failed, e.g. ${failures[0]}` : ""));
  // A sample is online, as the API sees it.
  await sleep(500);
  const sample = listeners.filter((_, i) => i % Math.max(1, Math.floor(SOCKETS / 20)) === 0);
  const onlineSeen = (await Promise.all(sample.map(async (l) => (await ok("GET", `/v2/subscribers/${l.subscriberId}`, undefined, 200)).isOnline))).filter(Boolean).length;

  // 3. triggers for SECONDS at RATE, round robin; the server's RSS and CPU sampled every 250 ms
  const holdStart = serverStats();
  const clientCpu0 = process.cpuUsage();
  const t0 = now();
  let seq = 0;
  let peakRss = afterConnect?.rss ?? 0;
  let ticks = 0;
  const timeline = []; // every 5 s: seconds since the first trigger, triggers sent, events received, RSS (MB)
  const sampler = setInterval(() => {
    const s = serverStats();
    if (s) peakRss = Math.max(peakRss, s.rss);
    if (++ticks % 20 === 0) {
      const received = listeners.reduce((n, l) => n + l.received, 0);
      timeline.push([Math.round((now() - t0) / 1000), seq, received, s ? +mb(s.rss) : null]);
      console.log(`  ${timeline.at(-1)[0]} s: ${seq} triggered, ${received} received${s ? `, server RSS ${mb(s.rss)} MB` : ""}`);
    }
  }, 250);
  const total = Math.round(SECONDS * RATE);
  const perRequest = BULK > 0 ? BULK : 1;
  const requests = Math.ceil(total / perRequest);
  const refused = [];
  const inflight = [];
  for (let r = 0; r < requests; r++) {
    const due = t0 + (r * 1000 * perRequest) / RATE;
    const wait = due - now();
    if (wait > 1) await sleep(wait);
    const events = [];
    for (let k = 0; k < perRequest && seq < total; k++, seq++) {
      const l = listeners[seq % SOCKETS];
      const transactionId = `b-${RUN}-${seq}`;
      events.push({ name: workflowId, to: l.subscriberId, payload: { seq }, transactionId, l, seq });
    }
    const at = now();
    for (const e of events) triggers.set(e.transactionId, { seq: e.seq, subscriber: e.l.i, at });
    const body = (e) => ({ name: e.name, to: e.to, payload: e.payload, transactionId: e.transactionId });
    const sent = BULK > 0
      ? http("POST", "/v1/events/trigger/bulk", { events: events.map(body) })
      : http("POST", "/v1/events/trigger", body(events[0]));
    inflight.push(sent.then((res) => {
      if (res.status === 201) for (const e of events) e.l.expected++;
      else {
        refused.push(`${res.status} ${JSON.stringify(res.json).slice(0, 200)}`);
        for (const e of events) triggers.delete(e.transactionId);
      }
    }, (err) => refused.push(String(err))));
  }
  await Promise.all(inflight);
  const sendSeconds = (now() - t0) / 1000;
  const expected = listeners.reduce((n, l) => n + l.expected, 0);
  // 4. the last events
  const drainStart = now();
  const settled = () => listeners.every((l) => l.received >= l.expected && (l.expected === 0 || l.unread === l.received));
  while (!settled() && now() - drainStart < DRAIN * 1000) await sleep(100);
  const holdEnd = serverStats();
  const clientCpu = process.cpuUsage(clientCpu0);
  const holdSeconds = (now() - t0) / 1000;
  clearInterval(sampler);
  const received = listeners.reduce((n, l) => n + l.received, 0);
  const wrong = listeners.flatMap((l) => l.wrong);
  const countsOff = listeners.filter((l) => l.expected > 0 && l.unread !== l.received);
  const short = listeners.filter((l) => l.received < l.expected);
  const dropped = listeners.filter((l) => l.disconnects > 0);
  const novu = listeners.slice(0, NOVU);

  // 5. close every socket; the subscribers go offline
  for (const l of listeners) l.close?.();
  await sleep(3000);
  const offlineSeen = (await Promise.all(sample.map(async (l) => (await ok("GET", `/v2/subscribers/${l.subscriberId}`, undefined, 200)).isOnline))).filter((x) => x === false).length;
  const end = serverStats();

  const sorted = latencies.slice().sort((a, b) => a - b);
  Object.assign(out, {
    connected, connectFailures: failures.length, connectSeconds: +connectSeconds.toFixed(2),
    onlineSample: `${onlineSeen}/${sample.length}`, offlineSampleAfterClose: `${offlineSeen}/${sample.length}`,
    triggersSent: seq, triggersRefused: refused.length, sendSeconds: +sendSeconds.toFixed(2),
    expected, received, wrongEvents: wrong.length, socketsShort: short.length, socketsWithWrongUnreadCount: countsOff.length,
    socketsDisconnectedDuringHold: dropped.length,
    novu: { clients: NOVU, expected: novu.reduce((n, l) => n + l.expected, 0), received: novu.reduce((n, l) => n + l.received, 0) },
    unreadCountEvents: listeners.reduce((n, l) => n + l.unreadEvents, 0), unseenCountEvents: listeners.reduce((n, l) => n + l.unseenEvents, 0),
    timeline,
    latencyMs: { p50: +pct(sorted, 50).toFixed(1), p90: +pct(sorted, 90).toFixed(1), p99: +pct(sorted, 99).toFixed(1), max: +(sorted.at(-1) ?? NaN).toFixed(1) },
  });
  if (start) {
    Object.assign(out, {
      rssMb: { beforeSockets: +mb(start.rss), afterConnect: +mb(afterConnect.rss), peak: +mb(peakRss), endOfHold: +mb(holdEnd.rss), afterClose: +mb(end.rss), hwm: +mb(end.hwm) },
      serverCpuSeconds: { connect: +(afterConnect.cpu - start.cpu).toFixed(2), hold: +(holdEnd.cpu - holdStart.cpu).toFixed(2) },
      serverCpuPercentDuringHold: +((100 * (holdEnd.cpu - holdStart.cpu)) / holdSeconds).toFixed(1),
      serverThreads: holdEnd.threads,
    });
  }
  out.clientCpuPercentDuringHold = +((100 * (clientCpu.user + clientCpu.system)) / 1e6 / holdSeconds).toFixed(1);
  if (server.log) out.serverWarnings = server.log.filter((l) => / (WARN|ERROR) /.test(l)).slice(0, 10);
  if (refused.length) out.refusedExamples = refused.slice(0, 3);
  if (wrong.length) out.wrongExamples = wrong.slice(0, 3);
  if (short.length) out.shortExamples = short.slice(0, 3).map((l) => ({ subscriberId: l.subscriberId, expected: l.expected, received: l.received }));

  console.log(JSON.stringify({ ...out, timeline: undefined }, null, 2)); // the timeline was printed as it went
  if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, JSON.stringify(out, null, 2));
  const pass = connected === SOCKETS && refused.length === 0 && expected === seq && received === expected && wrong.length === 0 && countsOff.length === 0;
  console.log(pass ? "PASS: every socket connected and heard every event triggered for it, once, with its right counts"
    : "FAIL: see connected, triggersRefused, received, wrongEvents and socketsWithWrongUnreadCount above");
  return pass;
}

let pass = false;
try {
  pass = await main();
} catch (e) {
  console.error(e);
} finally {
  for (const l of listeners) l.close?.();
  await stopServer();
}
process.exit(pass ? 0 : 1);
