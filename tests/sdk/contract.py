"""The SDK contract with novu-py (issue 19): every route of the server, called through the SDK method that
calls it, after a scenario producing every state the engine produces; every answer is parsed by the SDK's
models and its values are asserted. tests/sdk-ts/contract.mjs runs the same scenario with @novu/api.

Each route group runs in `group(...)`: a failure is recorded and the script goes on, so one run lists every
failure; at the end they are printed and the script exits 1 when there is any.

Environment: TIDINGS_URL, TIDINGS_KEY, and from tests/it/novu_sdk.rs the test SMTP server
(TIDINGS_SMTP_HOST, TIDINGS_SMTP_PORT), a port nobody listens on (TIDINGS_CLOSED_PORT) and the receiver
standing in for the SMS, chat and push providers and the http_request endpoint (TIDINGS_RECEIVER_URL).
"""

import base64
import json
import os
import sys
import time
import traceback

from novu_py import models

from checks import CheckFailed, check, eq, exchange_line, run_group
from sdkcheck import ISO_UTC, OBJECT_ID, RECORDER, client

SMTP_HOST = os.environ["TIDINGS_SMTP_HOST"]
SMTP_PORT = os.environ["TIDINGS_SMTP_PORT"]
CLOSED_PORT = os.environ["TIDINGS_CLOSED_PORT"]
R = os.environ["TIDINGS_RECEIVER_URL"]
UNKNOWN_ID = "0123456789abcdef01234567"
RUN = format(int(time.time() * 1000), "x")
FINISHED = {"completed", "failed", "skipped", "canceled", "merged"}

novu = client()
FAILURES = []


def tx(name):
    return f"{name}-{RUN}"


def last_exchange():
    return exchange_line(RECORDER.last) if RECORDER.exchanges else "(none)"


def describe(e):
    if isinstance(e, models.ResponseValidationError):
        cause = e.cause
        fields = "; ".join(
            f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']} (input {str(err.get('input'))[:80]})"
            for err in (cause.errors()[:12] if hasattr(cause, "errors") else [])
        ) or str(cause)[:600]
        return f"ResponseValidationError on {last_exchange()[:200]}\n      fields: {fields}"
    if isinstance(e, models.NovuError):
        return f"{type(e).__name__} {e.status_code}: {e.message[:300]}\n      last exchange: {last_exchange()}"
    if isinstance(e, CheckFailed):
        return f"{e}\n      last exchange: {last_exchange()}"
    return f"{type(e).__name__}: {e}\n{traceback.format_exc()}\n      last exchange: {last_exchange()}"


def group(name, fn):
    """Runs one route group; a failure is recorded and the script goes on."""
    run_group(FAILURES, name, fn, describe)


def attempt(name, call):
    """Runs `call`; on an error records it under `name` and answers None."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001
        FAILURES.append(f"{name}: {describe(e)}")
        print(f"FAIL  {name}", flush=True)
        return None


def last_wire():
    """The body of the last exchange without the `{"data": …}` envelope."""
    body = RECORDER.last.json()
    if isinstance(body, dict) and "data" in body and "hasMore" not in body and "next" not in body:
        return body["data"]
    return body


def sdk(name, call):
    """Calls the SDK: answers (result, wire), the parsed answer and the answer as sent (without the envelope).
    When the SDK fails (e.g. its model rejects the answer) the failure is recorded under `name`, result is
    None and wire still holds what the server sent, so value checks and later groups go on."""
    before = len(RECORDER.exchanges)
    try:
        out = call()
        return getattr(out, "result", None), (last_wire() if len(RECORDER.exchanges) > before else None)
    except Exception as e:  # noqa: BLE001
        FAILURES.append(f"{name}: {describe(e)}")
        print(f"FAIL  {name}", flush=True)
        return None, (last_wire() if len(RECORDER.exchanges) > before else None)


def expect_error(call, cls, status, what):
    try:
        result = call()
    except models.NovuError as e:
        check(isinstance(e, cls) and e.status_code == status,
              f"{what}: expected {cls.__name__} {status}, got {type(e).__name__} {e.status_code}: {e.message[:300]}")
        return e
    raise CheckFailed(f"{what}: expected {cls.__name__} {status}, the call succeeded with {result!r}"[:600])


def raw(method, path, body=None):
    """A raw request through the SDK's HTTP client (for what no SDK method does): (status, json)."""
    http = novu.sdk_configuration.client
    r = http.request(method, f"{os.environ['TIDINGS_URL']}{path}", json=body,
                     headers={"Authorization": f"ApiKey {os.environ['TIDINGS_KEY']}"})
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


def raw_ok(method, path, body=None, status=200):
    code, out = raw(method, path, body)
    check(code == status, f"{method} {path}: expected {status}, got {code} {json.dumps(out)[:500]}")
    if isinstance(out, dict) and list(out.keys()) == ["data"]:
        return out["data"]
    return out


def until(what, probe, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise CheckFailed(f"{what}: not reached in {seconds} s")


def activity(transaction_id):
    """The activity items of a transaction, read raw (polling must not depend on the models under test)."""
    return raw_ok("GET", f"/v1/notifications?transactionId={transaction_id}&limit=50").get("data", [])


def settled(transaction_id, count=1):
    def probe():
        items = activity(transaction_id)
        done = len(items) == count and all(
            n.get("jobs") and all(j["status"] in FINISHED for j in n["jobs"]) for n in items)
        return items if done else None
    return until(f"transaction {transaction_id} settles", probe)


def in_app(step_id, body):
    return {"name": step_id, "step_id": step_id, "type": "in_app",
            "control_values": {"subject": f"Subject {step_id}", "body": body}}


def val(x):
    """An enum's value, or the value itself."""
    return getattr(x, "value", x)


INTEGRATIONS = [
    {"name": "Inbox", "identifier": "inbox", "provider_id": "novu", "channel": "in_app", "active": True, "check": False},
    {"name": "SMTP ok", "identifier": "smtp-ok", "provider_id": "nodemailer", "channel": "email", "active": True, "check": False,
     "credentials": {"host": SMTP_HOST, "port": SMTP_PORT, "secure": False, "ignore_tls": True, "from_": "app@acme.test",
                     "sender_name": "Acme"}},
    {"name": "SMTP closed", "identifier": "smtp-closed", "provider_id": "nodemailer", "channel": "email", "active": True,
     "check": False, "credentials": {"host": "127.0.0.1", "port": CLOSED_PORT, "secure": False, "ignore_tls": True,
                                     "from_": "app@acme.test"}},
    {"name": "Twilio", "identifier": "twilio", "provider_id": "twilio", "channel": "sms", "active": True, "check": False,
     "credentials": {"account_sid": "AC1", "token": "tok", "from_": "+15550000000", "base_url": f"{R}/sms"}},
    {"name": "Slack", "identifier": "slack", "provider_id": "slack", "channel": "chat", "active": True, "check": False},
    {"name": "Push hook", "identifier": "push-hook", "provider_id": "push-webhook", "channel": "push", "active": True,
     "check": False, "credentials": {"webhook_url": f"{R}/push", "secret_key": "push-secret"}},
    {"name": "Temp", "identifier": "temp-sms", "provider_id": "twilio", "channel": "sms", "active": False, "check": False},
]

STRICT_SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}

