"""novu-py against /v1/integrations in the `novu` profile.

Runs on a fresh environment (no integrations). Prints "ok" or fails with context.
"""

from novu_py import models

from sdkcheck import (
    OBJECT_ID,
    RECORDER,
    check,
    check_envelope,
    check_error_body,
    client,
    eq,
    expect_error,
    run,
)

EMAIL = models.IntegrationResponseDtoChannel.EMAIL
PUSH = models.IntegrationResponseDtoChannel.PUSH
SMS = models.IntegrationResponseDtoChannel.SMS
IN_APP = models.IntegrationResponseDtoChannel.IN_APP
DELIVERY = models.Kind.DELIVERY
UNKNOWN_ID = "0123456789abcdef01234567"

CONDITION = {
    "is_negated": False,
    "type": "STATEMENT",
    "value": "AND",
    "children": [{"field": "tier", "value": "gold", "operator": "EQUAL", "on": "subscriber"}],
}


def check_integration(i, what, **expected):
    """An IntegrationResponseDto with the `expected` attribute values and never any `credentials`."""
    check(isinstance(i, models.IntegrationResponseDto), f"{what}: type {type(i).__name__}")
    for field, value in expected.items():
        eq(getattr(i, field), value, f"{what}: {field}")
    check(isinstance(i.id, str) and OBJECT_ID.match(i.id), f"{what}: _id {i.id!r}")
    check(isinstance(i.environment_id, str) and i.environment_id, f"{what}: _environmentId {i.environment_id!r}")
    check(isinstance(i.organization_id, str) and i.organization_id, f"{what}: _organizationId {i.organization_id!r}")
    eq(i.deleted, False, f"{what}: deleted")
    # API-key callers never receive credentials: the field is absent, not merely null.
    check("credentials" not in i.model_fields_set, f"{what}: credentials returned: {i.credentials!r}")


def check_raw_items_without_credentials(items, what):
    for item in items:
        check("credentials" not in item, f"{what}: raw item {item.get('identifier')} carries credentials: {item.get('credentials')}")


def by_identifier(items):
    return {i.identifier: i for i in items}


