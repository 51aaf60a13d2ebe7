// The official Svix client (`svix` on npm, pinned in package.json) managing a Tidings environment's webhook
// endpoints (issue 39): create (a secret made or given), retrieve by id and by uid, list pages in both orders,
// patch, replace (and create through replace), read and rotate the secret, delete; every answer checked field
// by field against the client's own model (no key it does not know, every key it requires) and its values
// asserted; the errors as the client raises them: 422, 409, 404 (unknown, deleted, another environment's
// endpoint or app), 401. tests/sdk/webhook_endpoints.py runs the same scenario with the Python client.
//
// TIDINGS_APP_ID is the environment's applicationIdentifier; TIDINGS_OTHER_KEY and TIDINGS_OTHER_APP_ID are a
// second environment's key and identifier.

import { ApiException, Svix } from "svix";
import { check, eq, finish, group } from "./lib.mjs";

const URL = process.env.TIDINGS_URL;
const APP = process.env.TIDINGS_APP_ID;
const OTHER_APP = process.env.TIDINGS_OTHER_APP_ID;
const VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/** The raw answers, to check them against the client's models (which copy fields without checking). */
const answers = [];
async function recordingFetch(url, init) {
  const res = await fetch(url, init);
  answers.push({ method: init.method, url: String(url), status: res.status, body: await res.clone().text() });
  return res;
}
const lastAnswer = () => answers[answers.length - 1];

function svix(key) {
  return new Svix(key, { serverUrl: URL, retryScheduleInMs: [], fetch: recordingFetch });
}
const client = svix(process.env.TIDINGS_KEY);
const other = svix(process.env.TIDINGS_OTHER_KEY);

// The keys of svix@2.5.0's models (src/models/*.ts): required ones, then optional ones.
const ENDPOINT_OUT = [["id", "metadata", "url", "description", "createdAt", "updatedAt"],
  ["throttleRate", "uid", "disabled", "eventTypes", "channels"]];
const LIST_OUT = [["data", "iterator", "done"], ["prevIterator"]];
const SECRET_OUT = [["key"], []];
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** The object has every required key of `model`, no key it does not know, and ISO times. */
function strict(obj, [required, optional], what) {
  const keys = Object.keys(obj);
  const unknown = keys.filter((k) => !required.includes(k) && !optional.includes(k));
  const missing = required.filter((k) => !keys.includes(k));
  eq([unknown, missing], [[], []], `${what}: unknown and missing keys`);
  for (const k of ["createdAt", "updatedAt"]) {
    if (k in obj) check(ISO.test(obj[k]), `${what}: ${k} ${obj[k]}`);
  }
}

/** The last answer's JSON, checked against `model` (a list's items against ENDPOINT_OUT). */
function strictAnswer(model, what) {
  const body = JSON.parse(lastAnswer().body);
  strict(body, model, what);
  if (model === LIST_OUT) body.data.forEach((e, i) => strict(e, ENDPOINT_OUT, `${what}: item ${i}`));
  return body;
}

async function expectApiError(call, status, what) {
  try {
    const r = await call();
    throw new Error(`${what}: expected HTTP ${status}, the call succeeded with ${JSON.stringify(r).slice(0, 300)}`);
  } catch (e) {
    check(e instanceof ApiException, `${what}: expected an ApiException, got ${e?.constructor?.name}: ${e?.message}`);
    eq(e.code, status, `${what}: status`);
    return e.body;
  }
}

