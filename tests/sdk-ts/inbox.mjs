// The Novu Inbox API (`POST /v1/inbox/session`, `/v1/inbox/*`) driven by the official headless client,
// `@novu/js` 3.19.2 (package.json), as a web page's `<Inbox/>` drives it: the session (application
// identifier, HMAC), the list and its filters and paging, the counts, every action on a notification and
// its effect on the lists and the counts, the same state seen with the API key, isolation between
// subscribers and environments, the subscriber's preferences, and sessions narrowed to a context (a tenant:
// lists, counts, actions and the socket of exactly that context, and its contextHash). The world (subscribers, workflows,
// triggers, the in-app integration) is set up raw with the API key. Reference: the Inbox protocol notes.
//
// @novu/js never throws: every method resolves `{data}` or `{error}` (a NovuError whose `originalError`
// carries the HTTP `status`), so each call goes through `ok` or `refused` below. The real-time groups open
// the client's socket (socket.io at `socketUrl`) and check what it hears; the topic group subscribes the
// subscriber to a topic from the Inbox.
//
// Environment: TIDINGS_URL, TIDINGS_KEY (environment A) and TIDINGS_KEY_B (a second environment's key),
// from tests/it/inbox_js.rs.

import { createHmac } from "node:crypto";

import { Novu } from "@novu/js";

import { CheckFailed, ISO_UTC, KEY, URL, attempt, check, eq, exchanges, finish, group, raw, rawOk, until } from "./lib.mjs";

const KEY_B = process.env.TIDINGS_KEY_B;
const RUN = Date.now().toString(36);
const SESSION_ERROR = "Failed to initialize session, please contact the support";

// Every exchange @novu/js makes (it calls the global fetch with its own headers) is recorded with those of
// lib.mjs, so a failure shows the last one.
const fetchOf = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const res = await fetchOf(input, init);
  if (init?.headers?.["Novu-Client-Version"]) {
    exchanges.push({ method: init.method ?? "GET", url: String(input), status: res.status, body: await res.clone().text() });
  }
  return res;
};

// ------------------------------------------------------------------------------------------- helpers

/** `Authorization` header values for `raw`. */
const apiKey = (key) => `ApiKey ${key}`;
const bearer = (token) => `Bearer ${token}`;

/** The subscriber hash the Inbox sends when the in-app integration has HMAC on. */
const hmac = (subscriberId, key = KEY) => createHmac("sha256", key).update(subscriberId).digest("hex");

/** The `data` of a resolved @novu/js call, which must not be an error. */
function ok(result, what) {
  const e = result?.error;
  if (e) throw new CheckFailed(`${what}: ${e.message}: ${e.originalError?.message ?? e.originalError}`);
  return result?.data;
}

/** The error of a resolved @novu/js call, which must be one whose HTTP status is `status`. */
function refused(result, status, what) {
  check(result?.error, `${what}: expected an error ${status}, got ${JSON.stringify(result?.data)?.slice(0, 300)}`);
  eq(result.error.originalError?.status, status, `${what}: status (${result.error.message})`);
  return result.error;
}

/** Runs a call that may throw (`preferences.list` rethrows the HTTP error) as one that resolves `{error}`. */
async function settle(call) {
  try {
    return await call();
  } catch (error) {
    return { error: { message: String(error?.message), originalError: error } };
  }
}

const clients = [];
let appA;

/** A @novu/js client of `subscriber` once its session resolved: `{novu, session}`, `session` being the
 * client's own `{data}` (the session answer) or `{error}`. Environment A and the right hash unless told. */
async function inbox(subscriber, { app = appA, hash = hmac(typeof subscriber === "string" ? subscriber : subscriber.subscriberId), context, contextHash } = {}) {
  const novu = new Novu({ applicationIdentifier: app, subscriber, subscriberHash: hash ?? undefined, context, contextHash, apiUrl: URL, socketUrl: URL, useCache: false });
  clients.push(novu);
  const session = await new Promise((resolve) => novu.on("session.initialize.resolved", resolve));
  return { novu, session };
}

/** `POST /v1/inbox/session` raw (no Authorization): `{status, json}`. */
const openSession = (applicationIdentifier, subscriberId, subscriberHash) =>
  raw("POST", "/v1/inbox/session", { applicationIdentifier, subscriberHash, subscriber: { subscriberId } }, null);

// Each in-app message the scenario creates has a label; lists are compared by labels.
const labels = new Map();
let sequence = 0;

/** Triggers `workflow` for `subscriberId` and waits for its in-app message: the message as the API key
 * lists it, plus `n` (the payload's number, unique in the run) and `label`. */
async function deliver(workflow, subscriberId, label, key = KEY, context = undefined) {
  const n = ++sequence;
  const transactionId = `${label}-${RUN}`;
  await rawOk("POST", "/v1/events/trigger", { name: workflow.workflowId, to: subscriberId, payload: { n }, transactionId, context }, 201, apiKey(key));
  const m = await until(`${label} delivered`, async () =>
    (await rawOk("GET", `/v1/messages?transactionId=${transactionId}&channel=in_app`, undefined, 200, apiKey(key))).data?.[0]);
  labels.set(m._id, label);
  await new Promise((r) => setTimeout(r, 3)); // the next message is created in a later millisecond (createdGte/Lte)
  return { ...m, n, label };
}

/** Triggers `workflow` for `subscriberId`, waits until the notification's jobs finished, and checks that no
 * in-app message was created; answers the jobs' statuses. */
async function withheld(workflow, subscriberId, label) {
  const transactionId = `${label}-${RUN}`;
  await rawOk("POST", "/v1/events/trigger", { name: workflow.workflowId, to: subscriberId, payload: { n: ++sequence }, transactionId }, 201);
  const done = new Set(["completed", "failed", "skipped", "canceled", "merged"]);
  const jobs = await until(`${label} runs`, async () => {
    const found = (await rawOk("GET", `/v1/notifications?transactionId=${transactionId}`)).data?.[0]?.jobs ?? [];
    return found.length > 0 && found.every((j) => done.has(j.status)) && found;
  });
  eq((await rawOk("GET", `/v1/messages?transactionId=${transactionId}`)).data, [], `${label}: no message`);
  return jobs.map((j) => j.status);
}

/** A subscriber's in-app messages as the API key lists them, by id. */
async function keyView(subscriberId) {
  const page = await rawOk("GET", `/v1/messages?subscriberId=${subscriberId}&channel=in_app&limit=100`);
  return new Map(page.data.map((m) => [m._id, m]));
}

/** The labels of a list's notifications (the id when it has none). */
const named = (list) => list.notifications.map((n) => labels.get(n.id) ?? n.id);

/** `novu.notifications.list(args)`: the labels it answers, and the list. */
async function listed(novu, args, what) {
  const list = ok(await novu.notifications.list(args), what);
  return { names: named(list), list };
}

/** The notification `m` (a delivered message) as `novu` lists it with `args`. */
async function itemOf(novu, m, args = {}) {
  const { list } = await listed(novu, { limit: 100, ...args }, `list to find ${m.label}`);
  const n = list.notifications.find((x) => x.id === m._id);
  check(n, `${m.label} is not listed with ${JSON.stringify(args)}: ${named(list)}`);
  return n;
}

