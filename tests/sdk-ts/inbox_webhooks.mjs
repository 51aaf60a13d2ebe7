// Outbound webhooks from the Inbox (issue 39): the official headless Inbox client, `@novu/js`, reads, sees,
// archives, unarchives, snoozes and deletes notifications as a web page's `<Inbox/>` does, and a local receiver
// gets the matching `message.*` event of each (verified with svix's `Webhook.verify`), naming the
// notification and its new state. The endpoint is made with the `svix` client; the world (workflow,
// triggers) with the API key.
//
// Environment: TIDINGS_URL, TIDINGS_KEY, TIDINGS_APP_ID (the environment's applicationIdentifier).

import http from "node:http";
import { Novu } from "@novu/js";
import { Svix, Webhook } from "svix";
import { check, eq, finish, group, rawOk, until } from "./lib.mjs";

const APP = process.env.TIDINGS_APP_ID;
const URL = process.env.TIDINGS_URL;

const received = [];
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    received.push({ headers: req.headers, body });
    res.writeHead(204).end();
  });
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));

/** `{data}` of a @novu/js call, or a failed check naming `what`. */
function ok(result, what) {
  check(!result.error, `${what}: ${result.error?.message} ${result.error?.originalError?.status ?? ""}`);
  return result.data;
}

async function main() {
  let secret, novu, ids;
  await group("world: an endpoint for message events, a workflow, three notifications", async () => {
    const svix = new Svix(process.env.TIDINGS_KEY, { serverUrl: URL, retryScheduleInMs: [] });
    const ep = await svix.endpoint.create(APP, {
      url: `http://127.0.0.1:${server.address().port}/`,
      eventTypes: ["message.read", "message.seen", "message.archived", "message.unarchived", "message.snoozed",
        "message.unsnoozed", "message.deleted"],
    });
    secret = (await svix.endpoint.getSecret(APP, ep.id)).key;
    await rawOk("POST", "/v2/workflows", {
      name: "Inbox hooks", workflowId: "inbox-hooks", active: true,
      steps: [{ name: "Inbox", type: "in_app", controlValues: { body: "Note {{ payload.n }}" } }],
    }, 201);
    for (const n of [1, 2, 3]) {
      await rawOk("POST", "/v1/events/trigger", { name: "inbox-hooks", to: "inbox-ann", payload: { n } }, 201);
    }
    novu = new Novu({ applicationIdentifier: APP, subscriber: "inbox-ann", apiUrl: URL, socketUrl: URL, useCache: false });
    await new Promise((resolve) => novu.on("session.initialize.resolved", resolve));
    const list = await until("three notifications", async () => {
      const page = ok(await novu.notifications.list({ limit: 10 }), "list");
      return page.notifications.length === 3 && page.notifications;
    });
    ids = Object.fromEntries(list.map((n) => [n.body, n.id]));
  });

  /** The one event of `type` about notification `id` (waiting for it), verified. */
  async function event(type, id) {
    const r = await until(`${type} of ${id}`, () =>
      received.find((q) => { const e = JSON.parse(q.body); return e.type === type && e.data.object._id === id; }));
    new Webhook(secret).verify(r.body, r.headers);
    return JSON.parse(r.body).data.object;
  }

  await group("each Inbox action emits its event", async () => {
    ok(await novu.notifications.seenAll({ notificationIds: [ids["Note 1"]] }), "seen 1");
    eq((await event("message.seen", ids["Note 1"])).seen, true, "message.seen");
    ok(await novu.notifications.read({ notificationId: ids["Note 1"] }), "read 1");
    eq((await event("message.read", ids["Note 1"])).read, true, "message.read");
    ok(await novu.notifications.archive({ notificationId: ids["Note 2"] }), "archive 2");
    eq((await event("message.archived", ids["Note 2"])).archived, true, "message.archived");
    ok(await novu.notifications.unarchive({ notificationId: ids["Note 2"] }), "unarchive 2");
    eq((await event("message.unarchived", ids["Note 2"])).archived, false, "message.unarchived");
    const until_ = new Date(Date.now() + 3_600_000).toISOString();
    ok(await novu.notifications.snooze({ notificationId: ids["Note 3"], snoozeUntil: until_ }), "snooze 3");
    check(typeof (await event("message.snoozed", ids["Note 3"])).snoozedUntil === "string", "message.snoozed: snoozedUntil");
    ok(await novu.notifications.unsnooze({ notificationId: ids["Note 3"] }), "unsnooze 3");
    await event("message.unsnoozed", ids["Note 3"]);
    ok(await novu.notifications.delete({ notificationId: ids["Note 3"] }), "delete 3");
    await event("message.deleted", ids["Note 3"]);
    eq(new Set(received.map((q) => q.headers["webhook-id"])).size, received.length, "one message per event");
  });

  novu.socket?.disconnect?.();
  server.close();
  finish();
  process.exit(0);
}

await main();
