"""novu-py against /v2/workflows in the `novu` profile.

Runs on a fresh environment (no workflows). Every answer is parsed by the SDK's models; the raw exchange is
checked where the models are lenient (absent keys, the `{"data": …}` envelope). Prints "ok" or fails with
context.
"""

from novu_py import models

from sdkcheck import (
    ISO_UTC,
    OBJECT_ID,
    RECORDER,
    check,
    check_envelope,
    check_error_body,
    client,
    eq,
    expect_error,
    is_null,
    run,
)

ACTIVE = models.WorkflowStatusEnum.ACTIVE
INACTIVE = models.WorkflowStatusEnum.INACTIVE
ERROR = models.WorkflowStatusEnum.ERROR
ILLEGAL = models.ContentIssueEnum.ILLEGAL_VARIABLE_IN_CONTROL_VALUE
UNKNOWN_ID = "0123456789abcdef01234567"

USER_PREFS = {
    "all": {"enabled": False, "read_only": False},
    "channels": {"email": {"enabled": False}, "in_app": {"enabled": True}},
}
WORKFLOW_PREFS = {
    "all": {"enabled": True, "read_only": True},
    "channels": {"sms": {"enabled": False}},
}


def inbox_step(body):
    return {"name": "Inbox", "type": "in_app", "control_values": {"subject": "Hi {{ subscriber.firstName }}", "body": body}}


def check_workflow(w, what, **expected):
    """A WorkflowResponseDto with the `expected` attribute values and the fields every workflow has."""
    check(isinstance(w, models.WorkflowResponseDto), f"{what}: type {type(w).__name__}")
    for field, value in expected.items():
        eq(getattr(w, field), value, f"{what}: {field}")
    check(OBJECT_ID.match(w.id), f"{what}: _id {w.id!r}")
    check(ISO_UTC.match(w.created_at) and ISO_UTC.match(w.updated_at), f"{what}: timestamps {w.created_at} {w.updated_at}")
    eq(w.origin, models.ResourceOriginEnum.NOVU_CLOUD, f"{what}: origin")
    d = w.preferences.default
    check(d.all is not None and isinstance(d.channels, dict), f"{what}: preferences.default {d!r}")
    for s in w.steps:
        eq((s.workflow_id, s.workflow_database_id), (w.workflow_id, w.id), f"{what}: step {s.step_id} workflow ids")


def check_default_preferences(p, what):
    eq((p.all.enabled, p.all.read_only), (True, False), f"{what}: default all")
    eq(sorted(p.channels), ["chat", "email", "in_app", "push", "sms"], f"{what}: default channels")
    check(all(c.enabled for c in p.channels.values()), f"{what}: every default channel enabled")


