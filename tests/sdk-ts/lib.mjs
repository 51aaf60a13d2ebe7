// Helpers of the `@novu/api` scripts in this folder (run by tests/it/novu_sdk.rs with `node`).
//
// A script builds a client with `client()`, runs each route group in `group(name, fn)` and ends with
// `finish()`: a failing group is recorded and the script goes on, so one run lists every failure; `finish`
// prints them and exits 1 when there is any. The SDK parses every answer with its zod models (nothing
// here turns that off): an answer the model rejects throws `ResponseValidationError`, whose zod issues
// (field path and message) are printed. Retries are off, so a failure surfaces at once.

import { HTTPClient, Novu } from "@novu/api";
import * as errors from "@novu/api/models/errors/index.js";

export const URL = process.env.TIDINGS_URL;
export const KEY = process.env.TIDINGS_KEY;
export const OBJECT_ID = /^[0-9a-f]{24}$/;
export const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
export { errors };

/** Every exchange the SDK made: `{method, url, status, body}` (body read from a clone). */
export const exchanges = [];

const http = new HTTPClient();
http.addHook("response", async (res, req) => {
  const body = await res.clone().text();
  exchanges.push({ method: req.method, url: req.url, status: res.status, body });
});

/** A Novu client against the server under test (with `key`, the app's by default), retries off, every
 * exchange recorded. */
export function client(key = KEY) {
  return new Novu({ secretKey: key, serverURL: URL, retryConfig: { strategy: "none" }, httpClient: http });
}

/** The last exchange, for failure messages. */
export function lastExchange() {
  const x = exchanges[exchanges.length - 1];
  return x ? `${x.method} ${new globalThis.URL(x.url).pathname}${new globalThis.URL(x.url).search} -> ${x.status} ${x.body.slice(0, 800)}` : "(none)";
}

/** The JSON body of the last exchange, as the server sent it (before the SDK's models strip anything). */
export function lastJson() {
  const x = exchanges[exchanges.length - 1];
  return x ? JSON.parse(x.body) : undefined;
}

export class CheckFailed extends Error {}

export function check(cond, what) {
  if (!cond) throw new CheckFailed(what);
}

export function eq(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new CheckFailed(`${what}: expected ${e}, got ${a}`);
}

/** A raw request through the SDK's HTTP client (for what no SDK method does); answers `{status, json}`.
 * `authorization` is the header sent (another environment's key, an Inbox `Bearer` token), none when null. */
export async function raw(method, path, body, authorization = `ApiKey ${KEY}`) {
  return rawAt(URL, method, path, body, authorization);
}

/** `raw` to the server at `base` (another instance than `TIDINGS_URL`'s). */
export async function rawAt(base, method, path, body, authorization = `ApiKey ${KEY}`) {
  const headers = { Accept: "application/json" };
  if (authorization !== null) headers.Authorization = authorization;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const request = new Request(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const response = await http.request(request);
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = text;
  }
  return { status: response.status, json, text, request, response };
}

/** Parses a raw error answer (from `raw`) with an SDK error class's schema (e.g.
 * `errors.ValidationErrorDto$inboundSchema`), as the SDK does: answers the error or throws the zod issues. */
export function parseError(schema, r, what) {
  const parsed = schema.safeParse({ ...r.json, request$: r.request, response$: r.response, body$: r.text });
  if (!parsed.success) throw new CheckFailed(`${what}: the SDK's error model rejects the answer: ${issues(parsed.error)}`);
  return parsed.data;
}

/** `raw` expecting `status`; answers the body without the `{"data": …}` envelope when it has one. */
export async function rawOk(method, path, body, status = 200, authorization = undefined) {
  return rawOkAt(URL, method, path, body, status, authorization);
}

/** `rawOk` to the server at `base`; a failure names it when it is not `TIDINGS_URL`. */
export async function rawOkAt(base, method, path, body, status = 200, authorization = undefined) {
  const r = await rawAt(base, method, path, body, authorization);
  const at = base === URL ? "" : ` at ${base}`;
  check(r.status === status, `${method} ${path}${at}: expected ${status}, got ${r.status} ${JSON.stringify(r.json).slice(0, 500)}`);
  return r.json && typeof r.json === "object" && !Array.isArray(r.json) && Object.keys(r.json).length === 1 && "data" in r.json
    ? r.json.data
    : r.json;
}