/** Epoch milliseconds of a message's `createdAt`. */
const ms = (m) => Date.parse(m.createdAt);

/** Equality blind to the order of objects' keys (the server re-serialises an echoed filter). */
const canonical = (v) => v === undefined ? v :
  JSON.parse(JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x)
    ? Object.keys(x).sort().reduce((o, k) => ({ ...o, [k]: x[k] }), {})
    : x)));

// ------------------------------------------------------------------------------------------- the world

/** The workflows of environment A: one in-app step each, with tags, a severity, actions and data. */
const W = {
  news: { workflowId: "inbox-news", name: "News", tags: ["news"], severity: "high", kind: "news" },
  billing: { workflowId: "inbox-billing", name: "Billing", tags: ["billing", "account"], severity: "medium", kind: "billing" },
  social: { workflowId: "inbox-social", name: "Social", tags: ["social"], severity: "low", kind: "social" },
  plain: { workflowId: "inbox-plain", name: "Plain" },
  critical: { workflowId: "inbox-critical", name: "Security", tags: ["security"], severity: "high", critical: true, kind: "security" },
};

function workflowBody(w) {
  const controlValues = { body: `${w.name} body {{payload.n}}` };
  if (w.kind) {
    Object.assign(controlValues, {
      subject: `${w.name} {{payload.n}}`,
      primaryAction: { label: "Open {{payload.n}}", redirect: { url: `https://example.com/${w.kind}/{{payload.n}}` } },
      secondaryAction: { label: "Later" },
      data: { kind: w.kind, ref: "r{{payload.n}}" },
    });
  }
  return {
    name: w.name, workflowId: w.workflowId, active: true,
    ...(w.tags && { tags: w.tags }), ...(w.severity && { severity: w.severity }), ...(w.critical && { critical: true }),
    steps: [{ name: "inbox", stepId: "inbox", type: "in_app", controlValues }],
  };
}

const newSubscriber = (subscriberId, firstName, key = KEY) =>
  rawOk("POST", "/v2/subscribers", { subscriberId, firstName }, 201, apiKey(key));

/** Creates `subscriberId` and delivers, in order, one message a `[label, workflow]` of `plan`: answers them by
 * label, and the subscriber as `subscriber` (a failure is recorded and what was delivered is answered). */
async function mailbox(subscriberId, firstName, plan) {
  const out = { subscriber: await newSubscriber(subscriberId, firstName) };
  await attempt(`messages for ${subscriberId}`, async () => {
    for (const [label, w] of plan) out[label] = await deliver(w, subscriberId, label);
  });
  return out;
}

// ------------------------------------------------------------------------------------------- groups

async function sessionGroups() {
  const me = await rawOk("GET", "/v1/environments/me");
  appA = me.identifier;
  check(typeof appA === "string" && appA.length > 0, `environment A identifier: ${JSON.stringify(me)}`);
  const S = await mailbox("inbox-ann", "Ann", [["S1", W.news], ["S2", W.news], ["S3", W.billing], ["S4", W.plain]]);

  await group("session: no in-app integration: a session opens without a hash, its unread counts", async () => {
    eq((await rawOk("GET", "/v1/integrations")).filter((i) => i.channel === "in_app"), [], "no in-app integration yet");
    const { novu, session } = await inbox("inbox-ann", { hash: null });
    const data = ok(session, "session without a hash");
    check(typeof data.token === "string" && data.token.length > 0, `token: ${JSON.stringify(data)}`);
    eq(named(ok(await novu.notifications.list(), "list")), ["S4", "S3", "S2", "S1"], "list");
    const r = await openSession(appA, "inbox-ann");
    eq(r.status, 201, `raw session: ${r.text.slice(0, 300)}`);
    const s = r.json?.data ?? {};
    eq(canonical([s.totalUnreadCount, s.unreadCount]), [4, { severity: { high: 2, low: 0, medium: 1, none: 1 }, total: 4 }], "raw session: unread counts");
    eq([s.removeNovuBranding, s.isDevelopmentMode, s.applicationIdentifier], [true, me.name.toLowerCase() !== "production", appA],
      "raw session: removeNovuBranding, isDevelopmentMode (environment A is Development), applicationIdentifier");
    check(Number.isInteger(s.maxSnoozeDurationHours) && s.maxSnoozeDurationHours >= 0, `maxSnoozeDurationHours: ${s.maxSnoozeDurationHours}`);
    check(typeof s.token === "string" && s.token.length > 0, `raw session: token ${s.token}`);
    ok(await novu.notifications.read({ notificationId: S.S1._id }), "read S1");
    const again = (await openSession(appA, "inbox-ann")).json?.data;
    eq(canonical([again?.totalUnreadCount, again?.unreadCount]), [3, { severity: { high: 1, low: 0, medium: 1, none: 1 }, total: 3 }],
      "after reading S1");
  });

  await group("session: an unknown applicationIdentifier: 400, and every call resolves {error}", async () => {
    const r = await openSession("no-such-app0", "inbox-ann");
    eq([r.status, r.json?.message], [400, "Please provide a valid application identifier"], "raw session");
    const { novu, session } = await inbox("inbox-ann", { app: "no-such-app0" });
    eq(session.error?.status, 400, `the client's session: ${session.error?.message}`);
    for (const [what, call] of [
      ["list", () => novu.notifications.list()],
      ["count", () => novu.notifications.count({ read: false })],
      ["read", () => novu.notifications.read({ notificationId: S.S2?._id ?? "x" })],
      ["readAll", () => novu.notifications.readAll()],
      ["preferences.list", () => novu.preferences.list()],
    ]) {
      const out = await settle(call);
      eq([out.error?.message, out.error?.originalError?.status], [SESSION_ERROR, 400], `${what} after a failed session`);
    }
  });

  await group("session: HMAC on: no hash or a wrong one 400, the right one opens", async () => {
    const integration = await rawOk("POST", "/v1/integrations", { providerId: "novu", channel: "in_app", credentials: { hmac: true }, active: true }, 201);
    eq([integration.channel, integration.active], ["in_app", true], "the in-app integration");
    const wrong = [["no hash", undefined], ["a wrong hash", hmac("someone-else")]];
    if (KEY_B) wrong.push(["a hash with another environment's key", hmac("inbox-ann", KEY_B)]);
    for (const [what, hash] of wrong) {
      const r = await openSession(appA, "inbox-ann", hash);
      eq([r.status, r.json?.message], [400, "Please provide a valid HMAC hash"], `raw session with ${what}`);
    }
    for (const hash of [null, "0".repeat(64)]) {
      const { novu, session } = await inbox("inbox-ann", { hash });
      eq(session.error?.status, 400, `client session with hash ${hash}`);
      const out = await novu.notifications.list();
      eq([out.error?.message, out.error?.originalError?.status], [SESSION_ERROR, 400], `list with hash ${hash}`);
    }
    const r = await openSession(appA, "inbox-ann", hmac("inbox-ann"));
    eq([r.status, r.json?.data?.unreadCount?.total], [201, 3], "raw session with the right hash");
    const { novu, session } = await inbox("inbox-ann");
    ok(session, "client session with the right hash");
    eq(named(ok(await novu.notifications.list(), "list")), ["S4", "S3", "S2", "S1"], "list with the right hash");
  });

  await group("session: upserts the subscriber it names", async () => {
    eq((await raw("GET", "/v2/subscribers/inbox-newcomer")).status, 404, "unknown before");
    const { novu, session } = await inbox({ subscriberId: "inbox-newcomer", firstName: "Nia", email: "nia@example.com" });
    ok(session, "session of a new subscriber");
    const list = ok(await novu.notifications.list(), "list");
    eq([list.notifications.length, list.hasMore], [0, false], "an empty list");
    eq(ok(await novu.notifications.count({ read: false }), "count").count, 0, "nothing unread");
    const s = await rawOk("GET", "/v2/subscribers/inbox-newcomer");
    eq([s.subscriberId, s.firstName, s.email], ["inbox-newcomer", "Nia", "nia@example.com"], "created by the session, with its profile");
  });
}

