// Prints the operations of the installed @novu/api, one JSON object a line: its accessor from the client
// (`subscribers.notifications.list`), HTTP method, path template and operation id. Offline: a client is built
// but never sends anything (run by tests/it/compatibility.rs).
//
// Each operation is a function of `funcs/` (`pathToFunc("/v2/…")`, `method: "…"`, `operationID: "…"`); a
// sub-SDK class exposes it as a method calling `(0, xxx_js_1.funcName)(this, …)`, and its sub-SDKs as getters.
// The walk starts at the `Novu` client; every function of `funcs/` must be reached exactly once.

import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

import { Novu } from "@novu/api";

const funcs = join(dirname(createRequire(import.meta.url).resolve("@novu/api/package.json")), "funcs");

function fail(what) {
  console.error(what);
  process.exit(1);
}

/** `{method, path, operationId}` of the function `name` of `funcs/`. */
function describe(name) {
  const text = readFileSync(join(funcs, `${name}.js`), "utf8");
  const one = (re, what) => {
    const all = [...text.matchAll(re)];
    if (all.length !== 1) fail(`funcs/${name}.js: ${all.length} ${what}`);
    return all[0][1];
  };
  return {
    method: one(/\bmethod: "([A-Z]+)"/g, "methods"),
    path: one(/pathToFunc\)\("([^"]+)"\)/g, "paths"),
    operationId: one(/\boperationID: "([^"]+)"/g, "operation ids"),
  };
}

const reached = new Map();

function walk(sdk, prefix) {
  const proto = Object.getPrototypeOf(sdk);
  for (const name of Object.getOwnPropertyNames(proto)) {
    if (name === "constructor") continue;
    const desc = Object.getOwnPropertyDescriptor(proto, name);
    if (desc.get) {
      walk(sdk[name], `${prefix}${name}.`);
      continue;
    }
    if (typeof desc.value !== "function") continue;
    const calls = [...desc.value.toString().matchAll(/\(0, \w+_js_1\.(\w+)\)\(this\b/g)];
    if (calls.length !== 1) fail(`${prefix}${name}: ${calls.length} calls of funcs/`);
    const func = calls[0][1];
    if (reached.has(func)) fail(`funcs/${func}.js is reached twice: ${reached.get(func)}, ${prefix}${name}`);
    reached.set(func, `${prefix}${name}`);
    console.log(JSON.stringify({ accessor: `${prefix}${name}`, ...describe(func) }));
  }
}

walk(new Novu({ serverURL: "http://127.0.0.1:9", secretKey: "offline" }), "");
const defined = readdirSync(funcs).filter((f) => f.endsWith(".js")).map((f) => f.slice(0, -3));
const missed = defined.filter((f) => !reached.has(f));
if (missed.length) fail(`funcs/ that no accessor reaches: ${missed.join(", ")}`);
