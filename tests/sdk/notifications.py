"""novu-py against /v1/notifications (list and retrieve) in the `novu` profile.

Triggers with `to` as a string, an object and a list of both, a digest (three events, one digest), a
delay (later steps pending), a filtered (skipped) step and a cancel, then reads them back through
`notifications.list` and `notifications.retrieve`: every answer must parse in the SDK's models, with the
values the triggers imply. Workflows are created over plain HTTP (their SDK calls belong to another
contract). Prints "ok" or fails with context.
"""

import time

import httpx
from novu_py import models

from sdkcheck import KEY, OBJECT_ID, URL, check, check_envelope, client, eq, expect_error, run

HTTP = httpx.Client(base_url=URL, headers={"Authorization": f"ApiKey {KEY}"}, timeout=30.0)
UNKNOWN_ID = "0123456789abcdef01234567"
SETTLED = {"completed", "failed", "skipped", "canceled", "merged"}


def workflow(workflow_id, steps):
    r = HTTP.post("/v2/workflows", json={"name": workflow_id, "workflowId": workflow_id, "steps": steps})
    eq(r.status_code, 201, f"create workflow {workflow_id}: {r.text[:500]}")


def trigger(novu, name, to, transaction_id, payload=None):
    out = novu.trigger(
        trigger_event_request_dto={
            "workflow_id": name,
            "to": to,
            "payload": payload or {},
            "transaction_id": transaction_id,
        }
    )
    eq(out.result.status, "processed", f"trigger {transaction_id}")


def listed(novu, transaction_id, count, settled=True):
    """The notifications of `transaction_id` through `notifications.list`, once there are `count` of them
    (and, with `settled`, every job of them has ended)."""
    deadline = time.time() + 20
    while True:
        page = novu.notifications.list(request={"transaction_id": transaction_id, "limit": 50}).result
        check(isinstance(page, models.ActivitiesResponseDto), f"list {transaction_id}: {type(page).__name__}")
        items = page.data
        done = len(items) == count and all(
            n.jobs and (not settled or all(j.status in SETTLED for j in n.jobs)) for n in items
        )
        if done:
            return items
        if time.time() > deadline:
            statuses = [[j.status for j in (n.jobs or [])] for n in items]
            raise AssertionError(f"{transaction_id}: not settled in 20 s: {len(items)} items, jobs {statuses}")
        time.sleep(0.1)


def retrieved(novu, notification_id):
    n = novu.notifications.retrieve(notification_id=notification_id).result
    check_envelope(f"retrieve {notification_id}", 200)
    check(isinstance(n, models.ActivityNotificationResponseDto), f"retrieve: {type(n).__name__}")
    eq(n.id, notification_id, "retrieve: _id")
    return n


def statuses(n):
    return [j.status for j in n.jobs]


def check_common(n, what):
    check(OBJECT_ID.match(n.id), f"{what}: _id {n.id!r}")
    check(OBJECT_ID.match(n.subscriber_id), f"{what}: _subscriberId {n.subscriber_id!r}")
    check(n.template is not None and n.template.triggers, f"{what}: template {n.template!r}")
    for j in n.jobs:
        check(OBJECT_ID.match(j.id), f"{what}: job _id {j.id!r}")
        eq(j.step.template_id, n.template_id, f"{what}: job step _templateId")
        for d in j.execution_details:
            check(OBJECT_ID.match(d.id), f"{what}: detail _id {d.id!r}")


