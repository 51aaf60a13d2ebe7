"""novu-py against promotion (issue 38): workflows.steps.retrieve, workflows.sync, environments.get_tags,
environments.diff and environments.publish (with and without dryRun), in the `novu` profile.

The app's environment is Development (its key is TIDINGS_KEY); the runner adds Production (TIDINGS_PROD_ID,
TIDINGS_PROD_KEY) and an environment of another organization (TIDINGS_FOREIGN_ID). Every answer is parsed by
the SDK's models. Prints "ok" or fails with context.
"""

import os

from novu_py import models

from sdkcheck import OBJECT_ID, check, check_envelope, check_error_body, client, eq, expect_error, is_null, run

PROD = os.environ["TIDINGS_PROD_ID"]
PROD_KEY = os.environ["TIDINGS_PROD_KEY"]
FOREIGN = os.environ["TIDINGS_FOREIGN_ID"]
UNKNOWN_ID = "0123456789abcdef01234567"
REGULAR = models.ResourceTypeEnum.REGULAR


def inbox_step(step_id, body):
    return {"name": step_id, "step_id": step_id, "type": "in_app", "control_values": {"body": body}}


def successful(published):
    eq(len(published.results), 1, "publish: one result (workflows)")
    r = published.results[0]
    eq(r.resource_type, REGULAR, "publish: resourceType")
    eq(r.failed, [], "publish: nothing failed")
    eq(r.total_processed, len(r.successful) + len(r.skipped), "publish: totalProcessed")
    return sorted((s.resource_name, s.action.value) for s in r.successful)


