"""The v1 topic routes (issue 23) through novu-py 0.3.4, the last release with methods for them (`topics.create`,
`list`, `retrieve`, `rename`, `delete`, `topics.subscribers.assign`, `retrieve`, `remove`), pinned in
tests/sdk/requirements-legacy.txt and installed apart in tests/sdk/.legacy/ (see tests/sdk/legacy.py).

Every answer is parsed by that release's models and its values are asserted; each group's failure is recorded
and the script goes on; it exits 1 when any failed.
"""

from legacy import (  # legacy first: it puts novu-py 0.3.4 on the path
    EXCHANGES, CheckFailed, check, eq, finish, group, novu, raw,
)
from novu_py import models  # noqa: E402

topics = novu.topics


def expect_error(call, status, what):
    try:
        result = call()
    except models.ErrorDto as e:
        eq(EXCHANGES[-1].status_code, status, f"{what}: status")
        return e
    raise CheckFailed(f"{what}: expected {status}, the call succeeded with {result!r}"[:600])


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
    finish()
