// The SDK contract with @novu/api (issue 19): every route of the server, called through the SDK method that
// calls it, after a scenario producing every state the engine produces; every answer is parsed by the
// SDK's models and its values are asserted. tests/sdk/contract.py runs the same scenario with novu-py.
//
// Environment: TIDINGS_URL, TIDINGS_KEY, and from tests/it/novu_sdk.rs the test SMTP server
// (TIDINGS_SMTP_HOST, TIDINGS_SMTP_PORT), a port nobody listens on (TIDINGS_CLOSED_PORT) and the
// receiver standing in for the SMS, chat and push providers and the http_request endpoint
// (TIDINGS_RECEIVER_URL).

import * as components from "@novu/api/models/components/index.js";
import {
  KEY,
  OBJECT_ID,
  ISO_UTC,
  attempt,
  check,
  client,
  eq,
  errors,
  exchanges,
  expectError,
  finish,
  group,
  lastExchange,
  lastJson,
  parseError,
  parseWith,
  raw,
  rawOk,
  sdk,
  until,
} from "./lib.mjs";

const SMTP_HOST = process.env.TIDINGS_SMTP_HOST;
const SMTP_PORT = process.env.TIDINGS_SMTP_PORT;
const CLOSED_PORT = process.env.TIDINGS_CLOSED_PORT;
const R = process.env.TIDINGS_RECEIVER_URL;
const UNKNOWN_ID = "0123456789abcdef01234567";
const RUN = Date.now().toString(36);
const tx = (name) => `${name}-${RUN}`;

const novu = client();

/** The activity items of `transactionId`, read raw (polling must not depend on the models under test). */
async function activity(transactionId) {
  const page = await rawOk("GET", `/v1/notifications?transactionId=${encodeURIComponent(transactionId)}&limit=50`);
  return page.data ?? [];
}

const FINISHED = new Set(["completed", "failed", "skipped", "canceled", "merged"]);

/** Waits until `transactionId` has `count` notifications whose jobs of `types` (all when omitted) finished. */
async function settled(transactionId, count = 1, types = null) {
  return until(`transaction ${transactionId} settles`, async () => {
    const items = await activity(transactionId);
    const done = items.length === count && items.every((n) => {
      const jobs = (n.jobs ?? []).filter((j) => !types || types.includes(j.type));
      return jobs.length > 0 && jobs.every((j) => FINISHED.has(j.status));
    });
    return done && items;
  });
}

const inApp = (stepId, body) => ({ name: stepId, stepId, type: "in_app", controlValues: { subject: `Subject ${stepId}`, body } });
const STRICT_SCHEMA = { type: "object", required: ["name"], properties: { name: { type: "string" } } };