async function listGroups() {
  const L = await mailbox("inbox-lister", "Lia", [["L1", W.news], ["L2", W.billing], ["L3", W.social], ["L4", W.plain], ["L5", W.news]]);
  const { novu } = await inbox("inbox-lister");

  await group("list: newest first, limit, hasMore, after (the last id), offset", async () => {
    const p1 = await listed(novu, { limit: 2 }, "page 1");
    eq([p1.names, p1.list.hasMore], [["L5", "L4"], true], "page 1");
    const p2 = await listed(novu, { limit: 2, after: p1.list.notifications.at(-1).id }, "page 2");
    eq([p2.names, p2.list.hasMore], [["L3", "L2"], true], "page 2");
    const p3 = await listed(novu, { limit: 2, after: p2.list.notifications.at(-1).id }, "page 3");
    eq([p3.names, p3.list.hasMore], [["L1"], false], "page 3");
    const all = await listed(novu, { limit: 5 }, "limit 5");
    eq([all.names, all.list.hasMore], [["L5", "L4", "L3", "L2", "L1"], false], "limit = count: no more");
    eq((await listed(novu, { limit: 4 }, "limit 4")).list.hasMore, true, "limit 4 of 5: more");
    const dflt = await listed(novu, undefined, "default limit");
    eq([dflt.names.length, dflt.list.hasMore], [5, false], "default limit (10)");
    eq((await listed(novu, { limit: 2, offset: 2 }, "offset")).names, ["L3", "L2"], "offset 2");
  });

  await group("list: mapped fields (body, subject, flags, tags, data, severity, workflow, to, actions)", async () => {
    const keyed = await keyView("inbox-lister");
    const n = await itemOf(novu, L.L5);
    const m = keyed.get(L.L5._id);
    const x = L.L5.n;
    eq([n.id, n.transactionId, n.createdAt], [m._id, m.transactionId, m.createdAt], "id, transactionId, createdAt as the API key sees them");
    check(ISO_UTC.test(n.createdAt), `createdAt ${n.createdAt}`);
    eq([n.body, n.subject, n.channelType], [`News body ${x}`, `News ${x}`, "in_app"], "body, subject, channelType");
    eq([n.isRead, n.isSeen, n.isArchived, n.isSnoozed], [false, false, false, false], "flags");
    eq([n.readAt ?? null, n.archivedAt ?? null, n.firstSeenAt ?? null], [null, null, null], "readAt, archivedAt, firstSeenAt");
    eq([n.tags, canonical(n.data), n.severity], [["news"], { kind: "news", ref: `r${x}` }, "high"], "tags, data, severity");
    eq([n.workflow?.id, n.workflow?.identifier, n.workflow?.name, n.workflow?.critical, n.workflow?.tags, n.workflow?.severity],
      [W.news.id, "inbox-news", "News", false, ["news"], "high"], "workflow");
    eq([n.primaryAction?.label, n.primaryAction?.isCompleted, n.primaryAction?.redirect?.url],
      [`Open ${x}`, false, `https://example.com/news/${x}`], "primaryAction");
    eq([n.secondaryAction?.label, n.secondaryAction?.isCompleted], ["Later", false], "secondaryAction");
    const b = await itemOf(novu, L.L2);
    eq([b.tags, b.severity, b.workflow?.identifier, b.data?.kind], [["billing", "account"], "medium", "inbox-billing", "billing"], "L2");
    const p = await itemOf(novu, L.L4);
    eq([p.body, p.subject ?? null, p.tags ?? [], p.severity, p.workflow?.severity], [`Plain body ${L.L4.n}`, null, [], "none", "none"], "L4 (plain)");
    eq([p.primaryAction ?? null, p.secondaryAction ?? null], [null, null], "L4: no actions");
    eq([n.to?.id, n.to?.subscriberId, n.to?.firstName], [L.subscriber._id, "inbox-lister", "Lia"], "to (the subscriber's profile)");
  });

  await group("list: filters tags, severity, data, createdGte/createdLte", async () => {
    for (const [args, expected] of [
      [{ tags: ["news"] }, ["L5", "L1"]],
      [{ tags: ["news", "social"] }, ["L5", "L3", "L1"]],
      [{ tags: { or: ["social"] } }, ["L3"]],
      [{ tags: { and: [{ or: ["billing"] }, { or: ["account"] }] } }, ["L2"]],
      [{ tags: { and: [{ or: ["billing"] }, { or: ["news"] }] } }, []],
      [{ severity: "high" }, ["L5", "L1"]],
      [{ severity: ["medium", "low"] }, ["L3", "L2"]],
      [{ severity: "none" }, ["L4"]],
      [{ data: { kind: "news" } }, ["L5", "L1"]],
      [{ data: { kind: ["billing", "social"] } }, ["L3", "L2"]],
      [{ data: { kind: "news", ref: `r${L.L5?.n}` } }, ["L5"]],
      [{ createdGte: ms(L.L3) }, ["L5", "L4", "L3"]],
      [{ createdLte: ms(L.L2) }, ["L2", "L1"]],
      [{ createdGte: ms(L.L2), createdLte: ms(L.L4) }, ["L4", "L3", "L2"]],
      [{ tags: ["news"], createdGte: ms(L.L2) }, ["L5"]],
    ]) {
      eq((await listed(novu, { limit: 50, ...args }, JSON.stringify(args))).names, expected, JSON.stringify(args));
    }
  });

  await group("list: filters read, seen, archived, snoozed (and unread + archived: 400)", async () => {
    const items = Object.fromEntries((await listed(novu, { limit: 50 }, "list")).list.notifications.map((n) => [labels.get(n.id), n]));
    ok(await items.L1.read(), "read L1");
    ok(await items.L2.seen(), "seen L2");
    ok(await items.L3.archive(), "archive L3");
    ok(await items.L4.snooze(new Date(Date.now() + 3600_000).toISOString()), "snooze L4");
    for (const [args, expected] of [
      [{ read: false, snoozed: false }, ["L5", "L2"]],
      [{ read: true, archived: false }, ["L1"]],
      [{ archived: true }, ["L3"]],
      [{ archived: false, snoozed: false }, ["L5", "L2", "L1"]],
      [{ snoozed: true }, ["L4"]],
      [{ seen: false, snoozed: false }, ["L5"]],
      [{ seen: true }, ["L3", "L2", "L1"]],
      [{ read: false, snoozed: false, tags: ["billing"] }, ["L2"]],
    ]) {
      eq((await listed(novu, { limit: 50, ...args }, JSON.stringify(args))).names, expected, JSON.stringify(args));
    }
    refused(await novu.notifications.list({ read: false, archived: true }), 400, "unread and archived");
  });
}

