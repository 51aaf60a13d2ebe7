// Outbound webhooks (issue 39) as the official libraries receive them: an endpoint created with the `svix`
// client points at a local receiver; `@novu/api` triggers a workflow, marks, reads and archives its messages,
// changes the workflow and a subscriber's preference; every request the receiver gets is verified with svix's
// `Webhook.verify` (through the `svix-*` headers, and again through the `webhook-*` ones alone) and with
// `standardwebhooks` (the `webhook-*` headers), and its envelope and data are checked.
//
// TIDINGS_APP_ID is the environment's applicationIdentifier.

import http from "node:http";
import { Svix, Webhook as SvixWebhook } from "svix";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { check, client, eq, finish, group, until } from "./lib.mjs";

const APP = process.env.TIDINGS_APP_ID;
const novu = client();
const svix = new Svix(process.env.TIDINGS_KEY, { serverUrl: process.env.TIDINGS_URL, retryScheduleInMs: [] });

/** Every request to /hooks received: `{headers, body}`; those to /fail apart. */
const received = [];
const failed = [];
/** While true, /fail answers 500 and asks for no retry (`webhook-delivery: abort-message`). */
let failing = true;
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    if (req.url === "/retry") return res.writeHead(503).end("later");
    if (req.url === "/fail") {
      failed.push({ headers: req.headers, body });
      if (failing) return res.writeHead(500, { "webhook-delivery": "abort-message" }).end("down");
      return res.writeHead(200).end("ok");
    }
    received.push({ headers: req.headers, body });
    res.writeHead(204).end();
  });
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const receiverUrl = `http://127.0.0.1:${server.address().port}/hooks`;

/** A GET through plain fetch with the key, for the JSON as sent (the client's models copy fields unchecked). */
async function rawSvix(path) {
  const res = await fetch(`${process.env.TIDINGS_URL}${path}`, { headers: { Authorization: `Bearer ${process.env.TIDINGS_KEY}` } });
  eq(res.status, 200, `GET ${path}`);
  return res.json();
}

// The keys of svix@2.5.0's models (src/models/*.ts): required ones, then optional ones.
const ATTEMPT_OUT = [["url", "response", "responseStatusCode", "responseDurationMs", "status", "statusText", "triggerType",
  "msgId", "endpointId", "id", "timestamp"], ["msg"]];
const ENDPOINT_MESSAGE_OUT = [["status", "statusText", "eventType", "payload", "id", "timestamp"],
  ["nextAttempt", "eventId", "channels", "tags", "deliverAt"]];
const MESSAGE_ENDPOINT_OUT = [["id", "status", "statusText", "url", "description", "createdAt", "updatedAt"],
  ["nextAttempt", "throttleRate", "uid", "disabled", "eventTypes", "channels"]];

/** The object has every required key of `model` and no key it does not know. */
function strict(obj, [required, optional], what) {
  const keys = Object.keys(obj);
  eq([keys.filter((k) => !required.includes(k) && !optional.includes(k)), required.filter((k) => !keys.includes(k))],
    [[], []], `${what}: unknown and missing keys`);
}

const pick = (headers, prefix) => Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith(prefix)));

/** Verifies a request with both official libraries and both header sets; answers its envelope. */
function verified(r, secret) {
  const svixOnly = pick(r.headers, "svix-");
  const webhookOnly = pick(r.headers, "webhook-");
  eq(Object.keys(svixOnly).sort(), ["svix-id", "svix-signature", "svix-timestamp"], "svix-* headers");
  eq(Object.keys(webhookOnly).sort(), ["webhook-id", "webhook-signature", "webhook-timestamp"], "webhook-* headers");
  // Each throws when the signature does not match.
  new SvixWebhook(secret).verify(r.body, svixOnly);
  new SvixWebhook(secret).verify(r.body, webhookOnly);
  const c = new StandardWebhook(secret.slice("whsec_".length)).verify(r.body, webhookOnly);
  // The verifiers reject a body changed by one byte.
  let refused = false;
  try {
    new SvixWebhook(secret).verify(r.body.replace("{", "{ "), svixOnly);
  } catch {
    refused = true;
  }
  check(refused, "a changed body is refused");
  check(/^msg_[0-9a-f]{24}$/.test(r.headers["webhook-id"]), `webhook-id ${r.headers["webhook-id"]}`);
  return c;
}

/** The one event of type `type` received (waiting for it), verified. */
async function event(type, secret) {
  const r = await until(`a ${type} event`, () => received.find((q) => JSON.parse(q.body).type === type));
  const e = verified(r, secret);
  eq(Object.keys(e).sort(), ["data", "environmentId", "id", "object", "timestamp", "type"], `${type}: envelope keys`);
  check(/^evt_[0-9a-f]{24}$/.test(e.id) && e.id.slice(4) === r.headers["webhook-id"].slice(4), `${type}: ids`);
  eq([e.environmentId, e.object], [APP, type.split(".")[0]], `${type}: environment and object`);
  return e;
}

