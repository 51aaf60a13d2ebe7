"""novu-py against bulk subscribers, the online flag and deleting a trigger's messages, in the `novu` profile:
`subscribers.create_bulk`, `subscribers.properties.update_online_flag`, `messages.delete_by_transaction_id`.

Runs on a fresh environment. Prints "ok" or fails with context.
"""

import time

import httpx
from novu_py import models

from sdkcheck import ISO_UTC, KEY, OBJECT_ID, URL, check, check_envelope, check_error_body, client, eq, expect_error, run

WORKFLOW = {
    "name": "SDK bulk note",
    "workflowId": "sdk-bulk-note",
    "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "Note {{ payload.n }}"}}],
}


def raw(method, path, body=None):
    r = httpx.request(method, URL + path, json=body, headers={"Authorization": f"ApiKey {KEY}"}, timeout=30.0)
    check(r.status_code < 300, f"{method} {path}: {r.status_code} {r.text[:500]}")
    return r.json() if r.content else None


def sids(items):
    return [i.subscriber_id for i in items]


def bulk(novu, subscribers, what):
    res = novu.subscribers.create_bulk(bulk_subscriber_create_dto={"subscribers": subscribers}).result
    data = check_envelope(what, 201)
    check(isinstance(res, models.BulkCreateSubscriberResponseDto), f"{what}: type {type(res).__name__}")
    eq(sorted(data.keys()), ["created", "failed", "updated"], f"{what}: keys")
    return res


def check_bulk(novu):
    novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-old", "first_name": "Old", "last_name": "Timer"})
    res = bulk(novu, [
        {"subscriber_id": "sdk-b1", "first_name": "B1", "email": "b1@example.com", "data": {"plan": "pro"}},
        {"subscriber_id": "sdk-b2", "first_name": "B2"},
        {"subscriber_id": "sdk-old", "first_name": "New"},
        {"subscriber_id": "sdk-b2", "last_name": "Again"},
        {"subscriber_id": "sdk-bad", "email": "not-an-email"},
        {"subscriber_id": "sdk-tz", "timezone": "Mars/Olympus"},
    ], "bulk")
    eq(sids(res.created), ["sdk-b1", "sdk-b2"], "bulk: created")
    eq(sids(res.updated), ["sdk-old", "sdk-b2"], "bulk: updated (a repeated id is updated by its second item)")
    eq([(f.subscriber_id, f.message) for f in res.failed], [
        ("sdk-bad", "email must be a valid email address"),
        ("sdk-tz", "timezone must be a valid IANA time zone, e.g. Europe/Paris"),
    ], "bulk: failed")
    for f in res.failed:
        check(isinstance(f, models.FailedOperationDto), f"bulk: failed item type {type(f).__name__}")

    b1 = novu.subscribers.retrieve(subscriber_id="sdk-b1").result
    eq((b1.first_name, b1.email, b1.data, b1.v), ("B1", "b1@example.com", {"plan": "pro"}, 0), "bulk: sdk-b1 as written")
    b2 = novu.subscribers.retrieve(subscriber_id="sdk-b2").result
    eq((b2.first_name, b2.last_name), ("B2", "Again"), "bulk: sdk-b2 has both items' fields")
    old = novu.subscribers.retrieve(subscriber_id="sdk-old").result
    eq((old.first_name, old.last_name, old.v), ("New", "Timer", 1), "bulk: sdk-old updated, the rest kept")
    expect_error(lambda: novu.subscribers.retrieve(subscriber_id="sdk-bad"), models.ErrorDto, 404, "bulk: a failed item is not written")

    # Only failures: nothing created or updated.
    res = bulk(novu, [{"subscriber_id": " ", "first_name": "Blank"}], "bulk of a blank id")
    eq((res.created, res.updated), ([], []), "bulk of a blank id: nothing written")
    eq([(f.subscriber_id, f.message) for f in res.failed], [(" ", "subscriberId must not be empty")], "bulk of a blank id: failed")
    # Nothing at all.
    res = bulk(novu, [], "empty bulk")
    eq((res.created, res.updated, res.failed), ([], [], []), "empty bulk")

    # 501 subscribers: refused whole, with Novu's error model.
    many = [{"subscriber_id": f"sdk-many-{i}"} for i in range(501)]
    e = expect_error(lambda: novu.subscribers.create_bulk(bulk_subscriber_create_dto={"subscribers": many}),
                     models.ErrorDto, 400, "bulk of 501")
    check_error_body(e, 400, "/v1/subscribers/bulk", "bulk of 501")
    eq(e.data.message, "subscribers must contain no more than 500 elements, got 501", "bulk of 501: message")
    expect_error(lambda: novu.subscribers.retrieve(subscriber_id="sdk-many-0"), models.ErrorDto, 404, "bulk of 501 wrote nothing")
    res = bulk(novu, many[:500], "bulk of 500")
    eq(len(res.created), 500, "bulk of 500: created")
    eq(res.created[499].subscriber_id, "sdk-many-499", "bulk of 500: order")