async function main() {
  let first, second;
  await group("create, retrieve by id and uid, secret made and given", async () => {
    first = await client.endpoint.create(APP, {
      url: "https://hooks.example.com/tidings",
      description: "Orders team",
      uid: "orders-hook",
      eventTypes: ["message.sent", "message.read", "message.sent"],
      metadata: { team: "orders" },
      throttleRate: 100,
    });
    eq(lastAnswer().status, 201, "create: 201");
    strictAnswer(ENDPOINT_OUT, "create");
    check(/^ep_[0-9a-f]{24}$/.test(first.id), `id ${first.id}`);
    eq([first.url, first.description, first.uid, first.eventTypes, first.metadata, first.throttleRate, first.disabled],
      ["https://hooks.example.com/tidings", "Orders team", "orders-hook", ["message.sent", "message.read"], { team: "orders" }, 100, false],
      "create: fields (event types deduplicated)");
    check(first.createdAt instanceof Date && first.createdAt.getTime() === first.updatedAt.getTime(), "create: times");

    second = await client.endpoint.create(APP, { url: "http://127.0.0.1:9/second", secret: VECTOR_SECRET });
    strictAnswer(ENDPOINT_OUT, "create with a secret");
    eq([second.description, second.metadata, second.eventTypes, second.uid], ["", {}, undefined, undefined], "defaults");

    eq(await client.endpoint.get(APP, first.id), first, "retrieve by id");
    strictAnswer(ENDPOINT_OUT, "retrieve");
    eq(await client.endpoint.get(APP, "orders-hook"), first, "retrieve by uid");

    eq((await client.endpoint.getSecret(APP, second.id)).key, VECTOR_SECRET, "the given secret");
    strictAnswer(SECRET_OUT, "secret");
    const made = (await client.endpoint.getSecret(APP, "orders-hook")).key;
    check(/^whsec_[A-Za-z0-9+/]{32}$/.test(made), `a made secret: ${made}`);
  });

  await group("list: pages by iterator, both orders", async () => {
    const all = await client.endpoint.list(APP);
    strictAnswer(LIST_OUT, "list");
    eq([all.data.map((e) => e.id), all.done, all.iterator], [[second.id, first.id], true, null], "newest first, one page");
    const one = await client.endpoint.list(APP, { limit: 1 });
    eq([one.data.map((e) => e.id), one.done], [[second.id], false], "page 1 of 2");
    const two = await client.endpoint.list(APP, { limit: 1, iterator: one.iterator });
    eq([two.data.map((e) => e.id), two.done, two.iterator], [[first.id], true, null], "page 2 of 2");
    const back = await client.endpoint.list(APP, { limit: 1, iterator: two.prevIterator });
    eq(back.data.map((e) => e.id), [second.id], "prevIterator goes back");
    const oldest = await client.endpoint.list(APP, { order: "ascending" });
    eq(oldest.data.map((e) => e.id), [first.id, second.id], "ascending");
    await expectApiError(() => client.endpoint.list(APP, { limit: 251 }), 422, "limit 251");
  });

  await group("patch, replace, create through replace", async () => {
    const patched = await client.endpoint.patch(APP, first.id, { description: "Orders", eventTypes: null, disabled: true });
    strictAnswer(ENDPOINT_OUT, "patch");
    eq([patched.description, patched.eventTypes, patched.uid, patched.metadata, patched.disabled, patched.throttleRate],
      ["Orders", undefined, "orders-hook", { team: "orders" }, true, 100], "patch changes only what it names");
    check(patched.updatedAt > first.updatedAt && patched.createdAt.getTime() === first.createdAt.getTime(), "patch: times");

    const replaced = await client.endpoint.upsert(APP, "orders-hook", { url: "https://hooks.example.com/v2", uid: "orders-hook" });
    eq(lastAnswer().status, 200, "replace: 200");
    strictAnswer(ENDPOINT_OUT, "replace");
    eq([replaced.id, replaced.url, replaced.description, replaced.metadata, replaced.disabled, replaced.throttleRate],
      [first.id, "https://hooks.example.com/v2", "", {}, false, undefined], "replace resets what it leaves out");

    const created = await client.endpoint.upsert(APP, "fresh-hook", { url: "https://hooks.example.com/fresh" });
    eq(lastAnswer().status, 201, "replace of an unknown uid creates: 201");
    eq([created.uid, created.url], ["fresh-hook", "https://hooks.example.com/fresh"], "created through replace");
    await client.endpoint.delete(APP, "fresh-hook");
  });

  await group("rotate the secret", async () => {
    const before = (await client.endpoint.getSecret(APP, first.id)).key;
    eq(await client.endpoint.rotateSecret(APP, first.id, {}), undefined, "rotate: the client reads no answer");
    eq(lastAnswer().status, 200, "rotate: 200");
    const rotated = strictAnswer(SECRET_OUT, "rotate").key;
    const after = (await client.endpoint.getSecret(APP, first.id)).key;
    eq(after, rotated, "rotate answers the new secret");
    check(after !== before && after.startsWith("whsec_"), `a new secret: ${before} -> ${after}`);
    await client.endpoint.rotateSecret(APP, first.id, { key: VECTOR_SECRET, gracePeriodSeconds: 60 });
    eq((await client.endpoint.getSecret(APP, first.id)).key, VECTOR_SECRET, "rotated to the given key");
    await expectApiError(() => client.endpoint.rotateSecret(APP, first.id, { key: "whsec_c2hvcnQ=" }), 422, "a short key");
    await expectApiError(() => client.endpoint.rotateSecret(APP, first.id, { gracePeriodSeconds: 86401 }), 422, "grace over 24 h");
  });

  await group("errors: 422, 409, 404, 401", async () => {
    for (const [body, what] of [
      [{ url: "ftp://example.com/x" }, "an ftp url"],
      [{ url: "not a url" }, "not a url"],
      [{ url: "https://example.com", eventTypes: ["message.exploded"] }, "an unknown event type"],
      [{ url: "https://example.com", eventTypes: [] }, "no event types"],
      [{ url: "https://example.com", uid: "has space" }, "a bad uid"],
      [{ url: "https://example.com", throttleRate: 0 }, "throttleRate 0"],
      [{ url: "https://example.com", secret: "whsec_c2hvcnQ=" }, "a short secret"],
    ]) {
      const body422 = await expectApiError(() => client.endpoint.create(APP, body), 422, what);
      check(Array.isArray(body422.detail) && body422.detail.every((d) => Array.isArray(d.loc) && typeof d.msg === "string"),
        `${what}: Svix's validation body ${JSON.stringify(body422)}`);
    }
    const conflict = await expectApiError(() => client.endpoint.create(APP, { url: "https://example.com", uid: "orders-hook" }), 409, "a taken uid");
    eq(conflict.code, "conflict", "409 code");
    const missing = await expectApiError(() => client.endpoint.get(APP, "ep_000000000000000000000000"), 404, "unknown endpoint");
    eq(missing.code, "not_found", "404 code");
    await expectApiError(() => client.endpoint.list(OTHER_APP), 404, "another environment's app with this key");
    await expectApiError(() => other.endpoint.get(OTHER_APP, first.id), 404, "this endpoint through another environment");
    eq((await other.endpoint.list(OTHER_APP)).data, [], "another environment sees none of these");
    await expectApiError(() => svix("not-a-key").endpoint.list(APP), 401, "an unknown key");
  });

  await group("delete", async () => {
    eq(await client.endpoint.delete(APP, second.id), undefined, "delete answers nothing");
    eq([lastAnswer().status, lastAnswer().body], [204, ""], "delete: 204 without a body");
    await expectApiError(() => client.endpoint.get(APP, second.id), 404, "deleted");
    await expectApiError(() => client.endpoint.delete(APP, second.id), 404, "deleted twice");
    eq((await client.endpoint.list(APP)).data.map((e) => e.id), [first.id], "one left");
  });
  finish();
}

await main();
