// Two `tidings serve` processes on one PostgreSQL database (tests/it/inbox_instances.rs starts them): the
// official Inbox client `@novu/js` holds its socket on instance A while the API key works on instance B, and
// every change made through B reaches A's socket (PostgreSQL LISTEN/NOTIFY between the processes): a trigger
// (`notification_received`, then the counts), a mark-as; and the other way round, an Inbox client on B hears a
// trigger sent through A.
//
// Environment: TIDINGS_URL and TIDINGS_KEY (instance B, and the key both instances hold), TIDINGS_URL_A
// (instance A, where the sockets are).

import { Novu } from "@novu/js";

import { CheckFailed, URL as URL_B, check, eq, finish, group, raw, rawOk, rawOkAt, until } from "./lib.mjs";

const URL_A = process.env.TIDINGS_URL_A;
const RUN = Date.now().toString(36);
check(URL_A && URL_B && URL_A !== URL_B, `two instances: TIDINGS_URL_A=${URL_A}, TIDINGS_URL=${URL_B}`);

/** `rawOk` to instance A (lib.mjs's `rawOk` goes to B). */
const rawOkA = (method, path, body, status = 200) => rawOkAt(URL_A, method, path, body, status);

/** The environment's public identifier as `GET /v1/environments/me` gives it (enveloped or not). */
const identifierOf = (me) => me?.identifier ?? me?.data?.identifier;

const clients = [];

/** A @novu/js client of `subscriberId` whose API and socket are `url`, once its socket connected: the client
 * and what its socket heard. */
async function listening(url, subscriberId, app) {
  const novu = new Novu({ applicationIdentifier: app, subscriber: subscriberId, apiUrl: url, socketUrl: url, useCache: false });
  clients.push(novu);
  const session = await new Promise((resolve) => novu.on("session.initialize.resolved", resolve));
  check(!session?.error, `${subscriberId} on ${url}: the session opens: ${session?.error?.message}`);
  const heard = { received: [], unread: [], unseen: [] };
  const connected = new Promise((resolve) => novu.on("socket.connect.resolved", resolve));
  novu.on("notifications.notification_received", ({ result }) => heard.received.push({ at: Date.now(), n: result }));
  novu.on("notifications.unread_count_changed", ({ result }) => heard.unread.push(result));
  novu.on("notifications.unseen_count_changed", ({ result }) => heard.unseen.push(result));
  const c = await connected;
  check(!c?.error, `${subscriberId} on ${url}: the socket connects: ${c?.error?.message}`);
  return { novu, heard };
}

const workflow = {
  name: "Two instances", workflowId: `instances-${RUN}`, active: true, severity: "high",
  steps: [{ name: "inbox", stepId: "inbox", type: "in_app", controlValues: { subject: "Hello {{payload.n}}", body: "Sent through {{payload.via}} {{payload.n}}" } }],
};

/** Triggers the workflow for `subscriberId` through `via` ("A" or "B") with the API key; answers the
 * transaction id and when the trigger was sent. */
async function trigger(via, subscriberId, n) {
  const transactionId = `inst-${via}-${n}-${RUN}`;
  const body = { name: workflow.workflowId, to: subscriberId, payload: { n, via }, transactionId };
  const sent = Date.now();
  if (via === "B") await rawOk("POST", "/v1/events/trigger", body, 201);
  else await rawOkA("POST", "/v1/events/trigger", body, 201);
  return { transactionId, sent };
}

/** The in-app message of `transactionId`, as instance B lists it with the API key. */
const messageOf = (transactionId) =>
  until(`the message of ${transactionId}`, async () =>
    (await rawOk("GET", `/v1/messages?transactionId=${transactionId}&channel=in_app`)).data?.[0]);

const onlineOn = async (get, subscriberId) => (await get("GET", `/v2/subscribers/${subscriberId}`)).isOnline;

