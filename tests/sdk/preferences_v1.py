"""The v1 preference routes (issue 22) through novu-py 0.3.4, the last release with methods for them
(`subscribers.preferences.list`, `retrieve_by_level`, `update_legacy`, `update_global`), pinned in
tests/sdk/requirements-legacy.txt. It has the package name of the current novu-py, so it is installed apart in
tests/sdk/.legacy/ (tests/it/support/sdk.rs), which tests/sdk/legacy.py puts first on the path.

Every answer is parsed by that release's models, its values are asserted, in each state a subscriber's
preferences can be in: defaults only, a workflow's default preferences, global and per-workflow changes,
`enabled: false` at both levels, read-only and critical workflows, unknown subscriber or workflow, and a
channel outside the five. Each group's failure is recorded and the script goes on; it exits 1 when any failed.
tests/sdk-ts/preferences_v1.mjs runs the same scenario with @novu/api 0.0.1.
"""

import importlib.metadata
import json

from legacy import (  # legacy first: it puts novu-py 0.3.4 on the path
    EXCHANGES, LEGACY, CheckFailed, check, eq, finish, group, novu, raw,
)
import novu_py  # noqa: E402
from novu_py import models  # noqa: E402

SUBSCRIBER = "leo"
prefs = novu.subscribers.preferences


def raw_ok(method, path, body=None, status=200):
    code, out = raw(method, path, body)
    check(code == status, f"{method} {path}: expected {status}, got {code} {json.dumps(out)[:500]}")
    return out["data"]


def expect_error(call, cls, status, what):
    """Runs `call`, which must raise the SDK error `cls` whose body has `status`; answers the parsed body."""
    try:
        result = call()
    except (models.ErrorDto, models.ValidationErrorDto, models.APIError) as e:
        check(isinstance(e, cls), f"{what}: expected {cls.__name__}, got {type(e).__name__}: {e}")
        eq(int(e.data.status_code), status, f"{what}: statusCode")
        eq(EXCHANGES[-1].status_code, status, f"{what}: HTTP status")
        return e.data
    raise CheckFailed(f"{what}: expected {cls.__name__} {status}, the call succeeded with {result!r}"[:600])


def val(x):
    return getattr(x, "value", x)


def channels(p):
    """The channels of a parsed preference, as a dict of the ones set."""
    c = p.channels
    out = {"in_app": c.in_app, "email": c.email, "sms": c.sms, "chat": c.chat, "push": c.push}
    return {k: v for k, v in out.items() if v is not None}


def on(*off):
    return {c: c not in off for c in ("in_app", "email", "sms", "chat", "push")}


def by_identifier(items):
    return {i.template.triggers[0].identifier: i for i in items}


def in_app(step_id):
    return {"name": step_id, "stepId": step_id, "type": "in_app", "controlValues": {"body": step_id}}


