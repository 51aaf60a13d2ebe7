// @novu/api against promotion (issue 38): workflows.steps.retrieve, workflows.sync, environments.getTags,
// environments.diff and environments.publish (with and without dryRun), in the `novu` profile.
//
// Environment: TIDINGS_URL, TIDINGS_KEY (Development), TIDINGS_PROD_ID, TIDINGS_PROD_KEY (Production) and
// TIDINGS_FOREIGN_ID (an environment of another organization), from tests/it/novu_sdk.rs.

import { Novu } from "@novu/api";

import { OBJECT_ID, URL, check, client, eq, errors, expectError, finish, group, lastWire } from "./lib.mjs";

const PROD = process.env.TIDINGS_PROD_ID;
const FOREIGN = process.env.TIDINGS_FOREIGN_ID;
const UNKNOWN_ID = "0123456789abcdef01234567";
const novu = client();
const prod = new Novu({ secretKey: process.env.TIDINGS_PROD_KEY, serverURL: URL, retryConfig: { strategy: "none" } });
let dev;

const inboxStep = (stepId, body) => ({ name: stepId, stepId, type: "in_app", controlValues: { body } });

/** The sorted `[name, action]` of a publish's successful workflows, after the shape's checks. */
function successful(published) {
  eq(published.results.length, 1, "publish: one result");
  const r = published.results[0];
  eq([r.resourceType, r.failed], ["REGULAR", []], "publish: resourceType, nothing failed");
  eq(r.totalProcessed, r.successful.length + r.skipped.length, "publish: totalProcessed");
  return r.successful.map((s) => [s.resourceName, s.action]).sort();
}

await group("setup", async () => {
  await novu.workflows.create({ name: "welcome", workflowId: "welcome", tags: ["onboarding", "beta"],
    steps: [inboxStep("hello", "Hello {{ payload.name }}")] });
  await novu.workflows.create({ name: "goodbye", workflowId: "goodbye", tags: ["beta"], steps: [inboxStep("bye", "Bye")] });
  dev = (await novu.environments.list()).result.find((e) => e.name === "Development").id;
  check(OBJECT_ID.test(dev), `Development's _id ${dev}`);
});

await group("workflows.steps.retrieve", async () => {
  const step = (await novu.workflows.steps.retrieve("welcome", "hello")).result;
  eq([step.stepId, step.type, step.workflowId], ["hello", "in_app", "welcome"], "step ids");
  check(OBJECT_ID.test(step.id) && OBJECT_ID.test(step.workflowDatabaseId), "step: _id and workflowDatabaseId");
  eq(step.controlValues.body, "Hello {{ payload.name }}", "step: controlValues");
  eq(step.variables.properties.payload.properties.name.type, "string", "step: variables");
  const byId = (await novu.workflows.steps.retrieve(step.workflowDatabaseId, step.id)).result;
  eq(byId.stepId, "hello", "step by _id");
  await expectError(() => novu.workflows.steps.retrieve("nope", "hello"), errors.ErrorDto, 404, "unknown workflow");
  await expectError(() => novu.workflows.steps.retrieve("welcome", "nope"), errors.ErrorDto, 404, "unknown step");
  await expectError(() => prod.workflows.steps.retrieve("welcome", "hello"), errors.ErrorDto, 404, "another environment's");
});

await group("environments.getTags", async () => {
  const tags = (await novu.environments.getTags(dev)).result;
  eq(tags, [{ name: "beta" }, { name: "onboarding" }], "tags of Development");
  eq((await novu.environments.getTags(PROD)).result, [], "tags of Production");
  for (const env of [FOREIGN, UNKNOWN_ID]) {
    await expectError(() => novu.environments.getTags(env), errors.ErrorDto, 404, `tags of ${env}`);
  }
});

await group("environments.diff", async () => {
  const d = (await novu.environments.diff({}, PROD)).result;
  eq([d.sourceEnvironmentId, d.targetEnvironmentId], [dev, PROD], "diff: environments");
  eq(d.summary, { totalEntities: 2, totalChanges: 4, hasChanges: true }, "diff: summary");
  const goodbye = d.resources[0];
  eq([goodbye.resourceType, goodbye.sourceResource.id, goodbye.targetResource], ["REGULAR", "goodbye", null], "diff: goodbye");
  eq(goodbye.changes.map((c) => c.action), ["added", "added"], "diff: goodbye's changes");
  eq([goodbye.changes[1].stepType, goodbye.changes[1].newIndex], ["in_app", 0], "diff: the step");
  eq(goodbye.changes[1].diffs.new.controlValues.body, "Bye", "diff: the step's controls");
  eq(goodbye.summary, { added: 2, modified: 0, deleted: 0, unchanged: 0 }, "diff: goodbye's summary");
});