WORKFLOWS = [
    {"name": "All steps", "workflow_id": "all-steps", "steps": [
        in_app("inbox", "Hi {{ subscriber.firstName }}, order {{ payload.order }}"),
        {"name": "mail", "step_id": "mail", "type": "email",
         # No editor_type: novu-py sends its default, "block", with this HTML body (rendered as HTML, as Novu does).
         "control_values": {"subject": "Order {{ payload.order }}", "body": "<p>Hello {{ subscriber.firstName }}</p>"}},
        {"name": "text", "step_id": "text", "type": "sms", "control_values": {"body": "Order {{ payload.order }}"}},
        {"name": "chat", "step_id": "chat", "type": "chat", "control_values": {"body": "Order {{ payload.order }}"}},
        {"name": "push", "step_id": "push", "type": "push", "control_values": {"subject": "Order", "body": "Order {{ payload.order }}"}},
        {"name": "custom", "step_id": "custom", "type": "custom", "control_values": {}},
        {"name": "call", "step_id": "call", "type": "http_request",
         "control_values": {"method": "POST", "url": f"{R}/http/{{{{ payload.order }}}}"}},
        {"name": "gate", "step_id": "gate", "type": "throttle", "control_values": {"amount": 1, "unit": "minutes", "threshold": 100}},
        {"name": "wait", "step_id": "wait", "type": "delay", "control_values": {"type": "regular", "amount": 1, "unit": "seconds"}},
        in_app("after", "After the delay"),
    ]},
    {"name": "Hello", "workflow_id": "hello", "description": "One in-app step", "tags": ["contract"],
     "steps": [in_app("hello", "Hello {{ subscriber.firstName }}")]},
    {"name": "Actor", "workflow_id": "actor", "steps": [in_app("actor", "From [{{ actor.firstName }}]")]},
    {"name": "Digest", "workflow_id": "digest", "steps": [
        {"name": "collect", "step_id": "collect", "type": "digest", "control_values": {"amount": 2, "unit": "seconds"}},
        in_app("summary", "{{ steps.collect.eventCount }} events"),
    ]},
    {"name": "Throttled", "workflow_id": "throttled", "steps": [
        {"name": "gate", "step_id": "gate", "type": "throttle", "control_values": {"amount": 1, "unit": "hours", "threshold": 1}},
        in_app("through", "Through the throttle"),
    ]},
    {"name": "Later", "workflow_id": "later", "steps": [
        in_app("now", "Now"),
        {"name": "day", "step_id": "day", "type": "delay", "control_values": {"type": "regular", "amount": 1, "unit": "days"}},
        {"name": "mail", "step_id": "mail", "type": "email", "control_values": {"editor_type": "html", "subject": "Tomorrow", "body": "<p>Tomorrow</p>"}},
    ]},
    {"name": "Mail only", "workflow_id": "mail-only", "steps": [
        {"name": "mail", "step_id": "mail", "type": "email", "control_values": {"editor_type": "html", "subject": "Hi", "body": "<p>Hi</p>"}},
    ]},
    {"name": "Temp", "workflow_id": "temp", "steps": [in_app("temp", "temp")]},
    {"name": "Unsafe", "workflow_id": "unsafe", "steps": [in_app("unsafe", "<p>Hi {{ payload.name }}</p>")]},
    {"name": "Variables", "workflow_id": "variables",
     "steps": [in_app("vars", "env=[{{ env.name }}] tenant=[{{ context.tenant.id }}] actor=[{{ actor.firstName }}]")]},
    {"name": "Broken", "workflow_id": "broken", "steps": [in_app("broken", "Hi {{ payload.name ")]},
    {"name": "Actions", "workflow_id": "actions", "steps": [{"name": "act", "step_id": "act", "type": "in_app", "control_values": {
        "body": "Order {{ payload.order }}",
        "primary_action": {"label": "Open {{ payload.order }}", "redirect": {"url": "https://example.com/o/{{ payload.order }}"}},
        "secondary_action": {"label": "{{ payload.none }}"}}}]},
    {"name": "Strict", "workflow_id": "strict", "validate_payload": True, "payload_schema": STRICT_SCHEMA,
     "steps": [in_app("strict", "{{ payload.name }}")]},
    {"name": "No label", "workflow_id": "no-label", "steps": [{"name": "act", "step_id": "act", "type": "in_app", "control_values": {
        "body": "Hi", "primary_action": {"redirect": {"url": "https://example.com/x"}}}}]},
]


