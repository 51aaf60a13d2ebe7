// The v1 preference routes (issue 22) through @novu/api 0.0.1, the last release with methods for them
// (`subscribers.preferences.list`, `retrieveByLevel`, `update`, `updateGlobal`), installed as the npm alias
// `@novu/api-legacy` (package.json). Every answer is parsed by that release's models, its values are asserted,
// in each state a subscriber's preferences can be in: defaults only, a workflow's default preferences, global
// and per-workflow changes, `enabled: false` at both levels, read-only and critical workflows, unknown
// subscriber or workflow, and a channel outside the five. tests/sdk/preferences_v1.py runs the same scenario
// with novu-py 0.3.4.

import { readFileSync } from "node:fs";

import { legacyErrors, novu } from "./legacy.mjs";
import { check, eq as eqOrdered, exchanges, expectError, finish, group, parseWith, raw, rawOk } from "./lib.mjs";

const SUBSCRIBER = "leo";
const prefs = novu.subscribers.preferences;

/** `eq` of lib.mjs, blind to the order of an object's keys (the SDK's models keep the server's order). */
const sorted = (v) => (v && typeof v === "object" && !Array.isArray(v)
  ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, sorted(x)]))
  : Array.isArray(v) ? v.map(sorted) : v);
const eq = (actual, expected, what) => eqOrdered(sorted(actual), sorted(expected), what);

const CHANNELS = ["inApp", "email", "sms", "chat", "push"];
/** Every channel on but the ones named (as the SDK's model names them). */
const on = (...off) => Object.fromEntries(CHANNELS.map((c) => [c, !off.includes(c)]));
const byIdentifier = (items) => Object.fromEntries(items.map((i) => [i.template.triggers[0].identifier, i]));
const inApp = (stepId) => ({ name: stepId, stepId, type: "in_app", controlValues: { body: stepId } });