await group("environments.publish", async () => {
  const dry = (await novu.environments.publish({ dryRun: true }, PROD)).result;
  eq(successful(dry), [["goodbye", "created"], ["welcome", "created"]], "dry run");
  eq((await prod.workflows.list({})).result.totalCount, 0, "a dry run writes nothing");
  const pub = (await novu.environments.publish({}, PROD)).result;
  eq(successful(pub), [["goodbye", "created"], ["welcome", "created"]], "publish");
  eq(pub.summary, { resources: 2, successful: 2, failed: 0, skipped: 0 }, "publish: summary");
  const first = (await prod.workflows.get("welcome")).result;
  eq(pub.results[0].successful.find((s) => s.resourceName === "welcome").resourceId, first.id, "publish answers Production's _id");

  await novu.workflows.update({ name: "welcome", tags: ["onboarding", "beta"], origin: "novu-cloud",
    preferences: { user: null, workflow: null }, steps: [inboxStep("hello", "Hi {{ payload.name }}")] }, "welcome");
  const d = (await novu.environments.diff({ sourceEnvironmentId: dev }, PROD)).result;
  eq(d.resources.map((r) => [r.targetResource.id, r.changes.map((c) => c.action)]), [["welcome", ["modified", "modified"]]],
    "diff after a change: the workflow's preferences and the step");
  eq([d.resources[0].changes[1].stepType, d.resources[0].changes[1].previousIndex], ["in_app", 0], "diff: the step's position");
  const again = (await novu.environments.publish({ sourceEnvironmentId: dev }, PROD)).result;
  eq(successful(again), [["welcome", "updated"]], "publish again");
  eq(again.results[0].skipped.map((s) => [s.resourceName, s.reason]), [["goodbye", "No changes"]], "publish again: skipped");
  const second = (await prod.workflows.get("welcome")).result;
  eq([second.id, second.steps[0].id], [first.id, first.steps[0].id], "the same ids in Production");

  await novu.workflows.delete("goodbye");
  eq(successful((await novu.environments.publish({}, PROD)).result), [["goodbye", "deleted"]], "publish a deletion");
  await expectError(() => prod.workflows.get("goodbye"), errors.ErrorDto, 404, "deleted in Production");
});

await group("errors and the key rule", async () => {
  const cases = [
    [() => novu.environments.diff({}, dev), 400, "diff into itself"],
    [() => novu.environments.publish({}, FOREIGN), 404, "another organization"],
    [() => novu.environments.diff({}, UNKNOWN_ID), 404, "unknown target"],
    [() => novu.environments.diff({ sourceEnvironmentId: FOREIGN }, PROD), 404, "another organization's source"],
    [() => prod.environments.publish({}, PROD), 403, "Production's key, Development as the source"],
    [() => novu.environments.diff({ sourceEnvironmentId: PROD }, dev), 403, "Development's key, Production as the source"],
  ];
  for (const [call, status, what] of cases) {
    const e = await expectError(call, errors.ErrorDto, status, what);
    eq(e.statusCode, status, `${what}: status`);
  }
  const back = (await prod.environments.diff({ sourceEnvironmentId: PROD }, dev)).result;
  eq(back.sourceEnvironmentId, PROD, "Production's key diffs from Production");
  const tooMany = Array.from({ length: 101 }, (_, i) => ({ resourceType: "REGULAR", resourceId: `w${i}` }));
  await expectError(() => novu.environments.publish({ resources: tooMany }, PROD), errors.ValidationErrorDto, 422, "101 resources");
});

await group("workflows.sync", async () => {
  await novu.workflows.create({ name: "synced", workflowId: "synced", steps: [inboxStep("s", "One")] });
  const copy = (await novu.workflows.sync({ targetEnvironmentId: PROD }, "synced")).result;
  eq(copy.workflowId, "synced", "sync: the copy");
  eq(lastWire()._environmentId, PROD, "sync: raw _environmentId");
  const again = (await novu.workflows.sync({ targetEnvironmentId: PROD }, "synced")).result;
  eq([again.id, again.steps[0].id], [copy.id, copy.steps[0].id], "sync again: the same ids");
  for (const [target, status, what] of [[dev, 400, "into itself"], [FOREIGN, 404, "into another organization"],
    [UNKNOWN_ID, 404, "into an unknown environment"]]) {
    await expectError(() => novu.workflows.sync({ targetEnvironmentId: target }, "synced"), errors.ErrorDto, status, `sync ${what}`);
  }
  await expectError(() => novu.workflows.sync({ targetEnvironmentId: PROD }, "nope"), errors.ErrorDto, 404, "sync an unknown workflow");
});

finish();
