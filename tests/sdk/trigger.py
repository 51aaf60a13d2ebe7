"""novu-py: `novu.trigger` with subscriber objects carrying `channels`, and the error models the SDK parses
(422 into ValidationErrorDto with every bad field and its value, 404 into ErrorDto naming the id).

Runs on a fresh environment. The workflow is created over plain HTTP (the workflow routes have their own
script). Prints "ok" or fails with context.
"""

import httpx
from novu_py import models

from sdkcheck import (
    KEY,
    RECORDER,
    URL,
    check,
    check_envelope,
    check_error_body,
    client,
    eq,
    expect_error,
    fail,
    run,
)

FCM = models.ChatOrPushProviderEnum.FCM
EXPO = models.ChatOrPushProviderEnum.EXPO


def raw(method, path, body=None):
    r = httpx.request(method, URL + path, json=body, headers={"Authorization": f"ApiKey {KEY}"}, timeout=30.0)
    check(r.status_code < 300, f"{method} {path}: {r.status_code} {r.text[:500]}")
    return r.json()


def tokens(novu, sid, provider):
    sub = novu.subscribers.retrieve(subscriber_id=sid).result
    found = [c for c in (sub.channels or []) if c.provider_id == provider]
    eq(len(found), 1, f"{sid}: channel entries for {provider.value} in {sub.channels!r}")
    return found[0]