/** Parses `value` with a zod schema of the SDK (for raw answers); throws the zod error's issues. */
export function parseWith(schema, value, what) {
  const r = schema.safeParse(value);
  if (!r.success) throw new CheckFailed(`${what}: the SDK model rejects the answer: ${issues(r.error)}`);
  return r.data;
}

function issues(zodError) {
  const list = zodError?.issues ?? zodError?.errors ?? [];
  if (!list.length) return String(zodError?.message ?? zodError);
  return list
    .flatMap((i) => (i.code === "invalid_union" && i.unionErrors ? [i, ...i.unionErrors.flatMap((u) => u.issues.slice(0, 3))] : [i]))
    .slice(0, 12)
    .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}${i.expected ? ` (expected ${i.expected}, received ${i.received})` : ""}`)
    .join("; ");
}

/** Runs `call`, which must throw the SDK error class `cls` with HTTP `status`; answers the error. */
export async function expectError(call, cls, status, what) {
  let result;
  try {
    result = await call();
  } catch (e) {
    check(e instanceof cls && e.statusCode === status,
      `${what}: expected ${cls.name} ${status}, got ${e?.constructor?.name} ${e?.statusCode}: ${String(e?.message).slice(0, 300)}`);
    return e;
  }
  throw new CheckFailed(`${what}: expected ${cls.name} ${status}, the call succeeded with ${JSON.stringify(result).slice(0, 300)}`);
}

/** Describes a failure: the route of the last exchange, the SDK's error class and, for a model that
 * rejected an answer, each field and message. */
function describe(e) {
  if (e instanceof errors.ResponseValidationError) {
    return `ResponseValidationError on ${lastExchange().slice(0, 200)}\n      fields: ${issues(e.cause)}`;
  }
  if (e instanceof errors.SDKValidationError) {
    return `SDKValidationError: ${issues(e.cause)}\n      last exchange: ${lastExchange()}`;
  }
  if (e instanceof errors.NovuError) {
    return `${e.constructor.name} ${e.statusCode}: ${String(e.message).slice(0, 300)}\n      last exchange: ${lastExchange()}`;
  }
  if (e instanceof CheckFailed) return `${e.message}\n      last exchange: ${lastExchange()}`;
  // Another release's validation error (e.g. @novu/api-legacy's): its zod issues.
  if (e?.cause?.issues) return `${e.constructor.name}: ${issues(e.cause)}\n      last exchange: ${lastExchange()}`;
  return `${e?.constructor?.name}: ${e?.stack ?? e}`;
}

const failures = [];

/** Runs one route group; a failure is recorded and the script continues. */
export async function group(name, fn) {
  try {
    await fn();
    console.log(`ok    ${name}`);
  } catch (e) {
    failures.push(`${name}: ${describe(e)}`);
    console.log(`FAIL  ${name}`);
  }
}

/** Runs `call`; on an error records it under `name` and answers `undefined` (for steps later groups need). */
export async function attempt(name, call) {
  try {
    return await call();
  } catch (e) {
    failures.push(`${name}: ${describe(e)}`);
    console.log(`FAIL  ${name}`);
    return undefined;
  }
}

/** The body of the last exchange without the `{"data": …}` envelope. */
export function lastWire() {
  const body = lastJson();
  return body && typeof body === "object" && !Array.isArray(body) && "data" in body && !("hasMore" in body) && !("next" in body)
    ? body.data
    : body;
}

/** Calls the SDK: answers `{result, wire}`, the parsed answer and the answer as sent (without the envelope).
 * When the SDK fails (e.g. its model rejects the answer) the failure is recorded under `name`, `result` is
 * undefined and `wire` still holds what the server sent, so value checks and later groups go on. */
export async function sdk(name, fn) {
  const before = exchanges.length;
  try {
    const out = await fn();
    return { result: out?.result, wire: exchanges.length > before ? lastWire() : undefined };
  } catch (e) {
    failures.push(`${name}: ${describe(e)}`);
    console.log(`FAIL  ${name}`);
    return { result: undefined, wire: exchanges.length > before ? lastWire() : undefined };
  }
}

/** Polls `probe` every 100 ms until it answers a truthy value (at most `seconds`). */
export async function until(what, probe, seconds = 20) {
  const deadline = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new CheckFailed(`${what}: not reached in ${seconds} s`);
}

/** Prints every recorded failure and exits 1 when there is any. */
export function finish() {
  if (failures.length) {
    console.error(`\n${failures.length} failure(s) with @novu/api:`);
    for (const f of failures) console.error(`  - ${f}`);
    process.exit(1);
  }
  console.log("ok");
}