def main():
    novu = client()

    # ---------------------------------------------------------------- empty environment
    eq(novu.integrations.list().result, [], "list on a fresh environment")
    eq(check_envelope("list (empty)", 200), [], "raw list (empty)")
    eq(novu.integrations.list_active().result, [], "list_active on a fresh environment")

    # ---------------------------------------------------------------- create
    sendgrid = novu.integrations.create(create_integration_request_dto={
        "name": "SendGrid Main",
        "identifier": "sendgrid-main",
        "provider_id": "sendgrid",
        "channel": "email",
        "credentials": {
            "api_key": "SG.secret-key",
            "from_": "noreply@example.com",
            "sender_name": "Example",
            "host": "smtp.sendgrid.net",
            "port": "587",
            "secure": True,
        },
        "active": True,
        "check": False,
        "conditions": [CONDITION],
    }).result
    raw = check_envelope("create sendgrid", 201)
    sent = RECORDER.last.request.content.decode()
    check('"port":"587"' in sent.replace(" ", "") and '"from":"noreply@example.com"' in sent.replace(" ", ""),
          f"create sendgrid: credentials on the wire: {sent}")
    check_integration(sendgrid, "create sendgrid", name="SendGrid Main", identifier="sendgrid-main", provider_id="sendgrid",
                      channel=EMAIL, kind=DELIVERY, active=True, primary=True)
    check_raw_items_without_credentials([raw], "create sendgrid")
    check(raw["providerId"] == "sendgrid" and raw["channel"] == "email", f"create sendgrid: raw {raw}")
    eq(len(sendgrid.conditions or []), 1, "create sendgrid: conditions")
    cond = sendgrid.conditions[0]
    eq((cond.is_negated, cond.type.value, cond.value.value), (False, "STATEMENT", "AND"), "create sendgrid: condition")
    eq([(c.field, c.value, c.operator.value, c.on.value) for c in cond.children], [("tier", "gold", "EQUAL", "subscriber")],
       "create sendgrid: condition children")
    env_id, org_id = sendgrid.environment_id, sendgrid.organization_id

    # A second active email integration is not primary while the first one is.
    mailgun = novu.integrations.create(create_integration_request_dto={
        "name": "Mailgun Backup", "identifier": "mailgun-backup", "provider_id": "mailgun", "channel": "email",
        "credentials": {"api_key": "mg-key", "domain": "mg.example.com", "region": "eu"}, "active": True, "check": False,
    }).result
    check_integration(mailgun, "create mailgun", name="Mailgun Backup", identifier="mailgun-backup", provider_id="mailgun",
                      channel=EMAIL, active=True, primary=False)

    fcm = novu.integrations.create(create_integration_request_dto={
        "name": "FCM", "identifier": "fcm-main", "provider_id": "fcm", "channel": "push",
        "credentials": {"service_account": '{"project_id":"sdk-test","private_key":"x"}'}, "active": True, "check": False,
        "configurations": {},
    }).result
    check_integration(fcm, "create fcm", name="FCM", identifier="fcm-main", provider_id="fcm", channel=PUSH,
                      kind=DELIVERY, active=True, primary=True)

    # The in-app provider is spelled `novu` under the novu profile.
    inbox = novu.integrations.create(create_integration_request_dto={
        "name": "Inbox", "identifier": "inbox", "provider_id": "novu", "channel": "in_app", "active": True, "check": False,
    }).result
    check_integration(inbox, "create novu in-app", name="Inbox", identifier="inbox", provider_id="novu", channel=IN_APP,
                      active=True)
    eq(check_envelope("create novu in-app", 201)["providerId"], "novu", "create novu in-app: raw providerId")

    # Without an identifier, one is generated from the name.
    twilio = novu.integrations.create(create_integration_request_dto={
        "name": "Twilio SMS", "provider_id": "twilio", "channel": "sms",
        "credentials": {"account_sid": "AC123", "token": "tok", "from_": "+15550000000"}, "active": False,
    }).result
    check_integration(twilio, "create twilio", name="Twilio SMS", provider_id="twilio", channel=SMS, active=False, primary=False)
    check(twilio.identifier.startswith("twilio-sms-") and len(twilio.identifier) > len("twilio-sms-"),
          f"create twilio: generated identifier {twilio.identifier!r}")

    for i in (mailgun, fcm, inbox, twilio):
        eq((i.environment_id, i.organization_id), (env_id, org_id), f"{i.identifier}: tenant ids")
    created = [sendgrid, mailgun, fcm, inbox, twilio]
    eq(len({i.id for i in created}), 5, "distinct _ids")

    # ---------------------------------------------------------------- create errors
    e = expect_error(
        lambda: novu.integrations.create(create_integration_request_dto={
            "name": "Dup", "identifier": "sendgrid-main", "provider_id": "sendgrid", "channel": "email"}),
        models.ErrorDto, 409, "create with a taken identifier",
    )
    check_error_body(e, 409, "/v1/integrations", "create with a taken identifier")
    e = expect_error(
        lambda: novu.integrations.create(create_integration_request_dto={
            "name": "Inbox 2", "provider_id": "novu", "channel": "in_app", "active": True}),
        models.ErrorDto, 400, "a second in-app integration",
    )
    check_error_body(e, 400, "/v1/integrations", "a second in-app integration")
    e = expect_error(
        lambda: novu.integrations.create(create_integration_request_dto={
            "name": "Wrong", "provider_id": "sendgrid", "channel": "sms"}),
        models.ValidationErrorDto, 422, "create sendgrid on the sms channel",
    )
    check("channel" in e.data.errors and e.data.errors["channel"].messages, f"sendgrid on sms: errors {e.data.errors!r}")
    e = expect_error(
        lambda: novu.integrations.create(create_integration_request_dto={
            "name": "Nope", "provider_id": "no-such-provider", "channel": "email"}),
        models.ValidationErrorDto, 422, "create with an unknown providerId",
    )
    check("providerId" in e.data.errors, f"unknown providerId: errors {e.data.errors!r}")

    # ---------------------------------------------------------------- list / list_active
    listed = novu.integrations.list().result
    raw = check_envelope("list", 200)
    eq([i.id for i in listed], [i.id for i in created], "list: every integration, oldest first")
    for i in listed:
        check_integration(i, f"list {i.identifier}")
    check_raw_items_without_credentials(raw, "list")
    eq({i.identifier: (i.active, i.primary) for i in listed},
       {"sendgrid-main": (True, True), "mailgun-backup": (True, False), "fcm-main": (True, True),
        "inbox": (True, False), twilio.identifier: (False, False)}, "list: active/primary")
    eq(by_identifier(listed)["inbox"].provider_id, "novu", "list: in-app providerId spelling")

    active = novu.integrations.list_active().result
    raw = check_envelope("list_active", 200)
    eq([i.id for i in active], [sendgrid.id, mailgun.id, fcm.id, inbox.id], "list_active: the active ones")
    check_raw_items_without_credentials(raw, "list_active")

    # ---------------------------------------------------------------- update (PUT)
    updated = novu.integrations.update(integration_id=twilio.id, update_integration_request_dto={
        "name": "Twilio Main", "identifier": "twilio-main", "active": True,
        "credentials": {"account_sid": "AC999", "token": "tok2"}, "check": False,
    }).result
    raw = check_envelope("update twilio", 200)
    check_integration(updated, "update twilio", id=twilio.id, name="Twilio Main", identifier="twilio-main",
                      provider_id="twilio", channel=SMS, active=True)
    check_raw_items_without_credentials([raw], "update twilio")
    twilio = updated

    updated = novu.integrations.update(integration_id=mailgun.id, update_integration_request_dto={"name": "Mailgun Renamed"}).result
    check_integration(updated, "update mailgun name only", id=mailgun.id, name="Mailgun Renamed", identifier="mailgun-backup",
                      provider_id="mailgun", channel=EMAIL, active=True, primary=False)
    listed = by_identifier(novu.integrations.list().result)
    eq((listed["twilio-main"].name, listed["twilio-main"].active), ("Twilio Main", True), "list after update: twilio")
    eq(listed["mailgun-backup"].name, "Mailgun Renamed", "list after update: mailgun")
    eq(len(novu.integrations.list_active().result), 5, "list_active after activating twilio")

    e = expect_error(
        lambda: novu.integrations.update(integration_id=fcm.id, update_integration_request_dto={"identifier": "sendgrid-main"}),
        models.ErrorDto, 409, "update to a taken identifier",
    )
    check_error_body(e, 409, f"/v1/integrations/{fcm.id}", "update to a taken identifier")
    eq(by_identifier(novu.integrations.list().result)["fcm-main"].id, fcm.id, "fcm keeps its identifier after the 409")

    # ---------------------------------------------------------------- set_as_primary
    res = novu.integrations.set_as_primary(integration_id=mailgun.id).result
    check_envelope("set_as_primary mailgun", 200)
    check_integration(res, "set_as_primary mailgun", id=mailgun.id, identifier="mailgun-backup", primary=True, active=True)
    listed = by_identifier(novu.integrations.list().result)
    eq((listed["mailgun-backup"].primary, listed["sendgrid-main"].primary), (True, False), "primary moved to mailgun")
    eq(listed["fcm-main"].primary, True, "the push primary is untouched")

    res = novu.integrations.set_as_primary(integration_id=sendgrid.id).result
    check_integration(res, "set_as_primary sendgrid", id=sendgrid.id, primary=True, active=True)
    listed = by_identifier(novu.integrations.list().result)
    eq((listed["sendgrid-main"].primary, listed["mailgun-backup"].primary), (True, False), "primary moved back to sendgrid")

    # Deactivating drops primary; set_as_primary activates again.
    res = novu.integrations.update(integration_id=sendgrid.id, update_integration_request_dto={"active": False}).result
    check_integration(res, "deactivate sendgrid", id=sendgrid.id, active=False, primary=False)
    eq([i.id for i in novu.integrations.list_active().result], [mailgun.id, fcm.id, inbox.id, twilio.id],
       "list_active without sendgrid")
    res = novu.integrations.set_as_primary(integration_id=sendgrid.id).result
    check_integration(res, "set_as_primary inactive sendgrid", id=sendgrid.id, active=True, primary=True)
    eq(len(novu.integrations.list_active().result), 5, "list_active after set_as_primary reactivated sendgrid")

    e = expect_error(lambda: novu.integrations.set_as_primary(integration_id=inbox.id), models.ErrorDto, 400,
                     "set_as_primary on the in-app integration")
    check_error_body(e, 400, f"/v1/integrations/{inbox.id}/set-primary", "set_as_primary on the in-app integration")

    # ---------------------------------------------------------------- delete
    remaining = novu.integrations.delete(integration_id=mailgun.id).result
    raw = check_envelope("delete mailgun", 200)
    eq([i.id for i in remaining], [sendgrid.id, fcm.id, inbox.id, twilio.id], "delete answers the remaining integrations")
    for i in remaining:
        check_integration(i, f"delete -> remaining {i.identifier}")
    check_raw_items_without_credentials(raw, "delete")
    eq([i.id for i in novu.integrations.list().result], [sendgrid.id, fcm.id, inbox.id, twilio.id], "list after delete")
    eq(mailgun.id in [i.id for i in novu.integrations.list_active().result], False, "list_active after delete")
    eq(by_identifier(novu.integrations.list().result)["sendgrid-main"].primary, True, "sendgrid still primary")

    # The identifier of a deleted integration can be used again.
    again = novu.integrations.create(create_integration_request_dto={
        "name": "Mailgun Again", "identifier": "mailgun-backup", "provider_id": "mailgun", "channel": "email",
        "active": False, "check": False,
    }).result
    check_integration(again, "re-create mailgun-backup", identifier="mailgun-backup", name="Mailgun Again", active=False,
                      primary=False)
    check(again.id != mailgun.id, "re-created integration has a new _id")

    # ---------------------------------------------------------------- unknown ids
    # novu-py maps a 404 from delete to ErrorDto, but from update and set_as_primary to APIError.
    e = expect_error(lambda: novu.integrations.delete(integration_id=mailgun.id), models.ErrorDto, 404, "delete a deleted integration")
    check_error_body(e, 404, f"/v1/integrations/{mailgun.id}", "delete a deleted integration")
    e = expect_error(lambda: novu.integrations.delete(integration_id=UNKNOWN_ID), models.ErrorDto, 404, "delete an unknown id")
    check_error_body(e, 404, f"/v1/integrations/{UNKNOWN_ID}", "delete an unknown id")
    check(UNKNOWN_ID in str(e.data.message), f"404 names the id: {e.data.message!r}")
    e = expect_error(
        lambda: novu.integrations.update(integration_id=UNKNOWN_ID, update_integration_request_dto={"name": "x"}),
        models.APIError, 404, "update an unknown id",
    )
    eq(RECORDER.last.json()["statusCode"], 404, "update unknown: body statusCode")
    e = expect_error(lambda: novu.integrations.set_as_primary(integration_id=UNKNOWN_ID), models.APIError, 404,
                     "set_as_primary an unknown id")
    eq(RECORDER.last.json()["path"], f"/v1/integrations/{UNKNOWN_ID}/set-primary", "set_as_primary unknown: body path")
    eq([i.id for i in novu.integrations.list().result], [sendgrid.id, fcm.id, inbox.id, twilio.id, again.id],
       "list at the end")

    # ---------------------------------------------------------------- other novu-spelled providers
    # Both spellings are accepted on input; the novu profile always answers novu-….
    demo_sms = novu.integrations.create(create_integration_request_dto={
        "name": "Demo SMS", "identifier": "demo-sms", "provider_id": "svc-sms", "channel": "sms", "active": True,
    }).result
    check_integration(demo_sms, "create svc-sms", identifier="demo-sms", provider_id="novu-sms", channel=SMS, active=True)
    agent = novu.integrations.create(create_integration_request_dto={
        "name": "Agent", "identifier": "agent", "provider_id": "novu-anthropic", "kind": "agent",
        "credentials": {"api_key": "sk-ant"}, "active": True,
    }).result
    check_integration(agent, "create novu-anthropic agent", identifier="agent", provider_id="novu-anthropic", channel=None,
                      kind=models.Kind.AGENT, active=True, primary=False)
    check("channel" not in check_envelope("create agent", 201), "an agent integration has no channel")
    eq({i.identifier: i.provider_id for i in novu.integrations.list_active().result if i.identifier in ("demo-sms", "agent")},
       {"demo-sms": "novu-sms", "agent": "novu-anthropic"}, "list_active: novu spellings")

    # ---------------------------------------------------------------- auth
    with client(key="sk_test_wrong") as bad:
        e = expect_error(lambda: bad.integrations.list(), models.ErrorDto, 401, "list with a wrong API key")
        check_error_body(e, 401, "/v1/integrations", "list with a wrong API key")


run(main)