def main():
    novu = client()

    # ---------------------------------------------------------------- empty environment
    page = novu.workflows.list().result
    check(isinstance(page, models.ListWorkflowResponse), f"list: type {type(page).__name__}")
    eq((page.workflows, page.total_count), ([], 0), "list on a fresh environment")
    eq(check_envelope("list (empty)", 200), {"workflows": [], "totalCount": 0}, "raw list (empty)")

    # ---------------------------------------------------------------- create without a description
    plain = novu.workflows.create(create_workflow_dto={
        "name": "Plain", "workflow_id": "plain", "active": True, "steps": [inbox_step("Hello {{ payload.name }}")],
    }).result
    raw = check_envelope("create plain", 201)
    check("description" not in raw, f"create plain: description must be absent, got {raw.get('description')!r}")
    check_workflow(plain, "create plain", name="Plain", workflow_id="plain", status=ACTIVE, description=None, active=True)
    eq(len(plain.steps), 1, "create plain: steps")
    step = plain.steps[0]
    check(isinstance(step, models.InAppStepResponseDto), f"create plain: step type {type(step).__name__}")
    eq(step.control_values.body, "Hello {{ payload.name }}", "create plain: step body")
    check(step.issues is None and "issues" not in raw["steps"][0], f"create plain: no issues, got {step.issues!r}")
    check(is_null(plain.preferences.user), f"create plain: preferences.user {plain.preferences.user!r}")
    eq(raw["preferences"]["user"], None, "create plain: raw preferences.user")
    check_default_preferences(plain.preferences.default, "create plain")

    # ---------------------------------------------------------------- create with a description and preferences
    full = novu.workflows.create(create_workflow_dto={
        "name": "Full", "workflow_id": "full", "description": "Everything set", "tags": ["billing", "ops"],
        "active": True, "severity": "high",
        "preferences": {"user": USER_PREFS, "workflow": WORKFLOW_PREFS},
        "steps": [
            inbox_step("Invoice {{ payload.invoice }}"),
            {"name": "Wait", "type": "delay", "control_values": {"amount": 1, "unit": "days", "type": "regular"}},
            {"name": "Mail", "type": "email", "control_values": {"subject": "Invoice", "body": "<p>{{ payload.invoice }}</p>", "editor_type": "html"}},
        ],
    }).result
    check_workflow(full, "create full", name="Full", workflow_id="full", description="Everything set",
                   tags=["billing", "ops"], status=ACTIVE, severity=models.SeverityLevelEnum.HIGH)
    eq([s.type for s in full.steps], [models.StepTypeEnum.IN_APP, models.StepTypeEnum.DELAY, models.StepTypeEnum.EMAIL],
       "create full: step types")
    user = full.preferences.user
    eq((user.all.enabled, user.all.read_only), (False, False), "create full: preferences.user.all")
    eq({k: v.enabled for k, v in user.channels.items()}, {"email": False, "in_app": True}, "create full: preferences.user.channels")
    default = full.preferences.default
    eq((default.all.enabled, default.all.read_only), (True, True), "create full: preferences.default.all")
    eq({k: v.enabled for k, v in default.channels.items()}, {"sms": False}, "create full: preferences.default.channels")
    raw = check_envelope("create full", 201)
    eq(raw["preferences"]["user"], {"all": {"enabled": False, "readOnly": False},
                                    "channels": {"email": {"enabled": False}, "in_app": {"enabled": True}}},
       "create full: raw preferences.user as sent")

    # ---------------------------------------------------------------- a broken template: saved, with issues
    broken = novu.workflows.create(create_workflow_dto={
        "name": "Broken", "workflow_id": "broken", "active": True, "steps": [inbox_step("Hello {{ payload.name ")],
    }).result
    check_workflow(broken, "create broken", workflow_id="broken", status=ERROR, active=True)
    issues = broken.steps[0].issues
    check(issues is not None and issues.controls is not None, f"create broken: step issues {issues!r}")
    eq(sorted(issues.controls), ["body"], "create broken: the control with issues")
    issue = issues.controls["body"][0]
    eq(issue.issue_type, ILLEGAL, "create broken: issueType")
    check(isinstance(issue.message, str) and issue.message, f"create broken: message {issue.message!r}")
    check("payload.name" in (issue.variable_name or ""), f"create broken: variableName {issue.variable_name!r}")

    # ---------------------------------------------------------------- get
    for key in (full.id, "full"):
        got = novu.workflows.get(workflow_id=key).result
        check_envelope(f"get {key}", 200)
        check_workflow(got, f"get {key}", id=full.id, workflow_id="full", description="Everything set")
        eq(got.preferences.user.all.enabled, False, f"get {key}: preferences.user kept")
    got = novu.workflows.get(workflow_id="plain").result
    check("description" not in check_envelope("get plain", 200), "get plain: description absent")
    eq(novu.workflows.get(workflow_id="broken").result.status, ERROR, "get broken: status")

    # ---------------------------------------------------------------- list
    page = novu.workflows.list().result
    eq(page.total_count, 3, "list: totalCount")
    eq([w.workflow_id for w in page.workflows], ["broken", "full", "plain"], "list: newest first")
    items = {w.workflow_id: w for w in page.workflows}
    eq(items["full"].step_type_overviews,
       [models.StepTypeEnum.IN_APP, models.StepTypeEnum.DELAY, models.StepTypeEnum.EMAIL], "list: stepTypeOverviews")
    eq([s.slug for s in items["full"].steps], [s.step_id for s in full.steps], "list: step slugs")
    eq(items["full"].tags, ["billing", "ops"], "list: tags")
    eq(items["broken"].status, ERROR, "list: broken status")
    eq(sorted(items["broken"].steps[0].issues.controls), ["body"], "list: broken step issues")
    eq((items["plain"].status, items["plain"].origin), (ACTIVE, models.ResourceOriginEnum.NOVU_CLOUD), "list: plain")
    raw = check_envelope("list", 200)
    eq(sorted(raw), ["totalCount", "workflows"], "raw list keys")

    page = novu.workflows.list(request={"limit": 1, "offset": 1, "order_by": "name", "order_direction": "ASC"}).result
    eq(([w.workflow_id for w in page.workflows], page.total_count), (["full"], 3), "list by name, second page")
    page = novu.workflows.list(request={"query": "FUL"}).result
    eq([w.workflow_id for w in page.workflows], ["full"], "list: query")
    page = novu.workflows.list(request={"tags": ["ops", "nope"]}).result
    eq([w.workflow_id for w in page.workflows], ["full"], "list: tags")
    page = novu.workflows.list(request={"status": [ERROR]}).result
    eq(([w.workflow_id for w in page.workflows], page.total_count), (["broken"], 1), "list: status ERROR")
    expect_error(lambda: novu.workflows.list(request={"limit": 101}), models.ValidationErrorDto, 422, "list with limit 101")

    # ---------------------------------------------------------------- update (PUT): preferences null, then set
    updated = novu.workflows.update(workflow_id="full", update_workflow_dto={
        "name": "Full v2", "origin": "novu-cloud",
        "preferences": {"user": None, "workflow": None},
        "steps": [{"id": full.steps[0].id, "name": "Inbox", "type": "in_app", "control_values": {"body": "Fixed"}}],
    }).result
    raw = check_envelope("update with null preferences", 200)
    check_workflow(updated, "update with null preferences", name="Full v2", workflow_id="full", status=INACTIVE)
    eq(raw["preferences"]["user"], None, "update: raw preferences.user is null, not nested")
    check(is_null(updated.preferences.user), f"update: preferences.user {updated.preferences.user!r}")
    check_default_preferences(updated.preferences.default, "update with null preferences")
    eq(updated.steps[0].id, full.steps[0].id, "update: the step keeps its _id")

    updated = novu.workflows.update(workflow_id=full.id, update_workflow_dto={
        "name": "Full v3", "active": True, "preferences": {"user": USER_PREFS},
        "steps": [{"name": "Inbox", "type": "in_app", "control_values": {"body": "Again"}}],
    }).result
    check_workflow(updated, "update with preferences", name="Full v3", status=ACTIVE)
    eq({k: v.enabled for k, v in updated.preferences.user.channels.items()}, {"email": False, "in_app": True},
       "update: preferences.user set")
    check_default_preferences(updated.preferences.default, "update with preferences")

    # Fixing the broken template clears its issues.
    fixed = novu.workflows.update(workflow_id="broken", update_workflow_dto={
        "name": "Broken", "active": True, "preferences": {},
        "steps": [{"id": broken.steps[0].id, "name": "Inbox", "type": "in_app", "control_values": {"body": "Hello {{ payload.name }}"}}],
    }).result
    eq((fixed.status, fixed.steps[0].issues), (ACTIVE, None), "update broken: fixed")

    # ---------------------------------------------------------------- patch
    patched = novu.workflows.patch(workflow_id="plain", patch_workflow_dto={"active": False}).result
    check_envelope("patch active", 200)
    check_workflow(patched, "patch active", name="Plain", active=False, status=INACTIVE, description=None)
    eq([s.id for s in patched.steps], [s.id for s in plain.steps], "patch: steps untouched")
    patched = novu.workflows.patch(workflow_id=plain.id, patch_workflow_dto={
        "name": "Plain renamed", "description": "Now described", "tags": ["x"], "active": True,
        "validate_payload": True, "payload_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
    }).result
    check_workflow(patched, "patch fields", name="Plain renamed", description="Now described", tags=["x"], active=True,
                   status=ACTIVE, validate_payload=True)
    eq(patched.payload_schema["properties"]["name"]["type"], "string", "patch: payloadSchema")
    got = novu.workflows.get(workflow_id="plain").result
    eq((got.name, got.description, got.active), ("Plain renamed", "Now described", True), "get after patch")

    # ---------------------------------------------------------------- unknown workflows
    for what, call in [
        ("get", lambda: novu.workflows.get(workflow_id=UNKNOWN_ID)),
        ("update", lambda: novu.workflows.update(workflow_id=UNKNOWN_ID, update_workflow_dto={
            "name": "x", "steps": [], "preferences": {}})),
        ("patch", lambda: novu.workflows.patch(workflow_id=UNKNOWN_ID, patch_workflow_dto={"active": True})),
        ("delete", lambda: novu.workflows.delete(workflow_id=UNKNOWN_ID)),
    ]:
        e = expect_error(call, models.ErrorDto, 404, f"{what} an unknown workflow")
        check_error_body(e, 404, f"/v2/workflows/{UNKNOWN_ID}", f"{what} an unknown workflow")
        check(UNKNOWN_ID in str(e.data.message), f"{what} an unknown workflow: message names the id: {e.data.message!r}")

    # ---------------------------------------------------------------- delete
    novu.workflows.delete(workflow_id="full")
    eq(RECORDER.last.status_code, 204, "delete: status")
    expect_error(lambda: novu.workflows.get(workflow_id="full"), models.ErrorDto, 404, "get a deleted workflow")
    eq(novu.workflows.list().result.total_count, 2, "list after delete")


run(main)
