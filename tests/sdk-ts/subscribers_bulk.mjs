// Bulk subscribers, the online flag and deleting a trigger's messages through @novu/api:
// `subscribers.createBulk`, `subscribers.properties.updateOnlineFlag`, `messages.deleteByTransactionId`.
// Every answer is parsed by the SDK's models and its values are asserted. tests/sdk/subscribers_bulk.py runs
// the same scenario with novu-py.

import { ISO_UTC, OBJECT_ID, check, client, eq, errors, exchanges, expectError, finish, group, lastWire, parseError, raw, rawOk, until } from "./lib.mjs";

const novu = client();
const lastStatus = () => exchanges[exchanges.length - 1]?.status;
const ids = (items) => items.map((i) => i.subscriberId);

async function bulk(subscribers, what) {
  const res = (await novu.subscribers.createBulk({ subscribers })).result;
  eq(lastStatus(), 201, `${what}: status`);
  eq(Object.keys(lastWire()).sort(), ["created", "failed", "updated"], `${what}: keys`);
  return res;
}

async function main() {
  await group("bulk: created, updated, failed; a repeated id; values as written", async () => {
    await novu.subscribers.create({ subscriberId: "ts-old", firstName: "Old", lastName: "Timer" });
    const res = await bulk([
      { subscriberId: "ts-b1", firstName: "B1", email: "b1@example.com", data: { plan: "pro" } },
      { subscriberId: "ts-b2", firstName: "B2" },
      { subscriberId: "ts-old", firstName: "New" },
      { subscriberId: "ts-b2", lastName: "Again" },
      { subscriberId: "ts-bad", email: "not-an-email" },
      { subscriberId: "ts-tz", timezone: "Mars/Olympus" },
    ], "bulk");
    eq(ids(res.created), ["ts-b1", "ts-b2"], "created");
    eq(ids(res.updated), ["ts-old", "ts-b2"], "updated");
    eq(res.failed.map((f) => [f.subscriberId, f.message]), [
      ["ts-bad", "email must be a valid email address"],
      ["ts-tz", "timezone must be a valid IANA time zone, e.g. Europe/Paris"],
    ], "failed");
    const b1 = (await novu.subscribers.retrieve("ts-b1")).result;
    eq([b1.firstName, b1.email, b1.data, b1.v], ["B1", "b1@example.com", { plan: "pro" }, 0], "ts-b1");
    const b2 = (await novu.subscribers.retrieve("ts-b2")).result;
    eq([b2.firstName, b2.lastName], ["B2", "Again"], "ts-b2 has both items' fields");
    const old = (await novu.subscribers.retrieve("ts-old")).result;
    eq([old.firstName, old.lastName, old.v], ["New", "Timer", 1], "ts-old updated, the rest kept");
    await expectError(() => novu.subscribers.retrieve("ts-bad"), errors.ErrorDto, 404, "a failed item is not written");
  });

  await group("bulk: only failures, nothing, 500, and 501 refused whole", async () => {
    let res = await bulk([{ subscriberId: " ", firstName: "Blank" }], "a blank id");
    eq([res.created, res.updated, res.failed.map((f) => [f.subscriberId, f.message])],
      [[], [], [[" ", "subscriberId must not be empty"]]], "a blank id");
    res = await bulk([], "empty");
    eq([res.created, res.updated, res.failed], [[], [], []], "empty");
    const many = Array.from({ length: 501 }, (_, i) => ({ subscriberId: `ts-many-${i}` }));
    const e = await expectError(() => novu.subscribers.createBulk({ subscribers: many }), errors.ErrorDto, 400, "501");
    eq(e.message, "subscribers must contain no more than 500 elements, got 501", "501: message");
    await expectError(() => novu.subscribers.retrieve("ts-many-0"), errors.ErrorDto, 404, "501 wrote nothing");
    res = await bulk(many.slice(0, 500), "500");
    eq([res.created.length, res.created[499].subscriberId], [500, "ts-many-499"], "500");
  });

  await group("online flag: on, off (lastOnlineAt), 404, 422", async () => {
    let sub = (await novu.subscribers.properties.updateOnlineFlag({ isOnline: true }, "ts-old")).result;
    eq(lastStatus(), 200, "online: status");
    eq([sub.subscriberId, sub.isOnline, sub.firstName, sub.v, sub.lastOnlineAt ?? null], ["ts-old", true, "New", 2, null], "online");
    check(OBJECT_ID.test(sub.id), `online: _id ${sub.id}`);
    sub = (await novu.subscribers.properties.updateOnlineFlag({ isOnline: false }, "ts-old")).result;
    eq([sub.isOnline, sub.v], [false, 3], "offline");
    check(typeof sub.lastOnlineAt === "string" && ISO_UTC.test(sub.lastOnlineAt), `offline: lastOnlineAt ${sub.lastOnlineAt}`);
    const got = (await novu.subscribers.retrieve("ts-old")).result;
    eq([got.isOnline, got.lastOnlineAt], [false, sub.lastOnlineAt], "offline: retrieved");
    const e = await expectError(() => novu.subscribers.properties.updateOnlineFlag({ isOnline: true }, "ts-nobody"),
      errors.ErrorDto, 404, "unknown subscriber");
    eq(e.data$?.path ?? JSON.parse(e.body).path, "/v1/subscribers/ts-nobody/online-status", "404: path");
    const r = await raw("PATCH", "/v1/subscribers/ts-old/online-status", { isOnline: "yes" });
    eq(r.status, 422, "not a boolean");
    const v = parseError(errors.ValidationErrorDto$inboundSchema, r, "422");
    check("isOnline" in v.errors, `422: errors ${r.text}`);
  });

  await group("delete by transaction: with and without channel, 404s", async () => {
    await rawOk("POST", "/v2/workflows", {
      name: "TS bulk note", workflowId: "ts-bulk-note",
      steps: [{ name: "Inbox", type: "in_app", controlValues: { body: "Note {{ payload.n }}" } }],
    }, 201);
    await novu.trigger({ workflowId: "ts-bulk-note", to: ["ts-b1", "ts-b2"], payload: { n: 1 }, transactionId: "ts-bulk-1" });
    await novu.trigger({ workflowId: "ts-bulk-note", to: "ts-b1", payload: { n: 2 }, transactionId: "ts-bulk-2" });
    const count = async (tx) => (await novu.messages.retrieve({ transactionId: [tx] })).result.data.length;
    await until("the messages", async () => (await count("ts-bulk-1")) === 2 && (await count("ts-bulk-2")) === 1);

    const e = await expectError(() => novu.messages.deleteByTransactionId("ts-bulk-1", "email"), errors.ErrorDto, 404, "a channel without messages");
    eq(e.message, "Invalid transactionId or channel", "404: message");
    eq(await count("ts-bulk-1"), 2, "nothing deleted");
    const res = await novu.messages.deleteByTransactionId("ts-bulk-1", "in_app");
    eq(lastStatus(), 204, "with the channel: status");
    check(res === undefined || typeof res === "object", `with the channel: ${JSON.stringify(res)}`);
    eq(await count("ts-bulk-1"), 0, "deleted with the channel");
    eq(await count("ts-bulk-2"), 1, "the other transaction's stay");
    await novu.messages.deleteByTransactionId("ts-bulk-2");
    eq(lastStatus(), 204, "without a channel: status");
    eq(await count("ts-bulk-2"), 0, "deleted without a channel");
    await expectError(() => novu.messages.deleteByTransactionId("ts-bulk-2"), errors.ErrorDto, 404, "deleted already");
    await expectError(() => novu.messages.deleteByTransactionId("ts-never"), errors.ErrorDto, 404, "unknown");
  });
}

await main();
finish();