def check_online(novu):
    sub = novu.subscribers.properties.update_online_flag(
        subscriber_id="sdk-old", update_subscriber_online_flag_request_dto={"is_online": True}).result
    check_envelope("online", 200)
    check(isinstance(sub, models.SubscriberResponseDto), f"online: type {type(sub).__name__}")
    eq((sub.subscriber_id, sub.is_online, sub.first_name, sub.v), ("sdk-old", True, "New", 2), "online")
    check(sub.last_online_at is None, f"online: lastOnlineAt {sub.last_online_at!r}")
    check(OBJECT_ID.match(sub.id), f"online: _id {sub.id!r}")
    sub = novu.subscribers.properties.update_online_flag(
        subscriber_id="sdk-old", update_subscriber_online_flag_request_dto={"is_online": False}).result
    eq((sub.is_online, sub.v), (False, 3), "offline")
    check(isinstance(sub.last_online_at, str) and ISO_UTC.match(sub.last_online_at), f"offline: lastOnlineAt {sub.last_online_at!r}")
    got = novu.subscribers.retrieve(subscriber_id="sdk-old").result
    eq((got.is_online, got.last_online_at), (False, sub.last_online_at), "offline: retrieved")
    e = expect_error(lambda: novu.subscribers.properties.update_online_flag(
        subscriber_id="sdk-nobody", update_subscriber_online_flag_request_dto={"is_online": True}),
        models.ErrorDto, 404, "online: unknown subscriber")
    check_error_body(e, 404, "/v1/subscribers/sdk-nobody/online-status", "online: unknown subscriber")
    r = httpx.patch(URL + "/v1/subscribers/sdk-old/online-status", json={"isOnline": "yes"},
                    headers={"Authorization": f"ApiKey {KEY}"})
    eq(r.status_code, 422, "online: a flag that is not a boolean")
    data = models.ValidationErrorDtoData.model_validate(r.json())
    check("isOnline" in data.errors, f"online: errors {r.text}")


def wait_for_messages(novu, transaction_id, n):
    deadline = time.time() + 20
    while time.time() < deadline:
        listed = novu.messages.retrieve(request={"transaction_id": [transaction_id]}).result
        if len(listed.data) == n:
            return listed
        time.sleep(0.1)
    check(False, f"{transaction_id}: {n} messages never appeared")


def check_delete_by_transaction(novu):
    raw("POST", "/v2/workflows", WORKFLOW)
    for n, to in ((1, ["sdk-b1", "sdk-b2"]), (2, "sdk-b1")):
        novu.trigger(trigger_event_request_dto={
            "workflow_id": "sdk-bulk-note", "to": to, "payload": {"n": n}, "transaction_id": f"sdk-bulk-{n}"})
    wait_for_messages(novu, "sdk-bulk-1", 2)
    wait_for_messages(novu, "sdk-bulk-2", 1)

    Channel = models.MessagesControllerDeleteMessagesByTransactionIDQueryParamChannel
    e = expect_error(lambda: novu.messages.delete_by_transaction_id(transaction_id="sdk-bulk-1", channel=Channel.EMAIL),
                     models.ErrorDto, 404, "delete by transaction: a channel without messages")
    check_error_body(e, 404, "/v1/messages/transaction/sdk-bulk-1?channel=email", "delete by transaction: a channel without messages")
    eq(e.data.message, "Invalid transactionId or channel", "delete by transaction: message")
    wait_for_messages(novu, "sdk-bulk-1", 2)

    res = novu.messages.delete_by_transaction_id(transaction_id="sdk-bulk-1", channel=Channel.IN_APP)
    check(isinstance(res, models.MessagesControllerDeleteMessagesByTransactionIDResponse), f"delete: type {type(res).__name__}")
    eq(novu.messages.retrieve(request={"transaction_id": ["sdk-bulk-1"]}).result.data, [], "deleted with the channel")
    eq(len(novu.messages.retrieve(request={"transaction_id": ["sdk-bulk-2"]}).result.data), 1, "the other transaction's stay")
    novu.messages.delete_by_transaction_id(transaction_id="sdk-bulk-2")
    eq(novu.messages.retrieve(request={"transaction_id": ["sdk-bulk-2"]}).result.data, [], "deleted without a channel")
    expect_error(lambda: novu.messages.delete_by_transaction_id(transaction_id="sdk-bulk-2"),
                 models.ErrorDto, 404, "delete by transaction: deleted already")
    expect_error(lambda: novu.messages.delete_by_transaction_id(transaction_id="sdk-never"),
                 models.ErrorDto, 404, "delete by transaction: unknown")


def main():
    novu = client()
    check_bulk(novu)
    check_online(novu)
    check_delete_by_transaction(novu)


run(main)
