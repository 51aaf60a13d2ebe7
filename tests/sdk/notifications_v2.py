"""novu-py against the v2 subscriber notifications (`novu.subscribers.notifications.*`, the Inbox's semantics
seen with the API key) and the v1 message action (`novu.subscribers.messages.update_as_seen`), in the `novu`
profile: every method in every state it produces (unread, seen, read, archived, snoozed, unsnoozed, an action
completed and reverted, deleted), the list's filters and cursor, several counts at once, and the errors
through the SDK's error models (an unknown subscriber or notification, another subscriber's, another
environment's, bad filters).

Environment: TIDINGS_URL, TIDINGS_KEY and TIDINGS_KEY_B (a second environment's key). The workflows are
created over plain HTTP; everything else goes through the SDK, whose models parse every answer. Prints "ok"
or fails.
"""

import datetime
import json
import os
import time

import httpx
from novu_py import models

from sdkcheck import ISO_UTC, KEY, OBJECT_ID, RECORDER, URL, check, check_envelope, check_error_body, client, eq, expect_error, fail, is_null, run

KEY_B = os.environ["TIDINGS_KEY_B"]
ANN = "sdk-v2-ann"
BOB = "sdk-v2-bob"
UNKNOWN_ID = "0123456789abcdef01234567"

WORKFLOWS = [
    {"name": "SDK alert", "workflowId": "sdk-alert", "severity": "high", "tags": ["ops"], "steps": [{
        "name": "Inbox", "type": "in_app", "controlValues": {
            "subject": "Alert", "body": "Alert {{ payload.n }}", "data": {"kind": "alert"},
            "primaryAction": {"label": "Open", "redirect": {"url": "https://example.com/a"}},
            "secondaryAction": {"label": "Dismiss"},
        },
    }]},
    {"name": "SDK news", "workflowId": "sdk-news", "tags": ["news"], "steps": [{
        "name": "Inbox", "type": "in_app", "controlValues": {"body": "News {{ payload.n }}", "data": {"kind": "news"}},
    }]},
]


def raw(method, path, body=None):
    r = httpx.request(method, URL + path, json=body, headers={"Authorization": f"ApiKey {KEY}"}, timeout=30.0)
    check(r.status_code < 300, f"{method} {path}: {r.status_code} {r.text[:500]}")
    return r.json()


def page(novu, what, **request):
    """A list page through the SDK; the raw answer is `{data, hasMore, filter}` (no envelope around it)."""
    res = novu.subscribers.notifications.list(request={"subscriber_id": ANN, **request}).result
    check(isinstance(res, models.GetSubscriberNotificationsResponseDto), f"{what}: type {type(res).__name__}")
    body = RECORDER.last_json()
    eq(sorted(body.keys()), ["data", "filter", "hasMore"], f"{what}: raw page keys")
    for n in res.data:
        check_notification(n, what)
    return res


def bodies(res):
    return [n.body for n in res.data]


def check_notification(n, what):
    check(isinstance(n, models.InboxNotificationDto), f"{what}: type {type(n).__name__}")
    check(OBJECT_ID.match(n.id), f"{what}: id {n.id!r}")
    eq(n.to.subscriber_id, ANN, f"{what}: to.subscriberId")
    check(OBJECT_ID.match(n.to.id), f"{what}: to.id {n.to.id!r}")
    eq(n.channel_type, models.ChannelTypeEnum.IN_APP, f"{what}: channelType")
    check(ISO_UTC.match(n.created_at), f"{what}: createdAt {n.created_at!r}")
    for field in ["read_at", "archived_at", "first_seen_at", "snoozed_until"]:
        value = getattr(n, field)
        check(is_null(value) or ISO_UTC.match(value), f"{what}: {field} {value!r}")
    eq(is_null(n.read_at), not n.is_read, f"{what}: readAt set when read")
    eq(is_null(n.archived_at), not n.is_archived, f"{what}: archivedAt set when archived")
    eq(is_null(n.snoozed_until), not n.is_snoozed, f"{what}: snoozedUntil set when snoozed")


