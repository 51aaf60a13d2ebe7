// @novu/api against /v1/environments in the `novu` profile (issue 38): create, list, update, delete, and
// their errors, every answer parsed by the SDK's models. tests/sdk/environments.py runs the same scenario
// with novu-py.
//
// Environment: TIDINGS_URL, TIDINGS_KEY, from tests/it/novu_sdk.rs.

import { OBJECT_ID, check, client, eq, errors, expectError, finish, group, lastJson, raw } from "./lib.mjs";

const UNKNOWN_ID = "0123456789abcdef01234567";
const RUN = Date.now().toString(36);
const novu = client();

function checkEnvironment(e, what) {
  check(OBJECT_ID.test(e?.id ?? ""), `${what}: _id ${e?.id}`);
  check(typeof e.organizationId === "string" && e.organizationId, `${what}: _organizationId`);
  check(typeof e.identifier === "string" && e.identifier, `${what}: identifier`);
}

async function main() {
  const dev = (await novu.environments.list()).result.find((e) => e.name === "Development");
  let created;
  let key;

  await group("environments: create shows the new key this once", async () => {
    created = (await novu.environments.create({ name: `TS ${RUN}`, color: "#3366ff" })).result;
    checkEnvironment(created, "create");
    eq([created.name, created.organizationId, created.identifier.length], [`TS ${RUN}`, dev.organizationId, 12], "create");
    eq(created.apiKeys?.length, 1, "create: one key");
    key = created.apiKeys[0].key;
    check(typeof key === "string" && key.length >= 32, `create: key ${key}`);
    eq(created.apiKeys[0].userId, dev.id, "create: _userId");
  });

  await group("environments: list never shows a key", async () => {
    const listed = (await novu.environments.list()).result;
    for (const e of listed) {
      checkEnvironment(e, `list ${e.name}`);
      eq(e.apiKeys, undefined, `list ${e.name}: apiKeys`);
    }
    check(!JSON.stringify(lastJson()).includes(key), "list: the new key in the answer");
    eq(listed.filter((e) => e.id === created.id).map((e) => e.identifier), [created.identifier], "list: the new one");
  });

  const mine = client(key);
  await group("environments: update the key's own environment", async () => {
    const updated = (await mine.environments.update(
      { name: `TS renamed ${RUN}`, identifier: `ts-${RUN}`, color: "#00ff00" }, created.id)).result;
    checkEnvironment(updated, "update");
    eq([updated.id, updated.name, updated.identifier, updated.apiKeys], [created.id, `TS renamed ${RUN}`, `ts-${RUN}`, undefined], "update");
  });

  await group("environments: errors", async () => {
    await expectError(() => novu.environments.update({ name: "X" }, created.id), errors.ErrorDto, 403, "update a sibling");
    await expectError(() => novu.environments.update({ name: "X" }, UNKNOWN_ID), errors.ErrorDto, 404, "update an unknown one");
    const e = await expectError(() => mine.environments.update({ parentId: dev.id, dns: { inboundParseDomain: "in.example.com" } }, created.id),
      errors.ValidationErrorDto, 422, "update with what Tidings has not");
    eq(Object.keys(e.errors).sort(), ["dns", "parentId"], "422 fields");
    await expectError(() => novu.environments.create({ name: `TS renamed ${RUN}`, color: "#000000" }), errors.ErrorDto, 409, "a taken name");
    await expectError(() => novu.environments.create({ name: "development", color: "#000000" }), errors.ValidationErrorDto, 422, "a protected name");
    await expectError(() => novu.environments.delete(dev.id), errors.ErrorDto, 400, "delete Development");
    await expectError(() => novu.environments.delete(created.id), errors.ErrorDto, 403, "delete a sibling");
  });

  await group("environments: delete refuses the key at once", async () => {
    await mine.environments.delete(created.id);
    await expectError(() => mine.environments.list(), errors.ErrorDto, 401, "the deleted environment's key");
    eq((await novu.environments.list()).result.filter((e) => e.id === created.id), [], "list after delete");
    await expectError(() => novu.environments.delete(created.id), errors.ErrorDto, 404, "delete again");
    const r = await raw("GET", "/v1/environments/me", undefined, `ApiKey ${key}`);
    eq(r.status, 401, "raw: the key");
  });
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
finish();