async function countGroup() {
  const C = await mailbox("inbox-counter", "Cal", [["C1", W.news], ["C2", W.news], ["C3", W.billing], ["C4", W.social], ["C5", W.plain]]);
  await group("count: several filters, each count right and its filter echoed", async () => {
    const { novu } = await inbox("inbox-counter");
    ok(await novu.notifications.read({ notificationId: C.C1._id }), "read C1");
    ok(await novu.notifications.archive({ notificationId: C.C3._id }), "archive C3");
    ok(await novu.notifications.seen({ notification: await itemOf(novu, C.C4) }), "seen C4");
    const filters = [
      { read: false }, { seen: false }, { archived: true }, { severity: "high" }, { read: false, severity: "high" },
      { tags: ["news"] }, { data: { kind: "billing" } }, { read: false, archived: false, snoozed: false, severity: "none" },
    ];
    const { counts } = ok(await novu.notifications.count({ filters }), "count");
    eq(counts.map((c) => c.count), [3, 2, 1, 2, 1, 2, 1, 1], "counts");
    eq(canonical(counts.map((c) => c.filter)), canonical(filters), "each filter echoed");
    const one = ok(await novu.notifications.count({ read: false }), "count one");
    eq([one.count, canonical(one.filter)], [3, { read: false }], "count({read:false})");
  });
}

async function actionGroups() {
  const A = await mailbox("inbox-actor", "Abe", [["A1", W.news], ["A2", W.billing], ["A3", W.social], ["A4", W.news], ["A5", W.plain]]);
  const { novu } = await inbox("inbox-actor");
  const unread = async () => ok(await novu.notifications.count({ read: false, snoozed: false }), "count unread").count;

  await group("actions: read (also seen), unread", async () => {
    const r = ok(await novu.notifications.read({ notificationId: A.A1._id }), "read A1");
    eq([r.id, r.isRead, r.isSeen, r.isArchived], [A.A1._id, true, true, false], "read A1: the answer");
    check(ISO_UTC.test(r.readAt ?? ""), `read A1: readAt ${r.readAt}`);
    eq((await listed(novu, { read: true }, "read list")).names, ["A1"], "read: true");
    eq(await unread(), 4, "unread count");
    const u = ok(await (await itemOf(novu, A.A1)).unread(), "unread A1");
    eq([u.isRead, u.isSeen, u.isArchived, u.readAt ?? null], [false, true, false, null], "unread A1: the answer");
    eq((await listed(novu, { read: true }, "read list")).names, [], "read: true after unread");
    eq(await unread(), 5, "unread count after unread");
  });

  await group("actions: seen (one), seenAll (ids, then all)", async () => {
    const a2 = await itemOf(novu, A.A2);
    eq(ok(await a2.seen(), "seen A2").isSeen, true, "seen A2: the answer");
    const seen = await itemOf(novu, A.A2, { seen: true });
    eq([seen.isSeen, seen.isRead], [true, false], "A2 listed as seen, still unread");
    check(ISO_UTC.test(seen.firstSeenAt ?? ""), `A2 firstSeenAt ${seen.firstSeenAt}`);
    ok(await novu.notifications.seen({ notification: await itemOf(novu, A.A3) }), "notifications.seen A3");
    ok(await novu.notifications.seenAll({ notificationIds: [A.A4._id] }), "seenAll A4");
    eq((await listed(novu, { seen: false }, "unseen")).names, ["A5"], "unseen after seen and seenAll by ids");
    ok(await novu.notifications.seenAll(), "seenAll");
    eq(ok(await novu.notifications.count({ seen: false }), "count unseen").count, 0, "unseen count after seenAll");
    eq(await unread(), 5, "seen does not read");
  });

  await group("actions: archive (also read), unarchive; unread unarchives", async () => {
    const a = ok(await novu.notifications.archive({ notificationId: A.A2._id }), "archive A2");
    eq([a.isArchived, a.isRead, a.isSeen], [true, true, true], "archive A2: the answer");
    check(ISO_UTC.test(a.archivedAt ?? ""), `archive A2: archivedAt ${a.archivedAt}`);
    eq((await listed(novu, { archived: true }, "archived")).names, ["A2"], "archived: true");
    check(!(await listed(novu, { archived: false }, "not archived")).names.includes("A2"), "A2 left the archived: false list");
    eq(await unread(), 4, "unread count after archive");
    const u = ok(await (await itemOf(novu, A.A2, { archived: true })).unarchive(), "unarchive A2");
    eq([u.isArchived, u.isRead, u.archivedAt ?? null], [false, true, null], "unarchive A2: the answer");
    eq((await listed(novu, { archived: true }, "archived")).names, [], "archived after unarchive");
    ok(await novu.notifications.archive({ notificationId: A.A3._id }), "archive A3");
    const back = ok(await novu.notifications.unread({ notificationId: A.A3._id }), "unread A3");
    eq([back.isArchived, back.isRead], [false, false], "unread of an archived one unarchives it");
    eq((await listed(novu, { archived: true }, "archived")).names, [], "nothing archived");
    eq(await unread(), 4, "unread count: A2 read");
  });

  await group("actions: snooze (a minute ahead at least), unsnooze", async () => {
    const until = new Date(Date.now() + 3600_000).toISOString();
    const s = ok(await novu.notifications.snooze({ notificationId: A.A4._id, snoozeUntil: until }), "snooze A4");
    eq(s.isSnoozed, true, "snooze A4: isSnoozed");
    check(Math.abs(Date.parse(s.snoozedUntil) - Date.parse(until)) < 1000, `snoozedUntil ${s.snoozedUntil}, asked ${until}`);
    check(!(await listed(novu, { snoozed: false }, "not snoozed")).names.includes("A4"), "A4 left the snoozed: false list");
    const snoozed = await listed(novu, { snoozed: true }, "snoozed");
    eq([snoozed.names, snoozed.list.notifications[0]?.isSnoozed], [["A4"], true], "snoozed: true");
    eq(await unread(), 3, "unread (not snoozed) count");
    refused(await novu.notifications.snooze({ notificationId: A.A5._id, snoozeUntil: new Date(Date.now() + 10_000).toISOString() }), 400,
      "snooze 10 s ahead");
    const u = ok(await (await itemOf(novu, A.A4, { snoozed: true })).unsnooze(), "unsnooze A4");
    eq([u.isSnoozed, u.snoozedUntil ?? null], [false, null], "unsnooze A4: the answer");
    eq((await listed(novu, { snoozed: true }, "snoozed")).names, [], "snoozed after unsnooze");
    eq(await unread(), 4, "unread count after unsnooze");
  });

  await group("actions: completePrimary, revertPrimary, completeSecondary", async () => {
    const c = ok(await novu.notifications.completePrimary({ notificationId: A.A1._id }), "completePrimary A1");
    eq([c.primaryAction?.isCompleted, c.secondaryAction?.isCompleted], [true, false], "completePrimary: the answer");
    eq((await itemOf(novu, A.A1)).primaryAction?.isCompleted, true, "listed completed");
    const r = ok(await (await itemOf(novu, A.A1)).revertPrimary(), "revertPrimary A1");
    eq([r.primaryAction?.isCompleted, r.secondaryAction?.isCompleted], [false, false], "revertPrimary: the answer");
    const s = ok(await (await itemOf(novu, A.A1)).completeSecondary(), "completeSecondary A1");
    eq([s.primaryAction?.isCompleted, s.secondaryAction?.isCompleted], [false, true], "completeSecondary: the answer");
    const listedA1 = await itemOf(novu, A.A1);
    eq([listedA1.primaryAction?.isCompleted, listedA1.secondaryAction?.isCompleted, listedA1.primaryAction?.label],
      [false, true, `Open ${A.A1.n}`], "listed after completeSecondary");
  });

  await group("actions: delete", async () => {
    eq(ok(await novu.notifications.delete({ notificationId: A.A3._id }), "delete A3"), undefined, "delete: no data");
    const left = [...(await listed(novu, { archived: false }, "list")).names, ...(await listed(novu, { archived: true }, "list")).names];
    eq(left.sort(), ["A1", "A2", "A4", "A5"], "A3 left every list");
    check(!(await keyView("inbox-actor")).has(A.A3._id), "A3 gone for the API key too");
    refused(await novu.notifications.read({ notificationId: A.A3._id }), 404, "read a deleted one");
    refused(await novu.notifications.delete({ notificationId: A.A3._id }), 404, "delete a deleted one");
    eq(await unread(), 3, "unread count after delete");
  });

  const B = await mailbox("inbox-bulk", "Bea", [["B1", W.news], ["B2", W.news], ["B3", W.billing], ["B4", W.social], ["B5", W.plain]]);
  await group("actions: readAll, archiveAllRead, archiveAll, deleteAll (by tags, by data, all)", async () => {
    const { novu: bulk } = await inbox("inbox-bulk");
    const names = async (args) => (await listed(bulk, { limit: 50, ...args }, JSON.stringify(args))).names;
    const unreadCount = async () => ok(await bulk.notifications.count({ read: false }), "count").count;
    ok(await bulk.notifications.readAll({ tags: ["news"] }), "readAll news");
    eq([await names({ read: true }), await unreadCount()], [["B2", "B1"], 3], "readAll by tags");
    ok(await bulk.notifications.archiveAllRead(), "archiveAllRead");
    eq([await names({ archived: true }), await names({ archived: false })], [["B2", "B1"], ["B5", "B4", "B3"]], "archiveAllRead archives the read ones");
    ok(await bulk.notifications.archiveAll({ data: { kind: "billing" } }), "archiveAll by data");
    eq(await names({ archived: true }), ["B3", "B2", "B1"], "archiveAll by data");
    eq((await itemOf(bulk, B.B3, { archived: true })).isRead, true, "archiveAll also reads");
    ok(await bulk.notifications.readAll(), "readAll");
    eq(await unreadCount(), 0, "readAll");
    ok(await bulk.notifications.deleteAll({ tags: ["social"] }), "deleteAll social");
    eq(await names({ archived: false }), ["B5"], "deleteAll by tags");
    ok(await bulk.notifications.archiveAll(), "archiveAll");
    eq([await names({ archived: false }), await names({ archived: true })], [[], ["B5", "B3", "B2", "B1"]], "archiveAll");
    ok(await bulk.notifications.deleteAll(), "deleteAll");
    eq([await names({ archived: false }), await names({ archived: true })], [[], []], "deleteAll");
    eq((await keyView("inbox-bulk")).size, 0, "the API key lists none either");
  });
}

