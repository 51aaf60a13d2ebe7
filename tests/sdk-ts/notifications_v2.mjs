// @novu/api against the v2 subscriber notifications (`novu.subscribers.notifications.*`, the Inbox's
// semantics seen with the API key) and the v1 message action (`novu.subscribers.messages.updateAsSeen`), in
// the `novu` profile: every method in every state it produces (unread, seen, read, archived, snoozed,
// unsnoozed, an action completed and reverted, deleted), the list's filters and cursor, several counts at
// once, and the errors through the SDK's error classes (an unknown subscriber or notification, another
// subscriber's, another environment's, bad filters). The SDK's zod models parse every answer.
//
// Environment: TIDINGS_URL, TIDINGS_KEY and TIDINGS_KEY_B (a second environment's key), from
// tests/it/novu_sdk.rs.

import { HTTPClient, Novu } from "@novu/api";

import { ISO_UTC, OBJECT_ID, URL, check, client, eq, errors, exchanges, expectError, finish, group, lastJson, rawOk, until } from "./lib.mjs";

const KEY_B = process.env.TIDINGS_KEY_B;
const ANN = "ts-v2-ann";
const BOB = "ts-v2-bob";
const UNKNOWN_ID = "0123456789abcdef01234567";
const novu = client();
const lastStatus = () => exchanges[exchanges.length - 1]?.status;

const WORKFLOWS = [
  { name: "TS alert", workflowId: "ts-alert", severity: "high", tags: ["ops"], steps: [{
    name: "Inbox", type: "in_app", controlValues: {
      subject: "Alert", body: "Alert {{ payload.n }}", data: { kind: "alert" },
      primaryAction: { label: "Open", redirect: { url: "https://example.com/a" } },
      secondaryAction: { label: "Dismiss" },
    },
  }] },
  { name: "TS news", workflowId: "ts-news", tags: ["news"], steps: [{
    name: "Inbox", type: "in_app", controlValues: { body: "News {{ payload.n }}", data: { kind: "news" } },
  }] },
];

function checkNotification(n, what) {
  check(OBJECT_ID.test(n.id), `${what}: id ${n.id}`);
  eq(n.to.subscriberId, ANN, `${what}: to.subscriberId`);
  eq(n.channelType, "in_app", `${what}: channelType`);
  check(ISO_UTC.test(n.createdAt), `${what}: createdAt ${n.createdAt}`);
  eq(n.readAt == null, !n.isRead, `${what}: readAt set when read`);
  eq(n.archivedAt == null, !n.isArchived, `${what}: archivedAt set when archived`);
  eq(n.snoozedUntil == null, !n.isSnoozed, `${what}: snoozedUntil set when snoozed`);
}

/** A list page of ann's (the raw answer is `{data, hasMore, filter}`, no envelope around it). */
async function page(what, request = {}) {
  const res = (await novu.subscribers.notifications.list({ subscriberId: ANN, ...request })).result;
  eq(Object.keys(lastJson()).sort(), ["data", "filter", "hasMore"], `${what}: raw page keys`);
  for (const n of res.data) checkNotification(n, what);
  return res;
}

const bodies = (res) => res.data.map((n) => n.body);

/** One notification's answer: `{data: notification}` on the wire. */
function one(res, what) {
  eq(Object.keys(lastJson()), ["data"], `${what}: envelope`);
  eq(lastStatus(), 200, `${what}: status`);
  checkNotification(res.result, what);
  return res.result;
}

async function counts(filters, subscriberId = ANN) {
  const res = (await novu.subscribers.notifications.count(subscriberId, JSON.stringify(filters))).result;
  check(Array.isArray(res), "count: an array");
  res.forEach((item, i) => eq(item.filter, filters[i], "count: filter echoed"));
  return res.map((c) => c.count);
}

async function all(subscriberId, count) {
  return until(`${subscriberId} has ${count} notifications`, async () => {
    const res = (await novu.subscribers.notifications.list({ subscriberId, limit: 100 })).result;
    return res.data.length >= count ? res : undefined;
  }, 30);
}

function noContent(what) {
  const x = exchanges[exchanges.length - 1];
  eq([x.status, x.body], [204, ""], `${what}: 204 without a body`);
}