def main():
    novu = client()
    prod = client(PROD_KEY)
    novu.workflows.create(create_workflow_dto={
        "name": "welcome", "workflow_id": "welcome", "tags": ["onboarding", "beta"],
        "steps": [inbox_step("hello", "Hello {{ payload.name }}")],
    })
    novu.workflows.create(create_workflow_dto={
        "name": "goodbye", "workflow_id": "goodbye", "tags": ["beta"], "steps": [inbox_step("bye", "Bye")],
    })
    dev = novu.environments.list().result
    dev_id = next(e.id for e in dev if e.name == "Development")

    # ---------------------------------------------------------------- steps.retrieve
    step = novu.workflows.steps.retrieve(workflow_id="welcome", step_id="hello").result
    check(isinstance(step, models.StepResponseDto), f"step: type {type(step).__name__}")
    eq((step.step_id, step.type, step.workflow_id), ("hello", models.StepTypeEnum.IN_APP, "welcome"), "step ids")
    check(OBJECT_ID.match(step.id) and OBJECT_ID.match(step.workflow_database_id), f"step: ids {step.id} {step.workflow_database_id}")
    eq(step.control_values["body"], "Hello {{ payload.name }}", "step: controlValues")
    eq(step.variables["properties"]["payload"]["properties"]["name"]["type"], "string", "step: variables.payload.name")
    by_id = novu.workflows.steps.retrieve(workflow_id=step.workflow_database_id, step_id=step.id).result
    eq(by_id.step_id, "hello", "step by _id")
    for wf, st, what in [("nope", "hello", "unknown workflow"), ("welcome", "nope", "unknown step")]:
        e = expect_error(lambda: novu.workflows.steps.retrieve(workflow_id=wf, step_id=st), models.ErrorDto, 404, what)
        check_error_body(e, 404, f"/v2/workflows/{wf}/steps/{st}", what)
    expect_error(lambda: prod.workflows.steps.retrieve(workflow_id="welcome", step_id="hello"), models.ErrorDto, 404,
                 "another environment's workflow")

    # ---------------------------------------------------------------- get_tags
    tags = novu.environments.get_tags(environment_id=dev_id).result
    eq([t.name for t in tags], ["beta", "onboarding"], "tags of Development")
    check(all(isinstance(t, models.GetEnvironmentTagsDto) for t in tags), "tags: model")
    eq(check_envelope("tags", 200), [{"name": "beta"}, {"name": "onboarding"}], "raw tags")
    eq(novu.environments.get_tags(environment_id=PROD).result, [], "tags of Production")
    for env in (FOREIGN, UNKNOWN_ID):
        expect_error(lambda: novu.environments.get_tags(environment_id=env), models.ErrorDto, 404, f"tags of {env}")

    # ---------------------------------------------------------------- diff
    d = novu.environments.diff(target_environment_id=PROD, diff_environment_request_dto={}).result
    check(isinstance(d, models.DiffEnvironmentResponseDto), f"diff: type {type(d).__name__}")
    eq((d.source_environment_id, d.target_environment_id), (dev_id, PROD), "diff: environments")
    eq((d.summary.total_entities, d.summary.total_changes, d.summary.has_changes), (2, 4, True), "diff: summary")
    goodbye = d.resources[0]
    eq((goodbye.resource_type, goodbye.source_resource.id, goodbye.source_resource.name), (REGULAR, "goodbye", "goodbye"), "diff: goodbye")
    check(is_null(goodbye.target_resource), "diff: goodbye has no target")
    eq([c.action for c in goodbye.changes], [models.DiffActionEnum.ADDED] * 2, "diff: goodbye's changes")
    eq((goodbye.changes[1].step_type, goodbye.changes[1].new_index), ("in_app", 0), "diff: the step")
    eq(goodbye.changes[1].diffs.new["controlValues"]["body"], "Bye", "diff: the step's controls")
    eq((goodbye.summary.added, goodbye.summary.modified, goodbye.summary.deleted), (2, 0, 0), "diff: goodbye's summary")

    # ---------------------------------------------------------------- publish: dry run, then for real
    dry = novu.environments.publish(target_environment_id=PROD, publish_environment_request_dto={"dry_run": True}).result
    check(isinstance(dry, models.PublishEnvironmentResponseDto), f"dry run: type {type(dry).__name__}")
    eq(successful(dry), [("goodbye", "created"), ("welcome", "created")], "dry run")
    eq(prod.workflows.list().result.total_count, 0, "a dry run writes nothing")
    pub = novu.environments.publish(target_environment_id=PROD, publish_environment_request_dto={}).result
    eq(successful(pub), [("goodbye", "created"), ("welcome", "created")], "publish")
    eq((pub.summary.resources, pub.summary.successful, pub.summary.failed, pub.summary.skipped), (2, 2, 0, 0), "publish: summary")
    in_prod = prod.workflows.get(workflow_id="welcome").result
    eq(in_prod.workflow_id, "welcome", "published into Production")
    ids = {s.resource_name: s.resource_id for s in pub.results[0].successful}
    eq(ids["welcome"], in_prod.id, "publish answers Production's _id")

    # A change, published again: updated in place.
    novu.workflows.update(workflow_id="welcome", update_workflow_dto={
        "name": "welcome", "tags": ["onboarding", "beta"], "origin": "novu-cloud",
        "preferences": {"user": None, "workflow": None},
        "steps": [inbox_step("hello", "Hi {{ payload.name }}")],
    })
    d = novu.environments.diff(target_environment_id=PROD, diff_environment_request_dto={"source_environment_id": dev_id}).result
    eq([(r.target_resource.id, [c.action.value for c in r.changes]) for r in d.resources], [("welcome", ["modified", "modified"])],
       "diff after a change: the workflow's preferences and the step")
    eq((d.resources[0].changes[1].step_type, d.resources[0].changes[1].previous_index), ("in_app", 0), "diff: the step's position")
    eq(d.resources[0].changes[1].diffs.previous["controlValues"]["body"], "Hello {{ payload.name }}", "diff: the step before")
    pub = novu.environments.publish(target_environment_id=PROD, publish_environment_request_dto={"source_environment_id": dev_id}).result
    eq(successful(pub), [("welcome", "updated")], "publish again")
    eq([(s.resource_name, s.reason) for s in pub.results[0].skipped], [("goodbye", "No changes")], "publish again: skipped")
    again = prod.workflows.get(workflow_id="welcome").result
    eq((again.id, again.steps[0].id), (in_prod.id, in_prod.steps[0].id), "the same ids in Production")

    # Deleted in Development, deleted on publish.
    novu.workflows.delete(workflow_id="goodbye")
    pub = novu.environments.publish(target_environment_id=PROD, publish_environment_request_dto={}).result
    eq(successful(pub), [("goodbye", "deleted")], "publish a deletion")
    expect_error(lambda: prod.workflows.get(workflow_id="goodbye"), models.ErrorDto, 404, "deleted in Production")

    # ---------------------------------------------------------------- errors and the key rule
    for call, status, what in [
        (lambda: novu.environments.diff(target_environment_id=dev_id, diff_environment_request_dto={}), 400, "diff into itself"),
        (lambda: novu.environments.publish(target_environment_id=FOREIGN, publish_environment_request_dto={}), 404, "another organization"),
        (lambda: novu.environments.diff(target_environment_id=UNKNOWN_ID, diff_environment_request_dto={}), 404, "unknown target"),
        (lambda: novu.environments.diff(target_environment_id=PROD, diff_environment_request_dto={"source_environment_id": FOREIGN}), 404,
         "another organization's source"),
        (lambda: prod.environments.publish(target_environment_id=PROD, publish_environment_request_dto={}), 403,
         "Production's key, Development as the source"),
        (lambda: novu.environments.diff(target_environment_id=dev_id, diff_environment_request_dto={"source_environment_id": PROD}), 403,
         "Development's key, Production as the source"),
    ]:
        e = expect_error(call, models.ErrorDto, status, what)
        eq(e.data.status_code, status, f"{what}: statusCode")
    back = prod.environments.diff(target_environment_id=dev_id, diff_environment_request_dto={"source_environment_id": PROD}).result
    eq(back.source_environment_id, PROD, "Production's key diffs from Production")
    too_many = [{"resource_type": "REGULAR", "resource_id": f"w{i}"} for i in range(101)]
    expect_error(lambda: novu.environments.publish(target_environment_id=PROD, publish_environment_request_dto={"resources": too_many}),
                 models.ValidationErrorDto, 422, "101 resources")

    # ---------------------------------------------------------------- sync
    novu.workflows.create(create_workflow_dto={"name": "synced", "workflow_id": "synced", "steps": [inbox_step("s", "One")]})
    copy = novu.workflows.sync(workflow_id="synced", sync_workflow_dto={"target_environment_id": PROD}).result
    check(isinstance(copy, models.WorkflowResponseDto), f"sync: type {type(copy).__name__}")
    eq(copy.workflow_id, "synced", "sync: the copy")
    eq(check_envelope("sync", 200)["_environmentId"], PROD, "sync: raw _environmentId")
    again = novu.workflows.sync(workflow_id="synced", sync_workflow_dto={"target_environment_id": PROD}).result
    eq((again.id, again.steps[0].id), (copy.id, copy.steps[0].id), "sync again: the same ids")
    for target, status, what in [(dev_id, 400, "sync into itself"), (FOREIGN, 404, "sync into another organization"),
                                 (UNKNOWN_ID, 404, "sync into an unknown environment")]:
        expect_error(lambda: novu.workflows.sync(workflow_id="synced", sync_workflow_dto={"target_environment_id": target}),
                     models.ErrorDto, status, what)
    expect_error(lambda: novu.workflows.sync(workflow_id="nope", sync_workflow_dto={"target_environment_id": PROD}),
                 models.ErrorDto, 404, "sync an unknown workflow")


run(main)