async function apiKeyGroups() {
  const K = await mailbox("inbox-shared", "Sam", [["K1", W.news], ["K2", W.billing], ["K3", W.social]]);
  const { novu } = await inbox("inbox-shared");

  await group("api key: sees what the Inbox did (read, seen, archived, completed)", async () => {
    ok(await novu.notifications.read({ notificationId: K.K1._id }), "read K1");
    ok(await novu.notifications.archive({ notificationId: K.K2._id }), "archive K2");
    ok(await (await itemOf(novu, K.K3)).seen(), "seen K3");
    ok(await novu.notifications.completePrimary({ notificationId: K.K3._id }), "completePrimary K3");
    const keyed = await keyView("inbox-shared");
    eq(["K1", "K2", "K3"].map((k) => [k, keyed.get(K[k]._id)?.read, keyed.get(K[k]._id)?.seen]),
      [["K1", true, true], ["K2", true, true], ["K3", false, true]], "GET /v1/messages: read, seen");
    const feed = await rawOk("GET", "/v1/subscribers/inbox-shared/notifications/feed?limit=100");
    const byId = new Map(feed.data.map((m) => [m._id, m]));
    eq(["K1", "K2", "K3"].map((k) => [k, byId.get(K[k]._id)?.archived]), [["K1", false], ["K2", true], ["K3", false]],
      "the feed: archived");
    const cta = byId.get(K.K3._id)?.cta?.action;
    eq([cta?.status, cta?.result?.type], ["done", "primary"], "the feed: K3's primary action done");
    eq((await rawOk("GET", "/v1/subscribers/inbox-shared/notifications/unseen")).count, 0, "unseen count with the key");
  });

  await group("api key: a mark or a delete with the key shows in the Inbox", async () => {
    await rawOk("POST", "/v1/subscribers/inbox-shared/messages/mark-as", { messageId: K.K3._id, markAs: "read" }, 201);
    eq((await itemOf(novu, K.K3)).isRead, true, "K3 read with the key");
    await rawOk("POST", "/v1/subscribers/inbox-shared/messages/mark-as", { messageId: K.K1._id, markAs: "unread" }, 201);
    eq((await itemOf(novu, K.K1)).isRead, false, "K1 unread with the key");
    await rawOk("POST", "/v1/subscribers/inbox-shared/messages/mark-as", { messageId: K.K3._id, markAs: "unseen" }, 201);
    eq((await itemOf(novu, K.K3)).isSeen, false, "K3 unseen with the key");
    eq(ok(await novu.notifications.count({ read: false }), "count").count, 1, "unread count: K1");
    await rawOk("DELETE", `/v1/messages/${K.K2._id}`);
    eq((await listed(novu, { archived: true }, "archived")).names, [], "K2 deleted with the key");
  });
}