def main():
    novu = client()
    raw("POST", "/v2/workflows", {
        "name": "SDK ping", "workflowId": "sdk-ping",
        "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "ping {{ payload.n }}"}}],
    })
    fcm = novu.integrations.create(create_integration_request_dto={
        "name": "FCM", "identifier": "fcm-main", "provider_id": "fcm", "channel": "push",
        "credentials": {"service_account": '{"project_id":"sdk"}'}, "active": True, "check": False,
    }).result

    # ---------------------------------------------------------------- to: a subscriber object with channels
    res = novu.trigger(trigger_event_request_dto={
        "workflow_id": "sdk-ping",
        "to": {
            "subscriber_id": "sdk-ivy", "first_name": "Ivy", "email": "ivy@example.com",
            "channels": [{"provider_id": "fcm", "integration_identifier": "fcm-main",
                          "credentials": {"device_tokens": ["tok-a", "tok-b", "tok-a"]}}],
        },
        "payload": {"n": 1},
    }).result
    check_envelope("trigger with channels", 201)
    eq((res.acknowledged, res.status), (True, models.TriggerEventResponseDtoStatus.PROCESSED), "trigger with channels")
    sent = RECORDER.last.request.content.decode()
    check('"channels"' in sent and '"deviceTokens"' in sent, f"the SDK sends to.channels: {sent}")
    ivy = novu.subscribers.retrieve(subscriber_id="sdk-ivy").result
    eq((ivy.first_name, ivy.email), ("Ivy", "ivy@example.com"), "the recipient was upserted")
    c = tokens(novu, "sdk-ivy", FCM)
    eq(c.credentials.device_tokens, ["tok-a", "tok-b"], "deviceTokens stored (deduplicated)")
    eq((c.integration_id, c.integration_identifier), (fcm.id, "fcm-main"), "the channel's integration")

    # A later trigger adds tokens (as PATCH …/credentials does), in a list of recipients of both forms.
    res = novu.trigger(trigger_event_request_dto={
        "workflow_id": "sdk-ping",
        "to": ["sdk-jo", {"subscriber_id": "sdk-ivy", "channels": [
            {"provider_id": "fcm", "credentials": {"device_tokens": ["tok-c"]}}]}],
        "payload": {"n": 2},
    }).result
    eq(res.status, models.TriggerEventResponseDtoStatus.PROCESSED, "trigger to a list")
    eq(tokens(novu, "sdk-ivy", FCM).credentials.device_tokens, ["tok-a", "tok-b", "tok-c"], "tokens added")
    eq(novu.subscribers.retrieve(subscriber_id="sdk-jo").result.subscriber_id, "sdk-jo", "sdk-jo upserted")

    # A provider without an active integration: the credentials route's 400 (its message names the provider).
    # novu-py reads every 400 of the trigger routes as PayloadValidationExceptionDto (`type` and `errors`
    # required), so the 400 carries them, naming the recipient's channels.
    e = expect_error(
        lambda: novu.trigger(trigger_event_request_dto={
            "workflow_id": "sdk-ping",
            "to": {"subscriber_id": "sdk-ivy", "channels": [
                {"provider_id": "expo", "credentials": {"device_tokens": ["ExponentPushToken[x]"]}}]},
        }),
        models.PayloadValidationExceptionDto, 400, "trigger with an expo channel and no expo integration",
    )
    check_error_body(e, 400, "/v1/events/trigger", "no expo integration")
    check("active expo integration" in e.data.message, f"no expo integration: message {e.data.message!r}")
    eq((e.data.type, [(x.field, x.value) for x in e.data.errors]),
       ("BAD_REQUEST", [("to.channels", "expo")]),
       "no expo integration: type and errors")
    # A bulk answers per event (201, as Novu): the refused event is `error` with its reason, the other
    # is recorded.
    out = novu.trigger_bulk(bulk_trigger_event_dto={"events": [
        {"workflow_id": "sdk-ping", "to": "sdk-jo"},
        {"workflow_id": "sdk-ping", "to": ["sdk-jo", {"subscriber_id": "sdk-ivy", "channels": [
            {"provider_id": "expo", "credentials": {"device_tokens": ["ExponentPushToken[y]"]}}]}]},
    ]}).result
    eq([o.status for o in out], [models.TriggerEventResponseDtoStatus.PROCESSED, models.TriggerEventResponseDtoStatus.ERROR],
       "bulk: the event without an expo integration is refused alone")
    check("active expo integration" in (out[1].error or [""])[0], f"bulk: the reason {out[1].error!r}")
    check(not [ch for ch in novu.subscribers.retrieve(subscriber_id="sdk-ivy").result.channels or []
               if ch.provider_id == EXPO], "no expo channel was stored")

    # ---------------------------------------------------------------- payloadSchema with validatePayload
    schema = {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "count": {"type": "number", "default": 3}}}
    raw("POST", "/v2/workflows", {
        "name": "SDK strict", "workflowId": "sdk-strict", "payloadSchema": schema, "validatePayload": True,
        "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "{{ payload.name }} x{{ payload.count }}"}}],
    })
    e = expect_error(
        lambda: novu.trigger(trigger_event_request_dto={"workflow_id": "sdk-strict", "to": "sdk-jo", "payload": {"count": "many"}}),
        models.PayloadValidationExceptionDto, 400, "a payload the schema rejects",
    )
    check_error_body(e, 400, "/v1/events/trigger", "payload validation")
    eq(e.data.type, "PAYLOAD_VALIDATION_ERROR", "payload validation: type")
    got = sorted((x.field, x.value, x.schema_path) for x in e.data.errors if x.field != "root.name")
    eq(got, [("count", "many", "#/properties/count/type")], "payload validation: the bad property, its value, the schema path")
    root = [x for x in e.data.errors if x.field == "root.name"]
    eq([(x.message, x.schema_path) for x in root], [("must have required property 'name'", "#/required")],
       "payload validation: the missing property, named as Novu names it")
    check(e.data.message.startswith("Payload validation failed: "), f"payload validation: message {e.data.message!r}")
    eq(RECORDER.last_json().get("schema"), schema, "payload validation: the schema used")
    out = novu.trigger_bulk(bulk_trigger_event_dto={"events": [
        {"workflow_id": "sdk-strict", "to": "sdk-jo", "payload": {"name": "ok"}},
        {"workflow_id": "sdk-strict", "to": "sdk-jo", "payload": {"name": 7}},
    ]}).result
    eq([o.status for o in out], [models.TriggerEventResponseDtoStatus.PROCESSED, models.TriggerEventResponseDtoStatus.ERROR],
       "bulk: the payload the schema rejects is refused alone")
    check((out[1].error or [""])[0].startswith("Payload validation failed: name"), f"bulk: the reason {out[1].error!r}")
    # A valid payload gets the schema's defaults (Novu validates with them applied).
    res = novu.trigger(trigger_event_request_dto={"workflow_id": "sdk-strict", "to": "sdk-jo", "payload": {"name": "Jo"},
                                                  "transaction_id": "sdk-strict-ok"}).result
    eq(res.status, models.TriggerEventResponseDtoStatus.PROCESSED, "a valid payload is processed")
    stored = raw("GET", "/v1/notifications?transactionId=sdk-strict-ok")["data"]
    eq([n["payload"] for n in stored], [{"name": "Jo", "count": 3}], "the schema's default is applied")
    # Without validatePayload the schema is not enforced.
    raw("PATCH", "/v2/workflows/sdk-strict", {"validatePayload": False})
    res = novu.trigger(trigger_event_request_dto={"workflow_id": "sdk-strict", "to": "sdk-jo", "payload": {"count": "many"}}).result
    eq(res.status, models.TriggerEventResponseDtoStatus.PROCESSED, "validatePayload false: not enforced")

    # ---------------------------------------------------------------- 422: every bad field, with its value
    e = expect_error(
        lambda: novu.trigger(trigger_event_request_dto={
            "workflow_id": "sdk-ping",
            "to": {"subscriber_id": "sdk-kim", "email": "not-an-email", "timezone": "Mars/Olympus"},
        }),
        models.ValidationErrorDto, 422, "trigger to a subscriber with a bad email and timezone",
    )
    check_error_body(e, 422, "/v1/events/trigger", "bad recipient")
    eq(sorted(e.data.errors.keys()), ["email", "timezone"], "bad recipient: every bad field")
    eq(e.data.errors["email"].value, "not-an-email", "bad recipient: email value")
    eq(e.data.errors["timezone"].value, "Mars/Olympus", "bad recipient: timezone value")
    for field in ("email", "timezone"):
        check(e.data.errors[field].messages and all(isinstance(m, str) and m for m in e.data.errors[field].messages),
              f"bad recipient: {field} messages {e.data.errors[field].messages!r}")
    expect_error(lambda: novu.subscribers.retrieve(subscriber_id="sdk-kim"), models.ErrorDto, 404, "sdk-kim was not stored")

    e = expect_error(
        lambda: novu.subscribers.create(create_subscriber_request_dto={
            "subscriber_id": "sdk-lee", "email": "lee-at-example", "timezone": "Nowhere/City", "avatar": "not a url",
        }),
        models.ValidationErrorDto, 422, "create a subscriber with three bad fields",
    )
    eq(sorted(e.data.errors.keys()), ["avatar", "email", "timezone"], "three bad fields at once")
    eq(e.data.errors["avatar"].value, "not a url", "avatar value")

    # ---------------------------------------------------------------- 404: the error names the id
    e = expect_error(
        lambda: novu.trigger(trigger_event_request_dto={"workflow_id": "sdk-missing", "to": "sdk-ivy"}),
        models.ErrorDto, 404, "trigger an unknown workflow",
    )
    check_error_body(e, 404, "/v1/events/trigger", "unknown workflow")
    check("sdk-missing" in e.data.message, f"404 names the workflow: {e.data.message!r}")
    # novu-py's integrations.update declares no 404 model: it raises its generic APIError with the body.
    e = expect_error(
        lambda: novu.integrations.update(integration_id="0123456789abcdef01234567", update_integration_request_dto={"name": "x"}),
        models.APIError, 404, "update an unknown integration",
    )
    check("0123456789abcdef01234567" in RECORDER.last_json()["message"], f"404 names the integration: {e.body!r}")
    e = expect_error(
        lambda: novu.subscribers.credentials.update(subscriber_id="sdk-nobody", update_subscriber_channel_request_dto={
            "provider_id": "fcm", "credentials": {"device_tokens": ["t"]}}),
        models.ErrorDto, 404, "credentials of an unknown subscriber",
    )
    check("sdk-nobody" in e.data.message, f"404 names the subscriber: {e.data.message!r}")


run(main)