async function main() {
  let app;
  await group("two instances: one environment, the same key and identifier on both", async () => {
    const meB = await rawOk("GET", "/v1/environments/me");
    const meA = await rawOkA("GET", "/v1/environments/me");
    app = identifierOf(meB);
    check(typeof app === "string" && app.length > 0, `identifier: ${JSON.stringify(meB)}`);
    eq(identifierOf(meA), app, "A's identifier");
  });
  if (!app) return;

  await rawOk("POST", "/v2/subscribers", { subscriberId: `ann-${RUN}`, firstName: "Ann" }, 201);
  await rawOk("POST", "/v2/workflows", workflow, 201);
  const ann = `ann-${RUN}`;

  let onA;
  await group("socket on A: @novu/js connects; B sees the subscriber online", async () => {
    check((await onlineOn(rawOk, ann)) !== true, "not online before");
    onA = await listening(URL_A, ann, app);
    await until("online, as B sees it", async () => (await onlineOn(rawOk, ann)) === true);
  });
  if (!onA) return;

  let m;
  await group("a trigger through B reaches the socket on A: notification_received, then unread 1 and unseen 1", async () => {
    const { transactionId, sent } = await trigger("B", ann, 1);
    m = await messageOf(transactionId);
    const got = await until("notification_received on A", async () => onA.heard.received.find((x) => x.n.id === m._id), 20);
    eq([got.n.body, got.n.subject, got.n.isRead, got.n.isSeen, got.n.workflow?.identifier, got.n.to?.subscriberId],
      ["Sent through B 1", "Hello 1", false, false, workflow.workflowId, ann], "the notification as heard on A");
    await until("unread_count_changed total 1 on A", async () =>
      onA.heard.unread.some((u) => u.total === 1 && u.severity?.high === 1));
    await until("unseen_count_changed 1 on A", async () => onA.heard.unseen.includes(1));
    console.log(`      (trigger through B to notification_received on A: ${got.at - sent} ms)`);
  });

  await group("a mark-as read through B with the API key: A's socket hears unread total 0", async () => {
    check(m, "the message of the previous group");
    await rawOk("POST", `/v1/subscribers/${ann}/messages/mark-as`, { messageId: m._id, markAs: "read" }, 201);
    await until("unread_count_changed total 0 on A", async () => onA.heard.unread.at(-1)?.total === 0);
    eq(onA.heard.received.length, 1, "no other notification_received");
  });

  let onB;
  await group("the other way: a trigger through A reaches a second client on B; both sockets hear it", async () => {
    onB = await listening(URL_B, ann, app);
    const { transactionId } = await trigger("A", ann, 2);
    const m2 = await messageOf(transactionId);
    for (const [name, c] of [["B", onB], ["A", onA]]) {
      const got = await until(`notification_received on ${name}`, async () => c.heard.received.find((x) => x.n.id === m2._id));
      eq(got.n.body, "Sent through A 2", `the body heard on ${name}`);
      await until(`unread_count_changed total 1 on ${name}`, async () => c.heard.unread.at(-1)?.total === 1);
    }
    // An Inbox action on B's client (its bearer token, B's /v1/inbox route) reaches A's socket too.
    const list = await onB.novu.notifications.list({ limit: 10 });
    check(!list.error, `list on B: ${list.error?.message}`);
    const n = list.data.notifications.find((x) => x.id === m2._id);
    check(n, `the notification is listed on B: ${list.data.notifications.map((x) => x.id)}`);
    const read = await n.read();
    check(!read.error, `read on B: ${read.error?.message}`);
    await until("unread_count_changed total 0 on A after B's Inbox read", async () => onA.heard.unread.at(-1)?.total === 0);
  });

  await group("the subscriber stays online while a socket on B is open after A's closes, and goes offline with the last", async () => {
    check(onB, "B's client of the previous group");
    await onA.novu.socket.disconnect();
    // Let A's disconnect be handled before looking.
    await new Promise((r) => setTimeout(r, 1000));
    const seen = await onlineOn(rawOk, ann);
    await onB.novu.socket.disconnect();
    await until("offline once B's socket closed too", async () => (await onlineOn(rawOk, ann)) === false);
    if (seen !== true) throw new CheckFailed(`isOnline is ${seen} after A's socket closed while B's is still open`);
  });
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
await Promise.all(clients.map((c) => c.socket?.disconnect?.()));
finish();