async function isolationGroups() {
  const I = { ...(await mailbox("inbox-iso-a", "Ida", [["I1", W.news]])), ...(await mailbox("inbox-iso-b", "Ivo", [["I2", W.billing]])) };
  const { novu: a } = await inbox("inbox-iso-a");
  const untouched = async (what) => {
    const n = await itemOf(a, I.I1);
    eq([n.isRead, n.isSeen, n.isArchived, n.isSnoozed, n.primaryAction?.isCompleted], [false, false, false, false, false], `I1 untouched ${what}`);
  };
  const patches = (id) => [
    ["PATCH", `/v1/inbox/notifications/${id}/read`], ["PATCH", `/v1/inbox/notifications/${id}/unread`],
    ["PATCH", `/v1/inbox/notifications/${id}/archive`], ["PATCH", `/v1/inbox/notifications/${id}/unarchive`],
    ["PATCH", `/v1/inbox/notifications/${id}/snooze`, { snoozeUntil: new Date(Date.now() + 3600_000).toISOString() }],
    ["PATCH", `/v1/inbox/notifications/${id}/unsnooze`],
    ["PATCH", `/v1/inbox/notifications/${id}/complete`, { actionType: "primary" }],
    ["PATCH", `/v1/inbox/notifications/${id}/revert`, { actionType: "primary" }],
    ["DELETE", `/v1/inbox/notifications/${id}/delete`],
  ];

  await group("isolation: another subscriber cannot list, mark or delete the first one's notifications (404)", async () => {
    const { novu: b, session } = await inbox("inbox-iso-b");
    const token = ok(session, "session of inbox-iso-b").token;
    eq([...(await listed(b, { archived: false }, "b")).names, ...(await listed(b, { archived: true }, "b")).names], ["I2"], "b's lists");
    const id = I.I1._id;
    for (const [what, call] of [
      ["read", () => b.notifications.read({ notificationId: id })],
      ["unread", () => b.notifications.unread({ notificationId: id })],
      ["archive", () => b.notifications.archive({ notificationId: id })],
      ["unarchive", () => b.notifications.unarchive({ notificationId: id })],
      ["snooze", () => b.notifications.snooze({ notificationId: id, snoozeUntil: new Date(Date.now() + 3600_000).toISOString() })],
      ["unsnooze", () => b.notifications.unsnooze({ notificationId: id })],
      ["completePrimary", () => b.notifications.completePrimary({ notificationId: id })],
      ["revertPrimary", () => b.notifications.revertPrimary({ notificationId: id })],
      ["completeSecondary", () => b.notifications.completeSecondary({ notificationId: id })],
      ["delete", () => b.notifications.delete({ notificationId: id })],
    ]) {
      refused(await call(), 404, `b ${what} a's notification`);
    }
    for (const [method, path, body] of patches(id)) {
      eq((await raw(method, path, body, bearer(token))).status, 404, `raw ${method} ${path} with b's token`);
    }
    await raw("POST", "/v1/inbox/notifications/seen", { notificationIds: [id] }, bearer(token));
    ok(await b.notifications.readAll(), "b readAll");
    ok(await b.notifications.archiveAll(), "b archiveAll");
    await untouched("by b");
    ok(await b.notifications.deleteAll(), "b deleteAll");
    eq((await listed(a, {}, "a")).names, ["I1"], "a's list after b's deleteAll");
  });

  await group("isolation: another environment with the same subscriberId sees none and acts on none", async () => {
    check(KEY_B, "TIDINGS_KEY_B is set");
    const meB = await rawOk("GET", "/v1/environments/me", undefined, 200, apiKey(KEY_B));
    check(meB.identifier && meB.identifier !== appA, `environment B's identifier ${meB.identifier}, A's ${appA}`);
    const wB = { workflowId: "inbox-b-only", name: "Elsewhere" };
    await rawOk("POST", "/v2/workflows", workflowBody(wB), 201, apiKey(KEY_B));
    await newSubscriber("inbox-iso-a", "Ida B", KEY_B);
    const E1 = await deliver(wB, "inbox-iso-a", "E1", KEY_B);
    // B is named Production: its sessions need the HMAC, keyed with B's key.
    const { novu: b, session } = await inbox("inbox-iso-a", { app: meB.identifier, hash: hmac("inbox-iso-a", KEY_B) });
    const token = ok(session, "session in environment B").token;
    eq([session.data.isDevelopmentMode, session.data.unreadCount?.total], [meB.name.toLowerCase() !== "production", 1],
      `session in B (${meB.name}): isDevelopmentMode, unread`);
    eq((await listed(b, { limit: 50 }, "B's list")).names, ["E1"], "B lists only its own");
    refused(await b.notifications.read({ notificationId: I.I1._id }), 404, "B reads A's notification");
    refused(await b.notifications.delete({ notificationId: I.I1._id }), 404, "B deletes A's notification");
    for (const [method, path, body] of patches(I.I1._id)) {
      eq((await raw(method, path, body, bearer(token))).status, 404, `raw ${method} ${path} with B's token`);
    }
    ok(await b.notifications.readAll(), "B readAll");
    await untouched("by environment B");
    refused(await a.notifications.read({ notificationId: E1._id }), 404, "A reads B's notification");
    check(!(await listed(a, { limit: 50 }, "a")).names.includes("E1"), "A does not list B's");
  });

  await group("isolation: a garbage or missing Bearer token: 401 (JSON)", async () => {
    const { session } = await inbox("inbox-iso-a");
    const token = ok(session, "session").token;
    for (const [what, auth] of [["garbage", "Bearer garbage"], ["none", null], ["a changed token", bearer(`${token.slice(0, -2)}xx`)],
      ["the API key", apiKey(KEY)]]) {
      for (const [method, path, body] of [["GET", "/v1/inbox/notifications"], ["GET", "/v1/inbox/notifications/count?filters=%5B%5D"],
        ["PATCH", `/v1/inbox/notifications/${I.I1._id}/read`], ["POST", "/v1/inbox/notifications/read", {}], ["GET", "/v1/inbox/preferences"]]) {
        const r = await raw(method, path, body, auth);
        eq(r.status, 401, `${method} ${path} with ${what}`);
        check(typeof r.json?.message === "string", `${method} ${path} with ${what}: a JSON body with a message: ${r.text.slice(0, 200)}`);
      }
    }
    await untouched("by bad tokens");
  });
}