async function main() {
  const pkg = JSON.parse(readFileSync(new globalThis.URL("./node_modules/@novu/api-legacy/package.json", import.meta.url)));
  eq([pkg.name, pkg.version], ["@novu/api", "0.0.1"], "@novu/api-legacy is @novu/api 0.0.1");
  // The scenario's world, created raw (this release's models of these routes are not under test here).
  await rawOk("POST", "/v2/subscribers", { subscriberId: SUBSCRIBER, firstName: "Leo" }, 201);
  const mail = { name: "mail", stepId: "mail", type: "email", controlValues: { subject: "Hi", body: "Hi" } };
  const ids = {};
  for (const body of [
    { name: "Plain", workflowId: "v1-plain", steps: [inApp("inbox"), mail] },
    { name: "Defaults", workflowId: "v1-defaults", steps: [inApp("inbox"), mail, { name: "text", stepId: "text", type: "sms", controlValues: { body: "Hi" } }],
      preferences: { user: null, workflow: { all: { enabled: true, readOnly: false }, channels: { email: { enabled: false } } } } },
    { name: "Read-only", workflowId: "v1-readonly", steps: [inApp("inbox")],
      preferences: { user: null, workflow: { all: { enabled: true, readOnly: true }, channels: {} } } },
    { name: "Critical", workflowId: "v1-critical", critical: true, steps: [inApp("inbox")] },
    { name: "Quiet", workflowId: "v1-quiet", steps: [{ name: "wait", stepId: "wait", type: "delay", controlValues: { amount: 1, unit: "seconds" } }] },
  ]) {
    ids[body.workflowId] = (await rawOk("POST", "/v2/workflows", { ...body, active: true }, 201))._id;
  }
  const template = (item, identifier, name) =>
    eq(item.template, { id: ids[identifier], name, critical: false, triggers: [{ type: "event", identifier, variables: [] }] }, `${identifier}: template`);

  await group("v1 preferences: list, defaults only (a workflow's default preferences)", async () => {
    const items = (await prefs.list(SUBSCRIBER)).result;
    eq(items.map((i) => i.template.triggers[0].identifier), ["v1-plain", "v1-defaults", "v1-readonly"],
      "non-critical workflows with a channel step, oldest first");
    const got = byIdentifier(items);
    template(got["v1-plain"], "v1-plain", "Plain");
    template(got["v1-defaults"], "v1-defaults", "Defaults");
    eq(Object.entries(got).map(([w, i]) => [w, i.preference]),
      [["v1-plain", { enabled: true, channels: on() }], ["v1-defaults", { enabled: true, channels: on("email") }],
        ["v1-readonly", { enabled: true, channels: on() }]], "each workflow's defaults, every channel");
  });

  await group("v1 preferences: list with includeInactiveChannels=false", async () => {
    const got = byIdentifier((await prefs.list(SUBSCRIBER, false)).result);
    eq(Object.entries(got).map(([w, i]) => [w, i.preference.channels]),
      [["v1-plain", { inApp: true, email: true }], ["v1-defaults", { email: false, sms: true, inApp: true }], ["v1-readonly", { inApp: true }]],
      "only the channels of each workflow's steps");
  });

  await group("v1 preferences: retrieveByLevel (global, template)", async () => {
    const g = (await prefs.retrieveByLevel({ subscriberId: SUBSCRIBER, preferenceLevel: "global" })).result;
    eq(g, [{ preference: { enabled: true, channels: on() } }], "global: one item without a template");
    const t = (await prefs.retrieveByLevel({ subscriberId: SUBSCRIBER, preferenceLevel: "template" })).result;
    eq(t.map((i) => [i.template.id, i.preference.channels]),
      [[ids["v1-plain"], on()], [ids["v1-defaults"], on("email")], [ids["v1-readonly"], on()]], "template level");
  });

  await group("v1 preferences: updateGlobal (channels)", async () => {
    const out = (await prefs.updateGlobal({ preferences: [{ type: "sms", enabled: false }, { type: "push", enabled: false }] }, SUBSCRIBER)).result;
    eq(out, { preference: { enabled: true, channels: on("sms", "push") } }, "updateGlobal answer");
    const got = byIdentifier((await prefs.list(SUBSCRIBER)).result);
    eq(Object.entries(got).map(([w, i]) => [w, i.preference.channels]),
      [["v1-plain", on("sms", "push")], ["v1-defaults", on("email", "sms", "push")], ["v1-readonly", on()]],
      "the global change reaches every workflow but the read-only one");
  });

  await group("v1 preferences: update a workflow (channel, enabled)", async () => {
    let out = (await prefs.update({ subscriberId: SUBSCRIBER, workflowId: "v1-plain",
      updateSubscriberPreferenceRequestDto: { channel: { type: "email", enabled: false } } })).result;
    template(out, "v1-plain", "Plain");
    eq(out.preference, { enabled: true, channels: on("email", "sms", "push") }, "email off for v1-plain");
    out = (await prefs.update({ subscriberId: SUBSCRIBER, workflowId: ids["v1-plain"],
      updateSubscriberPreferenceRequestDto: { channel: { type: "sms", enabled: true }, enabled: false } })).result;
    eq([out.template.id, out.preference], [ids["v1-plain"], { enabled: false, channels: on("email", "push") }],
      "by _id: the workflow off, sms on over the global level");
    const got = byIdentifier((await prefs.list(SUBSCRIBER)).result);
    eq(Object.entries(got).map(([w, i]) => [w, i.preference.enabled]), [["v1-plain", false], ["v1-defaults", true], ["v1-readonly", true]],
      "only v1-plain is off");
  });

  await group("v1 preferences: enabled false at the global level", async () => {
    const out = (await prefs.updateGlobal({ enabled: false }, SUBSCRIBER)).result;
    eq(out, { preference: { enabled: false, channels: on("sms", "push") } }, "everything off");
    await prefs.update({ subscriberId: SUBSCRIBER, workflowId: "v1-plain", updateSubscriberPreferenceRequestDto: { enabled: true } });
    const got = byIdentifier((await prefs.retrieveByLevel({ subscriberId: SUBSCRIBER, preferenceLevel: "template" })).result);
    eq(Object.entries(got).map(([w, i]) => [w, i.preference.enabled]), [["v1-plain", true], ["v1-defaults", false], ["v1-readonly", true]],
      "the global off, but v1-plain's own level on and v1-readonly's defaults");
    eq((await prefs.updateGlobal({ enabled: true }, SUBSCRIBER)).result.preference.enabled, true, "on again");
  });

  await group("v1 preferences: read-only and critical workflows refuse a change (400)", async () => {
    for (const [wf, words] of [["v1-readonly", "read-only"], ["v1-critical", "critical"]]) {
      const e = await expectError(() => prefs.update({ subscriberId: SUBSCRIBER, workflowId: wf, updateSubscriberPreferenceRequestDto: { enabled: false } }),
        legacyErrors.ErrorDto, 400, wf);
      eq(e.path, `/v1/subscribers/${SUBSCRIBER}/preferences/${wf}`, `${wf}: path`);
      check(e.message.includes(words), `${wf}: the message says why: ${e.message}`);
    }
    const got = byIdentifier((await prefs.list(SUBSCRIBER)).result);
    check(!("v1-critical" in got), "the critical workflow is not listed");
  });

  await group("v1 preferences: unknown subscriber or workflow (404)", async () => {
    for (const [what, call] of [
      ["list", () => prefs.list("nobody")],
      ["retrieveByLevel", () => prefs.retrieveByLevel({ subscriberId: "nobody", preferenceLevel: "global" })],
      ["updateGlobal", () => prefs.updateGlobal({ enabled: false }, "nobody")],
      ["update", () => prefs.update({ subscriberId: "nobody", workflowId: "v1-plain", updateSubscriberPreferenceRequestDto: { enabled: false } })],
    ]) {
      const e = await expectError(call, legacyErrors.ErrorDto, 404, `${what}: unknown subscriber`);
      check(e.message.includes("nobody"), `${what}: the 404 names the subscriber: ${e.message}`);
    }
    const e = await expectError(() => prefs.update({ subscriberId: SUBSCRIBER, workflowId: "v1-nothing", updateSubscriberPreferenceRequestDto: { enabled: false } }),
      legacyErrors.ErrorDto, 404, "unknown workflow");
    check(e.message.includes("v1-nothing"), `the 404 names the workflow: ${e.message}`);
  });

  await group("v1 preferences: a channel outside the five (422)", async () => {
    // This release's ChannelTypeEnum is closed: it refuses `tool` before sending anything.
    const before = exchanges.length;
    let refused;
    try {
      await prefs.update({ subscriberId: SUBSCRIBER, workflowId: "v1-plain", updateSubscriberPreferenceRequestDto: { channel: { type: "tool", enabled: true } } });
    } catch (e) {
      refused = e;
    }
    check(refused instanceof legacyErrors.SDKValidationError, `the SDK refuses tool: ${refused}`);
    eq(exchanges.length, before, "nothing sent");
    // Raw, the 422 parsed by this release's error model.
    for (const [path, body, field] of [
      [`/v1/subscribers/${SUBSCRIBER}/preferences/v1-plain`, { channel: { type: "tool", enabled: true } }, "channel.type"],
      [`/v1/subscribers/${SUBSCRIBER}/preferences`, { preferences: [{ type: "tool", enabled: false }] }, "preferences.0.type"],
    ]) {
      const r = await raw("PATCH", path, body);
      eq(r.status, 422, `PATCH ${path}`);
      const parsed = parseWith(legacyErrors.ValidationErrorDto$inboundSchema, r.json, `PATCH ${path}`);
      eq([Object.keys(parsed.errors), parsed.errors[field]?.value], [[field], "tool"], `PATCH ${path}: the channel named`);
    }
    const r = await raw("GET", `/v1/subscribers/${SUBSCRIBER}/preferences/weekly`);
    eq(r.status, 422, "an unknown level");
    eq(parseWith(legacyErrors.ValidationErrorDto$inboundSchema, r.json, "an unknown level").errors.parameter?.value, "weekly", "the level named");
    const got = byIdentifier((await prefs.list(SUBSCRIBER)).result);
    eq(got["v1-plain"].preference.channels, on("email", "push"), "nothing changed");
  });
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
finish();