def main():
    eq((novu_py.__file__.startswith(LEGACY), importlib.metadata.version("novu-py")), (True, "0.3.4"),
       "novu-py 0.3.4 from tests/sdk/.legacy")
    # The scenario's world, created raw (this release's models of these routes are not under test here).
    raw_ok("POST", "/v2/subscribers", {"subscriberId": SUBSCRIBER, "firstName": "Leo"}, 201)
    mail = {"name": "mail", "stepId": "mail", "type": "email", "controlValues": {"subject": "Hi", "body": "Hi"}}
    ids = {}
    for body in [
        {"name": "Plain", "workflowId": "v1-plain", "steps": [in_app("inbox"), mail]},
        {"name": "Defaults", "workflowId": "v1-defaults", "steps": [in_app("inbox"), mail,
            {"name": "text", "stepId": "text", "type": "sms", "controlValues": {"body": "Hi"}}],
         "preferences": {"user": None, "workflow": {"all": {"enabled": True, "readOnly": False},
                                                    "channels": {"email": {"enabled": False}}}}},
        {"name": "Read-only", "workflowId": "v1-readonly", "steps": [in_app("inbox")],
         "preferences": {"user": None, "workflow": {"all": {"enabled": True, "readOnly": True}, "channels": {}}}},
        {"name": "Critical", "workflowId": "v1-critical", "critical": True, "steps": [in_app("inbox")]},
        {"name": "Quiet", "workflowId": "v1-quiet", "steps": [
            {"name": "wait", "stepId": "wait", "type": "delay", "controlValues": {"amount": 1, "unit": "seconds"}}]},
    ]:
        ids[body["workflowId"]] = raw_ok("POST", "/v2/workflows", {**body, "active": True}, 201)["_id"]

    def template_of(item, identifier, name):
        t = item.template
        eq((t.id, t.name, t.critical, [(val(x.type), x.identifier, x.variables) for x in t.triggers]),
           (ids[identifier], name, False, [("event", identifier, [])]), f"{identifier}: template")

    def defaults_only():
        items = prefs.list(subscriber_id=SUBSCRIBER).result
        eq([i.template.triggers[0].identifier for i in items], ["v1-plain", "v1-defaults", "v1-readonly"],
           "non-critical workflows with a channel step, oldest first")
        got = by_identifier(items)
        template_of(got["v1-plain"], "v1-plain", "Plain")
        template_of(got["v1-defaults"], "v1-defaults", "Defaults")
        eq([(w, got[w].preference.enabled, channels(got[w].preference)) for w in got],
           [("v1-plain", True, on()), ("v1-defaults", True, on("email")), ("v1-readonly", True, on())],
           "each workflow's defaults, every channel")
    group("v1 preferences: list, defaults only (a workflow's default preferences)", defaults_only)

    def active_channels():
        items = by_identifier(prefs.list(subscriber_id=SUBSCRIBER, include_inactive_channels=False).result)
        eq([(w, channels(items[w].preference)) for w in items],
           [("v1-plain", {"in_app": True, "email": True}), ("v1-defaults", {"in_app": True, "email": False, "sms": True}),
            ("v1-readonly", {"in_app": True})], "only the channels of each workflow's steps")
    group("v1 preferences: list with includeInactiveChannels=false", active_channels)

    def by_level():
        g = prefs.retrieve_by_level(subscriber_id=SUBSCRIBER, preference_level=models.Parameter.GLOBAL).result
        eq([(i.template, i.preference.enabled, channels(i.preference)) for i in g], [(None, True, on())],
           "global: one item without a template")
        t = prefs.retrieve_by_level(subscriber_id=SUBSCRIBER, preference_level=models.Parameter.TEMPLATE).result
        eq([(i.template.id, channels(i.preference)) for i in t],
           [(ids["v1-plain"], on()), (ids["v1-defaults"], on("email")), (ids["v1-readonly"], on())], "template level")
    group("v1 preferences: retrieve by level (global, template)", by_level)

    def global_channels():
        out = prefs.update_global(subscriber_id=SUBSCRIBER, update_subscriber_global_preferences_request_dto={
            "preferences": [{"type": "sms", "enabled": False}, {"type": "push", "enabled": False}]}).result
        eq((out.preference.enabled, channels(out.preference)), (True, on("sms", "push")), "update_global answer")
        items = by_identifier(prefs.list(subscriber_id=SUBSCRIBER).result)
        eq([(w, channels(items[w].preference)) for w in items],
           [("v1-plain", on("sms", "push")), ("v1-defaults", on("email", "sms", "push")), ("v1-readonly", on())],
           "the global change reaches every workflow but the read-only one")
    group("v1 preferences: update_global (channels)", global_channels)

    def workflow_change():
        out = prefs.update_legacy(subscriber_id=SUBSCRIBER, workflow_id="v1-plain", update_subscriber_preference_request_dto={
            "channel": {"type": "email", "enabled": False}}).result
        template_of(out, "v1-plain", "Plain")
        eq((out.preference.enabled, channels(out.preference)), (True, on("email", "sms", "push")), "email off for v1-plain")
        out = prefs.update_legacy(subscriber_id=SUBSCRIBER, workflow_id=ids["v1-plain"], update_subscriber_preference_request_dto={
            "channel": {"type": "sms", "enabled": True}, "enabled": False}).result
        eq((out.template.id, out.preference.enabled, channels(out.preference)),
           (ids["v1-plain"], False, on("email", "push")), "by _id: the workflow off, sms on over the global level")
        items = by_identifier(prefs.list(subscriber_id=SUBSCRIBER).result)
        eq([(w, items[w].preference.enabled) for w in items], [("v1-plain", False), ("v1-defaults", True), ("v1-readonly", True)],
           "only v1-plain is off")
    group("v1 preferences: update a workflow (channel, enabled)", workflow_change)

    def global_off():
        out = prefs.update_global(subscriber_id=SUBSCRIBER, update_subscriber_global_preferences_request_dto={"enabled": False}).result
        eq((out.preference.enabled, channels(out.preference)), (False, on("sms", "push")), "everything off")
        prefs.update_legacy(subscriber_id=SUBSCRIBER, workflow_id="v1-plain", update_subscriber_preference_request_dto={"enabled": True})
        items = by_identifier(prefs.retrieve_by_level(subscriber_id=SUBSCRIBER, preference_level=models.Parameter.TEMPLATE).result)
        eq([(w, items[w].preference.enabled) for w in items], [("v1-plain", True), ("v1-defaults", False), ("v1-readonly", True)],
           "the global off, but v1-plain's own level on and v1-readonly's defaults")
        out = prefs.update_global(subscriber_id=SUBSCRIBER, update_subscriber_global_preferences_request_dto={"enabled": True}).result
        eq(out.preference.enabled, True, "on again")
    group("v1 preferences: enabled false at the global level", global_off)

    def refused():
        for wf, words in [("v1-readonly", "read-only"), ("v1-critical", "critical")]:
            e = expect_error(lambda wf=wf: prefs.update_legacy(subscriber_id=SUBSCRIBER, workflow_id=wf,
                                                               update_subscriber_preference_request_dto={"enabled": False}),
                             models.ErrorDto, 400, wf)
            eq(e.path, f"/v1/subscribers/{SUBSCRIBER}/preferences/{wf}", f"{wf}: path")
            check(words in e.message, f"{wf}: the message says why: {e.message}")
        items = prefs.list(subscriber_id=SUBSCRIBER).result
        check("v1-critical" not in by_identifier(items), "the critical workflow is not listed")
    group("v1 preferences: read-only and critical workflows refuse a change (400)", refused)

    def unknown():
        for what, call in [
            ("list", lambda: prefs.list(subscriber_id="nobody")),
            ("retrieve_by_level", lambda: prefs.retrieve_by_level(subscriber_id="nobody", preference_level=models.Parameter.GLOBAL)),
            ("update_global", lambda: prefs.update_global(subscriber_id="nobody", update_subscriber_global_preferences_request_dto={"enabled": False})),
            ("update_legacy", lambda: prefs.update_legacy(subscriber_id="nobody", workflow_id="v1-plain",
                                                          update_subscriber_preference_request_dto={"enabled": False})),
        ]:
            e = expect_error(call, models.ErrorDto, 404, f"{what}: unknown subscriber")
            check("nobody" in e.message, f"{what}: the 404 names the subscriber: {e.message}")
        e = expect_error(lambda: prefs.update_legacy(subscriber_id=SUBSCRIBER, workflow_id="v1-nothing",
                                                     update_subscriber_preference_request_dto={"enabled": False}),
                         models.ErrorDto, 404, "unknown workflow")
        check("v1-nothing" in e.message, f"the 404 names the workflow: {e.message}")
    group("v1 preferences: unknown subscriber or workflow (404)", unknown)

    def invalid():
        # This release's ChannelTypeEnum is closed: it refuses `tool` before sending anything.
        before = len(EXCHANGES)
        try:
            prefs.update_legacy(subscriber_id=SUBSCRIBER, workflow_id="v1-plain",
                                update_subscriber_preference_request_dto={"channel": {"type": "tool", "enabled": True}})
            raise CheckFailed("the SDK sent a channel outside its enum")
        except Exception as e:  # noqa: BLE001
            check(not isinstance(e, CheckFailed), str(e))
            eq(len(EXCHANGES), before, "nothing sent")
        # Raw, the 422 parsed by this release's error model.
        for path, body, field in [
            (f"/v1/subscribers/{SUBSCRIBER}/preferences/v1-plain", {"channel": {"type": "tool", "enabled": True}}, "channel.type"),
            (f"/v1/subscribers/{SUBSCRIBER}/preferences", {"preferences": [{"type": "tool", "enabled": False}]}, "preferences.0.type"),
        ]:
            code, out = raw("PATCH", path, body)
            eq(code, 422, f"PATCH {path}: {out}")
            parsed = models.ValidationErrorDtoData.model_validate(out)
            eq((list(parsed.errors), parsed.errors[field].value), ([field], "tool"), f"PATCH {path}: the channel named")
        code, out = raw("GET", f"/v1/subscribers/{SUBSCRIBER}/preferences/weekly")
        eq(code, 422, f"an unknown level: {out}")
        eq(models.ValidationErrorDtoData.model_validate(out).errors["parameter"].value, "weekly", "the level named")
        items = by_identifier(prefs.list(subscriber_id=SUBSCRIBER).result)
        eq(channels(items["v1-plain"].preference), on("email", "push"), "nothing changed")
    group("v1 preferences: a channel outside the five (422)", invalid)


if __name__ == "__main__":
    main()
    finish()