def main():
    novu = client()
    workflow(
        "greet",
        [
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hi {{ payload.name }}"}},
            {
                "name": "Pros only",
                "type": "in_app",
                "controlValues": {"body": "pro"},
                "filters": [
                    {
                        "isNegated": False,
                        "type": "GROUP",
                        "value": "AND",
                        "children": [{"field": "plan", "value": "pro", "operator": "EQUAL", "on": "payload"}],
                    }
                ],
            },
        ],
    )

    # `to` as a string: stored and shown as {subscriberId}; the filtered step is skipped.
    trigger(novu, "greet", "sdk-str", "n-str", {"name": "Str", "plan": "free"})
    [n] = listed(novu, "n-str", 1)
    check_common(n, "to string")
    eq(n.to, {"subscriberId": "sdk-str"}, "to string: to")
    eq(n.subscriber.subscriber_id, "sdk-str", "to string: subscriber")
    eq(n.subscriber.first_name, None, "to string: no first name")
    eq(statuses(n), ["completed", "skipped"], "to string: jobs")
    eq([j.type for j in n.jobs], ["in_app", "in_app"], "to string: job types")
    eq(n.jobs[0].provider_id, models.ProvidersIDEnum.NOVU, "to string: in-app provider")
    eq(n.jobs[1].execution_details[-1].detail, "Step skipped: its filters did not match", "skipped detail")
    eq(n.channels, [models.StepTypeEnum.IN_APP, models.StepTypeEnum.IN_APP], "channels")
    one = retrieved(novu, n.id)
    eq(one.to, {"subscriberId": "sdk-str"}, "retrieve to string: to")
    eq(statuses(one), ["completed", "skipped"], "retrieve to string: jobs")

    # `to` as an object, with names.
    trigger(
        novu,
        "greet",
        {"subscriber_id": "sdk-obj", "first_name": "Ob", "last_name": "Ject", "email": "obj@example.com"},
        "n-obj",
        {"name": "Obj", "plan": "pro"},
    )
    [n] = listed(novu, "n-obj", 1)
    check_common(n, "to object")
    eq(n.to.get("subscriberId"), "sdk-obj", "to object: to.subscriberId")
    eq(n.to.get("email"), "obj@example.com", "to object: to.email")
    eq(
        (n.subscriber.first_name, n.subscriber.last_name, n.subscriber.email, n.subscriber.phone),
        ("Ob", "Ject", "obj@example.com", None),
        "to object: subscriber",
    )
    eq(statuses(n), ["completed", "completed"], "to object: jobs")
    retrieved(novu, n.id)

    # `to` as a list of both: one notification each, each with its own recipient object.
    trigger(novu, "greet", ["sdk-l1", {"subscriber_id": "sdk-l2", "phone": "+15550001"}], "n-list", {"plan": "x"})
    items = listed(novu, "n-list", 2)
    tos = sorted((n.to["subscriberId"], n.to.get("phone")) for n in items)
    eq(tos, [("sdk-l1", None), ("sdk-l2", "+15550001")], "to list: recipients")
    for n in items:
        check_common(n, "to list")
        eq(retrieved(novu, n.id).to, n.to, "retrieve to list: to")
    by_phone = {n.subscriber.subscriber_id: n.subscriber.phone for n in items}
    eq(by_phone, {"sdk-l1": None, "sdk-l2": "+15550001"}, "to list: phones")

    # A digest: three events, one digest job; the later events' jobs merged, their later steps skipped.
    workflow(
        "digest",
        [
            {
                "name": "Collect",
                "stepId": "collect",
                "type": "digest",
                "controlValues": {"amount": 2, "unit": "seconds", "digestKey": "payload.thread"},
            },
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "{{ steps.collect.eventCount }} new"}},
        ],
    )
    for i in range(3):
        trigger(novu, "digest", "sdk-dig", f"n-dig-{i}", {"thread": "t1", "i": i})
    [first] = listed(novu, "n-dig-0", 1)
    eq(statuses(first), ["completed", "completed"], "digest: first event")
    d = first.jobs[0].digest
    check(isinstance(d, models.DigestMetadataDto), f"digest: metadata {d!r}")
    eq((d.type, d.amount, d.unit, d.digest_key), (models.DigestTypeEnum.REGULAR, 2, "seconds", "payload.thread"), "digest: metadata")
    eq([e["payload"]["i"] for e in d.events], [0, 1, 2], "digest: events")
    for i in (1, 2):
        [later] = listed(novu, f"n-dig-{i}", 1)
        eq(statuses(later), ["merged", "skipped"], f"digest: event {i}")
        eq(later.jobs[0].digest.type, models.DigestTypeEnum.REGULAR, f"digest: merged event {i} type")
        retrieved(novu, later.id)
    retrieved(novu, first.id)

    # A delay: the later step is pending at once; a cancel settles both.
    workflow(
        "later",
        [
            {"name": "Wait", "type": "delay", "controlValues": {"amount": 1, "unit": "days"}},
            {"name": "Inbox", "type": "in_app", "controlValues": {"body": "tomorrow"}},
        ],
    )
    trigger(novu, "later", "sdk-later", "n-later")
    [n] = listed(novu, "n-later", 1, settled=False)
    eq(statuses(n), ["queued", "pending"], "delay: jobs at once")
    eq(n.jobs[1].execution_details, [], "delay: the pending job has no details yet")
    eq(statuses(retrieved(novu, n.id)), ["queued", "pending"], "retrieve delay: jobs")
    r = HTTP.delete("/v1/events/trigger/n-later")
    eq(r.status_code, 200, f"cancel: {r.text}")
    [n] = listed(novu, "n-later", 1)
    eq(statuses(n), ["canceled", "canceled"], "delay: after cancel")

    # Unknown ids.
    e = expect_error(lambda: novu.notifications.retrieve(notification_id=UNKNOWN_ID), models.ErrorDto, 404, "unknown")
    check(UNKNOWN_ID in e.data.message, f"404 names the id: {e.data.message!r}")


run(main)