async function main() {
  // ------------------------------------------------------------------ integrations
  const integrationIds = {};
  await group("integrations: create (in_app, email ok/failing, sms, chat, push)", async () => {
    const bodies = [
      { name: "Inbox", identifier: "inbox", providerId: "novu", channel: "in_app", active: true, check: false },
      { name: "SMTP ok", identifier: "smtp-ok", providerId: "nodemailer", channel: "email", active: true, check: false,
        credentials: { host: SMTP_HOST, port: SMTP_PORT, secure: false, ignoreTls: true, from: "app@acme.test", senderName: "Acme" } },
      { name: "SMTP closed", identifier: "smtp-closed", providerId: "nodemailer", channel: "email", active: true, check: false,
        credentials: { host: "127.0.0.1", port: CLOSED_PORT, secure: false, ignoreTls: true, from: "app@acme.test" } },
      { name: "Twilio", identifier: "twilio", providerId: "twilio", channel: "sms", active: true, check: false,
        credentials: { accountSid: "AC1", token: "tok", from: "+15550000000", baseUrl: `${R}/sms` } },
      { name: "Slack", identifier: "slack", providerId: "slack", channel: "chat", active: true, check: false },
      { name: "Push hook", identifier: "push-hook", providerId: "push-webhook", channel: "push", active: true, check: false,
        credentials: { webhookUrl: `${R}/push`, secretKey: "push-secret" } },
      { name: "Temp", identifier: "temp-sms", providerId: "twilio", channel: "sms", active: false, check: false },
    ];
    for (const b of bodies) {
      const i = await attempt(`integrations.create ${b.identifier}`, () => novu.integrations.create(b));
      if (!i) continue;
      eq([i.result.identifier, i.result.providerId, i.result.channel, i.result.active],
        [b.identifier, b.providerId, b.channel, b.active], `create ${b.identifier}`);
      check(OBJECT_ID.test(i.result.id), `create ${b.identifier}: _id ${i.result.id}`);
      check(i.result.credentials === undefined, `create ${b.identifier}: credentials returned`);
      integrationIds[b.identifier] = i.result.id;
    }
  });
  // The ids of what the SDK could not parse, read raw (later groups need them).
  for (const i of await rawOk("GET", "/v1/integrations")) integrationIds[i.identifier] ??= i._id;

  await group("integrations: list, list active, update, set primary, delete", async () => {
    const all = (await novu.integrations.list()).result;
    eq(all.map((i) => i.identifier), ["inbox", "smtp-ok", "smtp-closed", "twilio", "slack", "push-hook", "temp-sms"], "list");
    const active = (await novu.integrations.listActive()).result;
    eq(active.map((i) => i.identifier).includes("temp-sms"), false, "listActive leaves out the inactive one");
    eq(active.length, 6, "listActive count");
    const updated = (await novu.integrations.update({ name: "Temp 2", active: false }, integrationIds["temp-sms"])).result;
    eq([updated.id, updated.name, updated.active], [integrationIds["temp-sms"], "Temp 2", false], "update");
    const primary = (await novu.integrations.setAsPrimary(integrationIds["smtp-ok"])).result;
    eq([primary.id, primary.primary, primary.active], [integrationIds["smtp-ok"], true, true], "setAsPrimary smtp-ok");
    const remaining = (await novu.integrations.delete(integrationIds["temp-sms"])).result;
    eq(remaining.map((i) => i.identifier).includes("temp-sms"), false, "delete answers the remaining ones");
    eq(remaining.length, 6, "remaining after delete");
  });

  // ------------------------------------------------------------------ environments
  await group("environments: list, me (public identifiers, no keys)", async () => {
    const listed = (await novu.environments.list()).result;
    check(listed.length >= 1, `environments.list: ${JSON.stringify(listed)}`);
    for (const e of listed) {
      check(OBJECT_ID.test(e.id) && e.identifier.length === 12, `environment ${e.id}: identifier ${e.identifier}`);
      check(e.apiKeys === undefined, `environment ${e.name}: API keys shown`);
    }
    // `GET /v1/environments/me` has no SDK method: its answer is parsed by the SDK's model.
    const me = parseWith(components.EnvironmentResponseDto$inboundSchema, await rawOk("GET", "/v1/environments/me"), "me");
    check(listed.some((e) => e.id === me.id), `me ${me.id} among the listed`);
    eq(me.identifier, listed.find((e) => e.id === me.id)?.identifier, "me: identifier");
    check(!JSON.stringify(await rawOk("GET", "/v1/environments")).includes(KEY), "the API key is never shown");
  });

  // ------------------------------------------------------------------ subscribers
  await group("subscribers: create, retrieve, patch, search", async () => {
    const ann = (await novu.subscribers.create({ subscriberId: "ann", firstName: "Ann", lastName: "Lee", email: "ann@example.com",
      phone: "+15551230000", locale: "en-US", timezone: "Europe/Paris", data: { plan: "pro" } })).result;
    eq([ann.subscriberId, ann.firstName, ann.email, ann.phone], ["ann", "Ann", "ann@example.com", "+15551230000"], "create ann");
    check(OBJECT_ID.test(ann.id ?? ""), `create ann: _id ${ann.id}`);
    const bob = (await novu.subscribers.create({ subscriberId: "bob", firstName: "Bob" })).result;
    eq([bob.subscriberId, bob.firstName], ["bob", "Bob"], "create bob (minimal)");
    const carl = (await novu.subscribers.create({ subscriberId: "carl", email: "carl@example.com" })).result;
    eq(carl.subscriberId, "carl", "create carl");
    const got = (await novu.subscribers.retrieve("ann")).result;
    eq([got.id, got.lastName, got.data], [ann.id, "Lee", { plan: "pro" }], "retrieve ann");
    const patched = (await novu.subscribers.patch({ lastName: "Lane" }, "ann")).result;
    eq([patched.lastName, patched.firstName], ["Lane", "Ann"], "patch ann");
    const found = (await novu.subscribers.search({ email: "example.com", limit: 10 })).result;
    eq(found.data.map((s) => s.subscriberId).sort(), ["ann", "carl"], "search by email substring");
    const byId = (await novu.subscribers.search({ subscriberId: "bob" })).result;
    eq(byId.data.map((s) => s.subscriberId), ["bob"], "search by subscriberId");
  });

  await group("subscribers: credentials put, patch, delete", async () => {
    const put = (await novu.subscribers.credentials.update(
      { providerId: "slack", integrationIdentifier: "slack", credentials: { webhookUrl: `${R}/chat/ann` } }, "ann")).result;
    const slack = (put.channels ?? []).find((c) => c.providerId === "slack");
    eq(slack?.credentials?.webhookUrl, `${R}/chat/ann`, "put slack webhookUrl");
    const patched = (await novu.subscribers.credentials.append(
      { providerId: "push-webhook", integrationIdentifier: "push-hook", credentials: { deviceTokens: ["tok-ann-1"] } }, "ann")).result;
    const push = (patched.channels ?? []).find((c) => c.providerId === "push-webhook");
    eq(push?.credentials?.deviceTokens, ["tok-ann-1"], "patch push-webhook deviceTokens");
    await novu.subscribers.credentials.append({ providerId: "push-webhook", integrationIdentifier: "push-hook",
      credentials: { deviceTokens: ["tok-bob"] } }, "bob");
    await novu.subscribers.credentials.delete("bob", "push-webhook");
    const bob = (await novu.subscribers.retrieve("bob")).result;
    eq((bob.channels ?? []).some((c) => c.providerId === "push-webhook"), false, "delete push-webhook credentials of bob");
  });

  // ------------------------------------------------------------------ workflows
  const workflows = [
    { name: "All steps", workflowId: "all-steps", steps: [
      inApp("inbox", "Hi {{ subscriber.firstName }}, order {{ payload.order }}"),
      { name: "mail", stepId: "mail", type: "email", controlValues: { editorType: "html", subject: "Order {{ payload.order }}", body: "<p>Hello {{ subscriber.firstName }}</p>" } },
      { name: "text", stepId: "text", type: "sms", controlValues: { body: "Order {{ payload.order }}" } },
      { name: "chat", stepId: "chat", type: "chat", controlValues: { body: "Order {{ payload.order }}" } },
      { name: "push", stepId: "push", type: "push", controlValues: { subject: "Order", body: "Order {{ payload.order }}" } },
      { name: "custom", stepId: "custom", type: "custom", controlValues: {} },
      { name: "call", stepId: "call", type: "http_request", controlValues: { method: "POST", url: `${R}/http/{{ payload.order }}` } },
      { name: "gate", stepId: "gate", type: "throttle", controlValues: { amount: 1, unit: "minutes", threshold: 100 } },
      { name: "wait", stepId: "wait", type: "delay", controlValues: { type: "regular", amount: 1, unit: "seconds" } },
      inApp("after", "After the delay"),
    ] },
    { name: "Hello", workflowId: "hello", description: "One in-app step", tags: ["contract"], steps: [inApp("hello", "Hello {{ subscriber.firstName }}")] },
    { name: "Actor", workflowId: "actor", steps: [inApp("actor", "From [{{ actor.firstName }}]")] },
    { name: "Throttled", workflowId: "throttled", steps: [
      { name: "gate", stepId: "gate", type: "throttle", controlValues: { amount: 1, unit: "hours", threshold: 1 } },
      inApp("through", "Through the throttle"),
    ] },
    { name: "Digest", workflowId: "digest", steps: [
      { name: "collect", stepId: "collect", type: "digest", controlValues: { amount: 2, unit: "seconds" } },
      inApp("summary", "{{ steps.collect.eventCount }} events"),
    ] },
    { name: "Later", workflowId: "later", steps: [
      inApp("now", "Now"),
      { name: "day", stepId: "day", type: "delay", controlValues: { type: "regular", amount: 1, unit: "days" } },
      { name: "mail", stepId: "mail", type: "email", controlValues: { editorType: "html", subject: "Tomorrow", body: "<p>Tomorrow</p>" } },
    ] },
    { name: "Mail only", workflowId: "mail-only", steps: [
      { name: "mail", stepId: "mail", type: "email", controlValues: { editorType: "html", subject: "Hi", body: "<p>Hi</p>" } },
    ] },
    { name: "Temp", workflowId: "temp", steps: [inApp("temp", "temp")] },
    { name: "Unsafe", workflowId: "unsafe", steps: [inApp("unsafe", "<p>Hi {{ payload.name }}</p>")] },
    { name: "Variables", workflowId: "variables", steps: [inApp("vars", "env=[{{ env.name }}] tenant=[{{ context.tenant.id }}] actor=[{{ actor.firstName }}]")] },
    { name: "Broken", workflowId: "broken", steps: [inApp("broken", "Hi {{ payload.name ")] },
    { name: "Actions", workflowId: "actions", steps: [{ name: "act", stepId: "act", type: "in_app", controlValues: {
      body: "Order {{ payload.order }}",
      primaryAction: { label: "Open {{ payload.order }}", redirect: { url: "https://example.com/o/{{ payload.order }}" } },
      secondaryAction: { label: "{{ payload.none }}" } } }] },
    { name: "Strict", workflowId: "strict", validatePayload: true, payloadSchema: STRICT_SCHEMA, steps: [inApp("strict", "{{ payload.name }}")] },
    { name: "No label", workflowId: "no-label", steps: [{ name: "act", stepId: "act", type: "in_app", controlValues: {
      body: "Hi", primaryAction: { redirect: { url: "https://example.com/x" } } } }] },
  ];
  await group("workflows: create (every step type)", async () => {
    for (const w of workflows) {
      // The SDK sends `active: false` unless told otherwise.
      const out = await attempt(`workflows.create ${w.workflowId}`, () => novu.workflows.create({ ...w, active: true }));
      if (!out) continue;
      const r = out.result;
      eq([r.workflowId, r.name, r.steps.map((s) => s.type)], [w.workflowId, w.name, w.steps.map((s) => s.type)], `create ${w.workflowId}`);
      check(OBJECT_ID.test(r.id), `create ${w.workflowId}: _id ${r.id}`);
    }
  });
  // A step condition through the SDK's own `controlValues.skip` (JSON Logic): as in Novu, the step
  // runs while the condition holds, so a trigger with plan "free" skips "pros" and the chain goes on.
  await group("workflows: create with a step condition (controlValues.skip)", async () => {
    const pros = { and: [{ "==": [{ var: "payload.plan" }, "pro"] }] };
    const { wire } = await sdk("workflows.create filtered", () => novu.workflows.create({
      name: "Filtered", workflowId: "filtered", active: true, steps: [
        { name: "pros", stepId: "pros", type: "in_app", controlValues: { body: "only for pros", skip: pros } },
        inApp("everyone", "for everyone"),
      ] }));
    eq(wire?.steps?.[0]?.controlValues?.skip, pros, "create filtered: skip stored as sent");
    eq([wire?.status, "issues" in (wire?.steps?.[0] ?? {})], ["ACTIVE", false], "create filtered: no issues");
  });

  await group("workflows: get", async () => {
    const { wire } = await sdk("workflows.get hello", () => novu.workflows.get("hello"));
    eq([wire.workflowId, wire.name, wire.description, wire.tags, wire.steps.length], ["hello", "Hello", "One in-app step", ["contract"], 1], "get hello");
    const all = await sdk("workflows.get all-steps", () => novu.workflows.get("all-steps"));
    eq(all.wire.steps.map((x) => x.type), workflows[0].steps.map((x) => x.type), "get all-steps: step types");
  });
  await group("workflows: list", async () => {
    const { wire } = await sdk("workflows.list", () => novu.workflows.list({ limit: 50 }));
    const items = wire.workflows ?? wire.data ?? [];
    eq(items.map((w) => w.workflowId).sort(), [...workflows.map((w) => w.workflowId), "filtered"].sort(), "list workflowIds");
    eq(wire.totalCount, workflows.length + 1, "list totalCount");
  });
  await group("workflows: update (PUT) with preferences", async () => {
    const preferences = { user: null, workflow: null };
    const { wire } = await sdk("workflows.update temp", () => novu.workflows.update({ name: "Temp 2", workflowId: "temp",
      steps: [inApp("temp", "temp 2")], preferences }, "temp"));
    eq(wire.name, "Temp 2", "update temp: name");
    const prefs = { user: { all: { enabled: true, readOnly: false }, channels: { email: { enabled: false } } }, workflow: null };
    const again = await sdk("workflows.update temp (preferences.user)", () => novu.workflows.update({ name: "Temp 2", workflowId: "temp",
      steps: [inApp("temp", "temp 2")], preferences: prefs }, "temp"));
    eq(again.wire.preferences?.user, prefs.user, "preferences.user stored as sent");
  });
  await group("workflows: patch", async () => {
    const { wire } = await sdk("workflows.patch temp", () => novu.workflows.patch({ active: false, description: "patched" }, "temp"));
    eq([wire?.active, wire?.description], [false, "patched"], "patch temp");
  });
  await group("workflows: delete", async () => {
    await novu.workflows.delete("temp");
    await expectError(() => novu.workflows.get("temp"), errors.ErrorDto, 404, "get a deleted workflow");
  });

  await group("workflows: a broken template is saved with step issues", async () => {
    const { wire } = await sdk("workflows.get broken", () => novu.workflows.get("broken"));
    check(wire.steps?.[0]?.issues && Object.keys(wire.steps[0].issues).length > 0, `broken: steps[0].issues ${JSON.stringify(wire.steps?.[0]?.issues)}`);
  });

  await group("workflows: step preview (in-app)", async () => {
    const { wire } = await sdk("workflows.steps.generatePreview in_app", () => novu.workflows.steps.generatePreview({ workflowId: "all-steps",
      stepId: "inbox", generatePreviewRequestDto: { previewPayload: { payload: { order: "A-1" }, subscriber: { firstName: "Ann" } } } }));
    eq(wire.result?.preview?.body, "Hi Ann, order A-1", "preview body");
    // Read on the wire: the SDK's model would drop a field it does not know.
    eq("subscriberId" in (wire.previewPayloadExample?.subscriber ?? {}), false, "previewPayloadExample.subscriber has no subscriberId");
  });
  await group("workflows: step preview (email)", async () => {
    const { wire } = await sdk("workflows.steps.generatePreview email", () => novu.workflows.steps.generatePreview({ workflowId: "all-steps",
      stepId: "mail", generatePreviewRequestDto: { previewPayload: { payload: { order: "A-2" } } } }));
    eq(wire.result?.preview?.subject, "Order A-2", "email preview subject");
  });

  // ------------------------------------------------------------------ triggers: every state
  const triggered = {};
  await group("events: trigger (to as string, object, list of both; actor object and string)", async () => {
    const t = async (key, body) => {
      const out = (await novu.trigger({ ...body, transactionId: tx(key) })).result;
      eq([out.acknowledged, out.status, out.transactionId], [true, "processed", tx(key)], `trigger ${key}`);
      triggered[key] = tx(key);
    };
    await t("all-steps", { workflowId: "all-steps", to: "ann", payload: { order: "A-7" } });
    await t("to-object", { workflowId: "hello", to: { subscriberId: "dan", firstName: "Dan", email: "dan@example.com",
      channels: [{ providerId: "push-webhook", integrationIdentifier: "push-hook", credentials: { deviceTokens: ["tok-dan"] } }] }, payload: {} });
    await t("to-list", { workflowId: "hello", to: ["bob", { subscriberId: "eve", firstName: "Eve" }], payload: {} });
    await t("actor-object", { workflowId: "actor", to: "ann", actor: { subscriberId: "bob" }, payload: {} });
    await t("actor-string", { workflowId: "actor", to: "ann", actor: "bob", payload: {} });
    await t("filtered", { workflowId: "filtered", to: "ann", payload: { plan: "free" } });
    await t("later", { workflowId: "later", to: "ann", payload: {} });
    await t("canceled", { workflowId: "later", to: "bob", payload: {} });
    await t("carl", { workflowId: "hello", to: "carl", payload: {} });
    for (let i = 0; i < 3; i++) await t(`digest-${i}`, { workflowId: "digest", to: "ann", payload: { n: i } });
    for (const i of [0, 1]) {
      await t(`throttle-${i}`, { workflowId: "throttled", to: "ann", payload: {} });
      await settled(tx(`throttle-${i}`), 1);
    }
    await t("unsafe", { workflowId: "unsafe", to: "ann", payload: { name: "<script>alert(1)</script>Ann" } });
    await t("variables", { workflowId: "variables", to: "ann", actor: { subscriberId: "bob" }, context: { tenant: "acme" }, payload: {} });
    await t("actions", { workflowId: "actions", to: "ann", payload: { order: "A-9" } });
    await t("no-label", { workflowId: "no-label", to: "ann", payload: {} });
  });

  await group("events: bulk trigger", async () => {
    const out = (await novu.triggerBulk({ events: [
      { workflowId: "hello", to: "bob", payload: {}, transactionId: tx("bulk-1") },
      { workflowId: "hello", to: { subscriberId: "ann" }, payload: {}, transactionId: tx("bulk-2") },
    ] })).result;
    eq(out.map((o) => [o.acknowledged, o.status, o.transactionId]),
      [[true, "processed", tx("bulk-1")], [true, "processed", tx("bulk-2")]], "bulk answers");
    triggered["bulk-1"] = tx("bulk-1");
    triggered["bulk-2"] = tx("bulk-2");
  });

  await group("events: the trigger routes' 400s parse in the SDK, a bulk's refused events", async () => {
    // @novu/api reads every 400 of the trigger routes as PayloadValidationExceptionDto.
    let e = await expectError(() => novu.trigger({ workflowId: "strict", to: "ann", payload: { name: 7 } }),
      errors.PayloadValidationExceptionDto, 400, "a payload the workflow's schema rejects");
    eq([e.type, e.errors.map((x) => [x.field, x.value, x.schemaPath])],
      ["PAYLOAD_VALIDATION_ERROR", [["name", 7, "#/properties/name/type"]]], "payload validation: type and errors");
    // A bulk trigger answers per event (201, as Novu): a refused event is `error` with its reason.
    const bulk = (await sdk("triggerBulk with refused events", () => novu.triggerBulk({ events: [
      { workflowId: "strict", to: "ann", payload: {} },
      { workflowId: "no-such-workflow", to: "ann", payload: {}, transactionId: tx("bulk-missing") },
    ] }))).result ?? [];
    eq(bulk.map((o) => [o.acknowledged, o.status, o.transactionId]),
      [[true, "error", undefined], [true, "error", tx("bulk-missing")]], "bulk: refused events answer error each");
    eq(bulk[0]?.error?.[0]?.startsWith("Payload validation failed: root.name"), true, "bulk: the payload's reason");
    eq(bulk[1]?.error, ["Workflow not found: no-such-workflow"], "bulk: the unknown workflow's reason");
    e = await expectError(() => novu.trigger({ workflowId: "hello", to: { subscriberId: "ann",
      channels: [{ providerId: "expo", credentials: { deviceTokens: ["ExponentPushToken[z]"] } }] } }),
      errors.PayloadValidationExceptionDto, 400, "to.channels with no active integration");
    eq([e.type, e.errors.map((x) => x.field)], ["BAD_REQUEST", ["to.channels"]], "no integration: type and errors");
  });

  await group("events: unsupported fields are refused (422)", async () => {
    // Fields Novu's request has and Tidings does not implement are refused, not dropped.
    const v = await expectError(() => novu.trigger({ workflowId: "hello", to: "ann", tenant: "acme",
      bridgeUrl: "https://bridge.example.com" }), errors.ValidationErrorDto, 422, "tenant and bridgeUrl");
    eq(Object.keys(v.errors ?? {}).sort(), ["bridgeUrl", "tenant"], "the unsupported fields named");
    eq(v.errors?.tenant?.messages, ["tenant is not supported by this server"], "tenant's message");
    const b = await expectError(() => novu.triggerBulk({ events: [{ workflowId: "hello", to: "ann", tenant: { identifier: "acme" } }] }),
      errors.ValidationErrorDto, 422, "bulk with a tenant");
    eq(Object.keys(b.errors ?? {}), ["events[0].tenant"], "bulk: the event's field named");
    await expectError(() => novu.triggerBroadcast({ name: "hello", payload: {}, overrides: { severity: "high" } }),
      errors.ValidationErrorDto, 422, "broadcast with overrides.severity");
  });

  await group("events: cancel", async () => {
    await until("the canceled trigger's first step ran", async () => (await activity(tx("canceled")))[0]?.jobs?.some((j) => j.type === "in_app" && j.status === "completed"));
    const out = (await novu.cancel(tx("canceled"))).result;
    eq(out, true, "cancel answers true");
  });

  // Waits for the engine (bounded), then sends one more email through the integration at the closed port
  // (named in the overrides, so the engine does not fail over to the working one): a failed delivery.
  await group("engine settles (all steps, digest, to forms, actor, filter, deleted subscriber)", async () => {
    await settled(tx("all-steps"), 1);
    for (const k of ["to-object", "actor-object", "actor-string", "filtered", "carl", "bulk-1", "bulk-2", "unsafe", "variables", "actions", "no-label"]) {
      await settled(tx(k), 1);
    }
    await settled(tx("to-list"), 2);
    await until("the digest fires", async () => {
      const all = await Promise.all([0, 1, 2].map((i) => activity(tx(`digest-${i}`))));
      return all.every((items) => items.length === 1 && items[0].jobs.every((j) => FINISHED.has(j.status)));
    });
  });
  await group("a failed delivery (SMTP port closed)", async () => {
    const out = (await novu.trigger({ workflowId: "mail-only", to: "ann", payload: {}, transactionId: tx("failed"),
      overrides: { email: { integrationIdentifier: "smtp-closed" } } })).result;
    eq(out.transactionId, tx("failed"), "trigger mail-only");
    const [n] = await settled(tx("failed"), 1);
    eq(n.jobs.map((j) => j.status), ["failed"], "the email job failed");
  });
  await group("subscribers: delete (after its notification)", async () => {
    const out = (await novu.subscribers.delete("carl")).result;
    eq(out.acknowledged, true, "delete carl");
    await expectError(() => novu.subscribers.retrieve("carl"), errors.ErrorDto, 404, "retrieve a deleted subscriber");
  });

  // ------------------------------------------------------------------ activity
  const notificationIds = {};
  await group("notifications: list (every transaction, parsed by the SDK)", async () => {
    for (const [key, transactionId] of Object.entries(triggered).concat([["failed", tx("failed")]])) {
      const r = await attempt(`notifications.list ${key}`, () => novu.notifications.list({ transactionId, limit: 10 }));
      if (!r) continue;
      check(r.result.data.length >= 1, `list ${key}: no notification`);
      for (const n of r.result.data) {
        eq(n.transactionId, transactionId, `list ${key}: transactionId`);
        notificationIds[key] ??= n.id;
      }
    }
    const all = (await novu.notifications.list({ limit: 50 })).result;
    check(all.data.length >= 15, `list all: ${all.data.length} notifications`);
  });
  for (const [key, transactionId] of Object.entries(triggered).concat([["failed", tx("failed")]])) {
    if (!notificationIds[key]) notificationIds[key] = (await activity(transactionId))[0]?._id;
  }

  // The values are checked on the wire (what the server sent), also when the SDK's model rejected it.
  const retrieved = {};
  const retrieve = async (key) => {
    check(notificationIds[key], `no notification for ${key}`);
    if (!retrieved[key]) {
      const { wire } = await sdk(`notifications.retrieve ${key}`, () => novu.notifications.retrieve(notificationIds[key]));
      retrieved[key] = wire;
    }
    eq(retrieved[key]?._id, notificationIds[key], `retrieve ${key}: _id`);
    return retrieved[key];
  };
  await group("notifications: retrieve, every step type completed", async () => {
    const n = await retrieve("all-steps");
    eq(n.jobs.map((j) => j.type), ["in_app", "email", "sms", "chat", "push", "custom", "http_request", "throttle", "delay", "in_app"], "all-steps: job types");
    eq(n.jobs.map((j) => j.status), Array(10).fill("completed"), "all-steps: job statuses");
  });
  await group("notifications: the email job names the integration's provider", async () => {
    const n = await retrieve("all-steps");
    eq(n.jobs.find((j) => j.type === "email")?.providerId, "nodemailer", "all-steps: email job providerId");
  });
  await group("notifications: pending steps shown from the start", async () => {
    const later = await retrieve("later");
    eq(later.jobs.map((j) => j.type), ["in_app", "delay", "email"], "later: every step's job from the start");
    eq(later.jobs[2]?.status, "pending", "later: the email after a one-day delay is pending");
  });
  await group("notifications: canceled", async () => {
    const canceled = await retrieve("canceled");
    eq(canceled.jobs.map((j) => j.status), ["completed", "canceled", "canceled"], "canceled: the rest of the chain");
  });
  await group("notifications: skipped", async () => {
    const jobs = (await retrieve("filtered")).jobs;
    eq(jobs.map((j) => j.status), ["skipped", "completed"], "filtered: the step whose condition is false is skipped");
    eq(jobs[0].executionDetails.at(-1)?.detail, "Step skipped: its condition (controlValues.skip) is false", "filtered: the skip says why");
  });
  await group("notifications: failed", async () => {
    const f = await retrieve("failed");
    eq([f.jobs[0]?.status, f.jobs[0]?.providerId], ["failed", "nodemailer"], "failed email");
  });
  await group("notifications: digest", async () => {
    const digests = [];
    for (const i of [0, 1, 2]) digests.push(await retrieve(`digest-${i}`));
    const jobs = digests.flatMap((d) => d.jobs.filter((j) => j.type === "digest"));
    eq(jobs.map((j) => j.status).sort(), ["completed", "merged", "merged"], "digest: one digest, two merged");
    eq(jobs.filter((j) => j.status === "completed").map((j) => j.digest?.events?.length), [3], "digest: three events");
    eq(jobs.map((j) => j.digest?.type), ["regular", "regular", "regular"], "every digest job carries digest.type");
  });
  await group("notifications: throttled", async () => {
    eq((await retrieve("throttle-0")).jobs.map((j) => j.status), ["completed", "completed"], "throttle: the first goes through");
    const jobs = (await retrieve("throttle-1")).jobs;
    eq(jobs.map((j) => j.status), ["skipped", "skipped"], "throttle: the second is throttled");
    eq(jobs[0].executionDetails.at(-1)?.detail.startsWith("Throttled"), true, "throttle: the detail says so");
  });
  await group("notifications: to forms, actor, bulk, deleted subscriber", async () => {
    for (const key of ["to-object", "actor-object", "actor-string", "carl", "bulk-1"]) {
      eq((await retrieve(key)).jobs.map((j) => j.status), ["completed"], `${key}: completed`);
    }
  });

  // ------------------------------------------------------------------ messages and the feed
  await group("messages: list (retrieve)", async () => {
    const { wire } = await sdk("messages.retrieve ann in_app", () => novu.messages.retrieve({ subscriberId: "ann", channel: "in_app", limit: 100 }));
    check(wire.data.length >= 5, `ann's in-app messages: ${wire.data.length}`);
    const email = await sdk("messages.retrieve email", () => novu.messages.retrieve({ transactionId: [tx("all-steps")], channel: "email" }));
    eq(email.wire.data.map((m) => m.status), ["sent"], "the successful email");
    const failed = await sdk("messages.retrieve failed email", () => novu.messages.retrieve({ transactionId: [tx("failed")], channel: "email" }));
    eq(failed.wire.data.map((m) => m.status), ["error"], "the failed email");
  });
  await group("actor given as object and as string is looked up", async () => {
    const { wire } = await sdk("messages.retrieve actor", () => novu.messages.retrieve({ transactionId: [tx("actor-object"), tx("actor-string")], limit: 10 }));
    eq(wire.data.map((m) => m.content).sort(), ["From [Bob]", "From [Bob]"], "in-app content");
  });
  await group("rendered HTML is sanitised", async () => {
    const { wire } = await sdk("messages.retrieve unsafe", () => novu.messages.retrieve({ transactionId: [tx("unsafe")] }));
    eq(wire.data.length, 1, "one message");
    check(!String(wire.data[0].content).includes("<script"), `in-app content keeps the script: ${wire.data[0].content}`);
    check(String(wire.data[0].content).includes("Ann"), `in-app content: ${wire.data[0].content}`);
  });
  await group("delivery renders env, context and actor as the preview does", async () => {
    const { wire } = await sdk("messages.retrieve variables", () => novu.messages.retrieve({ transactionId: [tx("variables")] }));
    eq(wire.data.map((m) => m.content), ["env=[Development] tenant=[acme] actor=[Bob]"], "delivered content");
    const p = await sdk("workflows.steps.generatePreview variables", () => novu.workflows.steps.generatePreview({ workflowId: "variables",
      stepId: "vars", generatePreviewRequestDto: { previewPayload: { context: { tenant: "acme" }, actor: { firstName: "Bob" } } } }));
    eq(p.wire?.result?.preview?.body, "env=[Development] tenant=[acme] actor=[Bob]", "the preview of the same inputs");
  });
  await group("`to.channels` stored on the subscriber", async () => {
    const dan = (await novu.subscribers.retrieve("dan")).result;
    eq((dan.channels ?? []).find((c) => c.providerId === "push-webhook")?.credentials?.deviceTokens, ["tok-dan"], "dan's push tokens");
  });

  let feedItems = [];
  await group("subscribers: notifications feed", async () => {
    const { wire } = await sdk("subscribers.notifications.feed", () => novu.subscribers.notifications.feed({ subscriberId: "ann", limit: 100 }));
    feedItems = wire.data;
    check(feedItems.length >= 5, `ann's feed: ${feedItems.length}`);
    eq([...new Set(feedItems.map((m) => m.channel))], ["in_app"], "feed items are in-app messages");
    // The payload filter, base64 as the SDK documents it: only the all-steps trigger's message.
    const filtered = await sdk("subscribers.notifications.feed payload", () => novu.subscribers.notifications.feed({
      subscriberId: "ann", limit: 100, payload: Buffer.from(JSON.stringify({ order: "A-7" })).toString("base64") }));
    eq([...new Set((filtered.wire?.data ?? []).map((m) => m.transactionId))], [tx("all-steps")], "the feed's payload filter");
  });
  await group("in-app actions: a button needs a label", async () => {
    // Every feed item above was parsed by the SDK's MessageButton; here the buttons' values.
    const items = feedItems.filter((m) => m.transactionId === tx("actions"));
    eq(items.length, 1, "the actions message");
    eq((items[0]?.cta?.action?.buttons ?? []).map((b) => [b.type, b.content]), [["primary", "Open A-9"]],
      "buttons: the labelled action; the one whose label renders empty is left out");
    eq(items[0]?.cta?.data?.url, "https://example.com/o/A-9", "the primary action's redirect");
    const w = await rawOk("GET", "/v2/workflows/no-label");
    const issues = w.steps[0].issues?.controls ?? {};
    eq(Object.entries(issues).map(([k, v]) => [k, v.map((i) => i.issueType)]), [["primaryAction.label", ["MISSING_VALUE"]]],
      "an action without a label is a step issue");
    eq(w.status, "ERROR", "no-label: status");
    const [n] = await settled(tx("no-label"), 1);
    eq(n.jobs.map((j) => j.status), ["failed"], "no-label: the step with an issue fails, no message");
    eq(feedItems.filter((m) => m.transactionId === tx("no-label")).length, 0, "no-label: nothing in the feed");
  });
  await group("subscribers: unseen count", async () => {
    const { count } = (await novu.subscribers.notifications.unseenCount({ subscriberId: "ann", seen: false })).result;
    eq(count, feedItems.filter((m) => !m.seen).length, "unseen count");
  });
  await group("subscribers: mark as", async () => {
    const first = feedItems[0];
    check(first, "a feed item to mark");
    const { wire } = await sdk("subscribers.messages.markAllAs", () => novu.subscribers.messages.markAllAs({ messageId: first._id, markAs: "read" }, "ann"));
    eq([wire.length, wire[0]?._id, wire[0]?.read], [1, first._id, true], "mark one as read");
  });
  await group("subscribers: mark all", async () => {
    await novu.subscribers.messages.markAll({ markAs: "seen" }, "ann");
    eq((await novu.subscribers.notifications.unseenCount({ subscriberId: "ann", seen: false })).result.count, 0, "unseen after mark all seen");
  });

  await group("messages: delete", async () => {
    const { wire } = await sdk("messages.retrieve bulk-1", () => novu.messages.retrieve({ transactionId: [tx("bulk-1")] }));
    eq(wire.data.length, 1, "bob's bulk message");
    eq([wire.data[0]?.archived, "archivedAt" in (wire.data[0] ?? {})], [false, false], "a message carries archived as the feed does");
    const out = (await novu.messages.delete(wire.data[0]._id)).result;
    eq([out.acknowledged, out.status], [true, "deleted"], "delete message");
    eq((await sdk("messages.retrieve after delete", () => novu.messages.retrieve({ transactionId: [tx("bulk-1")] }))).wire.data.length, 0, "after delete");
  });

  await group("deleted subscriber: their activity still parses", async () => {
    const page = (await novu.notifications.list({ transactionId: tx("carl") })).result;
    eq(page.data.length, 1, "carl's notification");
  });
  await group("deleted subscriber: their erased activity (no subscriber, no recipient) parses strictly", async () => {
    // The erasure runs in the background: wait until the notification lost its recipient.
    await until("carl's notification erased", async () => {
      const items = await activity(tx("carl"));
      return items.length === 1 && !("subscriber" in items[0]) && !("to" in items[0]);
    });
    const page = (await novu.notifications.list({ transactionId: tx("carl") })).result;
    eq(page.data.map((n) => [n.subscriber, n.to, typeof n.subscriberId]), [[undefined, undefined, "string"]], "list: carl's erased notification");
    const one = (await novu.notifications.retrieve(page.data[0].id)).result;
    eq([one.subscriber, one.to, one.subscriberId, one.transactionId], [undefined, undefined, page.data[0].subscriberId, tx("carl")],
      "retrieve: carl's erased notification");
    eq((await novu.notifications.list({ subscriberIds: ["carl"] })).result.data.length, 0, "carl's id names nobody now");
  });

  // ------------------------------------------------------------------ subscriber preferences (v2)
  // A subscriber of their own (the triggers above are not affected) and three workflows: default
  // preferences set at creation (email off), read-only defaults, and a critical one (raw: the SDK's create
  // model has no `critical`). The v1 routes run with older releases: tests/sdk-ts/preferences_v1.mjs.
  const ON = { email: true, sms: true, inApp: true, chat: true, push: true };
  const prefsOf = (result, identifier) => result.workflows.find((w) => w.workflow.identifier === identifier);
  const mailStep = { name: "mail", stepId: "mail", type: "email", controlValues: { editorType: "html", subject: "Hi", body: "<p>Hi</p>" } };
  await group("workflows: create with preferences (round trip through the SDK's models)", async () => {
    await novu.subscribers.create({ subscriberId: "pat", firstName: "Pat" });
    const defaults = { all: { enabled: true, readOnly: false }, channels: { email: { enabled: false } } };
    const created = (await novu.workflows.create({ name: "Prefs defaults", workflowId: "prefs-defaults", active: true,
      steps: [inApp("inbox", "Hi"), mailStep], preferences: { user: null, workflow: defaults } })).result;
    eq([created.workflowId, created.preferences?.user, created.preferences?.default], ["prefs-defaults", null, defaults],
      "preferences answered as {user, default}");
    const locked = { all: { enabled: true, readOnly: true }, channels: {} };
    const lockedOut = (await novu.workflows.create({ name: "Prefs locked", workflowId: "prefs-locked", active: true,
      steps: [inApp("inbox", "Hi")], preferences: { user: null, workflow: locked } })).result;
    eq(lockedOut.preferences?.default?.all, locked.all, "read-only defaults");
    const critical = await rawOk("POST", "/v2/workflows", { name: "Prefs critical", workflowId: "prefs-critical", active: true,
      critical: true, steps: [inApp("inbox", "Hi")] }, 201);
    eq(critical.critical, true, "critical workflow");
    const got = (await novu.workflows.get("prefs-defaults")).result;
    eq(got.preferences?.default, defaults, "get: the defaults as created");
  });
  await group("subscriber preferences: list, defaults only", async () => {
    const p = (await novu.subscribers.preferences.list({ subscriberId: "pat" })).result;
    eq(p.global, { enabled: true, channels: ON }, "global: every channel on");
    const d = prefsOf(p, "prefs-defaults");
    eq([d.enabled, d.channels, d.overrides, d.workflow.slug, d.workflow.name, d.updatedAt],
      [true, { email: false, inApp: true }, [{ channel: "in_app", source: "template" }, { channel: "email", source: "template" }],
        "prefs-defaults", "Prefs defaults", undefined], "prefs-defaults: its defaults, never changed");
    eq(prefsOf(p, "prefs-locked")?.channels, { inApp: true }, "prefs-locked");
    eq(prefsOf(p, "prefs-critical"), undefined, "the critical workflow is not listed by default");
    eq(prefsOf(p, "digest")?.channels, { inApp: true }, "a workflow with a digest and an in-app step shows in-app");
    const critical = (await novu.subscribers.preferences.list({ subscriberId: "pat", criticality: "critical" })).result;
    eq(critical.workflows.map((w) => w.workflow.identifier), ["prefs-critical"], "criticality=critical");
    const all = (await novu.subscribers.preferences.list({ subscriberId: "pat", criticality: "all" })).result;
    check(["prefs-defaults", "prefs-locked", "prefs-critical"].every((w) => prefsOf(all, w)), "criticality=all lists every one");
  });
  await group("subscriber preferences: a global change", async () => {
    const p = (await novu.subscribers.preferences.update({ channels: { inApp: false } }, "pat")).result;
    eq(p.global, { enabled: true, channels: { ...ON, inApp: false } }, "global in-app off");
    const d = prefsOf(p, "prefs-defaults");
    eq([d.channels, d.overrides[0]], [{ email: false, inApp: false }, { channel: "in_app", source: "subscriber" }], "prefs-defaults");
    eq(prefsOf(p, "prefs-locked").channels, { inApp: true }, "read-only defaults ignore the subscriber");
  });
  await group("subscriber preferences: a workflow change (overrides name subscriber or template)", async () => {
    const p = (await novu.subscribers.preferences.update({ workflowId: "prefs-defaults", channels: { email: true } }, "pat")).result;
    const d = prefsOf(p, "prefs-defaults");
    eq([d.channels, d.overrides], [{ email: true, inApp: false },
      [{ channel: "in_app", source: "subscriber" }, { channel: "email", source: "subscriber" }]], "prefs-defaults");
    check(ISO_UTC.test(d.updatedAt ?? ""), `updatedAt once changed: ${d.updatedAt}`);
    eq(prefsOf(p, "mail-only").overrides, [{ channel: "email", source: "template" }], "another workflow keeps its source");
    eq(p.global.channels.inApp, false, "the global level did not move");
  });
  await group("subscriber preferences: bulk update", async () => {
    const out = (await novu.subscribers.preferences.bulkUpdate({ preferences: [
      { workflowId: "prefs-defaults", channels: { email: false } }, { workflowId: "mail-only", channels: { email: false } }] }, "pat")).result;
    eq(out.map((x) => [x.level, x.enabled, x.workflow?.identifier, x.workflow?.critical, x.workflow?.severity, x.channels]),
      [["template", true, "prefs-defaults", false, "none", { email: false, inApp: false }],
        ["template", true, "mail-only", false, "none", { email: false }]], "each workflow, in the order given");
  });
  await group("subscriber preferences: read-only and critical workflows refuse a change (400)", async () => {
    for (const w of ["prefs-locked", "prefs-critical"]) {
      const e = await expectError(() => novu.subscribers.preferences.update({ workflowId: w, channels: { inApp: false } }, "pat"),
        errors.ErrorDto, 400, w);
      check(e.message.includes(w), `${w}: the 400 names the workflow: ${e.message}`);
    }
    await expectError(() => novu.subscribers.preferences.bulkUpdate({ preferences: [{ workflowId: "prefs-locked", channels: { inApp: false } }] }, "pat"),
      errors.ErrorDto, 400, "bulk with a read-only workflow");
  });
  await group("subscriber preferences: unknown subscriber or workflow (404)", async () => {
    await expectError(() => novu.subscribers.preferences.list({ subscriberId: "nobody" }), errors.ErrorDto, 404, "list");
    await expectError(() => novu.subscribers.preferences.update({ channels: { email: false } }, "nobody"), errors.ErrorDto, 404, "update");
    const e = await expectError(() => novu.subscribers.preferences.update({ workflowId: "nothing", channels: { email: false } }, "pat"),
      errors.ErrorDto, 404, "update an unknown workflow");
    check(e.message.includes("nothing"), `the 404 names the workflow: ${e.message}`);
    await expectError(() => novu.subscribers.preferences.bulkUpdate({ preferences: [{ workflowId: "nothing", channels: { email: false } }] }, "pat"),
      errors.ErrorDto, 404, "bulk with an unknown workflow");
  });
  await group("subscriber preferences: a channel outside the five (422)", async () => {
    const v = await expectError(() => novu.subscribers.preferences.update({ channels: { tool: true } }, "pat"),
      errors.ValidationErrorDto, 422, "tool");
    eq(Object.keys(v.errors ?? {}), ["channels.tool"], "the channel named");
    const b = await expectError(() => novu.subscribers.preferences.bulkUpdate({ preferences: [{ workflowId: "prefs-defaults", channels: { tool: true } }] }, "pat"),
      errors.ValidationErrorDto, 422, "bulk with tool");
    eq(Object.keys(b.errors ?? {}), ["preferences.0.channels.tool"], "bulk: the channel named");
    eq(prefsOf((await novu.subscribers.preferences.list({ subscriberId: "pat" })).result, "prefs-defaults").channels,
      { email: false, inApp: false }, "nothing changed");
  });

  // ------------------------------------------------------------------ channel connections and endpoints
  await group("channel connections: create, list, retrieve, update, delete", async () => {
    const c = (await novu.channelConnections.create({ subscriberId: "ann", integrationIdentifier: "slack",
      workspace: { id: "T1", name: "Acme" }, auth: { accessToken: "xoxb-1" } })).result;
    check(/^chconn_[0-9a-z]{12}$/.test(c.identifier), `connection identifier ${c.identifier}`);
    eq([c.subscriberId, c.providerId, c.channel, c.workspace], ["ann", "slack", "chat", { id: "T1", name: "Acme" }], "create");
    const list = (await novu.channelConnections.list({ subscriberId: "ann" })).result;
    eq(list.data.map((x) => x.identifier), [c.identifier], "list");
    const got = (await novu.channelConnections.retrieve(c.identifier)).result;
    eq(got.identifier, c.identifier, "retrieve");
    const up = (await novu.channelConnections.update({ workspace: { id: "T1", name: "Acme 2" }, auth: { accessToken: "xoxb-2" } }, c.identifier)).result;
    eq(up.workspace, { id: "T1", name: "Acme 2" }, "update");
    await novu.channelConnections.delete(c.identifier);
    await expectError(() => novu.channelConnections.retrieve(c.identifier), errors.ErrorDto, 404, "retrieve a deleted connection");
  });

  await group("channel endpoints: create, list, retrieve, update, delete", async () => {
    const e = (await novu.channelEndpoints.create({ subscriberId: "ann", integrationIdentifier: "slack", type: "slack_channel",
      endpoint: { channelId: "C1" } })).result;
    check(/^chendp_[0-9a-z]{12}$/.test(e.identifier), `endpoint identifier ${e.identifier}`);
    eq([e.subscriberId, e.type, e.endpoint], ["ann", "slack_channel", { channelId: "C1" }], "create");
    const list = (await novu.channelEndpoints.list({ subscriberId: "ann" })).result;
    eq(list.data.map((x) => x.identifier), [e.identifier], "list");
    eq((await novu.channelEndpoints.retrieve(e.identifier)).result.identifier, e.identifier, "retrieve");
    const up = (await novu.channelEndpoints.update({ endpoint: { channelId: "C2" } }, e.identifier)).result;
    eq(up.endpoint, { channelId: "C2" }, "update");
    // The SDK refuses a non-object `endpoint` before sending it: raw HTTP, and the 422 parsed by the SDK's model.
    await group("channel endpoints: PATCH with a non-object endpoint is a 422", async () => {
      const bad = await raw("PATCH", `/v1/channel-endpoints/${e.identifier}`, { endpoint: "not-an-object" });
      eq(bad.status, 422, "PATCH with a non-object endpoint");
      const parsed = parseError(errors.ValidationErrorDto$inboundSchema, bad, "PATCH with a non-object endpoint");
      check(parsed.errors?.endpoint?.messages?.length > 0, `errors.endpoint: ${JSON.stringify(bad.json)}`);
    });
    await novu.channelEndpoints.delete(e.identifier);
    await expectError(() => novu.channelEndpoints.retrieve(e.identifier), errors.ErrorDto, 404, "retrieve a deleted endpoint");
  });

  // ------------------------------------------------------------------ errors
  await group("errors: 404 in the SDK's error model", async () => {
    const e = await expectError(() => novu.subscribers.retrieve("nobody"), errors.ErrorDto, 404, "unknown subscriber");
    eq([e.statusCode, e.path], [404, "/v2/subscribers/nobody"], "404 body");
    check(ISO_UTC.test(e.timestamp), `404 timestamp ${e.timestamp}`);
    check(String(e.message).includes("nobody"), `404 names the id: ${e.message}`);
  });
  await group("errors: a notification's 404 names the id", async () => {
    const n = await expectError(() => novu.notifications.retrieve(UNKNOWN_ID), errors.ErrorDto, 404, "unknown notification");
    check(String(n.message).includes(UNKNOWN_ID), `notification 404 names the id: ${n.message}`);
  });
  await group("errors: 422 in the SDK's error model", async () => {
    const v = await expectError(() => novu.integrations.create({ name: "Wrong", providerId: "sendgrid", channel: "sms" }),
      errors.ValidationErrorDto, 422, "sendgrid on the sms channel");
    check(v.errors?.channel?.messages?.length > 0, `422 errors.channel: ${JSON.stringify(v.errors)}`);
  });

  await group("errors: a 422 lists every bad field with its value", async () => {
    // The SDK refuses these values before sending them: raw HTTP, parsed by the SDK's error model.
    const bad = await raw("POST", "/v1/integrations", { name: "Bad", providerId: "no-such-provider", channel: "no-such-channel" });
    eq(bad.status, 422, "status");
    const parsed = parseError(errors.ValidationErrorDto$inboundSchema, bad, "422 of two bad fields");
    eq(Object.keys(parsed.errors).sort(), ["channel", "providerId"], "every bad field");
    eq([parsed.errors.providerId?.value, parsed.errors.channel?.value], ["no-such-provider", "no-such-channel"], "the offending values");
  });
  await group("integrations: credentials.port accepted as a JSON number", async () => {
    const r = await raw("POST", "/v1/integrations", { name: "Port", identifier: "port-number", providerId: "nodemailer", channel: "email",
      active: false, credentials: { host: "127.0.0.1", port: 2525, from: "a@acme.test" } });
    eq(r.status, 201, `create with port 2525: ${JSON.stringify(r.json)}`);
  });

  // ------------------------------------------------------------------ topics and subscriptions
  const statusOfLast = () => Number(/ -> (\d{3}) /.exec(lastExchange())?.[1]);
  await group("topics: create (201, then 200), get, update, list, 404, 422", async () => {
    for (const subscriberId of ["tp-ann", "tp-bob"]) {
      await novu.subscribers.create({ subscriberId, firstName: subscriberId });
    }
    const created = (await novu.topics.create({ key: "tp-news", name: "News" })).result;
    eq(statusOfLast(), 201, "create: 201");
    eq([created.key, created.name], ["tp-news", "News"], "created topic");
    check(OBJECT_ID.test(created.id) && ISO_UTC.test(created.createdAt ?? ""), `created: ${JSON.stringify(created)}`);
    const again = (await novu.topics.create({ key: "tp-news", name: "Newer" })).result;
    eq(statusOfLast(), 200, "upsert of an existing topic: 200");
    eq([again.id, again.name], [created.id, "Newer"], "same topic, new name");
    const e = await expectError(() => novu.topics.create({ key: "tp-news" }, true), errors.TopicResponseDto, 409, "failIfExists");
    eq([e.id, e.key], [created.id, "tp-news"], "the 409 shows the existing topic");
    eq((await novu.topics.get("tp-news")).result.name, "Newer", "get");
    eq((await novu.topics.update({ name: "Renamed" }, "tp-news")).result.name, "Renamed", "update");
    await novu.topics.create({ key: "tp-other" });
    const page = (await novu.topics.list({ key: "tp-news" })).result;
    eq([page.data.map((t) => t.key), page.totalCount, page.next], [["tp-news"], 1, null], "list by key");
    const named = (await novu.topics.list({ name: "renam", limit: 5 })).result;
    eq(named.data.map((t) => t.key), ["tp-news"], "list by name substring");
    await expectError(() => novu.topics.get("tp-none"), errors.ErrorDto, 404, "unknown topic");
    const v = await expectError(() => novu.topics.create({ key: "bad key" }), errors.ValidationErrorDto, 422, "bad key");
    eq(Object.keys(v.errors ?? {}), ["key"], "the 422 names the key");
    // Tidings' extension field (a topic open to self-subscription through the Inbox) is parsed past.
    await rawOk("POST", "/v2/topics", { key: "tp-open", allowSelfSubscription: true }, 201);
    eq((await novu.topics.get("tp-open")).result.key, "tp-open", "a topic with allowSelfSubscription parses");
  });

  await group("topics: subscriptions create (partial, all failed), list, get, update, delete; subscriber's list; v1 membership", async () => {
    const out = (await novu.topics.subscriptions.create({ subscriptions: ["tp-ann", { identifier: "bob-news", subscriberId: "tp-bob" }, "tp-ghost"] }, "tp-news")).result;
    eq(statusOfLast(), 201, "subscribe: 201");
    eq([out.meta.totalCount, out.meta.successful, out.meta.failed], [3, 2, 1], "meta");
    eq(out.errors.map((x) => [x.subscriberId, x.code]), [["tp-ghost", "SUBSCRIBER_NOT_FOUND"]], "errors");
    eq(out.data.map((x) => [x.identifier, x.topic.key, x.subscriber.subscriberId, x.subscriber.firstName]),
      [["tk_tp-news:si_tp-ann", "tp-news", "tp-ann", "tp-ann"], ["bob-news", "tp-news", "tp-bob", "tp-bob"]], "subscriptions");
    await expectError(() => novu.topics.subscriptions.create({ subscriptions: ["tp-ghost"] }, "tp-news"), errors.ErrorDto, 400, "all failed");
    eq(lastJson().errors?.[0]?.code, "SUBSCRIBER_NOT_FOUND", "the 400 reports each subscriber");
    const page = (await novu.topics.subscriptions.list({ topicKey: "tp-news", orderDirection: "ASC" })).result;
    eq(page.data.map((x) => [x.identifier, x.subscriber.subscriberId, x.topic.name]),
      [["tk_tp-news:si_tp-ann", "tp-ann", "Renamed"], ["bob-news", "tp-bob", "Renamed"]], "list");
    const one = (await novu.topics.subscriptions.list({ topicKey: "tp-news", subscriberId: "tp-bob" })).result;
    eq(one.data.map((x) => x.identifier), ["bob-news"], "list by subscriberId");
    const detail = (await novu.topics.subscriptions.getSubscription("tp-news", "bob-news")).result;
    eq([detail.id, detail.identifier], [out.data[1].id, "bob-news"], "get by identifier");
    const same = (await novu.topics.subscriptions.update({ topicKey: "tp-news", identifier: "bob-news", updateTopicSubscriptionRequestDto: {} })).result;
    eq([same.id, same.identifier], [out.data[1].id, "bob-news"], "update answers the subscription");
    const mine = (await novu.subscribers.topics.list({ subscriberId: "tp-ann" })).result;
    eq(mine.data.map((x) => [x.topic.key, x.identifier]), [["tp-news", "tk_tp-news:si_tp-ann"]], "a subscriber's subscriptions");
    const member = (await novu.topics.subscribers.retrieve("tp-bob", "tp-news")).result;
    eq([member.topicKey, member.externalSubscriberId, member.topicId], ["tp-news", "tp-bob", out.data[1].topic.id], "v1 membership");
    await expectError(() => novu.topics.subscribers.retrieve("tp-ghost", "tp-news"), errors.ErrorDto, 404, "v1: not subscribed");
    const gone = (await novu.topics.subscriptions.delete({ subscriptions: [{ identifier: "bob-news" }, { subscriberId: "tp-ghost" }] }, "tp-news")).result;
    eq([gone.meta.successful, gone.meta.failed, gone.data.map((x) => x.identifier)], [1, 1, ["bob-news"]], "unsubscribe");
    eq((await novu.topics.delete("tp-news")).result.acknowledged, true, "delete topic");
    const after = (await novu.subscribers.topics.list({ subscriberId: "tp-ann" })).result;
    eq(after.data, [], "deleting the topic removed its subscriptions");
  });

  await group("events: trigger to a topic (mixed, exclude, actor); notifications by topicKey and subscriptionId", async () => {
    for (const subscriberId of ["tt-1", "tt-2", "tt-3", "tt-boss"]) await novu.subscribers.create({ subscriberId });
    await novu.topics.subscriptions.create({ subscriptions: ["tt-1", "tt-2", "tt-3", "tt-boss"] }, "tt-team");
    const { result: out } = await sdk("trigger to a topic", () => novu.trigger({
      workflowId: "hello", payload: {}, transactionId: tx("topic"), actor: "tt-boss",
      to: ["tt-1", { type: "Topic", topicKey: "tt-team", exclude: ["tt-3"] }],
    }));
    eq([out?.acknowledged, out?.status, out?.transactionId], [true, "processed", tx("topic")], "trigger to a topic");
    const items = await settled(tx("topic"), 2);
    eq(items.map((n) => n.subscriber.subscriberId).sort(), ["tt-1", "tt-2"],
      "the direct recipient once, the topic's members but the excluded one and the actor");
    const { result: page } = await sdk("notifications.list by topicKey", () => novu.notifications.list({ topicKey: "tt-team", limit: 10 }));
    eq(page?.data.map((n) => [n.subscriber.subscriberId, n.topics.map((t) => [t.topicKey, t.topicId.length])]),
      [["tt-2", [["tt-team", 24]]]], "list by topicKey: topics parsed");
    const { result: one } = await sdk("notifications.list by subscriptionId", () => novu.notifications.list({
      subscriptionId: "tk_tt-team:si_tt-2", transactionId: tx("topic") }));
    eq(one?.data.map((n) => n.id), [page?.data[0].id], "list by subscriptionId");
    const { result: got } = await sdk("notifications.retrieve through a topic", () => novu.notifications.retrieve(page.data[0].id));
    eq(got?.topics.map((t) => t.topicKey), ["tt-team"], "retrieve: topics");
  });

  await group("events: broadcast to every subscriber but the actor", async () => {
    const everyone = (await rawOk("GET", "/v2/subscribers?limit=100")).data;
    const { result: out } = await sdk("triggerBroadcast", () => novu.triggerBroadcast({
      name: "hello", payload: {}, transactionId: tx("broadcast"), actor: { subscriberId: "tt-boss" } }));
    eq(exchanges[exchanges.length - 1].status, 201, "broadcast: 201");
    eq([out?.acknowledged, out?.status, out?.transactionId], [true, "processed", tx("broadcast")], "broadcast");
    const items = await settled(tx("broadcast"), everyone.length - 1);
    eq(items.map((n) => n.subscriber.subscriberId).sort(),
      everyone.map((s) => s.subscriberId).filter((id) => id !== "tt-boss").sort(), "every subscriber but the actor");
    const e = await expectError(() => novu.triggerBroadcast({ name: "no-such-workflow", payload: {} }), errors.ErrorDto, 404,
      "broadcast of an unknown workflow");
    eq(e.path, "/v1/events/trigger/broadcast", "broadcast 404 path");
  });
}

await main().catch((e) => {
  console.error(e);
  process.exit(2);
});
finish();
