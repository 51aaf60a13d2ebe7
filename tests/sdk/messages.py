"""novu-py against the in-app message routes in the `novu` profile: a subscriber's feed and unseen count,
`GET /v1/messages`, mark-as, mark-all and `DELETE /v1/messages/{id}`, and their error models.

Runs on a fresh environment. The workflow is created over plain HTTP (the workflow routes have their own
script); everything else goes through the SDK, whose models parse every answer. Prints "ok" or fails.
"""

import datetime
import time

import httpx
from novu_py import models

from sdkcheck import (
    ISO_UTC,
    KEY,
    OBJECT_ID,
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

WORKFLOW = {
    "name": "SDK note",
    "workflowId": "sdk-note",
    "steps": [{
        "name": "Inbox",
        "type": "in_app",
        "controlValues": {
            "subject": "For {{ subscriber.firstName }}",
            "body": "Note {{ payload.n }}",
            "primaryAction": {"label": "Open", "redirect": {"url": "https://example.com/notes"}},
            "data": {"kind": "note"},
        },
    }],
}


def raw(method, path, body=None):
    r = httpx.request(method, URL + path, json=body, headers={"Authorization": f"ApiKey {KEY}"}, timeout=30.0)
    check(r.status_code < 300, f"{method} {path}: {r.status_code} {r.text[:500]}")
    return r.json()


def feed(novu, **request):
    res = novu.subscribers.notifications.feed(request=dict(subscriber_id="sdk-meg", **request)).result
    check(isinstance(res, models.FeedResponseDto), f"feed {request}: type {type(res).__name__}")
    page = RECORDER.last_json()
    # A page is never wrapped in {"data": …}.
    eq(sorted(page.keys()), ["data", "hasMore", "page", "pageSize", "totalCount"], f"feed {request}: raw page keys")
    return res, page


def wait_for_feed(novu, count):
    deadline = time.time() + 20
    while time.time() < deadline:
        res, _ = feed(novu)
        if len(res.data) >= count:
            return
        time.sleep(0.1)
    fail(f"the feed never reached {count} items")


def check_feed_item(item, raw_item, n, transaction_id, what):
    check(isinstance(item, models.NotificationFeedItemDto), f"{what}: type {type(item).__name__}")
    for field in ["id", "template_id", "environment_id", "organization_id", "notification_id", "subscriber_id", "job_id"]:
        value = getattr(item, field)
        check(isinstance(value, str) and OBJECT_ID.match(value), f"{what}: {field} {value!r}")
    check(item.job_id not in (item.id, item.notification_id), f"{what}: _jobId is the job's own id")
    eq(item.transaction_id, transaction_id, f"{what}: transactionId")
    eq(item.content, f"Note {n}", f"{what}: content")
    eq(item.subject, "For Meg", f"{what}: subject")
    eq(item.channel, models.ChannelTypeEnum.IN_APP, f"{what}: channel")
    eq(item.status, models.NotificationFeedItemDtoStatus.SENT, f"{what}: status")
    eq(item.archived, False, f"{what}: archived")
    eq(item.template_identifier, "sdk-note", f"{what}: templateIdentifier")
    eq(item.provider_id, "novu", f"{what}: providerId (novu spelling)")
    eq(item.payload, {"n": n}, f"{what}: payload")
    eq(item.data, {"kind": "note"}, f"{what}: data")
    eq(item.cta.type, models.ChannelCTATypeEnum.REDIRECT, f"{what}: cta.type")
    eq(item.cta.data.url, "https://example.com/notes", f"{what}: cta.data.url")
    eq([(b.type, b.content) for b in item.cta.action.buttons], [(models.ButtonTypeEnum.PRIMARY, "Open")], f"{what}: buttons")
    check(isinstance(item.created_at, datetime.datetime), f"{what}: createdAt {item.created_at!r}")
    check(ISO_UTC.match(raw_item["createdAt"]), f"{what}: raw createdAt {raw_item['createdAt']!r}")
    # The TS SDK takes a string or nothing for a feed item's _messageTemplateId: never null.
    check("_messageTemplateId" not in raw_item, f"{what}: _messageTemplateId must be absent, got {raw_item.get('_messageTemplateId')!r}")
    eq(item.message_template_id, None, f"{what}: messageTemplateId")


def check_message(m, what):
    check(isinstance(m, models.MessageResponseDto), f"{what}: type {type(m).__name__}")
    check(isinstance(m.id, str) and OBJECT_ID.match(m.id), f"{what}: _id {m.id!r}")
    eq(m.channel, models.ChannelTypeEnum.IN_APP, f"{what}: channel")
    eq(m.status, models.MessageStatusEnum.SENT, f"{what}: status")
    eq(m.template_identifier, "sdk-note", f"{what}: templateIdentifier")
    eq(m.provider_id, "novu", f"{what}: providerId")
    check(ISO_UTC.match(m.created_at), f"{what}: createdAt {m.created_at!r}")
    eq(len(m.delivered_at or []), 1, f"{what}: deliveredAt")
    eq(m.context_keys, [], f"{what}: contextKeys")


def main():
    novu = client()
    raw("POST", "/v2/workflows", WORKFLOW)
    novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-meg", "first_name": "Meg"})

    # ---------------------------------------------------------------- trigger, then read the feed
    for n in (1, 2, 3):
        res = novu.trigger(trigger_event_request_dto={
            "workflow_id": "sdk-note", "to": "sdk-meg", "payload": {"n": n}, "transaction_id": f"sdk-note-{n}",
        }).result
        check_envelope(f"trigger {n}", 201)
        eq((res.acknowledged, res.status, res.transaction_id),
           (True, models.TriggerEventResponseDtoStatus.PROCESSED, f"sdk-note-{n}"), f"trigger {n}")
        # One after the other, so the feed's order is the trigger order.
        wait_for_feed(novu, n)

    res, page = feed(novu)
    eq((res.page, res.page_size, res.has_more, res.total_count), (0, 10, False, 3), "feed page")
    eq([i.content for i in res.data], ["Note 3", "Note 2", "Note 1"], "feed: newest first")
    for item, raw_item, n in zip(res.data, page["data"], (3, 2, 1)):
        check_feed_item(item, raw_item, n, f"sdk-note-{n}", f"feed item {n}")
    eq(len({i.job_id for i in res.data}), 3, "each item has its own job")
    ids = {n: i.id for i, n in zip(res.data, (3, 2, 1))}

    res, _ = feed(novu, limit=2, page=0)
    eq(([i.content for i in res.data], res.has_more, res.page_size), (["Note 3", "Note 2"], True, 2), "feed limit=2 page=0")
    res, _ = feed(novu, limit=2, page=1)
    eq(([i.content for i in res.data], res.has_more, res.page), (["Note 1"], False, 1), "feed limit=2 page=1")

    # ---------------------------------------------------------------- unseen count
    count = novu.subscribers.notifications.unseen_count(subscriber_id="sdk-meg").result
    check_envelope("unseen count", 200)
    check(isinstance(count, models.UnseenCountResponse), f"unseen count: type {type(count).__name__}")
    eq(count.count, 3, "unseen count")

    # ---------------------------------------------------------------- GET /v1/messages
    listed = novu.messages.retrieve(request={"subscriber_id": "sdk-meg", "channel": "in_app"}).result
    check(isinstance(listed, models.MessagesResponseDto), f"messages: type {type(listed).__name__}")
    eq((listed.page, listed.page_size, listed.has_more, listed.total_count), (0, 10, False, 3), "messages page")
    for m in listed.data:
        check_message(m, f"message {m.content}")
    eq([m.content for m in listed.data], ["Note 3", "Note 2", "Note 1"], "messages: newest first")
    listed = novu.messages.retrieve(request={"transaction_id": ["sdk-note-2"]}).result
    eq([m.id for m in listed.data], [ids[2]], "messages by transactionId")

    # ---------------------------------------------------------------- mark-as, mark-all
    marked = novu.subscribers.messages.mark_all_as(
        subscriber_id="sdk-meg", message_mark_as_request_dto={"message_id": ids[1], "mark_as": "read"},
    ).result
    check_envelope("mark-as read", 201)
    eq([m.id for m in marked], [ids[1]], "mark-as read: the message")
    check_message(marked[0], "mark-as read")
    eq((marked[0].read, marked[0].seen), (True, True), "mark-as read: read implies seen")
    check(ISO_UTC.match(marked[0].last_read_date or ""), f"lastReadDate {marked[0].last_read_date!r}")
    marked = novu.subscribers.messages.mark_all_as(
        subscriber_id="sdk-meg", message_mark_as_request_dto={"message_id": [ids[2], ids[3]], "mark_as": "seen"},
    ).result
    eq(sorted((m.id, m.read, m.seen) for m in marked), sorted([(ids[2], False, True), (ids[3], False, True)]), "mark-as seen (array)")
    marked = novu.subscribers.messages.mark_all_as(
        subscriber_id="sdk-meg", message_mark_as_request_dto={"message_id": [ids[3]], "mark_as": "unseen"},
    ).result
    eq([(m.id, m.seen) for m in marked], [(ids[3], False)], "mark-as unseen")
    eq(novu.subscribers.notifications.unseen_count(subscriber_id="sdk-meg").result.count, 1, "unseen after marks")
    eq(novu.subscribers.notifications.unseen_count(subscriber_id="sdk-meg", seen=True).result.count, 2, "seen count")
    res, _ = feed(novu, read=True)
    eq([i.id for i in res.data], [ids[1]], "feed read=true")
    res, _ = feed(novu, seen=False)
    eq([i.id for i in res.data], [ids[3]], "feed seen=false")

    changed = novu.subscribers.messages.mark_all(
        subscriber_id="sdk-meg", mark_all_message_as_request_dto={"mark_as": "read"},
    ).result
    check_envelope("mark-all read", 201)
    eq(changed, 2, "mark-all read: how many changed")
    eq(novu.subscribers.notifications.unseen_count(subscriber_id="sdk-meg").result.count, 0, "unseen after mark-all")

    # ---------------------------------------------------------------- delete
    deleted = novu.messages.delete(message_id=ids[2]).result
    check_envelope("delete message", 200)
    eq((deleted.acknowledged, deleted.status), (True, models.DeleteMessageResponseDtoStatus.DELETED), "delete message")
    res, _ = feed(novu)
    eq([i.id for i in res.data], [ids[3], ids[1]], "feed after delete")

    # ---------------------------------------------------------------- errors
    e = expect_error(lambda: novu.messages.delete(message_id=ids[2]), models.ErrorDto, 404, "delete a deleted message")
    check_error_body(e, 404, f"/v1/messages/{ids[2]}", "delete a deleted message")
    check(ids[2] in e.data.message, f"404 names the message: {e.data.message!r}")
    e = expect_error(
        lambda: novu.subscribers.notifications.feed(request={"subscriber_id": "sdk-nobody"}),
        models.ErrorDto, 404, "feed of an unknown subscriber",
    )
    check("sdk-nobody" in e.data.message, f"404 names the subscriber: {e.data.message!r}")
    e = expect_error(
        lambda: novu.subscribers.notifications.unseen_count(subscriber_id="sdk-nobody"),
        models.ErrorDto, 404, "unseen count of an unknown subscriber",
    )
    check("sdk-nobody" in e.data.message, f"404 names the subscriber: {e.data.message!r}")
    e = expect_error(
        lambda: novu.subscribers.messages.mark_all_as(
            subscriber_id="sdk-meg", message_mark_as_request_dto={"message_id": "not-an-id", "mark_as": "read"}),
        models.ValidationErrorDto, 422, "mark-as with a malformed id",
    )
    check_error_body(e, 422, "/v1/subscribers/sdk-meg/messages/mark-as", "mark-as with a malformed id")
    eq(list(e.data.errors.keys()), ["messageId"], "mark-as malformed id: errors")
    eq(e.data.errors["messageId"].value, "not-an-id", "mark-as malformed id: the offending value as sent")
    e = expect_error(
        lambda: novu.messages.retrieve(request={"channel": "in_app", "limit": 0}),
        models.ValidationErrorDto, 422, "messages with limit=0",
    )
    eq(e.data.errors["limit"].value, "0.0", "limit=0: the value as sent")
    check("limit" in e.data.errors["limit"].messages[0], f"limit message {e.data.errors['limit'].messages!r}")


run(main)