def one(res, what):
    """A single notification's answer: `{data: notification}` on the wire, the notification in the SDK."""
    check_envelope(what, 200)
    check_notification(res.result, what)
    return res.result


def counts(novu, filters, subscriber=ANN):
    res = novu.subscribers.notifications.count(subscriber_id=subscriber, filters=json.dumps(filters)).result
    check(isinstance(res, list), f"count: type {type(res).__name__}")
    check_envelope("count", 200)
    for item, f in zip(res, filters):
        check(isinstance(item, models.GetSubscriberNotificationsCountResponseDto), f"count: item {type(item).__name__}")
        eq(item.filter_, f, "count: filter echoed")
    return [int(item.count) for item in res]


def wait_for(novu, count, subscriber=ANN):
    deadline = time.time() + 30
    while time.time() < deadline:
        res = novu.subscribers.notifications.list(request={"subscriber_id": subscriber, "limit": 100}).result
        if len(res.data) >= count:
            return res
        time.sleep(0.1)
    fail(f"{subscriber} never had {count} notifications")


def no_content(what):
    r = RECORDER.last
    eq(r.status_code, 204, f"{what}: status")
    eq(r.content, b"", f"{what}: empty body")


def main():
    novu = client()
    for w in WORKFLOWS:
        raw("POST", "/v2/workflows", w)
    for s in (ANN, BOB):
        novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": s})
    for n, (workflow, to) in enumerate([("sdk-alert", ANN), ("sdk-news", ANN), ("sdk-alert", ANN), ("sdk-alert", BOB)], 1):
        novu.trigger(trigger_event_request_dto={"workflow_id": workflow, "to": to, "payload": {"n": n}})
    wait_for(novu, 3)
    wait_for(novu, 1, BOB)

    # ------------------------------------------------------------------ list: unread, filters, cursor
    res = page(novu, "list")
    eq(bodies(res), ["Alert 3", "News 2", "Alert 1"], "list: newest first")
    eq(res.has_more, False, "list: hasMore")
    alert = res.data[0]
    eq((alert.is_read, alert.is_seen, alert.is_archived, alert.is_snoozed), (False, False, False, False), "unread state")
    eq(alert.severity, models.SeverityLevelEnum.HIGH, "severity")
    eq(alert.tags, ["ops"], "tags")
    eq(alert.data, {"kind": "alert"}, "data")
    eq((alert.primary_action.label, alert.primary_action.is_completed), ("Open", False), "primaryAction")
    eq(alert.primary_action.redirect.url, "https://example.com/a", "primaryAction.redirect")
    eq((alert.secondary_action.label, alert.secondary_action.is_completed), ("Dismiss", False), "secondaryAction")
    eq(alert.subject, "Alert", "subject")
    eq(alert.workflow.identifier, "sdk-alert", "workflow.identifier")
    a3, news, a1 = (n.id for n in res.data)

    first = page(novu, "page 1", limit=2)
    eq((bodies(first), first.has_more), (["Alert 3", "News 2"], True), "page 1")
    second = page(novu, "page 2", limit=2, after=first.data[-1].id)
    eq((bodies(second), second.has_more), (["Alert 1"], False), "page 2 (after)")
    eq(bodies(page(novu, "offset", limit=1, offset=1)), ["News 2"], "offset")
    eq(bodies(page(novu, "severity", severity=["high"])), ["Alert 3", "Alert 1"], "severity filter")
    eq(bodies(page(novu, "data", data=json.dumps({"kind": "news"}))), ["News 2"], "data filter")
    eq(bodies(page(novu, "read", read=True)), [], "read filter")
    eq(bodies(page(novu, "several", read=False, seen=False, archived=False, snoozed=False, severity=["none"])), ["News 2"], "several filters")
    later = int((time.time() + 60) * 1000)
    eq(bodies(page(novu, "createdGte", created_gte=later)), [], "createdGte")
    eq(len(page(novu, "createdLte", created_lte=later).data), 3, "createdLte")
    page(novu, "echo", read=False)
    eq(RECORDER.last_json()["filter"], {"read": False}, "the filter echoed")

    # ------------------------------------------------------------------ counts, several filters at once
    eq(counts(novu, [{}, {"read": False}, {"seen": True}, {"tags": ["ops"]}, {"severity": "high"}]), [3, 3, 0, 2, 2], "counts")

    # ------------------------------------------------------------------ one notification in every state
    r = one(novu.subscribers.notifications.mark_as_read(subscriber_id=ANN, notification_id=a1), "read")
    eq((r.id, r.is_read, r.is_seen), (a1, True, True), "read: state")
    check(ISO_UTC.match(r.read_at) and ISO_UTC.match(r.first_seen_at), f"read: readAt {r.read_at!r}")
    r = one(novu.subscribers.notifications.mark_as_unread(subscriber_id=ANN, notification_id=a1), "unread")
    eq((r.is_read, r.is_seen), (False, True), "unread: state (still seen)")
    r = one(novu.subscribers.notifications.archive(subscriber_id=ANN, notification_id=a1), "archive")
    eq((r.is_archived, r.is_read), (True, True), "archive: state")
    eq(bodies(page(novu, "archived", archived=True)), ["Alert 1"], "archived filter")
    r = one(novu.subscribers.notifications.unarchive(subscriber_id=ANN, notification_id=a1), "unarchive")
    eq(r.is_archived, False, "unarchive: state")
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    r = one(novu.subscribers.notifications.snooze(request={"subscriber_id": ANN, "notification_id": news, "snooze_subscriber_notification_dto": {"snooze_until": until}}), "snooze")
    eq(r.is_snoozed, True, "snooze: state")
    check(ISO_UTC.match(r.snoozed_until), f"snooze: snoozedUntil {r.snoozed_until!r}")
    eq(bodies(page(novu, "snoozed", snoozed=True)), ["News 2"], "snoozed filter")
    eq(bodies(page(novu, "not snoozed", snoozed=False)), ["Alert 3", "Alert 1"], "snoozed=false")
    r = one(novu.subscribers.notifications.unsnooze(subscriber_id=ANN, notification_id=news), "unsnooze")
    eq(r.is_snoozed, False, "unsnooze: state")
    for kind, attr in [("primary", "primary_action"), ("secondary", "secondary_action")]:
        r = one(novu.subscribers.notifications.complete_action(request={"subscriber_id": ANN, "notification_id": a3, "action_type": kind}), f"complete {kind}")
        eq(getattr(r, attr).is_completed, True, f"complete {kind}")
        r = one(novu.subscribers.notifications.revert_action(request={"subscriber_id": ANN, "notification_id": a3, "action_type": kind}), f"revert {kind}")
        eq(getattr(r, attr).is_completed, False, f"revert {kind}")

    # ------------------------------------------------------------------ the v1 message action
    m = novu.subscribers.messages.update_as_seen(request={
        "subscriber_id": ANN, "message_id": a3, "type": "primary",
        "mark_message_action_as_seen_dto": {"status": "done", "payload": {"rating": 5}},
    }).result
    check_envelope("message action", 201)
    check(isinstance(m, models.MessageResponseDto), f"message action: type {type(m).__name__}")
    eq(m.id, a3, "message action: _id")
    eq(m.cta.action.status, models.MessageActionStatusEnum.DONE, "message action: status")
    # The payload as the SDK sent it (its model of the payload may drop keys it does not declare).
    sent = json.loads(RECORDER.last.request.content)["payload"]
    eq((m.cta.action.result.type, m.cta.action.result.payload), (models.ButtonTypeEnum.PRIMARY, sent), "message action: result")
    eq(page(novu, "after message action").data[0].primary_action.is_completed, True, "message action seen by the v2 list")
    m = novu.subscribers.messages.update_as_seen(request={
        "subscriber_id": ANN, "message_id": a3, "type": "primary", "mark_message_action_as_seen_dto": {"status": "pending"},
    }).result
    eq(m.cta.action.status, models.MessageActionStatusEnum.PENDING, "message action: pending")

    # ------------------------------------------------------------------ errors through the SDK's models
    e = expect_error(lambda: novu.subscribers.notifications.list(request={"subscriber_id": "sdk-nobody"}), models.ErrorDto, 404, "list: unknown subscriber")
    check_error_body(e, 404, "/v2/subscribers/sdk-nobody/notifications?limit=10", "list: unknown subscriber")
    e = expect_error(lambda: novu.subscribers.notifications.list(request={"subscriber_id": ANN, "limit": 101}), models.ValidationErrorDto, 422, "list: limit 101")
    eq(e.data.status_code, 422, "list: limit 101: statusCode")
    expect_error(lambda: novu.subscribers.notifications.list(request={"subscriber_id": ANN, "data": "{nope"}), models.ValidationErrorDto, 422, "list: bad data")
    expect_error(lambda: novu.subscribers.notifications.list(request={"subscriber_id": ANN, "context_keys": ["nokey"]}), models.ValidationErrorDto, 422, "list: bad contextKeys")
    expect_error(lambda: novu.subscribers.notifications.list(request={"subscriber_id": ANN, "read": False, "archived": True}), models.ErrorDto, 400, "list: unread and archived")
    expect_error(lambda: novu.subscribers.notifications.count(subscriber_id=ANN, filters="nope"), models.ValidationErrorDto, 422, "count: not JSON")
    expect_error(lambda: novu.subscribers.notifications.count(subscriber_id=ANN, filters=json.dumps([{}] * 31)), models.ValidationErrorDto, 422, "count: 31 filters")
    expect_error(lambda: novu.subscribers.notifications.count(subscriber_id="sdk-nobody", filters="[{}]"), models.ErrorDto, 404, "count: unknown subscriber")
    bob = wait_for(novu, 1, BOB).data[0].id
    for nid in (UNKNOWN_ID, bob):
        for name, call in [
            ("read", lambda: novu.subscribers.notifications.mark_as_read(subscriber_id=ANN, notification_id=nid)),
            ("unread", lambda: novu.subscribers.notifications.mark_as_unread(subscriber_id=ANN, notification_id=nid)),
            ("archive", lambda: novu.subscribers.notifications.archive(subscriber_id=ANN, notification_id=nid)),
            ("unarchive", lambda: novu.subscribers.notifications.unarchive(subscriber_id=ANN, notification_id=nid)),
            ("unsnooze", lambda: novu.subscribers.notifications.unsnooze(subscriber_id=ANN, notification_id=nid)),
            ("snooze", lambda: novu.subscribers.notifications.snooze(request={"subscriber_id": ANN, "notification_id": nid, "snooze_subscriber_notification_dto": {"snooze_until": until}})),
            ("complete", lambda: novu.subscribers.notifications.complete_action(request={"subscriber_id": ANN, "notification_id": nid, "action_type": "primary"})),
            ("revert", lambda: novu.subscribers.notifications.revert_action(request={"subscriber_id": ANN, "notification_id": nid, "action_type": "primary"})),
            ("delete", lambda: novu.subscribers.notifications.delete(subscriber_id=ANN, notification_id=nid)),
            ("message action", lambda: novu.subscribers.messages.update_as_seen(request={
                "subscriber_id": ANN, "message_id": nid, "type": "primary", "mark_message_action_as_seen_dto": {"status": "done"}})),
        ]:
            expect_error(call, models.ErrorDto, 404, f"{name} of {'bob' if nid == bob else 'an unknown id'}")
    soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=5)
    expect_error(lambda: novu.subscribers.notifications.snooze(request={"subscriber_id": ANN, "notification_id": a1, "snooze_subscriber_notification_dto": {"snooze_until": soon}}), models.ErrorDto, 400, "snooze: too soon")
    expect_error(lambda: novu.subscribers.notifications.mark_as_read(subscriber_id="sdk-nobody", notification_id=a1), models.ErrorDto, 404, "read: unknown subscriber")
    expect_error(lambda: novu.subscribers.notifications.mark_all_as_read(subscriber_id="sdk-nobody", update_all_subscriber_notifications_dto={}), models.ErrorDto, 404, "bulk: unknown subscriber")
    expect_error(lambda: novu.subscribers.notifications.mark_as_seen(subscriber_id=ANN, mark_subscriber_notifications_as_seen_dto={"notification_ids": [UNKNOWN_ID] * 101}), models.ValidationErrorDto, 422, "seen: 101 ids")
    expect_error(lambda: novu.subscribers.notifications.archive_all(subscriber_id=ANN, update_all_subscriber_notifications_dto={"data": "{nope"}), models.ValidationErrorDto, 422, "archive all: bad data")
    other = client(KEY_B).subscribers.notifications
    expect_error(lambda: other.list(request={"subscriber_id": ANN}), models.ErrorDto, 404, "list from another environment")
    expect_error(lambda: other.mark_as_read(subscriber_id=ANN, notification_id=a1), models.ErrorDto, 404, "read from another environment")
    expect_error(lambda: other.delete(subscriber_id=ANN, notification_id=a1), models.ErrorDto, 404, "delete from another environment")
    eq([n.is_read for n in wait_for(novu, 1, BOB).data], [False], "bob's notification untouched")

    # ------------------------------------------------------------------ bulk: seen, read, read-archive, archive, delete
    novu.subscribers.notifications.mark_as_seen(subscriber_id=ANN, mark_subscriber_notifications_as_seen_dto={"notification_ids": [a3]})
    no_content("seen (ids)")
    eq(counts(novu, [{"seen": True}, {"seen": False}]), [2, 1], "after seen: a1 was seen when read")
    novu.subscribers.notifications.mark_all_as_read(subscriber_id=ANN, update_all_subscriber_notifications_dto={"data": json.dumps({"kind": "alert"})})
    no_content("read (data)")
    eq(counts(novu, [{"read": True}, {"read": False}]), [2, 1], "after read by data")
    novu.subscribers.notifications.archive_all_read(subscriber_id=ANN, update_all_subscriber_notifications_dto={})
    no_content("read-archive")
    eq(bodies(page(novu, "archived after read-archive", archived=True)), ["Alert 3", "Alert 1"], "read-archive")
    novu.subscribers.notifications.archive_all(subscriber_id=ANN, update_all_subscriber_notifications_dto={})
    no_content("archive")
    eq(counts(novu, [{"archived": True}, {"archived": False}]), [3, 0], "after archive")
    novu.subscribers.notifications.delete(subscriber_id=ANN, notification_id=news)
    no_content("delete one")
    eq(bodies(page(novu, "after delete", archived=True)), ["Alert 3", "Alert 1"], "deleted one gone")
    expect_error(lambda: novu.subscribers.notifications.delete(subscriber_id=ANN, notification_id=news), models.ErrorDto, 404, "delete again")
    novu.subscribers.notifications.delete_all(subscriber_id=ANN, update_all_subscriber_notifications_dto={})
    no_content("delete all")
    eq(counts(novu, [{}]), [0], "after delete all")
    eq(bodies(page(novu, "empty")), [], "empty list")
    eq(len(wait_for(novu, 1, BOB).data), 1, "bob's notification still there")


if __name__ == "__main__":
    run(main)