async function preferenceGroups() {
  await newSubscriber("inbox-pref", "Pia");
  const { novu } = await inbox("inbox-pref");
  const prefs = async (args) => ok(await settle(() => novu.preferences.list(args)), `preferences.list ${JSON.stringify(args ?? {})}`);
  const template = (list, w) => list.find((p) => p.level === "template" && p.workflow?.identifier === w.workflowId);
  const keyPrefs = async () => rawOk("GET", "/v2/subscribers/inbox-pref/preferences");
  const keyOf = (kp, w) => kp.workflows?.find((x) => x.workflow?.identifier === w.workflowId);

  await group("preferences: list: the global one first, then one per non-critical workflow", async () => {
    const list = await prefs();
    eq([list[0]?.level, list[0]?.enabled, list[0]?.channels?.in_app, list[0]?.workflow ?? null], ["global", true, true, null], "global");
    eq(list.slice(1).map((p) => [p.level, p.workflow?.identifier]),
      [W.news, W.billing, W.social, W.plain].map((w) => ["template", w.workflowId]), "one per non-critical workflow, oldest first");
    for (const w of [W.news, W.billing, W.social, W.plain]) {
      const p = template(list, w);
      eq([p.workflow.id, p.workflow.name, p.workflow.critical, p.enabled, p.channels?.in_app], [w.id, w.name, false, true, true], w.workflowId);
    }
    eq((await prefs({ criticality: "critical" })).filter((p) => p.level === "template").map((p) => p.workflow?.identifier),
      ["inbox-critical"], "criticality critical");
    eq((await prefs({ tags: ["news"] })).filter((p) => p.level === "template").map((p) => p.workflow?.identifier),
      ["inbox-news"], "tags news");
  });

  await group("preferences: a workflow's in_app off: its next trigger makes no in-app message, another's does", async () => {
    const social = template(await prefs(), W.social);
    const out = ok(await social.update({ channels: { in_app: false } }), "update social");
    eq([out.level, out.workflow?.identifier, out.channels?.in_app, out.enabled], ["template", "inbox-social", false, true], "the answer");
    eq(template(await prefs(), W.social)?.channels?.in_app, false, "listed");
    const kp = await keyPrefs();
    eq([keyOf(kp, W.social)?.channels?.in_app, keyOf(kp, W.news)?.channels?.in_app], [false, true], "GET /v2/subscribers/:id/preferences");
    eq(await withheld(W.social, "inbox-pref", "P1"), ["skipped"], "social's in-app step skipped");
    await deliver(W.news, "inbox-pref", "P2");
    eq((await listed(novu, { limit: 50 }, "list")).names, ["P2"], "only news reached the Inbox");
  });

  await group("preferences: global in_app off holds back every workflow's in-app message, on again lets them through", async () => {
    const global = (await prefs())[0];
    const out = ok(await global.update({ channels: { in_app: false } }), "update global");
    eq([out.level, out.channels?.in_app], ["global", false], "the answer");
    eq((await prefs())[0]?.channels?.in_app, false, "listed");
    eq((await keyPrefs()).global?.channels?.in_app, false, "GET /v2/subscribers/:id/preferences: global");
    eq(await withheld(W.news, "inbox-pref", "P3"), ["skipped"], "news held back by the global preference");
    ok(await (await prefs())[0].update({ channels: { in_app: true } }), "global on again");
    await deliver(W.news, "inbox-pref", "P4");
    eq((await listed(novu, { limit: 50 }, "list")).names, ["P4", "P2"], "news reaches the Inbox again");
  });

  await group("preferences: bulkUpdate", async () => {
    const list = await prefs();
    const out = ok(await novu.preferences.bulkUpdate([
      { preference: template(list, W.social), channels: { in_app: true } },
      { workflowId: template(list, W.billing).workflow.id, channels: { in_app: false } },
    ]), "bulkUpdate");
    eq(out.map((p) => [p.level, p.workflow?.identifier, p.channels?.in_app]).sort(),
      [["template", "inbox-billing", false], ["template", "inbox-social", true]], "the answer");
    const again = await prefs();
    eq([template(again, W.social)?.channels?.in_app, template(again, W.billing)?.channels?.in_app], [true, false], "listed");
    const kp = await keyPrefs();
    eq([keyOf(kp, W.social)?.channels?.in_app, keyOf(kp, W.billing)?.channels?.in_app], [true, false], "with the API key");
    eq(await withheld(W.billing, "inbox-pref", "P5"), ["skipped"], "billing held back");
    await deliver(W.social, "inbox-pref", "P6");
  });
}

/** A client of `subscriberId` (with `options` as `inbox` takes them) with its socket open, and what the
 * socket heard. */
async function listening(subscriberId, options = {}) {
  const { novu } = await inbox(subscriberId, options);
  const heard = { received: [], unread: [], unseen: [] };
  const connected = new Promise((resolve) => novu.on("socket.connect.resolved", resolve));
  novu.on("notifications.notification_received", ({ result }) => heard.received.push(result));
  novu.on("notifications.unread_count_changed", ({ result }) => heard.unread.push(result));
  novu.on("notifications.unseen_count_changed", ({ result }) => heard.unseen.push(result));
  const c = await connected;
  check(!c?.error, `${subscriberId}: the socket connects: ${c?.error?.message}`);
  return { novu, heard };
}

const online = async (subscriberId) => (await rawOk("GET", `/v2/subscribers/${subscriberId}`)).isOnline;

async function realtimeGroups() {
  await newSubscriber("rt-ann", "Ann");
  await newSubscriber("rt-bob", "Bob");
  let ann;
  let bob;
  await group("real-time: the socket connects with the session's token; the subscriber goes online", async () => {
    check((await online("rt-ann")) !== true, "not online before");
    ann = await listening("rt-ann");
    bob = await listening("rt-bob");
    await until("rt-ann online", async () => (await online("rt-ann")) === true);
  });
  let m;
  await group("real-time: a trigger sends notification_received, then the unseen and unread counts", async () => {
    m = await deliver(W.news, "rt-ann", "rt-1");
    const n = await until("notification_received", async () => ann.heard.received.find((x) => x.id === m._id));
    eq([n.body, n.isRead, n.isSeen, n.workflow?.identifier, n.primaryAction?.label, n.to?.subscriberId],
      [`News body ${m.n}`, false, false, W.news.workflowId, `Open ${m.n}`, "rt-ann"], "the notification as heard");
    await until("unread_count_changed 1", async () =>
      ann.heard.unread.some((u) => u.total === 1 && u.severity?.high === 1 && u.severity?.none === 0));
    await until("unseen_count_changed 1", async () => ann.heard.unseen.includes(1));
  });
  await group("real-time: a mark-as with the API key, then an Inbox action, change the counts", async () => {
    await rawOk("POST", "/v1/subscribers/rt-ann/messages/mark-as", { messageId: m._id, markAs: "read" }, 201);
    await until("unread_count_changed 0", async () => ann.heard.unread.at(-1)?.total === 0);
    await until("unseen_count_changed 0", async () => ann.heard.unseen.at(-1) === 0);
    const n = await itemOf(ann.novu, m);
    ok(await n.unread(), "unread from the Inbox");
    await until("unread_count_changed 1 again", async () => ann.heard.unread.at(-1)?.total === 1);
  });
  await group("real-time: events reach their subscriber only", async () => {
    eq(bob.heard.received.length, 0, "bob heard nothing of ann's");
    const b = await deliver(W.plain, "rt-bob", "rt-2");
    await until("bob's own notification", async () => bob.heard.received.some((x) => x.id === b._id));
    eq(ann.heard.received.map((x) => x.id), [m._id], "ann heard only hers");
  });
  await group("real-time: the subscriber goes offline when its socket closes", async () => {
    await ann.novu.socket.disconnect();
    await until("rt-ann offline", async () => (await online("rt-ann")) === false);
    check((await rawOk("GET", "/v2/subscribers/rt-ann")).lastOnlineAt, "lastOnlineAt is set");
  });
}

/** The canonical JSON of `v` (keys sorted, no spaces), which a `contextHash` signs. */
const canonicalJson = (v) => Array.isArray(v) ? `[${v.map(canonicalJson).join(",")}]`
  : v !== null && typeof v === "object"
    ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`).join(",")}}`
    : JSON.stringify(v);
const contextHash = (context, key = KEY) => createHmac("sha256", key).update(canonicalJson(context)).digest("hex");

