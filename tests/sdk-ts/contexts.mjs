// @novu/api against /v2/contexts (issue 38): every method of `novu.contexts` (create, list, retrieve, update,
// delete) in every state it produces, every answer parsed by the SDK's zod models and its values asserted, and
// the errors through the SDK's error classes: 409, 422, 404 (also another environment's). tests/sdk/contexts.py
// runs the same scenario with novu-py. TIDINGS_OTHER_KEY is the key of a second environment of the server.

import { Novu } from "@novu/api";
import { ISO_UTC, URL, check, client, eq, errors, exchanges, expectError, finish, group, rawOk } from "./lib.mjs";

const novu = client();
const key = (c) => `${c.type}:${c.id}`;
const last = () => exchanges[exchanges.length - 1];

async function main() {
  let acme;
  await group("contexts: create, retrieve, update, delete; 409, 422, 404", async () => {
    acme = (await novu.contexts.create({ type: "tenant", id: "acme", data: { name: "Acme", plan: { seats: 3 } } })).result;
    eq([last().status, Object.keys(JSON.parse(last().body))], [201, ["data"]], "create: 201 in the data envelope");
    eq([acme.type, acme.id, acme.data], ["tenant", "acme", { name: "Acme", plan: { seats: 3 } }], "create");
    check(ISO_UTC.test(acme.createdAt) && acme.createdAt === acme.updatedAt, `create times ${JSON.stringify(acme)}`);
    eq((await novu.contexts.create({ type: "app", id: "jira" })).result.data, {}, "create without data: data is {}");

    eq((await novu.contexts.retrieve("acme", "tenant")).result, acme, "retrieve");
    const changed = (await novu.contexts.update({ type: "tenant", id: "acme", updateContextRequestDto: { data: { name: "Acme Corp" } } })).result;
    eq([changed.data, changed.createdAt], [{ name: "Acme Corp" }, acme.createdAt], "update replaces the data");
    check(changed.updatedAt > acme.updatedAt, `update: updatedAt ${changed.updatedAt} after ${acme.updatedAt}`);
    eq((await novu.contexts.retrieve("acme", "tenant")).result.data, { name: "Acme Corp" }, "retrieve after update");

    const e = await expectError(() => novu.contexts.create({ type: "tenant", id: "acme" }), errors.ErrorDto, 409, "a taken type:id");
    check(String(e.message).includes("already exists"), `409 message ${e.message}`);
    for (const [body, what] of [
      [{ type: "ten:ant", id: "x" }, "a type with ':'"],
      [{ type: "tenant", id: "x".repeat(101) }, "an id over 100 characters"],
      [{ type: "tenant", id: "" }, "an empty id"],
      [{ type: "tenant", id: "big", data: { blob: "x".repeat(64 * 1024) } }, "data over 64 KiB"],
    ]) {
      await expectError(() => novu.contexts.create(body), errors.ValidationErrorDto, 422, what);
    }
    await expectError(() => novu.contexts.list({ limit: 101 }), errors.ValidationErrorDto, 422, "limit 101");
    await expectError(() => novu.contexts.list({ orderBy: "name" }), errors.ValidationErrorDto, 422, "orderBy name");
    for (const [call, what] of [
      [() => novu.contexts.retrieve("nobody", "tenant"), "retrieve unknown"],
      [() => novu.contexts.update({ type: "tenant", id: "nobody", updateContextRequestDto: { data: {} } }), "update unknown"],
      [() => novu.contexts.delete("nobody", "tenant"), "delete unknown"],
    ]) {
      const e404 = await expectError(call, errors.ErrorDto, 404, what);
      eq(e404.path, "/v2/contexts/tenant/nobody", `${what}: path`);
    }

    eq(await novu.contexts.delete("jira", "app"), undefined, "delete answers nothing");
    eq([last().status, last().body], [204, ""], "delete: 204 without a body");
    await expectError(() => novu.contexts.retrieve("jira", "app"), errors.ErrorDto, 404, "deleted");
  });

  await group("contexts: list pages, orders and filters", async () => {
    for (const [type, id] of [["tenant", "globex"], ["app", "tenant-tools"], ["region", "eu"], ["region", "us"]]) {
      await novu.contexts.create({ type, id, data: { n: id } });
    }
    const everything = (await novu.contexts.list({ limit: 100 })).result;
    eq([everything.totalCount, everything.totalCountCapped, everything.next, everything.previous], [5, false, null, null], "one page");
    const newestFirst = everything.data.map(key);
    const sorted = [...everything.data].sort((a, b) => (a.createdAt + key(a) < b.createdAt + key(b) ? 1 : -1)).map(key);
    eq(newestFirst, sorted, "newest first, then by key");
    eq((await novu.contexts.list({ orderDirection: "ASC" })).result.data.map(key), [...newestFirst].reverse(), "ASC");

    const first = (await novu.contexts.list({ limit: 2 })).result;
    eq([first.data.map(key), first.next, first.previous], [newestFirst.slice(0, 2), newestFirst[1], null], "first page");
    const middle = (await novu.contexts.list({ limit: 2, after: first.next })).result;
    eq(middle.data.map(key), newestFirst.slice(2, 4), "middle page");
    check(middle.next && middle.previous, `middle cursors ${middle.next} ${middle.previous}`);
    const lastPage = (await novu.contexts.list({ limit: 2, after: middle.next })).result;
    eq([lastPage.data.map(key), lastPage.next], [newestFirst.slice(4), null], "last page");
    eq((await novu.contexts.list({ limit: 2, before: lastPage.previous })).result.data.map(key), newestFirst.slice(2, 4), "back a page");
    eq((await novu.contexts.list({ limit: 2, after: first.next, includeCursor: true })).result.data.map(key), newestFirst.slice(1, 3), "includeCursor");

    const keys = async (request) => {
      const page = (await novu.contexts.list(request)).result;
      return [page.data.map(key).sort(), page.totalCount];
    };
    eq(await keys({ id: "eu" }), [["region:eu"], 1], "by id");
    eq(await keys({ search: "TENANT" }), [["app:tenant-tools", "tenant:acme", "tenant:globex"], 3], "search");
    eq(await keys({ search: "on:u" }), [["region:us"], 1], "search across type:id");
    eq(await keys({ search: "nothing" }), [[], 0], "search without a match");

    await novu.contexts.update({ type: "region", id: "eu", updateContextRequestDto: { data: { n: "changed" } } });
    eq((await novu.contexts.list({ orderBy: "updatedAt", limit: 1 })).result.data.map(key), ["region:eu"], "orderBy updatedAt");
  });

  await group("contexts: a trigger's context is the same record", async () => {
    await rawOk("POST", "/v2/workflows", { name: "Ctx", workflowId: "ctx", steps: [
      { name: "Inbox", stepId: "inbox", type: "in_app", controlValues: { body: "hi {{ context.team.data.name }}" } }] }, 201);
    await novu.trigger({ workflowId: "ctx", to: "sdk-ctx-ann", context: { team: { id: "blue", data: { name: "Blue" } } } });
    const team = (await novu.contexts.retrieve("blue", "team")).result;
    eq([team.type, team.id, team.data], ["team", "blue", { name: "Blue" }], "the trigger's context");
  });

  await group("contexts: another environment's are a 404", async () => {
    const other = new Novu({ secretKey: process.env.TIDINGS_OTHER_KEY, serverURL: URL, retryConfig: { strategy: "none" } }).contexts;
    eq((await other.list({})).result.totalCount, 0, "another environment lists none of these");
    for (const [call, what] of [
      [() => other.retrieve("acme", "tenant"), "retrieve"],
      [() => other.update({ type: "tenant", id: "acme", updateContextRequestDto: { data: { x: 1 } } }), "update"],
      [() => other.delete("acme", "tenant"), "delete"],
    ]) {
      await expectError(call, errors.ErrorDto, 404, `another environment's context: ${what}`);
    }
    eq((await other.create({ type: "tenant", id: "acme", data: { x: 2 } })).result.data, { x: 2 }, "its own tenant:acme");
    eq((await novu.contexts.retrieve("acme", "tenant")).result.data, { name: "Acme Corp" }, "ours unchanged");
  });
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
finish();