async function main() {
  for (const w of WORKFLOWS) await rawOk("POST", "/v2/workflows", w, 201);
  for (const subscriberId of [ANN, BOB]) await novu.subscribers.create({ subscriberId });
  const triggers = [["ts-alert", ANN], ["ts-news", ANN], ["ts-alert", ANN], ["ts-alert", BOB]];
  for (const [i, [workflowId, to]] of triggers.entries()) {
    await novu.trigger({ workflowId, to, payload: { n: i + 1 } });
  }
  await all(ANN, 3);
  const bob = (await all(BOB, 1)).data[0].id;
  const ids = {};

  await group("list: unread notifications, newest first, their fields", async () => {
    const res = await page("list");
    eq([bodies(res), res.hasMore], [["Alert 3", "News 2", "Alert 1"], false], "list");
    const a = res.data[0];
    eq([a.isRead, a.isSeen, a.isArchived, a.isSnoozed], [false, false, false, false], "unread state");
    eq([a.severity, a.tags, a.data, a.subject], ["high", ["ops"], { kind: "alert" }, "Alert"], "severity, tags, data, subject");
    eq(a.primaryAction, { label: "Open", isCompleted: false, redirect: { url: "https://example.com/a" } }, "primaryAction");
    eq(a.secondaryAction, { label: "Dismiss", isCompleted: false }, "secondaryAction");
    eq(a.workflow?.identifier, "ts-alert", "workflow.identifier");
    [ids.a3, ids.news, ids.a1] = res.data.map((n) => n.id);
  });

  await group("list: cursor, offset and filters (severity, data, read, seen, archived, snoozed, created)", async () => {
    const first = await page("page 1", { limit: 2 });
    eq([bodies(first), first.hasMore], [["Alert 3", "News 2"], true], "page 1");
    const second = await page("page 2", { limit: 2, after: first.data[1].id });
    eq([bodies(second), second.hasMore], [["Alert 1"], false], "page 2 (after)");
    eq(bodies(await page("offset", { limit: 1, offset: 1 })), ["News 2"], "offset");
    eq(bodies(await page("severity", { severity: ["high"] })), ["Alert 3", "Alert 1"], "severity");
    eq(bodies(await page("data", { data: JSON.stringify({ kind: "news" }) })), ["News 2"], "data");
    eq(bodies(await page("read", { read: true })), [], "read");
    eq(bodies(await page("several", { read: false, seen: false, archived: false, snoozed: false, severity: ["none"] })), ["News 2"], "several");
    const later = Date.now() + 60_000;
    eq(bodies(await page("createdGte", { createdGte: later })), [], "createdGte");
    eq((await page("createdLte", { createdLte: later })).data.length, 3, "createdLte");
    const echoed = await page("echo", { read: false });
    eq(lastJson().filter, { read: false }, "filter echoed");
    check(typeof echoed.filter === "object", "filter: an object");
  });

  await group("count: several filters at once", async () => {
    eq(await counts([{}, { read: false }, { seen: true }, { tags: ["ops"] }, { severity: "high" }]), [3, 3, 0, 2, 2], "counts");
  });

  await group("one notification: read, unread, archive, unarchive, snooze, unsnooze", async () => {
    const at = { subscriberId: ANN, notificationId: ids.a1 };
    let r = one(await novu.subscribers.notifications.markAsRead(at), "read");
    eq([r.id, r.isRead, r.isSeen], [ids.a1, true, true], "read");
    r = one(await novu.subscribers.notifications.markAsUnread(at), "unread");
    eq([r.isRead, r.isSeen], [false, true], "unread (still seen)");
    r = one(await novu.subscribers.notifications.archive(at), "archive");
    eq([r.isArchived, r.isRead], [true, true], "archive");
    eq(bodies(await page("archived", { archived: true })), ["Alert 1"], "archived filter");
    r = one(await novu.subscribers.notifications.unarchive(at), "unarchive");
    eq(r.isArchived, false, "unarchive");
    const snoozeUntil = new Date(Date.now() + 3_600_000);
    r = one(await novu.subscribers.notifications.snooze({ subscriberId: ANN, notificationId: ids.news, snoozeSubscriberNotificationDto: { snoozeUntil } }), "snooze");
    eq(r.isSnoozed, true, "snooze");
    eq(bodies(await page("snoozed", { snoozed: true })), ["News 2"], "snoozed filter");
    eq(bodies(await page("not snoozed", { snoozed: false })), ["Alert 3", "Alert 1"], "snoozed=false");
    r = one(await novu.subscribers.notifications.unsnooze({ subscriberId: ANN, notificationId: ids.news }), "unsnooze");
    eq(r.isSnoozed, false, "unsnooze");
  });

  await group("actions: complete and revert, primary and secondary; the v1 message action", async () => {
    for (const kind of ["primary", "secondary"]) {
      const at = { subscriberId: ANN, notificationId: ids.a3, actionType: kind };
      let r = one(await novu.subscribers.notifications.completeAction(at), `complete ${kind}`);
      eq(r[`${kind}Action`].isCompleted, true, `complete ${kind}`);
      r = one(await novu.subscribers.notifications.revertAction(at), `revert ${kind}`);
      eq(r[`${kind}Action`].isCompleted, false, `revert ${kind}`);
    }
    const m = (await novu.subscribers.messages.updateAsSeen({
      subscriberId: ANN, messageId: ids.a3, type: "primary", markMessageActionAsSeenDto: { status: "done", payload: { rating: 5 } },
    })).result;
    eq(lastStatus(), 201, "message action: 201");
    // The SDK's model of the payload declares no field: it sends `{}`, which is what is recorded.
    eq([m.id, m.cta.action.status, m.cta.action.result], [ids.a3, "done", { payload: {}, type: "primary" }], "message action");
    eq((await page("after message action")).data[0].primaryAction.isCompleted, true, "seen by the v2 list");
    const back = (await novu.subscribers.messages.updateAsSeen({
      subscriberId: ANN, messageId: ids.a3, type: "primary", markMessageActionAsSeenDto: { status: "pending" },
    })).result;
    eq(back.cta.action.status, "pending", "message action: pending");
  });

  await group("errors: unknown subscriber or notification, another subscriber's, another environment's, bad filters", async () => {
    await expectError(() => novu.subscribers.notifications.list({ subscriberId: "ts-nobody" }), errors.ErrorDto, 404, "list: unknown subscriber");
    await expectError(() => novu.subscribers.notifications.list({ subscriberId: ANN, limit: 101 }), errors.ValidationErrorDto, 422, "list: limit 101");
    await expectError(() => novu.subscribers.notifications.list({ subscriberId: ANN, data: "{nope" }), errors.ValidationErrorDto, 422, "list: bad data");
    await expectError(() => novu.subscribers.notifications.list({ subscriberId: ANN, contextKeys: ["nokey"] }), errors.ValidationErrorDto, 422, "list: bad contextKeys");
    await expectError(() => novu.subscribers.notifications.list({ subscriberId: ANN, read: false, archived: true }), errors.ErrorDto, 400, "list: unread and archived");
    await expectError(() => novu.subscribers.notifications.count(ANN, "nope"), errors.ValidationErrorDto, 422, "count: not JSON");
    await expectError(() => novu.subscribers.notifications.count(ANN, JSON.stringify(Array(31).fill({}))), errors.ValidationErrorDto, 422, "count: 31 filters");
    await expectError(() => novu.subscribers.notifications.count("ts-nobody", "[{}]"), errors.ErrorDto, 404, "count: unknown subscriber");
    const snoozeUntil = new Date(Date.now() + 3_600_000);
    for (const id of [UNKNOWN_ID, bob]) {
      const at = { subscriberId: ANN, notificationId: id };
      const calls = {
        read: () => novu.subscribers.notifications.markAsRead(at), unread: () => novu.subscribers.notifications.markAsUnread(at), archive: () => novu.subscribers.notifications.archive(at),
        unarchive: () => novu.subscribers.notifications.unarchive(at), unsnooze: () => novu.subscribers.notifications.unsnooze(at),
        snooze: () => novu.subscribers.notifications.snooze({ ...at, snoozeSubscriberNotificationDto: { snoozeUntil } }),
        complete: () => novu.subscribers.notifications.completeAction({ ...at, actionType: "primary" }),
        revert: () => novu.subscribers.notifications.revertAction({ ...at, actionType: "primary" }),
        delete: () => novu.subscribers.notifications.delete(at),
        "message action": () => novu.subscribers.messages.updateAsSeen({ subscriberId: ANN, messageId: id, type: "primary", markMessageActionAsSeenDto: { status: "done" } }),
      };
      for (const [name, call] of Object.entries(calls)) {
        await expectError(call, errors.ErrorDto, 404, `${name} of ${id === bob ? "bob's" : "an unknown id"}`);
      }
    }
    const soon = new Date(Date.now() + 5_000);
    await expectError(() => novu.subscribers.notifications.snooze({ subscriberId: ANN, notificationId: ids.a1, snoozeSubscriberNotificationDto: { snoozeUntil: soon } }), errors.ErrorDto, 400, "snooze: too soon");
    await expectError(() => novu.subscribers.notifications.markAsRead({ subscriberId: "ts-nobody", notificationId: ids.a1 }), errors.ErrorDto, 404, "read: unknown subscriber");
    await expectError(() => novu.subscribers.notifications.markAllAsRead({}, "ts-nobody"), errors.ErrorDto, 404, "bulk: unknown subscriber");
    await expectError(() => novu.subscribers.notifications.markAsSeen({ notificationIds: Array(101).fill(UNKNOWN_ID) }, ANN), errors.ValidationErrorDto, 422, "seen: 101 ids");
    await expectError(() => novu.subscribers.notifications.archiveAll({ data: "{nope" }, ANN), errors.ValidationErrorDto, 422, "archive all: bad data");
    const other = new Novu({ secretKey: KEY_B, serverURL: URL, retryConfig: { strategy: "none" }, httpClient: new HTTPClient() }).subscribers.notifications;
    await expectError(() => other.list({ subscriberId: ANN }), errors.ErrorDto, 404, "list from another environment");
    await expectError(() => other.markAsRead({ subscriberId: ANN, notificationId: ids.a1 }), errors.ErrorDto, 404, "read from another environment");
    await expectError(() => other.delete({ subscriberId: ANN, notificationId: ids.a1 }), errors.ErrorDto, 404, "delete from another environment");
    eq((await all(BOB, 1)).data.map((n) => n.isRead), [false], "bob's notification untouched");
  });

  await group("bulk: seen, read, read-archive, archive, delete one, delete all", async () => {
    await novu.subscribers.notifications.markAsSeen({ notificationIds: [ids.a3] }, ANN);
    noContent("seen (ids)");
    eq(await counts([{ seen: true }, { seen: false }]), [2, 1], "after seen");
    await novu.subscribers.notifications.markAllAsRead({ data: JSON.stringify({ kind: "alert" }) }, ANN);
    noContent("read (data)");
    eq(await counts([{ read: true }, { read: false }]), [2, 1], "after read by data");
    await novu.subscribers.notifications.archiveAllRead({}, ANN);
    noContent("read-archive");
    eq(bodies(await page("archived after read-archive", { archived: true })), ["Alert 3", "Alert 1"], "read-archive");
    await novu.subscribers.notifications.archiveAll({}, ANN);
    noContent("archive");
    eq(await counts([{ archived: true }, { archived: false }]), [3, 0], "after archive");
    await novu.subscribers.notifications.delete({ subscriberId: ANN, notificationId: ids.news });
    noContent("delete one");
    eq(bodies(await page("after delete", { archived: true })), ["Alert 3", "Alert 1"], "deleted one gone");
    await expectError(() => novu.subscribers.notifications.delete({ subscriberId: ANN, notificationId: ids.news }), errors.ErrorDto, 404, "delete again");
    await novu.subscribers.notifications.deleteAll({}, ANN);
    noContent("delete all");
    eq(await counts([{}]), [0], "after delete all");
    eq(bodies(await page("empty")), [], "empty list");
    eq((await all(BOB, 1)).data.length, 1, "bob's notification still there");
  });
}

await main();
finish();
