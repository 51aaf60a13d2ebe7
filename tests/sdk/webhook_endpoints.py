"""The official Svix client for Python (`svix`, pinned in requirements.txt) managing a Tidings environment's
webhook endpoints (issue 39): create (a secret made or given), retrieve by id and by uid, list pages in both
orders, patch, replace (and create through replace), read and rotate the secret, delete. Every answer is parsed
by the client's pydantic models and again by the same models made strict (no key they do not know), and its
values asserted; the errors as the client raises them: 422 (HTTPValidationError), 409, 404 (unknown, deleted,
another environment's endpoint or app), 401 (HttpError). tests/sdk-ts/webhook_endpoints.mjs runs the same
scenario with the JavaScript client.

TIDINGS_APP_ID is the environment's applicationIdentifier; TIDINGS_OTHER_KEY and TIDINGS_OTHER_APP_ID are a
second environment's key and identifier. Prints "ok" or fails with context.
"""

import json
import os
import re

import pydantic
from svix.api import (
    EndpointIn,
    EndpointListOptions,
    EndpointPatch,
    EndpointSecretRotateIn,
    EndpointUpsertIn,
    Svix,
    SvixOptions,
)
from svix.exceptions import HttpError, HTTPValidationError
from svix.models import EndpointOut, EndpointSecretOut, ListResponseEndpointOut, Ordering

from sdkcheck import check, eq, run

URL = os.environ["TIDINGS_URL"]
APP = os.environ["TIDINGS_APP_ID"]
OTHER_APP = os.environ["TIDINGS_OTHER_APP_ID"]
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

ANSWERS = []


def svix(key):
    client = Svix(key, SvixOptions(server_url=URL, retry_schedule=[]))

    def record(response):
        response.read()
        ANSWERS.append(response)

    # The client's own httpx client: every answer is kept, to check it against the strict models.
    client._httpx_client.event_hooks["response"].append(record)
    return client


def strict_model(model):
    return type(f"Strict{model.__name__}", (model,), {"model_config": {**model.model_config, "extra": "forbid"}})


STRICT_ENDPOINT = strict_model(EndpointOut)
STRICT_SECRET = strict_model(EndpointSecretOut)


def last():
    return ANSWERS[-1]


def strict_answer(model, what):
    """The last answer parses with `model` made strict; its times are ISO with milliseconds."""
    body = last().json()
    try:
        if model is ListResponseEndpointOut:
            check(set(body) <= {"data", "iterator", "prevIterator", "done"}, f"{what}: keys {sorted(body)}")
            ListResponseEndpointOut.model_validate(body)
            for item in body["data"]:
                STRICT_ENDPOINT.model_validate(item)
        else:
            strict_model(model).model_validate(body)
    except pydantic.ValidationError as e:
        raise AssertionError(f"{what}: {e}\n  body: {json.dumps(body)[:800]}") from e
    for item in body.get("data", [body]) if isinstance(body, dict) else []:
        for k in ("createdAt", "updatedAt"):
            if k in item:
                check(ISO.match(item[k]), f"{what}: {k} {item[k]!r}")
    return body


def expect_error(call, cls, status, what):
    try:
        result = call()
    except (HttpError, HTTPValidationError) as e:
        check(isinstance(e, cls), f"{what}: expected {cls.__name__}, got {type(e).__name__} {e}")
        eq(e.status_code, status, f"{what}: status")
        return e
    raise AssertionError(f"{what}: expected {cls.__name__} {status}, the call succeeded with {result!r}")