async function contextGroups() {
  await newSubscriber("cx-ann", "Ann");
  const ACME = { tenant: { id: "acme", data: { name: "Acme", plan: "pro" } } };
  const GLOBEX = { tenant: "globex" };
  let acme;
  let globex;
  let plain;
  await group("contexts: with HMAC on a context needs its contextHash; the session echoes its keys", async () => {
    for (const [what, hash] of [["no contextHash", undefined], ["another context's", contextHash(GLOBEX)],
      ["the subscriber's hash", hmac("cx-ann")]]) {
      const r = await raw("POST", "/v1/inbox/session", { applicationIdentifier: appA, subscriberHash: hmac("cx-ann"),
        subscriber: { subscriberId: "cx-ann" }, context: ACME, contextHash: hash }, null);
      eq([r.status, r.json?.message], [400, "Please provide a valid context HMAC hash"], `raw session with ${what}`);
      const { novu, session } = await inbox("cx-ann", { context: ACME, contextHash: hash });
      eq(session.error?.status, 400, `client session with ${what}`);
      refused(await novu.notifications.list(), 400, `list after a session with ${what}`);
    }
    const r = await raw("POST", "/v1/inbox/session", { applicationIdentifier: appA, subscriberHash: hmac("cx-ann"),
      subscriber: { subscriberId: "cx-ann" }, context: ACME, contextHash: contextHash(ACME) }, null);
    eq([r.status, r.json?.data?.contextKeys], [201, ["tenant:acme"]], "raw session with the right contextHash");
    acme = await listening("cx-ann", { context: ACME, contextHash: contextHash(ACME) });
    globex = await listening("cx-ann", { context: GLOBEX, contextHash: contextHash(GLOBEX) });
    plain = await listening("cx-ann");
  });
  const M = {};
  await group("contexts: each session lists and counts only the notifications of exactly its context", async () => {
    M.a1 = await deliver(W.news, "cx-ann", "CA1", KEY, { tenant: "acme" });
    M.g1 = await deliver(W.news, "cx-ann", "CG1", KEY, GLOBEX);
    M.p1 = await deliver(W.plain, "cx-ann", "CP1");
    M.ab = await deliver(W.news, "cx-ann", "CAB", KEY, { tenant: "acme", app: "jira" });
    M.a2 = await deliver(W.billing, "cx-ann", "CA2", KEY, { tenant: { id: "acme" } });
    eq((await listed(acme.novu, { limit: 10 }, "acme list")).names, ["CA2", "CA1"], "acme's Inbox");
    eq((await listed(globex.novu, { limit: 10 }, "globex list")).names, ["CG1"], "globex's Inbox");
    eq((await listed(plain.novu, { limit: 10 }, "plain list")).names, ["CP1"], "the Inbox without a context");
    const counts = async (c) => ok(await c.novu.notifications.count({ filters: [{ read: false }, { seen: false }] }), "count")
      .counts.map((x) => x.count);
    eq([await counts(acme), await counts(globex), await counts(plain)], [[2, 2], [1, 1], [1, 1]], "counts");
  });
  await group("contexts: each socket hears only its context's notifications and counts", async () => {
    await until("acme heard CA1 and CA2", async () => [M.a1, M.a2].every((m) => acme.heard.received.some((x) => x.id === m._id)));
    await until("globex heard CG1", async () => globex.heard.received.some((x) => x.id === M.g1._id));
    await until("plain heard CP1", async () => plain.heard.received.some((x) => x.id === M.p1._id));
    eq(acme.heard.received.map((x) => labels.get(x.id)).sort(), ["CA1", "CA2"], "acme heard");
    eq(globex.heard.received.map((x) => labels.get(x.id)), ["CG1"], "globex heard");
    eq(plain.heard.received.map((x) => labels.get(x.id)), ["CP1"], "plain heard");
    await until("acme's unread count 2", async () => acme.heard.unread.at(-1)?.total === 2);
    await until("globex's unread count 1", async () => globex.heard.unread.at(-1)?.total === 1);
  });
  await group("contexts: actions and bulk actions reach only the session's context", async () => {
    refused(await acme.novu.notifications.read({ notificationId: M.g1._id }), 404, "acme reads globex's");
    refused(await acme.novu.notifications.delete({ notificationId: M.p1._id }), 404, "acme deletes the plain one");
    ok(await acme.novu.notifications.readAll(), "acme readAll");
    await until("acme's unread count 0", async () => acme.heard.unread.at(-1)?.total === 0);
    const keyed = await keyView("cx-ann");
    eq([M.a1, M.a2, M.g1, M.p1, M.ab].map((m) => keyed.get(m._id)?.read), [true, true, false, false, false], "read, with the API key");
    ok(await globex.novu.notifications.archiveAll(), "globex archiveAll");
    eq((await listed(globex.novu, { archived: false }, "globex list")).names, [], "globex's archived");
    eq((await listed(plain.novu, { archived: false }, "plain list")).names, ["CP1"], "the plain one is not archived");
    await until("globex's unread count 0", async () => globex.heard.unread.at(-1)?.total === 0);
    eq(plain.heard.unread.at(-1)?.total, 1, "the plain count is unchanged");
  });
}

async function topicGroups() {
  await newSubscriber("tp-ann", "Ann");
  await group("topics: subscribe, list, get and unsubscribe through @novu/js; a trigger to the topic reaches the subscriber", async () => {
    const { novu } = await inbox("tp-ann");
    const topicKey = `tp-launches-${RUN}`;
    // Only a topic the operator opened to self-subscription can be joined from the Inbox.
    refused(await novu.subscriptions.create({ topicKey }), 404, "no such topic: none is created");
    await rawOk("POST", "/v2/topics", { key: topicKey, name: "Launches" }, 201);
    refused(await novu.subscriptions.create({ topicKey }), 404, "a topic closed to self-subscription");
    await rawOk("PATCH", `/v2/topics/${topicKey}`, { allowSelfSubscription: true });
    eq(ok(await novu.subscriptions.list({ topicKey }), "list before").length, 0, "no subscription before");
    refused(await novu.subscriptions.create({ topicKey, topicName: "Mine" }), 422, "the Inbox names no topic");
    refused(await novu.subscriptions.create({ topicKey, identifier: "chosen" }), 422, "the identifier is assigned");
    const created = ok(await novu.subscriptions.create({ topicKey }), "create");
    eq(created.identifier, `tk_${topicKey}:si_tp-ann`, "the assigned identifier");
    check(created.id, `create: ${JSON.stringify(created)}`);
    eq((await rawOk("GET", `/v2/topics/${topicKey}`)).name, "Launches", "the topic keeps its name");
    eq(ok(await novu.subscriptions.list({ topicKey }), "list").map((s) => s.identifier), [created.identifier], "list");
    eq(ok(await novu.subscriptions.get({ topicKey, identifier: created.identifier }), "get")?.id, created.id, "get");
    const transactionId = `tp-1-${RUN}`;
    await rawOk("POST", "/v1/events/trigger", { name: W.plain.workflowId, to: { type: "Topic", topicKey }, payload: { n: 901 }, transactionId }, 201);
    await until("the topic's notification in the Inbox", async () =>
      (await listed(novu, { limit: 10 }, "list")).list.notifications.some((n) => n.body === "Plain body 901"));
    refused(await novu.subscriptions.create({ topicKey, preferences: [{ workflowId: W.news.workflowId, enabled: false }] }), 422,
      "subscription preferences are refused");
    ok(await created.delete(), "delete");
    eq(ok(await novu.subscriptions.list({ topicKey }), "list after").length, 0, "no subscription after");
    eq(ok(await novu.subscriptions.get({ topicKey, identifier: created.identifier }), "get after"), null, "get after");
  });
}

async function main() {
  for (const w of Object.values(W)) w.id = (await rawOk("POST", "/v2/workflows", workflowBody(w), 201))._id;
  await sessionGroups();
  await listGroups();
  await countGroup();
  await actionGroups();
  await apiKeyGroups();
  await isolationGroups();
  await preferenceGroups();
  await realtimeGroups();
  await contextGroups();
  await topicGroups();
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
await Promise.all(clients.map((c) => c.socket?.disconnect?.()));
finish();