def main():
    ids = {}
    triggered = {}
    notification_ids = {}

    # ------------------------------------------------------------------ integrations
    def integrations_create():
        for b in INTEGRATIONS:
            out = attempt(f"integrations.create {b['identifier']}", lambda b=b: novu.integrations.create(create_integration_request_dto=b))
            if out is None:
                continue
            i = out.result
            eq((i.identifier, i.provider_id, val(i.channel), i.active), (b["identifier"], b["provider_id"], b["channel"], b["active"]),
               f"create {b['identifier']}")
            check(OBJECT_ID.match(i.id), f"create {b['identifier']}: _id {i.id}")
            check("credentials" not in i.model_fields_set, f"create {b['identifier']}: credentials returned")
            ids[b["identifier"]] = i.id
    group("integrations: create (in_app, email ok/failing, sms, chat, push)", integrations_create)
    for i in raw_ok("GET", "/v1/integrations"):
        ids.setdefault(i["identifier"], i["_id"])

    def integrations_rest():
        listed = novu.integrations.list().result
        eq([i.identifier for i in listed], [b["identifier"] for b in INTEGRATIONS], "list")
        active = novu.integrations.list_active().result
        eq(("temp-sms" in [i.identifier for i in active], len(active)), (False, 6), "list_active")
        up = novu.integrations.update(integration_id=ids["temp-sms"], update_integration_request_dto={"name": "Temp 2", "active": False}).result
        eq((up.id, up.name, up.active), (ids["temp-sms"], "Temp 2", False), "update")
        p = novu.integrations.set_as_primary(integration_id=ids["smtp-ok"]).result
        eq((p.id, p.primary, p.active), (ids["smtp-ok"], True, True), "set_as_primary smtp-ok")
        remaining = novu.integrations.delete(integration_id=ids["temp-sms"]).result
        eq(("temp-sms" in [i.identifier for i in remaining], len(remaining)), (False, 6), "delete answers the remaining ones")
    group("integrations: list, list active, update, set primary, delete", integrations_rest)

    # ------------------------------------------------------------------ environments
    def environments():
        listed = novu.environments.list().result
        check(len(listed) >= 1, f"environments.list: {listed}")
        for e in listed:
            check(OBJECT_ID.match(e.id) and len(e.identifier) == 12, f"environment {e.id}: identifier {e.identifier!r}")
            check(e.api_keys is None, f"environment {e.name}: API keys shown")
        # `GET /v1/environments/me` has no SDK method: its answer is parsed by the SDK's model.
        me = models.EnvironmentResponseDto.model_validate(raw_ok("GET", "/v1/environments/me"))
        check(me.id in [e.id for e in listed], f"me {me.id} among the listed")
        eq(me.identifier, next(e.identifier for e in listed if e.id == me.id), "me: identifier")
        check(os.environ["TIDINGS_KEY"] not in json.dumps(raw_ok("GET", "/v1/environments")), "the API key is never shown")
    group("environments: list, me (public identifiers, no keys)", environments)

    # ------------------------------------------------------------------ subscribers
    def subscribers():
        ann = novu.subscribers.create(create_subscriber_request_dto={
            "subscriber_id": "ann", "first_name": "Ann", "last_name": "Lee", "email": "ann@example.com", "phone": "+15551230000",
            "locale": "en-US", "timezone": "Europe/Paris", "data": {"plan": "pro"}}).result
        eq((ann.subscriber_id, ann.first_name, ann.email, ann.phone), ("ann", "Ann", "ann@example.com", "+15551230000"), "create ann")
        check(OBJECT_ID.match(ann.id or ""), f"create ann: _id {ann.id}")
        eq(novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "bob", "first_name": "Bob"}).result.first_name,
           "Bob", "create bob (minimal)")
        eq(novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "carl", "email": "carl@example.com"}).result.subscriber_id,
           "carl", "create carl")
        got = novu.subscribers.retrieve(subscriber_id="ann").result
        eq((got.id, got.last_name, got.data), (ann.id, "Lee", {"plan": "pro"}), "retrieve ann")
        patched = novu.subscribers.patch(subscriber_id="ann", patch_subscriber_request_dto={"last_name": "Lane"}).result
        eq((patched.last_name, patched.first_name), ("Lane", "Ann"), "patch ann")
        found = novu.subscribers.search(request={"email": "example.com", "limit": 10}).result
        eq(sorted(s.subscriber_id for s in found.data), ["ann", "carl"], "search by email substring")
        by_id = novu.subscribers.search(request={"subscriber_id": "bob"}).result
        eq([s.subscriber_id for s in by_id.data], ["bob"], "search by subscriberId")
    group("subscribers: create, retrieve, patch, search", subscribers)

    def credentials():
        put = novu.subscribers.credentials.update(subscriber_id="ann", update_subscriber_channel_request_dto={
            "provider_id": "slack", "integration_identifier": "slack", "credentials": {"webhook_url": f"{R}/chat/ann"}}).result
        slack = next((c for c in (put.channels or []) if val(c.provider_id) == "slack"), None)
        eq(slack and slack.credentials.webhook_url, f"{R}/chat/ann", "put slack webhookUrl")
        patched = novu.subscribers.credentials.append(subscriber_id="ann", update_subscriber_channel_request_dto={
            "provider_id": "push-webhook", "integration_identifier": "push-hook", "credentials": {"device_tokens": ["tok-ann-1"]}}).result
        push = next((c for c in (patched.channels or []) if val(c.provider_id) == "push-webhook"), None)
        eq(push and push.credentials.device_tokens, ["tok-ann-1"], "patch push-webhook deviceTokens")
        novu.subscribers.credentials.append(subscriber_id="bob", update_subscriber_channel_request_dto={
            "provider_id": "push-webhook", "integration_identifier": "push-hook", "credentials": {"device_tokens": ["tok-bob"]}})
        novu.subscribers.credentials.delete(subscriber_id="bob", provider_id="push-webhook")
        bob = novu.subscribers.retrieve(subscriber_id="bob").result
        eq(any(val(c.provider_id) == "push-webhook" for c in (bob.channels or [])), False, "delete push-webhook credentials of bob")
    group("subscribers: credentials put, patch, delete", credentials)

    # ------------------------------------------------------------------ workflows
    def workflows_create():
        for w in WORKFLOWS:
            out = attempt(f"workflows.create {w['workflow_id']}", lambda w=w: novu.workflows.create(create_workflow_dto={**w, "active": True}))
            if out is None:
                continue
            r = out.result
            eq((r.workflow_id, r.name, [val(s.type) for s in r.steps]), (w["workflow_id"], w["name"], [s["type"] for s in w["steps"]]),
               f"create {w['workflow_id']}")
            check(OBJECT_ID.match(r.id), f"create {w['workflow_id']}: _id {r.id}")
    group("workflows: create (every step type)", workflows_create)

    # A step condition through the SDK's own `controlValues.skip` (JSON Logic): as in Novu, the step
    # runs while the condition holds, so a trigger with plan "free" skips "pros" and the chain goes on.
    def workflows_create_condition():
        pros = {"and": [{"==": [{"var": "payload.plan"}, "pro"]}]}
        _, wire = sdk("workflows.create filtered", lambda: novu.workflows.create(create_workflow_dto={
            "name": "Filtered", "workflow_id": "filtered", "active": True, "steps": [
                {"name": "pros", "step_id": "pros", "type": "in_app",
                 "control_values": {"body": "only for pros", "skip": pros}},
                in_app("everyone", "for everyone")]}))
        eq(wire["steps"][0]["controlValues"]["skip"], pros, "create filtered: skip stored as sent")
        eq((wire["status"], "issues" in wire["steps"][0]), ("ACTIVE", False), "create filtered: no issues")
    group("workflows: create with a step condition (controlValues.skip)", workflows_create_condition)

    def workflows_get():
        _, wire = sdk("workflows.get hello", lambda: novu.workflows.get(workflow_id="hello"))
        eq((wire["workflowId"], wire["name"], wire["description"], wire["tags"], len(wire["steps"])),
           ("hello", "Hello", "One in-app step", ["contract"], 1), "get hello")
        _, wire = sdk("workflows.get all-steps", lambda: novu.workflows.get(workflow_id="all-steps"))
        eq([x["type"] for x in wire["steps"]], [x["type"] for x in WORKFLOWS[0]["steps"]], "get all-steps: step types")
    group("workflows: get", workflows_get)

    def workflows_list():
        _, wire = sdk("workflows.list", lambda: novu.workflows.list(request={"limit": 50}))
        items = wire.get("workflows", wire.get("data", []))
        eq(sorted(w["workflowId"] for w in items), sorted([w["workflow_id"] for w in WORKFLOWS] + ["filtered"]), "list workflowIds")
        eq(wire.get("totalCount"), len(WORKFLOWS) + 1, "list totalCount")
    group("workflows: list", workflows_list)

    def workflows_update():
        _, wire = sdk("workflows.update temp", lambda: novu.workflows.update(workflow_id="temp", update_workflow_dto={
            "name": "Temp 2", "workflow_id": "temp", "steps": [in_app("temp", "temp 2")],
            "preferences": {"user": None, "workflow": None}}))
        eq(wire["name"], "Temp 2", "update temp: name")
        user = {"all": {"enabled": True, "read_only": False}, "channels": {"email": {"enabled": False}}}
        _, wire = sdk("workflows.update temp (preferences.user)", lambda: novu.workflows.update(workflow_id="temp", update_workflow_dto={
            "name": "Temp 2", "workflow_id": "temp", "steps": [in_app("temp", "temp 2")],
            "preferences": {"user": user, "workflow": None}}))
        eq((wire.get("preferences") or {}).get("user"),
           {"all": {"enabled": True, "readOnly": False}, "channels": {"email": {"enabled": False}}}, "preferences.user stored as sent")
    group("workflows: update (PUT) with preferences", workflows_update)

    def workflows_patch():
        _, wire = sdk("workflows.patch temp", lambda: novu.workflows.patch(workflow_id="temp", patch_workflow_dto={
            "active": False, "description": "patched"}))
        eq((wire.get("active"), wire.get("description")), (False, "patched"), "patch temp")
    group("workflows: patch", workflows_patch)

    def workflows_delete():
        novu.workflows.delete(workflow_id="temp")
        expect_error(lambda: novu.workflows.get(workflow_id="temp"), models.ErrorDto, 404, "get a deleted workflow")
    group("workflows: delete", workflows_delete)

    def broken():
        _, wire = sdk("workflows.get broken", lambda: novu.workflows.get(workflow_id="broken"))
        issues = wire["steps"][0].get("issues")
        check(isinstance(issues, dict) and issues, f"broken: steps[0].issues {issues!r}")
    group("workflows: a broken template is saved with step issues", broken)

    def preview_in_app():
        _, wire = sdk("workflows.steps.generate_preview in_app", lambda: novu.workflows.steps.generate_preview(
            workflow_id="all-steps", step_id="inbox", generate_preview_request_dto={
                "preview_payload": {"payload": {"order": "A-1"}, "subscriber": {"first_name": "Ann"}}}))
        eq(wire["result"]["preview"].get("body"), "Hi Ann, order A-1", "preview body")
        # Read on the wire: the SDK's model would drop a field it does not know.
        eq("subscriberId" in wire["previewPayloadExample"].get("subscriber", {}), False,
           "previewPayloadExample.subscriber has no subscriberId")
    group("workflows: step preview (in-app)", preview_in_app)

    def preview_email():
        _, wire = sdk("workflows.steps.generate_preview email", lambda: novu.workflows.steps.generate_preview(
            workflow_id="all-steps", step_id="mail", generate_preview_request_dto={
                "preview_payload": {"payload": {"order": "A-2"}, "subscriber": {"first_name": "Ann"}}}))
        eq(wire["result"]["preview"].get("subject"), "Order A-2", "email preview subject")
        body = wire["result"]["preview"].get("body") or ""
        check("<p>Hello Ann</p>" in body, f"email preview body of an HTML body with editorType block: {body!r}")
        w = raw_ok("GET", "/v2/workflows/all-steps")
        mail = next(s for s in w["steps"] if s["stepId"] == "mail")
        eq(mail["controlValues"].get("editorType"), "block", "the SDK's default editorType was sent")
        eq((w["status"], mail.get("issues")), ("ACTIVE", None), "an HTML body with editorType block has no issues")
    group("workflows: step preview (email)", preview_email)

    # ------------------------------------------------------------------ triggers: every state
    def t(key, body):
        out = novu.trigger(trigger_event_request_dto={**body, "transaction_id": tx(key)}).result
        eq((out.acknowledged, val(out.status), out.transaction_id), (True, "processed", tx(key)), f"trigger {key}")
        triggered[key] = tx(key)

    def triggers():
        t("all-steps", {"workflow_id": "all-steps", "to": "ann", "payload": {"order": "A-7"}})
        t("to-object", {"workflow_id": "hello", "to": {"subscriber_id": "dan", "first_name": "Dan", "email": "dan@example.com",
            "channels": [{"provider_id": "push-webhook", "integration_identifier": "push-hook",
                          "credentials": {"device_tokens": ["tok-dan"]}}]}, "payload": {}})
        t("to-list", {"workflow_id": "hello", "to": ["bob", {"subscriber_id": "eve", "first_name": "Eve"}], "payload": {}})
        t("actor-object", {"workflow_id": "actor", "to": "ann", "actor": {"subscriber_id": "bob"}, "payload": {}})
        t("actor-string", {"workflow_id": "actor", "to": "ann", "actor": "bob", "payload": {}})
        t("filtered", {"workflow_id": "filtered", "to": "ann", "payload": {"plan": "free"}})
        t("later", {"workflow_id": "later", "to": "ann", "payload": {}})
        t("canceled", {"workflow_id": "later", "to": "bob", "payload": {}})
        t("carl", {"workflow_id": "hello", "to": "carl", "payload": {}})
        for i in range(3):
            t(f"digest-{i}", {"workflow_id": "digest", "to": "ann", "payload": {"n": i}})
        for i in range(2):
            t(f"throttle-{i}", {"workflow_id": "throttled", "to": "ann", "payload": {}})
            settled(tx(f"throttle-{i}"))
        t("unsafe", {"workflow_id": "unsafe", "to": "ann", "payload": {"name": "<script>alert(1)</script>Ann"}})
        t("variables", {"workflow_id": "variables", "to": "ann", "actor": {"subscriber_id": "bob"},
                        "context": {"tenant": "acme"}, "payload": {}})
        t("actions", {"workflow_id": "actions", "to": "ann", "payload": {"order": "A-9"}})
        t("no-label", {"workflow_id": "no-label", "to": "ann", "payload": {}})
    group("events: trigger (to as string, object, list of both; actor object and string)", triggers)

    def bulk():
        out = novu.trigger_bulk(bulk_trigger_event_dto={"events": [
            {"workflow_id": "hello", "to": "bob", "payload": {}, "transaction_id": tx("bulk-1")},
            {"workflow_id": "hello", "to": {"subscriber_id": "ann"}, "payload": {}, "transaction_id": tx("bulk-2")},
        ]}).result
        eq([(o.acknowledged, val(o.status), o.transaction_id) for o in out],
           [(True, "processed", tx("bulk-1")), (True, "processed", tx("bulk-2"))], "bulk answers")
        triggered["bulk-1"], triggered["bulk-2"] = tx("bulk-1"), tx("bulk-2")
    group("events: bulk trigger", bulk)

    def cancel():
        until("the canceled trigger's first step ran", lambda: any(
            j["type"] == "in_app" and j["status"] == "completed" for n in activity(tx("canceled")) for j in n["jobs"]))
        eq(novu.cancel(transaction_id=tx("canceled")).result, True, "cancel answers true")
    group("events: cancel", cancel)

    def trigger_400s():
        # novu-py reads every 400 of the trigger routes as PayloadValidationExceptionDto.
        e = expect_error(lambda: novu.trigger(trigger_event_request_dto={"workflow_id": "strict", "to": "ann", "payload": {"name": 7}}),
                         models.PayloadValidationExceptionDto, 400, "a payload the workflow's schema rejects")
        eq((e.data.type, [(x.field, x.value, x.schema_path) for x in e.data.errors]),
           ("PAYLOAD_VALIDATION_ERROR", [("name", 7, "#/properties/name/type")]), "payload validation: type and errors")
        # A bulk trigger answers per event (201, as Novu): a refused event is `error` with its reason.
        out, _ = sdk("trigger_bulk with refused events", lambda: novu.trigger_bulk(bulk_trigger_event_dto={"events": [
            {"workflow_id": "strict", "to": "ann", "payload": {}},
            {"workflow_id": "no-such-workflow", "to": "ann", "payload": {}, "transaction_id": tx("bulk-missing")}]}))
        out = out or []
        eq([(o.acknowledged, val(o.status), o.transaction_id) for o in out],
           [(True, "error", None), (True, "error", tx("bulk-missing"))], "bulk: refused events answer error each")
        check(bool(out) and (out[0].error or [""])[0].startswith("Payload validation failed: root.name"),
              f"bulk: the payload's reason: {out[0].error if out else None!r}")
        eq(out[1].error if len(out) > 1 else None, ["Workflow not found: no-such-workflow"], "bulk: the unknown workflow's reason")
        e = expect_error(lambda: novu.trigger(trigger_event_request_dto={"workflow_id": "hello", "to": {"subscriber_id": "ann",
                             "channels": [{"provider_id": "expo", "credentials": {"device_tokens": ["ExponentPushToken[z]"]}}]}}),
                         models.PayloadValidationExceptionDto, 400, "to.channels with no active integration")
        eq((e.data.type, [x.field for x in e.data.errors]), ("BAD_REQUEST", ["to.channels"]), "no integration: type and errors")
    group("events: the trigger routes' 400s parse in the SDK, a bulk's refused events", trigger_400s)

    def trigger_unsupported():
        # Fields Novu's request has and Tidings does not implement are refused, not dropped.
        v = expect_error(lambda: novu.trigger(trigger_event_request_dto={"workflow_id": "hello", "to": "ann",
                             "tenant": "acme", "bridge_url": "https://bridge.example.com"}),
                         models.ValidationErrorDto, 422, "tenant and bridgeUrl")
        eq(sorted(v.data.errors), ["bridgeUrl", "tenant"], "the unsupported fields named")
        eq(v.data.errors["tenant"].messages, ["tenant is not supported by this server"], "tenant's message")
        b = expect_error(lambda: novu.trigger_bulk(bulk_trigger_event_dto={"events": [
                             {"workflow_id": "hello", "to": "ann", "tenant": {"identifier": "acme"}}]}),
                         models.ValidationErrorDto, 422, "bulk with a tenant")
        eq(list(b.data.errors), ["events[0].tenant"], "bulk: the event's field named")
        expect_error(lambda: novu.trigger_broadcast(trigger_event_to_all_request_dto={"name": "hello", "payload": {},
                         "overrides": {"severity": "high"}}),
                     models.ValidationErrorDto, 422, "broadcast with overrides.severity")
    group("events: unsupported fields are refused (422)", trigger_unsupported)

    def engine():
        settled(tx("all-steps"))
        for k in ["to-object", "actor-object", "actor-string", "filtered", "carl", "bulk-1", "bulk-2", "unsafe", "variables", "actions",
                  "no-label"]:
            settled(tx(k))
        settled(tx("to-list"), 2)
        until("the digest fires", lambda: all(
            len(items) == 1 and all(j["status"] in FINISHED for j in items[0]["jobs"])
            for items in [activity(tx(f"digest-{i}")) for i in range(3)]))
    group("engine settles (all steps, digest, to forms, actor, filter, deleted subscriber)", engine)

    def failed():
        # The integration at the closed port is named in the overrides, so the engine does not fail over.
        out = novu.trigger(trigger_event_request_dto={"workflow_id": "mail-only", "to": "ann", "payload": {},
                                                      "transaction_id": tx("failed"),
                                                      "overrides": {"email": {"integrationIdentifier": "smtp-closed"}}}).result
        eq(out.transaction_id, tx("failed"), "trigger mail-only")
        [n] = settled(tx("failed"))
        eq([j["status"] for j in n["jobs"]], ["failed"], "the email job failed")
    group("a failed delivery (SMTP port closed)", failed)

    def delete_subscriber():
        eq(novu.subscribers.delete(subscriber_id="carl").result.acknowledged, True, "delete carl")
        expect_error(lambda: novu.subscribers.retrieve(subscriber_id="carl"), models.ErrorDto, 404, "retrieve a deleted subscriber")
    group("subscribers: delete (after its notification)", delete_subscriber)

    # ------------------------------------------------------------------ activity
    every = list(triggered.items()) + [("failed", tx("failed"))]

    def notifications_list():
        for key, transaction_id in every:
            r = attempt(f"notifications.list {key}", lambda t=transaction_id: novu.notifications.list(request={"transaction_id": t, "limit": 10}))
            if r is None:
                continue
            check(len(r.result.data) >= 1, f"list {key}: no notification")
            for n in r.result.data:
                eq(n.transaction_id, transaction_id, f"list {key}: transactionId")
                notification_ids.setdefault(key, n.id)
        everything = novu.notifications.list(request={"limit": 50}).result
        check(len(everything.data) >= 15, f"list all: {len(everything.data)} notifications")
    group("notifications: list (every transaction, parsed by the SDK)", notifications_list)
    for key, transaction_id in every:
        if key not in notification_ids:
            items = activity(transaction_id)
            notification_ids[key] = items[0]["_id"] if items else None

    # The values are checked on the wire (what the server sent), also when the SDK's model rejected it.
    retrieved = {}

    def retrieve(key):
        check(notification_ids.get(key), f"no notification for {key}")
        if key not in retrieved:
            retrieved[key] = sdk(f"notifications.retrieve {key}",
                                 lambda: novu.notifications.retrieve(notification_id=notification_ids[key]))[1]
        eq((retrieved[key] or {}).get("_id"), notification_ids[key], f"retrieve {key}: _id")
        return retrieved[key]

    def all_steps():
        n = retrieve("all-steps")
        eq([j["type"] for j in n["jobs"]],
           ["in_app", "email", "sms", "chat", "push", "custom", "http_request", "throttle", "delay", "in_app"], "all-steps: job types")
        eq([j["status"] for j in n["jobs"]], ["completed"] * 10, "all-steps: job statuses")
    group("notifications: retrieve, every step type completed", all_steps)
    group("notifications: the email job names the integration's provider", lambda: eq(
        next((j["providerId"] for j in retrieve("all-steps")["jobs"] if j["type"] == "email"), None), "nodemailer",
        "all-steps: email job providerId"))

    def pending():
        later = retrieve("later")
        eq([j["type"] for j in later["jobs"]], ["in_app", "delay", "email"], "later: every step's job from the start")
        eq(later["jobs"][2]["status"], "pending", "later: the email after a one-day delay is pending")
    group("notifications: pending steps shown from the start", pending)
    group("notifications: canceled", lambda: eq([j["status"] for j in retrieve("canceled")["jobs"]],
                                                ["completed", "canceled", "canceled"], "canceled: the rest of the chain"))
    def skipped():
        jobs = retrieve("filtered")["jobs"]
        eq([j["status"] for j in jobs], ["skipped", "completed"], "filtered: the step whose condition is false is skipped")
        eq(jobs[0]["executionDetails"][-1]["detail"], "Step skipped: its condition (controlValues.skip) is false",
           "filtered: the skip says why")
    group("notifications: skipped", skipped)

    def failed_job():
        j = retrieve("failed")["jobs"][0]
        eq((j["status"], j["providerId"]), ("failed", "nodemailer"), "failed email")
    group("notifications: failed", failed_job)

    def digest():
        jobs = [j for i in range(3) for j in retrieve(f"digest-{i}")["jobs"] if j["type"] == "digest"]
        eq(sorted(j["status"] for j in jobs), ["completed", "merged", "merged"], "digest: one digest, two merged")
        eq([len(j["digest"].get("events", [])) for j in jobs if j["status"] == "completed"], [3], "digest: three events")
        eq([j["digest"].get("type") for j in jobs], ["regular"] * 3, "every digest job carries digest.type")
    group("notifications: digest", digest)

    def throttled():
        eq([j["status"] for j in retrieve("throttle-0")["jobs"]], ["completed", "completed"], "throttle: the first goes through")
        jobs = retrieve("throttle-1")["jobs"]
        eq([j["status"] for j in jobs], ["skipped", "skipped"], "throttle: the second is throttled")
        eq(jobs[0]["executionDetails"][-1]["detail"].startswith("Throttled"), True, "throttle: the detail says so")
    group("notifications: throttled", throttled)

    def others():
        for key in ["to-object", "actor-object", "actor-string", "carl", "bulk-1"]:
            eq([j["status"] for j in retrieve(key)["jobs"]], ["completed"], f"{key}: completed")
    group("notifications: to forms, actor, bulk, deleted subscriber", others)

    def erased():
        # The erasure runs in the background: wait until the notification lost its recipient.
        until("carl's notification erased", lambda: (lambda items: len(items) == 1 and "subscriber" not in items[0]
                                                     and "to" not in items[0])(activity(tx("carl"))))
        listed = novu.notifications.list(request={"transaction_id": tx("carl"), "limit": 10}).result
        eq([(n.subscriber, n.to, bool(n.subscriber_id)) for n in listed.data], [(None, None, True)],
           "list: carl's erased notification")
        one = novu.notifications.retrieve(notification_id=listed.data[0].id).result
        eq((one.subscriber, one.to, one.subscriber_id, one.transaction_id),
           (None, None, listed.data[0].subscriber_id, tx("carl")), "retrieve: carl's erased notification")
        eq(len(novu.notifications.list(request={"subscriber_ids": ["carl"], "limit": 10}).result.data), 0,
           "carl's id names nobody now")
    group("notifications: a deleted subscriber's erased activity (no subscriber, no recipient) parses strictly", erased)

    # ------------------------------------------------------------------ messages and the feed
    def messages():
        _, wire = sdk("messages.retrieve ann in_app", lambda: novu.messages.retrieve(
            request={"subscriber_id": "ann", "channel": "in_app", "limit": 100}))
        check(len(wire["data"]) >= 5, f"ann's in-app messages: {len(wire['data'])}")
        _, wire = sdk("messages.retrieve email", lambda: novu.messages.retrieve(
            request={"transaction_id": [tx("all-steps")], "channel": "email"}))
        eq([m["status"] for m in wire["data"]], ["sent"], "the successful email")
        _, wire = sdk("messages.retrieve failed email", lambda: novu.messages.retrieve(
            request={"transaction_id": [tx("failed")], "channel": "email"}))
        eq([m["status"] for m in wire["data"]], ["error"], "the failed email")
    group("messages: list (retrieve)", messages)

    def actor():
        _, wire = sdk("messages.retrieve actor", lambda: novu.messages.retrieve(
            request={"transaction_id": [tx("actor-object"), tx("actor-string")], "limit": 10}))
        eq(sorted(m["content"] for m in wire["data"]), ["From [Bob]", "From [Bob]"], "in-app content")
    group("actor given as object and as string is looked up", actor)

    def unsafe():
        _, wire = sdk("messages.retrieve unsafe", lambda: novu.messages.retrieve(request={"transaction_id": [tx("unsafe")]}))
        eq(len(wire["data"]), 1, "one message")
        content = str(wire["data"][0]["content"])
        check("<script" not in content, f"in-app content keeps the script: {content}")
        check("Ann" in content, f"in-app content: {content}")
    group("rendered HTML is sanitised", unsafe)

    def variables():
        _, wire = sdk("messages.retrieve variables", lambda: novu.messages.retrieve(request={"transaction_id": [tx("variables")]}))
        eq([m["content"] for m in wire["data"]], ["env=[Development] tenant=[acme] actor=[Bob]"], "delivered content")
        _, p = sdk("workflows.steps.generate_preview variables", lambda: novu.workflows.steps.generate_preview(
            workflow_id="variables", step_id="vars", generate_preview_request_dto={
                "preview_payload": {"context": {"tenant": "acme"}, "actor": {"first_name": "Bob"}}}))
        eq(p["result"]["preview"].get("body"), "env=[Development] tenant=[acme] actor=[Bob]", "the preview of the same inputs")
    group("delivery renders env, context and actor as the preview does", variables)

    def to_channels():
        dan = novu.subscribers.retrieve(subscriber_id="dan").result
        push = next((c for c in (dan.channels or []) if val(c.provider_id) == "push-webhook"), None)
        eq(push and push.credentials.device_tokens, ["tok-dan"], "dan's push tokens")
    group("`to.channels` stored on the subscriber", to_channels)

    feed_items = []

    def feed():
        _, wire = sdk("subscribers.notifications.feed", lambda: novu.subscribers.notifications.feed(
            request={"subscriber_id": "ann", "limit": 100}))
        feed_items.extend(wire["data"])
        check(len(feed_items) >= 5, f"ann's feed: {len(feed_items)}")
        eq({m["channel"] for m in feed_items}, {"in_app"}, "feed items are in-app messages")
        # The payload filter, base64 as the SDK documents it: only the all-steps trigger's message.
        _, wire = sdk("subscribers.notifications.feed payload", lambda: novu.subscribers.notifications.feed(
            request={"subscriber_id": "ann", "limit": 100,
                     "payload": base64.b64encode(json.dumps({"order": "A-7"}).encode()).decode()}))
        eq({m["transactionId"] for m in (wire or {}).get("data", [])}, {tx("all-steps")}, "the feed's payload filter")
    group("subscribers: notifications feed", feed)

    def actions():
        # Every feed item above was parsed by the SDK's MessageButton; here the buttons' values.
        [item] = [m for m in feed_items if m.get("transactionId") == tx("actions")] or [{}]
        eq([(b["type"], b["content"]) for b in item.get("cta", {}).get("action", {}).get("buttons", [])],
           [("primary", "Open A-9")], "buttons: the labelled action; the one whose label renders empty is left out")
        eq(item.get("cta", {}).get("data", {}).get("url"), "https://example.com/o/A-9", "the primary action's redirect")
        w = raw_ok("GET", "/v2/workflows/no-label")
        issues = (w["steps"][0].get("issues") or {}).get("controls", {})
        eq([(k, [i["issueType"] for i in v]) for k, v in issues.items()], [("primaryAction.label", ["MISSING_VALUE"])],
           "an action without a label is a step issue")
        eq(w["status"], "ERROR", "no-label: status")
        [n] = settled(tx("no-label"))
        eq([j["status"] for j in n["jobs"]], ["failed"], "no-label: the step with an issue fails, no message")
        eq([m for m in feed_items if m.get("transactionId") == tx("no-label")], [], "no-label: nothing in the feed")
    group("in-app actions: a button needs a label", actions)
    group("subscribers: unseen count", lambda: eq(
        novu.subscribers.notifications.unseen_count(subscriber_id="ann", seen=False).result.count,
        len([m for m in feed_items if not m["seen"]]), "unseen count"))

    def mark_as():
        check(feed_items, "a feed item to mark")
        first = feed_items[0]
        _, wire = sdk("subscribers.messages.mark_all_as", lambda: novu.subscribers.messages.mark_all_as(
            subscriber_id="ann", message_mark_as_request_dto={"message_id": first["_id"], "mark_as": "read"}))
        eq([(m["_id"], m["read"]) for m in wire], [(first["_id"], True)], "mark one as read")
    group("subscribers: mark as", mark_as)

    def mark_all():
        novu.subscribers.messages.mark_all(subscriber_id="ann", mark_all_message_as_request_dto={"mark_as": "seen"})
        eq(novu.subscribers.notifications.unseen_count(subscriber_id="ann", seen=False).result.count, 0, "unseen after mark all seen")
    group("subscribers: mark all", mark_all)

    def message_delete():
        _, wire = sdk("messages.retrieve bulk-1", lambda: novu.messages.retrieve(request={"transaction_id": [tx("bulk-1")]}))
        eq(len(wire["data"]), 1, "bob's bulk message")
        eq((wire["data"][0].get("archived"), "archivedAt" in wire["data"][0]), (False, False),
           "a message carries archived as the feed does")
        out = novu.messages.delete(message_id=wire["data"][0]["_id"]).result
        eq((out.acknowledged, val(out.status)), (True, "deleted"), "delete message")
        _, wire = sdk("messages.retrieve after delete", lambda: novu.messages.retrieve(request={"transaction_id": [tx("bulk-1")]}))
        eq(len(wire["data"]), 0, "after delete")
    group("messages: delete", message_delete)

    group("deleted subscriber: their activity still parses", lambda: eq(
        len(novu.notifications.list(request={"transaction_id": tx("carl")}).result.data), 1, "carl's notification"))

    # ------------------------------------------------------------------ subscriber preferences (v2)
    # A subscriber of their own (the triggers above are not affected) and three workflows: default
    # preferences set at creation (email off), read-only defaults, and a critical one (raw: the SDK's create
    # model has no `critical`). The v1 routes run with an older release: tests/sdk/preferences_v1.py.
    every_on = {"email": True, "sms": True, "in_app": True, "chat": True, "push": True}

    def chans(c):
        """The channels a parsed preference shows (the ones set)."""
        out = {"email": c.email, "sms": c.sms, "in_app": c.in_app, "chat": c.chat, "push": c.push, "tool": c.tool}
        return {k: v for k, v in out.items() if v is not None}

    def of(p, identifier):
        return next((w for w in p.workflows if w.workflow.identifier == identifier), None)

    def overrides(w):
        return [(val(o.channel), val(o.source)) for o in w.overrides]

    mail_step = {"name": "mail", "step_id": "mail", "type": "email",
                 "control_values": {"editor_type": "html", "subject": "Hi", "body": "<p>Hi</p>"}}

    def workflows_with_preferences():
        novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "pat", "first_name": "Pat"})
        defaults = {"all": {"enabled": True, "read_only": False}, "channels": {"email": {"enabled": False}}}
        defaults_wire = {"all": {"enabled": True, "readOnly": False}, "channels": {"email": {"enabled": False}}}
        created, wire = sdk("workflows.create prefs-defaults", lambda: novu.workflows.create(create_workflow_dto={
            "name": "Prefs defaults", "workflow_id": "prefs-defaults", "active": True, "steps": [in_app("inbox", "Hi"), mail_step],
            "preferences": {"user": None, "workflow": defaults}}))
        eq((wire["preferences"]["user"], wire["preferences"]["default"]), (None, defaults_wire), "preferences answered as {user, default}")
        check(created is not None and created.preferences.default.all.read_only is False
              and created.preferences.default.channels["email"].enabled is False, f"parsed preferences: {created and created.preferences}")
        _, wire = sdk("workflows.create prefs-locked", lambda: novu.workflows.create(create_workflow_dto={
            "name": "Prefs locked", "workflow_id": "prefs-locked", "active": True, "steps": [in_app("inbox", "Hi")],
            "preferences": {"user": None, "workflow": {"all": {"enabled": True, "read_only": True}, "channels": {}}}}))
        eq(wire["preferences"]["default"]["all"], {"enabled": True, "readOnly": True}, "read-only defaults")
        critical = raw_ok("POST", "/v2/workflows", {"name": "Prefs critical", "workflowId": "prefs-critical", "active": True,
                                                    "critical": True, "steps": [{"name": "inbox", "stepId": "inbox", "type": "in_app",
                                                                                 "controlValues": {"body": "Hi"}}]}, 201)
        eq(critical["critical"], True, "critical workflow")
        _, wire = sdk("workflows.get prefs-defaults", lambda: novu.workflows.get(workflow_id="prefs-defaults"))
        eq(wire["preferences"]["default"], defaults_wire, "get: the defaults as created")
    group("workflows: create with preferences (round trip through the SDK's models)", workflows_with_preferences)

    def prefs_defaults():
        p = novu.subscribers.preferences.list(subscriber_id="pat").result
        eq((p.global_.enabled, chans(p.global_.channels)), (True, every_on), "global: every channel on")
        d = of(p, "prefs-defaults")
        eq((d.enabled, chans(d.channels), overrides(d), d.workflow.slug, d.workflow.name, d.updated_at),
           (True, {"email": False, "in_app": True}, [("in_app", "template"), ("email", "template")], "prefs-defaults",
            "Prefs defaults", None), "prefs-defaults: its defaults, never changed")
        eq(chans(of(p, "prefs-locked").channels), {"in_app": True}, "prefs-locked")
        eq(of(p, "prefs-critical"), None, "the critical workflow is not listed by default")
        eq(chans(of(p, "digest").channels), {"in_app": True}, "a workflow with a digest and an in-app step shows in-app")
        critical = novu.subscribers.preferences.list(subscriber_id="pat", criticality=models.Criticality.CRITICAL).result
        eq([w.workflow.identifier for w in critical.workflows], ["prefs-critical"], "criticality=critical")
        every = novu.subscribers.preferences.list(subscriber_id="pat", criticality=models.Criticality.ALL).result
        check(all(of(every, w) for w in ["prefs-defaults", "prefs-locked", "prefs-critical"]), "criticality=all lists every one")
    group("subscriber preferences: list, defaults only", prefs_defaults)

    def prefs_global():
        p = novu.subscribers.preferences.update(subscriber_id="pat", patch_subscriber_preferences_dto={"channels": {"in_app": False}}).result
        eq((p.global_.enabled, chans(p.global_.channels)), (True, {**every_on, "in_app": False}), "global in-app off")
        d = of(p, "prefs-defaults")
        eq((chans(d.channels), overrides(d)[0]), ({"email": False, "in_app": False}, ("in_app", "subscriber")), "prefs-defaults")
        eq(chans(of(p, "prefs-locked").channels), {"in_app": True}, "read-only defaults ignore the subscriber")
    group("subscriber preferences: a global change", prefs_global)

    def prefs_workflow():
        p = novu.subscribers.preferences.update(subscriber_id="pat", patch_subscriber_preferences_dto={
            "workflow_id": "prefs-defaults", "channels": {"email": True}}).result
        d = of(p, "prefs-defaults")
        eq((chans(d.channels), overrides(d)), ({"email": True, "in_app": False}, [("in_app", "subscriber"), ("email", "subscriber")]),
           "prefs-defaults")
        check(ISO_UTC.match(d.updated_at or ""), f"updatedAt once changed: {d.updated_at}")
        eq(overrides(of(p, "mail-only")), [("email", "template")], "another workflow keeps its source")
        eq(p.global_.channels.in_app, False, "the global level did not move")
    group("subscriber preferences: a workflow change (overrides name subscriber or template)", prefs_workflow)

    def prefs_bulk():
        out = novu.subscribers.preferences.bulk_update(subscriber_id="pat", bulk_update_subscriber_preferences_dto={"preferences": [
            {"workflow_id": "prefs-defaults", "channels": {"email": False}},
            {"workflow_id": "mail-only", "channels": {"email": False}}]}).result
        eq([(val(x.level), x.enabled, x.workflow.identifier, x.workflow.critical, val(x.workflow.severity), chans(x.channels)) for x in out],
           [("template", True, "prefs-defaults", False, "none", {"email": False, "in_app": False}),
            ("template", True, "mail-only", False, "none", {"email": False})], "each workflow, in the order given")
    group("subscriber preferences: bulk update", prefs_bulk)

    def prefs_refused():
        for w in ["prefs-locked", "prefs-critical"]:
            e = expect_error(lambda w=w: novu.subscribers.preferences.update(subscriber_id="pat", patch_subscriber_preferences_dto={
                "workflow_id": w, "channels": {"in_app": False}}), models.ErrorDto, 400, w)
            check(w in e.data.message, f"{w}: the 400 names the workflow: {e.data.message}")
        expect_error(lambda: novu.subscribers.preferences.bulk_update(subscriber_id="pat", bulk_update_subscriber_preferences_dto={"preferences": [
            {"workflow_id": "prefs-locked", "channels": {"in_app": False}}]}), models.ErrorDto, 400, "bulk with a read-only workflow")
    group("subscriber preferences: read-only and critical workflows refuse a change (400)", prefs_refused)

    def prefs_unknown():
        expect_error(lambda: novu.subscribers.preferences.list(subscriber_id="nobody"), models.ErrorDto, 404, "list")
        expect_error(lambda: novu.subscribers.preferences.update(subscriber_id="nobody", patch_subscriber_preferences_dto={"channels": {"email": False}}),
                     models.ErrorDto, 404, "update")
        e = expect_error(lambda: novu.subscribers.preferences.update(subscriber_id="pat", patch_subscriber_preferences_dto={
            "workflow_id": "nothing", "channels": {"email": False}}), models.ErrorDto, 404, "update an unknown workflow")
        check("nothing" in e.data.message, f"the 404 names the workflow: {e.data.message}")
        expect_error(lambda: novu.subscribers.preferences.bulk_update(subscriber_id="pat", bulk_update_subscriber_preferences_dto={"preferences": [
            {"workflow_id": "nothing", "channels": {"email": False}}]}), models.ErrorDto, 404, "bulk with an unknown workflow")
    group("subscriber preferences: unknown subscriber or workflow (404)", prefs_unknown)

    def prefs_invalid():
        v = expect_error(lambda: novu.subscribers.preferences.update(subscriber_id="pat", patch_subscriber_preferences_dto={"channels": {"tool": True}}),
                         models.ValidationErrorDto, 422, "tool")
        eq(list(v.data.errors), ["channels.tool"], "the channel named")
        b = expect_error(lambda: novu.subscribers.preferences.bulk_update(subscriber_id="pat", bulk_update_subscriber_preferences_dto={"preferences": [
            {"workflow_id": "prefs-defaults", "channels": {"tool": True}}]}), models.ValidationErrorDto, 422, "bulk with tool")
        eq(list(b.data.errors), ["preferences.0.channels.tool"], "bulk: the channel named")
        eq(chans(of(novu.subscribers.preferences.list(subscriber_id="pat").result, "prefs-defaults").channels), {"email": False, "in_app": False},
           "nothing changed")
    group("subscriber preferences: a channel outside the five (422)", prefs_invalid)

    # ------------------------------------------------------------------ channel connections and endpoints
    def connections():
        c = novu.channel_connections.create(create_channel_connection_request_dto={
            "subscriber_id": "ann", "integration_identifier": "slack", "workspace": {"id": "T1", "name": "Acme"},
            "auth": {"access_token": "xoxb-1"}}).result
        check(c.identifier.startswith("chconn_") and len(c.identifier) == 19, f"connection identifier {c.identifier}")
        eq((c.subscriber_id, val(c.provider_id), val(c.channel), c.workspace.id, c.workspace.name),
           ("ann", "slack", "chat", "T1", "Acme"), "create")
        eq([x.identifier for x in novu.channel_connections.list(request={"subscriber_id": "ann"}).result.data], [c.identifier], "list")
        eq(novu.channel_connections.retrieve(identifier=c.identifier).result.identifier, c.identifier, "retrieve")
        up = novu.channel_connections.update(identifier=c.identifier, update_channel_connection_request_dto={
            "workspace": {"id": "T1", "name": "Acme 2"}, "auth": {"access_token": "xoxb-2"}}).result
        eq(up.workspace.name, "Acme 2", "update")
        novu.channel_connections.delete(identifier=c.identifier)
        expect_error(lambda: novu.channel_connections.retrieve(identifier=c.identifier), models.ErrorDto, 404, "retrieve a deleted connection")
    group("channel connections: create, list, retrieve, update, delete", connections)

    def endpoints():
        e = novu.channel_endpoints.create(request_body={"subscriber_id": "ann", "integration_identifier": "slack",
                                                        "type": "slack_channel", "endpoint": {"channel_id": "C1"}}).result
        check(e.identifier.startswith("chendp_") and len(e.identifier) == 19, f"endpoint identifier {e.identifier}")
        eq((e.subscriber_id, val(e.type)), ("ann", "slack_channel"), "create")
        eq(RECORDER.last_json()["data"]["endpoint"] if "data" in RECORDER.last_json() else RECORDER.last_json()["endpoint"],
           {"channelId": "C1"}, "create: endpoint")
        eq([x.identifier for x in novu.channel_endpoints.list(request={"subscriber_id": "ann"}).result.data], [e.identifier], "list")
        eq(novu.channel_endpoints.retrieve(identifier=e.identifier).result.identifier, e.identifier, "retrieve")
        novu.channel_endpoints.update(identifier=e.identifier, update_channel_endpoint_request_dto={"endpoint": {"channel_id": "C2"}})
        body = RECORDER.last_json()
        eq(body.get("data", body)["endpoint"], {"channelId": "C2"}, "update")

        # The SDK refuses a non-object `endpoint` before sending it: raw HTTP, parsed by the SDK's error model.
        def non_object():
            code, out = raw("PATCH", f"/v1/channel-endpoints/{e.identifier}", {"endpoint": "not-an-object"})
            eq(code, 422, f"PATCH with a non-object endpoint: {out}")
            parsed = models.ValidationErrorDtoData.model_validate(out)
            check("endpoint" in parsed.errors, f"422 errors.endpoint: {out}")
        group("channel endpoints: PATCH with a non-object endpoint is a 422", non_object)
        novu.channel_endpoints.delete(identifier=e.identifier)
        expect_error(lambda: novu.channel_endpoints.retrieve(identifier=e.identifier), models.ErrorDto, 404, "retrieve a deleted endpoint")
    group("channel endpoints: create, list, retrieve, update, delete", endpoints)

    # ------------------------------------------------------------------ errors
    def not_found():
        e = expect_error(lambda: novu.subscribers.retrieve(subscriber_id="nobody"), models.ErrorDto, 404, "unknown subscriber")
        eq((e.data.status_code, e.data.path), (404, "/v2/subscribers/nobody"), "404 body")
        check(ISO_UTC.match(e.data.timestamp), f"404 timestamp {e.data.timestamp}")
        check("nobody" in str(e.data.message), f"404 names the id: {e.data.message}")
    group("errors: 404 in the SDK's error model", not_found)

    def notification_not_found():
        n = expect_error(lambda: novu.notifications.retrieve(notification_id=UNKNOWN_ID), models.ErrorDto, 404, "unknown notification")
        check(UNKNOWN_ID in str(n.data.message), f"notification 404 names the id: {n.data.message}")
    group("errors: a notification's 404 names the id", notification_not_found)

    def invalid():
        v = expect_error(lambda: novu.integrations.create(create_integration_request_dto={
            "name": "Wrong", "provider_id": "sendgrid", "channel": "sms"}), models.ValidationErrorDto, 422, "sendgrid on the sms channel")
        check("channel" in v.data.errors and v.data.errors["channel"].messages, f"422 errors.channel: {v.data.errors!r}")
    group("errors: 422 in the SDK's error model", invalid)

    def every_field():
        # The SDK refuses these values before sending them: raw HTTP, parsed by the SDK's error model.
        code, out = raw("POST", "/v1/integrations", {"name": "Bad", "providerId": "no-such-provider", "channel": "no-such-channel"})
        eq(code, 422, "status")
        parsed = models.ValidationErrorDtoData.model_validate(out)
        eq(sorted(parsed.errors), ["channel", "providerId"], "every bad field")
        eq((parsed.errors["providerId"].value, parsed.errors["channel"].value), ("no-such-provider", "no-such-channel"),
           "the offending values")
    group("errors: a 422 lists every bad field with its value", every_field)

    def port_number():
        code, out = raw("POST", "/v1/integrations", {"name": "Port", "identifier": "port-number", "providerId": "nodemailer",
                                                     "channel": "email", "active": False,
                                                     "credentials": {"host": "127.0.0.1", "port": 2525, "from": "a@acme.test"}})
        eq(code, 201, f"create with port 2525: {out}")
    group("integrations: credentials.port accepted as a JSON number", port_number)

    # ------------------------------------------------------------------ topics and subscriptions

    def topics_crud():
        for sid in ["tp-ann", "tp-bob"]:
            novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": sid, "first_name": sid})
        created, wire = sdk("topics.create", lambda: novu.topics.create(create_update_topic_request_dto={"key": "tp-news", "name": "News"}))
        eq(RECORDER.last.status_code, 201, "create: 201")
        eq((created.key, created.name), ("tp-news", "News"), "created topic")
        check(OBJECT_ID.match(created.id) and ISO_UTC.match(created.created_at or ""), f"created: {wire}")
        again, _ = sdk("topics.create again", lambda: novu.topics.create(create_update_topic_request_dto={"key": "tp-news", "name": "Newer"}))
        eq(RECORDER.last.status_code, 200, "upsert of an existing topic: 200")
        eq((again.id, again.name), (created.id, "Newer"), "same topic, new name")
        e = expect_error(lambda: novu.topics.create(create_update_topic_request_dto={"key": "tp-news"}, fail_if_exists=True),
                         models.TopicResponseDtoError, 409, "failIfExists")
        eq((e.data.id, e.data.key, e.data.name), (created.id, "tp-news", "Newer"), "the 409 shows the existing topic")
        got, _ = sdk("topics.get", lambda: novu.topics.get(topic_key="tp-news"))
        eq(got.name, "Newer", "get")
        updated, _ = sdk("topics.update", lambda: novu.topics.update(topic_key="tp-news", update_topic_request_dto={"name": "Renamed"}))
        eq(updated.name, "Renamed", "update")
        novu.topics.create(create_update_topic_request_dto={"key": "tp-other"})
        page, _ = sdk("topics.list", lambda: novu.topics.list(request={"key": "tp-news"}))
        eq([t.key for t in page.data], ["tp-news"], "list by key")
        eq((page.total_count, page.next), (1, None), "list counts")
        named, _ = sdk("topics.list by name", lambda: novu.topics.list(request={"name": "renam", "limit": 5}))
        eq([t.key for t in named.data], ["tp-news"], "list by name substring")
        expect_error(lambda: novu.topics.get(topic_key="tp-none"), models.ErrorDto, 404, "unknown topic")
        e = expect_error(lambda: novu.topics.create(create_update_topic_request_dto={"key": "bad key"}), models.ValidationErrorDto, 422, "bad key")
        eq(sorted(e.data.errors), ["key"], "the 422 names the key")
        # Tidings' extension field (a topic open to self-subscription through the Inbox) is parsed past.
        raw_ok("POST", "/v2/topics", {"key": "tp-open", "allowSelfSubscription": True}, 201)
        opened, wire = sdk("topics.get open", lambda: novu.topics.get(topic_key="tp-open"))
        eq((opened.key if opened else None, (wire or {}).get("allowSelfSubscription")), ("tp-open", True),
           "a topic with allowSelfSubscription parses")
    group("topics: create (201, then 200), get, update, list, 404, 422", topics_crud)

    def topic_subscriptions():
        out, wire = sdk("subscriptions.create", lambda: novu.topics.subscriptions.create(topic_key="tp-news", create_topic_subscriptions_request_dto={
            "subscriptions": ["tp-ann", {"identifier": "bob-news", "subscriber_id": "tp-bob"}, "tp-ghost"]}))
        eq(RECORDER.last.status_code, 201, "subscribe: 201")
        eq((out.meta.total_count, out.meta.successful, out.meta.failed), (3, 2, 1), "meta")
        eq([(x.subscriber_id, x.code) for x in out.errors], [("tp-ghost", "SUBSCRIBER_NOT_FOUND")], "errors")
        eq([(x.identifier, x.topic.key, x.subscriber.subscriber_id, x.subscriber.first_name) for x in out.data],
           [("tk_tp-news:si_tp-ann", "tp-news", "tp-ann", "tp-ann"), ("bob-news", "tp-news", "tp-bob", "tp-bob")], "subscriptions")
        e = expect_error(lambda: novu.topics.subscriptions.create(topic_key="tp-news", create_topic_subscriptions_request_dto={"subscriptions": ["tp-ghost"]}),
                         models.ErrorDto, 400, "all failed")
        eq(RECORDER.last.json()["errors"][0]["code"], "SUBSCRIBER_NOT_FOUND", "the 400 reports each subscriber")
        page, _ = sdk("subscriptions.list", lambda: novu.topics.subscriptions.list(request={"topic_key": "tp-news", "order_direction": models.TopicsControllerListTopicSubscriptionsQueryParamOrderDirection.ASC}))
        eq([(x.identifier, x.subscriber.subscriber_id, x.topic.name) for x in page.data],
           [("tk_tp-news:si_tp-ann", "tp-ann", "Renamed"), ("bob-news", "tp-bob", "Renamed")], "list")
        one, _ = sdk("subscriptions.list by subscriberId", lambda: novu.topics.subscriptions.list(request={"topic_key": "tp-news", "subscriber_id": "tp-bob"}))
        eq([x.identifier for x in one.data], ["bob-news"], "list by subscriberId")
        detail, _ = sdk("subscriptions.get_subscription", lambda: novu.topics.subscriptions.get_subscription(topic_key="tp-news", identifier="bob-news"))
        eq((detail.id, detail.identifier), (out.data[1].id, "bob-news"), "get by identifier")
        same, _ = sdk("subscriptions.update (nothing to change)", lambda: novu.topics.subscriptions.update(topic_key="tp-news", identifier="bob-news",
                                                                                       update_topic_subscription_request_dto={}))
        eq((same.id, same.identifier), (out.data[1].id, "bob-news"), "update answers the subscription")
        mine, _ = sdk("subscribers.topics.list", lambda: novu.subscribers.topics.list(request={"subscriber_id": "tp-ann"}))
        eq([(x.topic.key, x.identifier) for x in mine.data], [("tp-news", "tk_tp-news:si_tp-ann")], "a subscriber's subscriptions")
        member, _ = sdk("topics.subscribers.retrieve (v1)", lambda: novu.topics.subscribers.retrieve(topic_key="tp-news", external_subscriber_id="tp-bob"))
        eq((member.topic_key, member.external_subscriber_id, member.topic_id), ("tp-news", "tp-bob", out.data[1].topic.id), "v1 membership")
        expect_error(lambda: novu.topics.subscribers.retrieve(topic_key="tp-news", external_subscriber_id="tp-ghost"), models.ErrorDto, 404, "v1: not subscribed")
        gone, _ = sdk("subscriptions.delete", lambda: novu.topics.subscriptions.delete(topic_key="tp-news", delete_topic_subscriptions_request_dto={
            "subscriptions": [{"identifier": "bob-news"}, {"subscriber_id": "tp-ghost"}]}))
        eq((gone.meta.successful, gone.meta.failed, [x.identifier for x in gone.data]), (1, 1, ["bob-news"]), "unsubscribe")
        deleted, _ = sdk("topics.delete", lambda: novu.topics.delete(topic_key="tp-news"))
        eq(deleted.acknowledged, True, "delete topic")
        mine, _ = sdk("subscribers.topics.list after delete", lambda: novu.subscribers.topics.list(request={"subscriber_id": "tp-ann"}))
        eq(mine.data, [], "deleting the topic removed its subscriptions")
    group("topics: subscriptions create (partial, all failed), list, get, update, delete; subscriber's list; v1 membership", topic_subscriptions)

    def topic_triggers():
        for sid in ["tt-1", "tt-2", "tt-3", "tt-boss"]:
            novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": sid})
        novu.topics.subscriptions.create(topic_key="tt-team", create_topic_subscriptions_request_dto={
            "subscriptions": ["tt-1", "tt-2", "tt-3", "tt-boss"]})
        out, _ = sdk("trigger to a topic", lambda: novu.trigger(trigger_event_request_dto={
            "workflow_id": "hello", "payload": {}, "transaction_id": tx("topic"), "actor": "tt-boss",
            "to": ["tt-1", {"type": models.TriggerRecipientsTypeEnum.TOPIC, "topic_key": "tt-team", "exclude": ["tt-3"]}]}))
        eq((out.acknowledged, val(out.status), out.transaction_id), (True, "processed", tx("topic")), "trigger to a topic")
        items = settled(tx("topic"), 2)
        eq(sorted(n["subscriber"]["subscriberId"] for n in items), ["tt-1", "tt-2"],
           "the direct recipient once, the topic's members but the excluded one and the actor")
        page, _ = sdk("notifications.list by topicKey", lambda: novu.notifications.list(request={"topic_key": "tt-team", "limit": 10}))
        eq([(n.subscriber.subscriber_id, [(t.topic_key, len(t.topic_id)) for t in n.topics]) for n in page.data],
           [("tt-2", [("tt-team", 24)])], "list by topicKey: topics parsed")
        one, _ = sdk("notifications.list by subscriptionId", lambda: novu.notifications.list(request={
            "subscription_id": "tk_tt-team:si_tt-2", "transaction_id": tx("topic")}))
        eq([n.id for n in one.data], [page.data[0].id], "list by subscriptionId")
        got, _ = sdk("notifications.retrieve through a topic", lambda: novu.notifications.retrieve(notification_id=page.data[0].id))
        eq([t.topic_key for t in got.topics], ["tt-team"], "retrieve: topics")
    group("events: trigger to a topic (mixed, exclude, actor); notifications by topicKey and subscriptionId", topic_triggers)

    def broadcast():
        everyone = raw_ok("GET", "/v2/subscribers?limit=100")["data"]
        out, _ = sdk("trigger_broadcast", lambda: novu.trigger_broadcast(trigger_event_to_all_request_dto={
            "name": "hello", "payload": {}, "transaction_id": tx("broadcast"), "actor": {"subscriber_id": "tt-boss"}}))
        eq(RECORDER.last.status_code, 201, "broadcast: 201")
        eq((out.acknowledged, val(out.status), out.transaction_id), (True, "processed", tx("broadcast")), "broadcast")
        items = settled(tx("broadcast"), len(everyone) - 1)
        eq(sorted(n["subscriber"]["subscriberId"] for n in items),
           sorted(s["subscriberId"] for s in everyone if s["subscriberId"] != "tt-boss"), "every subscriber but the actor")
        e = expect_error(lambda: novu.trigger_broadcast(trigger_event_to_all_request_dto={"name": "no-such-workflow", "payload": {}}),
                         models.ErrorDto, 404, "broadcast of an unknown workflow")
        eq(e.data.path, "/v1/events/trigger/broadcast", "broadcast 404 path")
    group("events: broadcast to every subscriber but the actor", broadcast)

if __name__ == "__main__":
    main()
    if FAILURES:
        print(f"\n{len(FAILURES)} failure(s) with novu-py:", file=sys.stderr)
        for f in FAILURES:
            print(f"  - {f}", file=sys.stderr)
        sys.exit(1)
    print("ok")