def main():
    client = svix(os.environ["TIDINGS_KEY"])
    other = svix(os.environ["TIDINGS_OTHER_KEY"])
    ep = client.endpoint

    # Create, retrieve by id and by uid; a secret made and one given.
    first = ep.create(APP, EndpointIn(
        url="https://hooks.example.com/tidings",
        description="Orders team",
        uid="orders-hook",
        event_types=["message.sent", "message.read", "message.sent"],
        metadata={"team": "orders"},
        throttle_rate=100,
    ))
    eq(last().status_code, 201, "create: 201")
    strict_answer(EndpointOut, "create")
    check(re.match(r"^ep_[0-9a-f]{24}$", first.id), f"id {first.id}")
    eq(
        (first.url, first.description, first.uid, first.event_types, first.metadata, first.throttle_rate, first.disabled),
        ("https://hooks.example.com/tidings", "Orders team", "orders-hook", ["message.sent", "message.read"],
         {"team": "orders"}, 100, False),
        "create: fields (event types deduplicated)",
    )
    eq(first.created_at, first.updated_at, "create: times")
    second = ep.create(APP, EndpointIn(url="http://127.0.0.1:9/second", secret=VECTOR_SECRET))
    eq((second.description, second.metadata, second.event_types, second.uid), ("", {}, None, None), "defaults")
    eq(ep.get(APP, first.id), first, "retrieve by id")
    strict_answer(EndpointOut, "retrieve")
    eq(ep.get(APP, "orders-hook"), first, "retrieve by uid")
    eq(ep.get_secret(APP, second.id).key, VECTOR_SECRET, "the given secret")
    strict_answer(EndpointSecretOut, "secret")
    made = ep.get_secret(APP, "orders-hook").key
    check(re.match(r"^whsec_[A-Za-z0-9+/]{32}$", made), f"a made secret: {made}")

    # List: pages by iterator, both orders.
    everything = ep.list(APP)
    strict_answer(ListResponseEndpointOut, "list")
    eq(([e.id for e in everything.data], everything.done, everything.iterator), ([second.id, first.id], True, None), "one page")
    one = ep.list(APP, EndpointListOptions(limit=1))
    eq(([e.id for e in one.data], one.done), ([second.id], False), "page 1 of 2")
    two = ep.list(APP, EndpointListOptions(limit=1, iterator=one.iterator))
    eq(([e.id for e in two.data], two.done), ([first.id], True), "page 2 of 2")
    back = ep.list(APP, EndpointListOptions(limit=1, iterator=two.prev_iterator))
    eq([e.id for e in back.data], [second.id], "prevIterator goes back")
    oldest = ep.list(APP, EndpointListOptions(order=Ordering.ASCENDING))
    eq([e.id for e in oldest.data], [first.id, second.id], "ascending")
    expect_error(lambda: ep.list(APP, EndpointListOptions(limit=251)), HTTPValidationError, 422, "limit 251")

    # Patch, replace, create through replace.
    patched = ep.patch(APP, first.id, EndpointPatch(description="Orders", event_types=None, disabled=True))
    strict_answer(EndpointOut, "patch")
    eq(
        (patched.description, patched.event_types, patched.uid, patched.metadata, patched.disabled, patched.throttle_rate),
        ("Orders", None, "orders-hook", {"team": "orders"}, True, 100),
        "patch changes only what it names",
    )
    check(patched.updated_at > first.updated_at and patched.created_at == first.created_at, "patch: times")
    replaced = ep.upsert(APP, "orders-hook", EndpointUpsertIn(url="https://hooks.example.com/v2", uid="orders-hook"))
    eq(last().status_code, 200, "replace: 200")
    eq(
        (replaced.id, replaced.url, replaced.description, replaced.metadata, replaced.disabled, replaced.throttle_rate),
        (first.id, "https://hooks.example.com/v2", "", {}, False, None),
        "replace resets what it leaves out",
    )
    created = ep.upsert(APP, "fresh-hook", EndpointUpsertIn(url="https://hooks.example.com/fresh"))
    eq(last().status_code, 201, "replace of an unknown uid creates: 201")
    eq((created.uid, created.url), ("fresh-hook", "https://hooks.example.com/fresh"), "created through replace")
    ep.delete(APP, "fresh-hook")

    # Rotate the secret.
    before = ep.get_secret(APP, first.id).key
    rotated = ep.rotate_secret(APP, first.id, EndpointSecretRotateIn())
    strict_answer(EndpointSecretOut, "rotate")
    after = ep.get_secret(APP, first.id).key
    check(after != before and after.startswith("whsec_"), f"a new secret: {before} -> {after}")
    eq(rotated.key, after, "rotate answers the new secret")
    eq(ep.rotate_secret(APP, first.id, EndpointSecretRotateIn(key=VECTOR_SECRET, grace_period_seconds=60)).key,
       VECTOR_SECRET, "rotated to the given key")
    expect_error(lambda: ep.rotate_secret(APP, first.id, EndpointSecretRotateIn(key="whsec_c2hvcnQ=")),
                 HTTPValidationError, 422, "a short key")

    # Errors: 422, 409, 404, 401.
    for body, what in [
        (EndpointIn(url="ftp://example.com/x"), "an ftp url"),
        (EndpointIn(url="https://example.com", event_types=["message.exploded"]), "an unknown event type"),
        (EndpointIn(url="https://example.com", uid="has space"), "a bad uid"),
        (EndpointIn(url="https://example.com", throttle_rate=0), "throttleRate 0"),
    ]:
        e = expect_error(lambda: ep.create(APP, body), HTTPValidationError, 422, what)
        check(e.detail and all(d.loc and d.msg for d in e.detail), f"{what}: Svix's validation body {e.detail!r}")
    e = expect_error(lambda: ep.create(APP, EndpointIn(url="https://example.com", uid="orders-hook")), HttpError, 409, "a taken uid")
    eq(e.code, "conflict", "409 code")
    e = expect_error(lambda: ep.get(APP, "ep_000000000000000000000000"), HttpError, 404, "unknown endpoint")
    eq(e.code, "not_found", "404 code")
    expect_error(lambda: ep.list(OTHER_APP), HttpError, 404, "another environment's app with this key")
    expect_error(lambda: other.endpoint.get(OTHER_APP, first.id), HttpError, 404, "this endpoint through another environment")
    eq(other.endpoint.list(OTHER_APP).data, [], "another environment sees none of these")
    expect_error(lambda: svix("not-a-key").endpoint.list(APP), HttpError, 401, "an unknown key")

    # Delete.
    eq(ep.delete(APP, second.id), None, "delete answers nothing")
    eq((last().status_code, last().content), (204, b""), "delete: 204 without a body")
    expect_error(lambda: ep.get(APP, second.id), HttpError, 404, "deleted")
    eq([e.id for e in ep.list(APP).data], [first.id], "one left")


if __name__ == "__main__":
    run(main)