async function main() {
  let secret, messageIds;
  await group("an endpoint made with the Svix client", async () => {
    const ep = await svix.endpoint.create(APP, { url: receiverUrl, description: "every event" });
    secret = (await svix.endpoint.getSecret(APP, ep.id)).key;
  });

  await group("workflow.created, message.sent, message.delivered", async () => {
    await novu.workflows.create({
      name: "Hooks", workflowId: "hooks", active: true,
      steps: [{ name: "Inbox", type: "in_app", controlValues: { body: "Hi {{ payload.n }}" } }],
    });
    const created = await event("workflow.created", secret);
    eq([created.data.object.workflowId, created.data.previousObject], ["hooks", undefined], "workflow.created data");
    const tx = (await novu.trigger({ workflowId: "hooks", to: "wh-ann", payload: { n: 1 } })).result.transactionId;
    await novu.trigger({ workflowId: "hooks", to: "wh-ann", payload: { n: 2 } });
    await until("two message.sent events", () => received.filter((q) => JSON.parse(q.body).type === "message.sent").length === 2);
    const sent = received.filter((q) => JSON.parse(q.body).type === "message.sent").map((q) => verified(q, secret));
    const first = sent.find((e) => e.data.object.transactionId === tx);
    check(first, `a message.sent of ${tx}`);
    const m = first.data.object;
    eq([m.subscriberId, m.channel, m.workflowId, m.templateIdentifier, m.seen, m.read, m.archived, m.status],
      ["wh-ann", "in_app", "hooks", "hooks", false, false, false, "sent"], "message.sent: the message");
    messageIds = sent.map((e) => e.data.object._id);
    const delivered = await event("message.delivered", secret);
    check(messageIds.includes(delivered.data.object._id), "message.delivered names a message sent");
  });

  await group("message.read, message.seen, message.archived from mark-as and the v2 notification routes", async () => {
    const [a, b] = messageIds;
    await novu.subscribers.notifications.markAsRead({ subscriberId: "wh-ann", notificationId: a });
    const read = await event("message.read", secret);
    eq([read.data.object._id, read.data.object.read, read.data.object.seen], [a, true, true], "message.read");
    await novu.subscribers.messages.markAllAs({ messageId: b, markAs: "seen" }, "wh-ann");
    const seen = await event("message.seen", secret);
    eq([seen.data.object._id, seen.data.object.seen, seen.data.object.read], [b, true, false], "message.seen");
    await novu.subscribers.notifications.archive({ subscriberId: "wh-ann", notificationId: b });
    const archived = await event("message.archived", secret);
    eq([archived.data.object._id, archived.data.object.archived], [b, true], "message.archived");
    check(typeof archived.data.object.archivedAt === "string", "archivedAt");
  });

  await group("workflow.updated, preference.updated", async () => {
    await novu.workflows.update({
      name: "Hooks 2", workflowId: "hooks", active: true, preferences: { user: null, workflow: null },
      steps: [{ name: "Inbox", type: "in_app", controlValues: { body: "Hi {{ payload.n }}" } }],
    }, "hooks");
    const updated = await event("workflow.updated", secret);
    eq([updated.data.object.name, updated.data.previousObject.name], ["Hooks 2", "Hooks"], "workflow.updated data");
    await novu.subscribers.preferences.update({ workflowId: "hooks", channels: { inApp: false } }, "wh-ann");
    const pref = await event("preference.updated", secret);
    eq([pref.data.subscriberId, pref.data.object.level, pref.data.object.channels.in_app, pref.data.object.workflow.identifier],
      ["wh-ann", "template", false, "hooks"], "preference.updated data");
  });

  await group("attempts and messages through the Svix client; send-example; recover", async () => {
    const main = (await svix.endpoint.list(APP)).data[0];
    const attempts = await svix.messageAttempt.listByEndpoint(APP, main.id, { limit: 250 });
    const raw = await rawSvix(`/api/v1/app/${APP}/attempt/endpoint/${main.id}?limit=250`);
    raw.data.forEach((a, i) => strict(a, ATTEMPT_OUT, `attempt ${i}`));
    eq(attempts.data.length, received.length, "one attempt per request received");
    check(attempts.data.every((a) => a.status === 0 && a.responseStatusCode === 204 && a.triggerType === 0), "all succeeded");
    const ids = attempts.data.map((a) => a.id);
    eq([...ids].sort().reverse(), ids, "newest first");
    const twoPages = await svix.messageAttempt.listByEndpoint(APP, main.id, { limit: 2 });
    const next = await svix.messageAttempt.listByEndpoint(APP, main.id, { limit: 2, iterator: twoPages.iterator });
    eq([...twoPages.data, ...next.data].map((a) => a.id), ids.slice(0, 4), "pages by iterator");
    const messages = await svix.messageAttempt.listAttemptedMessages(APP, main.id);
    const rawMessages = await rawSvix(`/api/v1/app/${APP}/endpoint/${main.id}/msg?with_content=true`);
    rawMessages.data.forEach((m, i) => strict(m, ENDPOINT_MESSAGE_OUT, `message ${i}`));
    eq(messages.data.length, received.length, "one message per event");
    check(rawMessages.data.every((m) => m.payload.id === m.eventId && m.status === 0), "payloads and statuses");

    const bad = await svix.endpoint.create(APP, { url: receiverUrl.replace("/hooks", "/fail"), eventTypes: ["message.read"] });
    const example = await svix.endpoint.sendExample(APP, bad.id, { eventType: "message.sent" });
    check(/^msg_[0-9a-f]{24}$/.test(example.id) && example.eventType === "message.sent", `example ${example.id}`);
    await until("the example's failed attempt", async () =>
      (await svix.messageAttempt.listAttemptedMessages(APP, bad.id)).data.find((m) => m.id === example.id && m.status === 2));
    eq(failed.length, 1, "aborted: no retry");
    eq(failed[0].headers["webhook-id"], example.id, "the example's id");
    failing = false;
    const recovered = await svix.endpoint.recover(APP, bad.id, { since: new Date(Date.now() - 60_000) });
    eq([recovered.status, recovered.task], ["finished", "endpoint.recover"], "recover");
    await until("the example sent again", () => failed.length === 2);
    eq([failed[1].headers["webhook-id"], failed[1].body], [example.id, failed[0].body], "same id and body");
    const byMsg = await until("both attempts recorded", async () => {
      const page = await svix.messageAttempt.listByMsg(APP, example.id);
      return page.data.length === 2 && page;
    });
    eq(byMsg.data.map((a) => [a.status, a.responseStatusCode, a.response]), [[0, 200, "ok"], [2, 500, "down"]], "attempts of the message");
    const dest = await svix.messageAttempt.listAttemptedDestinations(APP, example.id);
    const rawDest = await rawSvix(`/api/v1/app/${APP}/msg/${example.id}/endpoint`);
    rawDest.data.forEach((d, i) => strict(d, MESSAGE_ENDPOINT_OUT, `destination ${i}`));
    eq(dest.data.map((d) => [d.id, d.status]), [[bad.id, 0]], "destinations");
  });

  await group("a message waiting for its retry: pending, with its next attempt", async () => {
    const later = await svix.endpoint.create(APP, { url: receiverUrl.replace("/hooks", "/retry"), eventTypes: ["message.read"] });
    const example = await svix.endpoint.sendExample(APP, later.id, { eventType: "message.read" });
    // Pending before its first attempt too (due now); after the 503, pending with its retry ahead.
    const pending = await until("the example pending after a 503", async () =>
      (await svix.messageAttempt.listAttemptedMessages(APP, later.id)).data.find(
        (m) => m.id === example.id && m.status === 1 && m.nextAttempt instanceof Date && m.nextAttempt.getTime() > Date.now()));
    check(pending.nextAttempt.getTime() <= Date.now() + 5_500, `nextAttempt ${pending.nextAttempt}: in about 5 s`);
    const raw = await rawSvix(`/api/v1/app/${APP}/endpoint/${later.id}/msg`);
    raw.data.forEach((m, i) => strict(m, ENDPOINT_MESSAGE_OUT, `pending message ${i}`));
    const dest = await rawSvix(`/api/v1/app/${APP}/msg/${example.id}/endpoint`);
    dest.data.forEach((d, i) => strict(d, MESSAGE_ENDPOINT_OUT, `pending destination ${i}`));
    eq(dest.data.map((d) => [d.status, d.statusText]), [[1, "pending"]], "pending at its endpoint");
    const attempts = await svix.messageAttempt.listByMsg(APP, example.id);
    eq(attempts.data.map((a) => [a.status, a.responseStatusCode, a.response]), [[2, 503, "later"]], "the failed attempt");
    await svix.endpoint.delete(APP, later.id);
  });

  await group("each event once", async () => {
    const ids = received.map((q) => q.headers["webhook-id"]);
    eq(new Set(ids).size, ids.length, "no message id twice");
  });
  server.close();
  finish();
}

await main();
