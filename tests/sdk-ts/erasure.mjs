// A subscriber deleted and created again under the same subscriberId (issue 35), through `@novu/js` and its
// socket: the deleted one's session ends and its socket hears nothing of the new one; the new one's Inbox,
// counts and socket hold its own messages only. tests/it/erasure.rs checks every other route.
//
// Environment: TIDINGS_URL, TIDINGS_KEY, from tests/it/erasure_js.rs.

import { Novu } from "@novu/js";

import { CheckFailed, URL, check, eq, finish, group, rawOk, until } from "./lib.mjs";

const RUN = Date.now().toString(36);
const SUBSCRIBER = `er-user-${RUN}`;
const WORKFLOW = `er-news-${RUN}`;
const clients = [];
let app;

/** The `data` of a resolved @novu/js call, which must not be an error. */
function ok(result, what) {
  const e = result?.error;
  if (e) throw new CheckFailed(`${what}: ${e.message}: ${e.originalError?.message ?? e.originalError}`);
  return result?.data;
}

/** A client of `subscriberId` with its session open and its socket connected, and what the socket heard. */
async function listening(subscriberId) {
  const novu = new Novu({ applicationIdentifier: app, subscriber: subscriberId, apiUrl: URL, socketUrl: URL, useCache: false });
  clients.push(novu);
  const session = await new Promise((resolve) => novu.on("session.initialize.resolved", resolve));
  check(!session?.error, `${subscriberId}: the session opens: ${session?.error?.message}`);
  const heard = { received: [], unread: [], unseen: [] };
  const connected = new Promise((resolve) => novu.on("socket.connect.resolved", resolve));
  novu.on("notifications.notification_received", ({ result }) => heard.received.push(result));
  novu.on("notifications.unread_count_changed", ({ result }) => heard.unread.push(result));
  novu.on("notifications.unseen_count_changed", ({ result }) => heard.unseen.push(result));
  const c = await connected;
  check(!c?.error, `${subscriberId}: the socket connects: ${c?.error?.message}`);
  return { novu, heard };
}

/** Triggers the workflow for the subscriber and waits for its in-app message (as the API key lists it). */
async function deliver(label) {
  const transactionId = `${label}-${RUN}`;
  await rawOk("POST", "/v1/events/trigger", { name: WORKFLOW, to: SUBSCRIBER, payload: { label }, transactionId }, 201);
  return until(`${label} delivered`, async () =>
    (await rawOk("GET", `/v1/messages?transactionId=${transactionId}&channel=in_app`)).data?.[0]);
}

async function main() {
  app = (await rawOk("GET", "/v1/environments/me")).identifier;
  await rawOk("POST", "/v2/workflows", {
    name: "Erasure news", workflowId: WORKFLOW, active: true,
    steps: [{ name: "inbox", stepId: "inbox", type: "in_app", controlValues: { body: "News {{payload.label}}" } }],
  }, 201);
  await rawOk("POST", "/v2/subscribers", { subscriberId: SUBSCRIBER, firstName: "Old" }, 201);
  let old;
  let first;
  await group("erasure: the first subscriber's socket hears its message", async () => {
    old = await listening(SUBSCRIBER);
    first = await deliver("old-1");
    await until("the old socket's notification", async () => old.heard.received.some((n) => n.id === first._id));
    await until("the old socket's unread count 1", async () => old.heard.unread.some((u) => u.total === 1));
  });
  let oldRef;
  let newRef;
  await group("erasure: deleted and created again, the first one's session ends", async () => {
    oldRef = (await rawOk("GET", `/v2/subscribers/${SUBSCRIBER}`))._id;
    eq(await rawOk("DELETE", `/v2/subscribers/${SUBSCRIBER}`), { acknowledged: true, status: "deleted" }, "the delete");
    newRef = (await rawOk("POST", "/v2/subscribers", { subscriberId: SUBSCRIBER, firstName: "New" }, 201))._id;
    check(newRef && newRef !== oldRef, `a new record: ${oldRef} → ${newRef}`);
    const r = await old.novu.notifications.list({ limit: 10 });
    check(r?.error, `the old session lists nothing: ${JSON.stringify(r?.data)?.slice(0, 300)}`);
    eq(r.error.originalError?.status, 401, "the old session's status");
  });
  await group("erasure: the new subscriber's Inbox, counts and socket hold its own messages only", async () => {
    const heardBefore = { received: old.heard.received.length, unread: old.heard.unread.length, unseen: old.heard.unseen.length };
    const fresh = await listening(SUBSCRIBER);
    const listed = ok(await fresh.novu.notifications.list({ limit: 10 }), "the new list");
    eq(listed.notifications.map((n) => n.id), [], "nothing of the first subscriber's");
    const counts = ok(await fresh.novu.notifications.count({ filters: [{ read: false }, { seen: false }] }), "the new counts");
    eq(counts.counts.map((c) => c.count), [0, 0], "the new counts");
    const second = await deliver("new-1");
    eq(second._subscriberId, newRef, "the new message's record");
    const n = await until("the new socket's notification", async () => fresh.heard.received.find((x) => x.id === second._id));
    eq([n.body, n.to?.subscriberId], ["News new-1", SUBSCRIBER], "the notification as heard");
    await until("the new socket's unread count 1", async () => fresh.heard.unread.some((u) => u.total === 1));
    await until("the new socket's unseen count 1", async () => fresh.heard.unseen.includes(1));
    // A mark-as with the API key: the new socket hears the counts fall; the old one heard nothing since.
    await rawOk("POST", `/v1/subscribers/${SUBSCRIBER}/messages/mark-as`, { messageId: second._id, markAs: "read" }, 201);
    await until("the new socket's unread count 0", async () => fresh.heard.unread.at(-1)?.total === 0);
    await until("the new socket's unseen count 0", async () => fresh.heard.unseen.at(-1) === 0);
    eq({ received: old.heard.received.length, unread: old.heard.unread.length, unseen: old.heard.unseen.length },
      heardBefore, "the old socket heard nothing of the new subscriber");
    eq(fresh.heard.received.map((x) => x.id), [second._id], "the new socket heard its own message only");
    const after = ok(await fresh.novu.notifications.list({ limit: 10 }), "the new list after");
    eq(after.notifications.map((x) => x.id), [second._id], "the new list holds its own message only");
  });
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
await Promise.all(clients.map((c) => c.socket?.disconnect?.()));
finish();
