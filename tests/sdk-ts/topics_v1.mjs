// The v1 topic routes (issue 23) through @novu/api 0.0.1, the last release with methods for them, installed
// as `@novu/api-legacy` (package.json). Every answer is parsed by that release's models and its values are
// asserted. tests/sdk/topics_v1.py runs the same scenario with novu-py 0.3.4.

import { legacyErrors, novu } from "./legacy.mjs";
import { check, eq, exchanges, expectError, finish, group, raw, rawOk } from "./lib.mjs";

const topics = novu.topics;
const lastStatus = () => exchanges[exchanges.length - 1]?.status;

async function main() {
  for (const subscriberId of ["v1-ann", "v1-bob"]) {
    await rawOk("POST", "/v2/subscribers", { subscriberId }, 201);
  }

  await group("v1 topics: create (409 when taken), retrieve, rename, list by page and key, 404", async () => {
    const created = (await topics.create({ key: "v1-news", name: "News" })).result;
    eq(created.key, "v1-news", "create");
    check(/^[0-9a-f]{24}$/.test(created.id ?? ""), `create _id: ${created.id}`);
    await expectError(() => topics.create({ key: "v1-news", name: "Again" }), legacyErrors.ErrorDto, 409, "a taken key");
    const got = (await topics.retrieve("v1-news")).result;
    eq([got.id, got.key, got.name, got.subscribers], [created.id, "v1-news", "News", []], "retrieve");
    eq((await topics.rename({ name: "Renamed" }, "v1-news")).result.name, "Renamed", "rename");
    await topics.create({ key: "v1-other", name: "Other" });
    const page = (await topics.list({ page: 0, pageSize: 1 })).result;
    eq([page.data.map((t) => t.key), page.page, page.pageSize, page.totalCount], [["v1-news"], 0, 1, 2], "first page");
    eq((await topics.list({ page: 1, pageSize: 1 })).result.data.map((t) => t.key), ["v1-other"], "second page");
    eq((await topics.list({ key: "v1-other" })).result.data.map((t) => t.key), ["v1-other"], "by key");
    await expectError(() => topics.retrieve("v1-none"), legacyErrors.ErrorDto, 404, "unknown topic");
  });

  await group("v1 topics: assign (partial), membership, remove, delete", async () => {
    const out = (await topics.subscribers.assign({ subscribers: ["v1-ann", "v1-bob", "v1-ghost"] }, "v1-news")).result;
    eq([out.succeeded, out.failed?.notFound], [["v1-ann", "v1-bob"], ["v1-ghost"]], "assign");
    const member = (await topics.subscribers.retrieve("v1-bob", "v1-news")).result;
    eq([member.topicKey, member.externalSubscriberId], ["v1-news", "v1-bob"], "membership");
    await topics.subscribers.remove({ subscribers: ["v1-bob"] }, "v1-news");
    eq(lastStatus(), 204, "remove: 204");
    await expectError(() => topics.subscribers.retrieve("v1-bob", "v1-news"), legacyErrors.ErrorDto, 404, "removed");
    await topics.delete("v1-news");
    eq(lastStatus(), 204, "delete: 204");
    await expectError(() => topics.retrieve("v1-news"), legacyErrors.ErrorDto, 404, "deleted");
    const r = await raw("GET", "/v2/subscribers/v1-ann/subscriptions");
    eq([r.status, r.json?.data], [200, []], "deleting the topic removed its subscriptions");
  });
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
finish();
