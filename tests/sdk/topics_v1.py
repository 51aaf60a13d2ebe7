"""The v1 topic routes (issue 23) through novu-py 0.3.4, the last release with methods for them (`topics.create`,
`list`, `retrieve`, `rename`, `delete`, `topics.subscribers.assign`, `retrieve`, `remove`), pinned in
tests/sdk/requirements-legacy.txt and installed apart in tests/sdk/.legacy/ (tests/it/support/sdk.rs).

Every answer is parsed by that release's models and its values are asserted; each group's failure is recorded
and the script goes on; it exits 1 when any failed.
"""

import json
import os
import sys
import traceback

LEGACY = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".legacy")
sys.path.insert(0, LEGACY)

import httpx  # noqa: E402
from novu_py import Novu, models  # noqa: E402
from novu_py.utils import BackoffStrategy, RetryConfig  # noqa: E402

URL = os.environ["TIDINGS_URL"]
KEY = os.environ["TIDINGS_KEY"]
FAILURES = []
EXCHANGES = []


class CheckFailed(AssertionError):
    pass


def check(cond, what):
    if not cond:
        raise CheckFailed(what)


def eq(actual, expected, what):
    if actual != expected:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


def last_exchange():
    if not EXCHANGES:
        return "(none)"
    r = EXCHANGES[-1]
    return f"{r.request.method} {r.request.url.raw_path.decode()} -> {r.status_code} {r.text[:800]}"


def group(name, fn):
    """Runs one route group; a failure is recorded and the script goes on."""
    try:
        fn()
        print(f"ok    {name}", flush=True)
    except Exception as e:  # noqa: BLE001 - record anything, go on
        FAILURES.append(f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()}      last exchange: {last_exchange()}")
        print(f"FAIL  {name}", flush=True)


def record(response):
    response.read()
    EXCHANGES.append(response)


def expect_error(call, status, what):
    try:
        result = call()
    except models.ErrorDto as e:
        eq(EXCHANGES[-1].status_code, status, f"{what}: status")
        return e
    raise CheckFailed(f"{what}: expected {status}, the call succeeded with {result!r}"[:600])


HTTP = httpx.Client(timeout=30.0, event_hooks={"response": [record]})
novu = Novu(secret_key=KEY, server_url=URL, retry_config=RetryConfig("none", BackoffStrategy(1, 1, 1.0, 1), False),
            client=HTTP)
topics = novu.topics


def raw(method, path, body=None):
    """A request the SDK cannot make: (status, JSON body)."""
    r = HTTP.request(method, f"{URL}{path}", json=body, headers={"Authorization": f"ApiKey {KEY}"})
    return r.status_code, r.json()


def main():
    for sid in ["v1-ann", "v1-bob"]:
        code, out = raw("POST", "/v2/subscribers", {"subscriberId": sid})
        check(code == 201, f"subscriber {sid}: {code} {out}")

    def crud():
        created = topics.create(create_topic_request_dto={"key": "v1-news", "name": "News"}).result
        eq(created.key, "v1-news", "create")
        check(created.id and len(created.id) == 24, f"create _id: {created.id}")
        expect_error(lambda: topics.create(create_topic_request_dto={"key": "v1-news", "name": "Again"}), 409, "a taken key")
        got = topics.retrieve(topic_key="v1-news").result
        eq((got.id, got.key, got.name, got.subscribers), (created.id, "v1-news", "News", []), "retrieve")
        renamed = topics.rename(topic_key="v1-news", rename_topic_request_dto={"name": "Renamed"}).result
        eq(renamed.name, "Renamed", "rename")
        topics.create(create_topic_request_dto={"key": "v1-other", "name": "Other"})
        page = topics.list(page=0, page_size=1).result
        eq(([t.key for t in page.data], page.page, page.page_size, page.total_count), (["v1-news"], 0, 1, 2), "first page")
        eq([t.key for t in topics.list(page=1, page_size=1).result.data], ["v1-other"], "second page")
        eq([t.key for t in topics.list(key="v1-other").result.data], ["v1-other"], "by key")
        expect_error(lambda: topics.retrieve(topic_key="v1-none"), 404, "unknown topic")
    group("v1 topics: create (409 when taken), retrieve, rename, list by page and key, 404", crud)

    def members():
        out = topics.subscribers.assign(topic_key="v1-news", add_subscribers_request_dto={"subscribers": ["v1-ann", "v1-bob", "v1-ghost"]}).result
        eq((out.succeeded, out.failed and out.failed.not_found), (["v1-ann", "v1-bob"], ["v1-ghost"]), "assign")
        member = topics.subscribers.retrieve(topic_key="v1-news", external_subscriber_id="v1-bob").result
        eq((member.topic_key, member.external_subscriber_id), ("v1-news", "v1-bob"), "membership")
        topics.subscribers.remove(topic_key="v1-news", remove_subscribers_request_dto={"subscribers": ["v1-bob"]})
        eq(EXCHANGES[-1].status_code, 204, "remove: 204")
        expect_error(lambda: topics.subscribers.retrieve(topic_key="v1-news", external_subscriber_id="v1-bob"), 404, "removed")
        topics.delete(topic_key="v1-news")
        eq(EXCHANGES[-1].status_code, 204, "delete: 204")
        expect_error(lambda: topics.retrieve(topic_key="v1-news"), 404, "deleted")
        code, out = raw("GET", "/v2/subscribers/v1-ann/subscriptions")
        eq((code, out.get("data")), (200, []), "deleting the topic removed its subscriptions")
    group("v1 topics: assign (partial), membership, remove, delete", members)


if __name__ == "__main__":
    main()
    if FAILURES:
        print(f"\n{len(FAILURES)} failure(s) with novu-py 0.3.4:", file=sys.stderr)
        for f in FAILURES:
            print(f"  - {f}", file=sys.stderr)
        sys.exit(1)
    print("ok")
