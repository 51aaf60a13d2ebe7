"""novu-py against /v2/contexts (issue 38): every method of `novu.contexts` (create, list, retrieve, update,
delete) in every state it produces (with and without data, first/middle/last pages, filtered, changed,
deleted), every answer parsed by the SDK's models and its values asserted, and the errors through the SDK's
error models: 409 (a taken type:id), 422 (bad type, id, data, query), 404 (unknown, deleted, another
environment's). tests/sdk-ts/contexts.mjs runs the same scenario with @novu/api.

Runs on a fresh environment. Prints "ok" or fails with context.
"""

import os

from novu_py import models

from sdkcheck import (
    ISO_UTC,
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

novu = client()


def key(c):
    return f"{c.type}:{c.id}"


def raw(method, path, body=None):
    http = novu.sdk_configuration.client
    r = http.request(method, f"{os.environ['TIDINGS_URL']}{path}", json=body,
                     headers={"Authorization": f"ApiKey {os.environ['TIDINGS_KEY']}"})
    return r.status_code, (r.json() if r.content else None)


def crud():
    acme = novu.contexts.create(create_context_request_dto={
        "type": "tenant", "id": "acme", "data": {"name": "Acme", "plan": {"seats": 3}}}).result
    check_envelope("create", 201)
    eq((acme.type, acme.id, acme.data), ("tenant", "acme", {"name": "Acme", "plan": {"seats": 3}}), "create")
    check(ISO_UTC.match(acme.created_at) and acme.created_at == acme.updated_at, f"create times {acme!r}")
    bare = novu.contexts.create(create_context_request_dto={"type": "app", "id": "jira"}).result
    eq(bare.data, {}, "create without data: data is {}")

    got = novu.contexts.retrieve(type_="tenant", id="acme").result
    check_envelope("retrieve", 200)
    eq(got, acme, "retrieve")

    changed = novu.contexts.update(type_="tenant", id="acme", update_context_request_dto={"data": {"name": "Acme Corp"}}).result
    check_envelope("update", 200)
    eq((changed.data, changed.created_at), ({"name": "Acme Corp"}, acme.created_at), "update replaces the data")
    check(changed.updated_at > acme.updated_at, f"update: updatedAt {changed.updated_at} after {acme.updated_at}")
    eq(novu.contexts.retrieve(type_="tenant", id="acme").result.data, {"name": "Acme Corp"}, "retrieve after update")

    e = expect_error(lambda: novu.contexts.create(create_context_request_dto={"type": "tenant", "id": "acme"}),
                     models.ErrorDto, 409, "a taken type:id")
    check_error_body(e, 409, "/v2/contexts", "409")
    check("already exists" in e.data.message, f"409 message {e.data.message!r}")

    for body, what in [
        ({"type": "ten:ant", "id": "x"}, "a type with ':'"),
        ({"type": "tenant", "id": "x" * 101}, "an id over 100 characters"),
        ({"type": "tenant", "id": ""}, "an empty id"),
        ({"type": "tenant", "id": "big", "data": {"blob": "x" * (64 * 1024)}}, "data over 64 KiB"),
    ]:
        e = expect_error(lambda b=body: novu.contexts.create(create_context_request_dto=b), models.ValidationErrorDto, 422, what)
        check_error_body(e, 422, "/v2/contexts", what)
    expect_error(lambda: novu.contexts.list(request={"limit": 101}), models.ValidationErrorDto, 422, "limit 101")
    expect_error(lambda: novu.contexts.list(request={"order_by": "name"}), models.ValidationErrorDto, 422, "orderBy name")

    for call, what in [
        (lambda: novu.contexts.retrieve(type_="tenant", id="nobody"), "retrieve unknown"),
        (lambda: novu.contexts.update(type_="tenant", id="nobody", update_context_request_dto={"data": {}}), "update unknown"),
        (lambda: novu.contexts.delete(type_="tenant", id="nobody"), "delete unknown"),
    ]:
        e = expect_error(call, models.ErrorDto, 404, what)
        check_error_body(e, 404, "/v2/contexts/tenant/nobody", what)

    novu.contexts.delete(type_="app", id="jira")
    eq(RECORDER.last.status_code, 204, "delete: 204")
    eq(RECORDER.last.content, b"", "delete: no body")
    expect_error(lambda: novu.contexts.retrieve(type_="app", id="jira"), models.ErrorDto, 404, "deleted")


def listing():
    for kind, cid in [("tenant", "globex"), ("app", "tenant-tools"), ("region", "eu"), ("region", "us")]:
        novu.contexts.create(create_context_request_dto={"type": kind, "id": cid, "data": {"n": cid}})
    everything = novu.contexts.list(request={"limit": 100}).result
    eq((everything.total_count, everything.total_count_capped), (5, False), "totals")
    check(is_null(everything.next) and is_null(everything.previous), f"one page: {everything.next!r} {everything.previous!r}")
    newest_first = [key(c) for c in everything.data]
    eq(newest_first, [key(c) for c in sorted(everything.data, key=lambda c: (c.created_at, key(c)), reverse=True)],
       "newest first, then by key")
    eq([key(c) for c in novu.contexts.list(request={"order_direction": models.OrderDirection.ASC}).result.data],
       list(reversed(newest_first)), "ASC")

    first = novu.contexts.list(request={"limit": 2}).result
    eq(([key(c) for c in first.data], first.next, first.previous), (newest_first[:2], newest_first[1], None), "first page")
    middle = novu.contexts.list(request={"limit": 2, "after": first.next}).result
    eq([key(c) for c in middle.data], newest_first[2:4], "middle page")
    check(not is_null(middle.next) and not is_null(middle.previous), f"middle cursors {middle.next!r} {middle.previous!r}")
    last = novu.contexts.list(request={"limit": 2, "after": middle.next}).result
    eq(([key(c) for c in last.data], last.next), (newest_first[4:], None), "last page")
    back = novu.contexts.list(request={"limit": 2, "before": last.previous}).result
    eq([key(c) for c in back.data], newest_first[2:4], "back a page")
    eq([key(c) for c in novu.contexts.list(request={"limit": 2, "after": first.next, "include_cursor": True}).result.data],
       newest_first[1:3], "includeCursor")

    def keys(request):
        page = novu.contexts.list(request=request).result
        return sorted(key(c) for c in page.data), page.total_count

    eq(keys({"id": "eu"}), (["region:eu"], 1), "by id")
    eq(keys({"search": "TENANT"}), (["app:tenant-tools", "tenant:acme", "tenant:globex"], 3), "search")
    eq(keys({"search": "on:u"}), (["region:us"], 1), "search across type:id")
    eq(keys({"search": "nothing"}), ([], 0), "search without a match")

    novu.contexts.update(type_="region", id="eu", update_context_request_dto={"data": {"n": "changed"}})
    eq([key(c) for c in novu.contexts.list(request={"order_by": "updatedAt", "limit": 1}).result.data], ["region:eu"],
       "orderBy updatedAt")


def trigger_context():
    # A context a trigger names is the same record: listed and readable here with its data.
    code, out = raw("POST", "/v2/workflows", {"name": "Ctx", "workflowId": "ctx", "steps": [
        {"name": "Inbox", "stepId": "inbox", "type": "in_app", "controlValues": {"body": "hi {{ context.team.data.name }}"}}]})
    check(code == 201, f"workflow: {code} {out}")
    novu.trigger(trigger_event_request_dto={"workflow_id": "ctx", "to": "sdk-ctx-ann",
                                            "context": {"team": {"id": "blue", "data": {"name": "Blue"}}}})
    team = novu.contexts.retrieve(type_="team", id="blue").result
    eq((team.type, team.id, team.data), ("team", "blue", {"name": "Blue"}), "the trigger's context")


def other_environment():
    # TIDINGS_OTHER_KEY is the key of a second environment of the same server (tests/it/novu_sdk.rs).
    other = client(os.environ["TIDINGS_OTHER_KEY"]).contexts
    eq(other.list().result.total_count, 0, "another environment lists none of these")
    for call, what in [
        (lambda: other.retrieve(type_="tenant", id="acme"), "retrieve"),
        (lambda: other.update(type_="tenant", id="acme", update_context_request_dto={"data": {"x": 1}}), "update"),
        (lambda: other.delete(type_="tenant", id="acme"), "delete"),
    ]:
        expect_error(call, models.ErrorDto, 404, f"another environment's context: {what}")
    theirs = other.create(create_context_request_dto={"type": "tenant", "id": "acme", "data": {"x": 2}}).result
    eq(theirs.data, {"x": 2}, "another environment has its own tenant:acme")
    eq(novu.contexts.retrieve(type_="tenant", id="acme").result.data, {"name": "Acme Corp"}, "ours unchanged")


def main():
    crud()
    listing()
    trigger_context()
    other_environment()


if __name__ == "__main__":
    run(main)
