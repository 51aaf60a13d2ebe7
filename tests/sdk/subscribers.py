"""novu-py against /v2/subscribers and /v1/subscribers/{id}/credentials in the `novu` profile.

Runs on a fresh environment (no subscribers, no integrations). Prints "ok" or fails with context.
"""

from novu_py import models

from sdkcheck import (
    ISO_UTC,
    OBJECT_ID,
    RECORDER,
    check,
    check_envelope,
    check_error_body,
    client,
    eq,
    expect_error,
    fail,
    is_null,
    run,
)

FCM = models.ChatOrPushProviderEnum.FCM
NOVU_SLACK = models.ChatOrPushProviderEnum.NOVU_SLACK

ALICE = {
    "subscriber_id": "sdk-alice",
    "first_name": "Alice",
    "last_name": "Smith",
    "email": "alice.smith@example.com",
    "phone": "+15550001111",
    "avatar": "https://example.com/avatars/alice.png",
    "locale": "fr-FR",
    "timezone": "Europe/Paris",
    "data": {"plan": "pro", "seats": 3, "tags": ["a", "b"], "nested": {"beta": True}},
}
BOB = {
    "subscriber_id": "sdk-bob",
    "first_name": "Bob",
    "last_name": "Jones",
    "email": "bob.jones@example.com",
    "phone": "+15550002222",
    "timezone": "America/New_York",
}
CAROL = {
    "subscriber_id": "sdk-carol",
    "first_name": "Carol",
    "last_name": "Smith",
    "email": "carol.smith@example.org",
    "phone": "+442000000333",
    "locale": "en-GB",
}
DAVE = {"subscriber_id": "sdk-dave", "first_name": "Dave", "email": "dave@example.org"}
ERIN = {"subscriber_id": "sdk-erin"}
# A subscriberId that is an email address: it travels in the path of retrieve/patch/delete.
FRANK = {"subscriber_id": "frank@example.com", "first_name": "Frank", "last_name": "O'Neil"}
GRACE = {"subscriber_id": "sdk-grace", "locale": "de-DE", "data": {"vip": False}}

CREATION_ORDER = [ALICE, BOB, CAROL, DAVE, ERIN, FRANK, GRACE]
PROFILE_FIELDS = ["first_name", "last_name", "email", "phone", "avatar", "locale", "timezone", "data"]


def check_subscriber(sub, expected, what):
    """A SubscriberResponseDto carrying `expected` (create-dict); absent fields must be null/unset."""
    check(isinstance(sub, models.SubscriberResponseDto), f"{what}: type {type(sub).__name__}")
    eq(sub.subscriber_id, expected["subscriber_id"], f"{what}: subscriberId")
    for field in PROFILE_FIELDS:
        actual = getattr(sub, field)
        if field in expected and expected[field] is not None:
            eq(actual, expected[field], f"{what}: {field}")
        else:
            check(is_null(actual), f"{what}: {field} should be null/absent, got {actual!r}")
    check(isinstance(sub.id, str) and OBJECT_ID.match(sub.id), f"{what}: _id {sub.id!r}")
    check(sub.id != sub.subscriber_id, f"{what}: _id must differ from subscriberId")
    check(isinstance(sub.organization_id, str) and sub.organization_id, f"{what}: _organizationId {sub.organization_id!r}")
    check(isinstance(sub.environment_id, str) and sub.environment_id, f"{what}: _environmentId {sub.environment_id!r}")
    eq(sub.deleted, False, f"{what}: deleted")
    check(ISO_UTC.match(sub.created_at), f"{what}: createdAt {sub.created_at!r}")
    check(ISO_UTC.match(sub.updated_at), f"{what}: updatedAt {sub.updated_at!r}")
    check(sub.updated_at >= sub.created_at, f"{what}: updatedAt {sub.updated_at} < createdAt {sub.created_at}")


def sids(page):
    return [s.subscriber_id for s in page.data]


def search(novu, **request):
    page = novu.subscribers.search(request=request).result
    check(isinstance(page, models.ListSubscribersResponseDto), f"search {request}: type {type(page).__name__}")
    # A cursor page is never wrapped in {"data": …}: it is the page object itself.
    raw = RECORDER.last_json()
    eq(sorted(raw.keys()), ["data", "next", "previous", "totalCount", "totalCountCapped"], f"search {request}: raw page keys")
    eq(page.total_count_capped, False, f"search {request}: totalCountCapped")
    return page


def check_filter(novu, request, expected_sids):
    page = search(novu, **request)
    eq(sids(page), expected_sids, f"search {request}: subscriberIds (default order: _id DESC)")
    eq(page.total_count, len(expected_sids), f"search {request}: totalCount")
    eq(page.next, None, f"search {request}: next")
    eq(page.previous, None, f"search {request}: previous")


def channel(sub, provider):
    found = [c for c in (sub.channels or []) if c.provider_id == provider]
    eq(len(found), 1, f"{sub.subscriber_id}: channel entries for {provider.value} in {sub.channels!r}")
    return found[0]


def main():
    novu = client()

    # ---------------------------------------------------------------- create
    created = {}
    for spec in CREATION_ORDER:
        sub = novu.subscribers.create(create_subscriber_request_dto=dict(spec)).result
        check_envelope(f"create {spec['subscriber_id']}", 201)
        check_subscriber(sub, spec, f"create {spec['subscriber_id']}")
        eq(sub.channels, [], f"create {spec['subscriber_id']}: channels")
        eq(sub.v, 0, f"create {spec['subscriber_id']}: __v")
        created[spec["subscriber_id"]] = sub
    check(len({s.id for s in created.values()}) == len(CREATION_ORDER), "every subscriber has its own _id")
    eq(
        [s.subscriber_id for s in sorted(created.values(), key=lambda s: s.id)],
        [s["subscriber_id"] for s in CREATION_ORDER],
        "_ids sort by creation",
    )
    env_id = created["sdk-alice"].environment_id
    org_id = created["sdk-alice"].organization_id
    for sub in created.values():
        eq((sub.environment_id, sub.organization_id), (env_id, org_id), f"{sub.subscriber_id}: tenant ids")

    # ---------------------------------------------------------------- retrieve
    for spec in CREATION_ORDER:
        sid = spec["subscriber_id"]
        sub = novu.subscribers.retrieve(subscriber_id=sid).result
        check_envelope(f"retrieve {sid}", 200)
        check_subscriber(sub, spec, f"retrieve {sid}")
        eq(sub.id, created[sid].id, f"retrieve {sid}: _id")
        eq(sub.created_at, created[sid].created_at, f"retrieve {sid}: createdAt")
        if sid == "frank@example.com":
            # The subscriberId with '@' travels in the path (percent-encoded or not) and comes back intact.
            path = RECORDER.last.request.url.raw_path.decode()
            check(path in ("/v2/subscribers/frank%40example.com", "/v2/subscribers/frank@example.com"), f"retrieve frank: path {path}")

    # ---------------------------------------------------------------- search filters
    # Email: case-sensitive substring.
    check_filter(novu, {"email": "smith@"}, ["sdk-carol", "sdk-alice"])
    check_filter(novu, {"email": "example.org"}, ["sdk-dave", "sdk-carol"])
    check_filter(novu, {"email": "bob.jones@example.com"}, ["sdk-bob"])
    check_filter(novu, {"email": "SMITH@"}, [])
    # Name: substring of firstName + " " + lastName.
    check_filter(novu, {"name": "Smith"}, ["sdk-carol", "sdk-alice"])
    check_filter(novu, {"name": "Alice Smith"}, ["sdk-alice"])
    check_filter(novu, {"name": "b J"}, ["sdk-bob"])
    check_filter(novu, {"name": "Dave"}, ["sdk-dave"])
    check_filter(novu, {"name": "O'Neil"}, ["frank@example.com"])
    # Phone: substring.
    check_filter(novu, {"phone": "555000"}, ["sdk-bob", "sdk-alice"])
    check_filter(novu, {"phone": "+44"}, ["sdk-carol"])
    # subscriberId: exact only.
    check_filter(novu, {"subscriber_id": "sdk-bob"}, ["sdk-bob"])
    check_filter(novu, {"subscriber_id": "frank@example.com"}, ["frank@example.com"])
    check_filter(novu, {"subscriber_id": "sdk-bo"}, [])
    # Filters combine with AND.
    check_filter(novu, {"email": "smith", "name": "Carol"}, ["sdk-carol"])
    check_filter(novu, {"email": "smith", "phone": "+1555"}, ["sdk-alice"])

    # ---------------------------------------------------------------- cursor pages
    ids = {s["subscriber_id"]: created[s["subscriber_id"]].id for s in CREATION_ORDER}
    desc = [s["subscriber_id"] for s in reversed(CREATION_ORDER)]  # default order: _id DESC
    total = len(desc)

    p1 = search(novu, limit=3)  # the SDK sends limit=3.0
    check("limit=3.0" in str(RECORDER.last.request.url), f"the SDK sends limit as a float: {RECORDER.last.request.url}")
    eq(sids(p1), desc[0:3], "page 1 items")
    eq(p1.next, ids[desc[2]], "page 1 next = last item's _id")
    eq(p1.previous, None, "page 1 previous")
    eq(p1.total_count, total, "page 1 totalCount")

    p2 = search(novu, limit=3, after=p1.next)
    eq(sids(p2), desc[3:6], "page 2 items")
    eq(p2.next, ids[desc[5]], "page 2 next")
    eq(p2.previous, ids[desc[3]], "page 2 previous = first item's _id")
    eq(p2.total_count, total, "page 2 totalCount")

    p3 = search(novu, limit=3, after=p2.next)
    eq(sids(p3), desc[6:7], "page 3 items")
    eq(p3.next, None, "page 3 next (last page)")
    eq(p3.previous, ids[desc[6]], "page 3 previous")
    eq(p3.total_count, total, "page 3 totalCount")

    back2 = search(novu, limit=3, before=p3.previous)
    eq(sids(back2), desc[3:6], "before page 3: items")
    eq(back2.next, ids[desc[5]], "before page 3: next")
    eq(back2.previous, ids[desc[3]], "before page 3: previous")
    eq(back2.total_count, total, "before page 3: totalCount")

    back1 = search(novu, limit=3, before=back2.previous)
    eq(sids(back1), desc[0:3], "before page 2: items")
    eq(back1.next, ids[desc[2]], "before page 2: next")
    eq(back1.previous, None, "before page 2: previous (first page)")

    asc = search(novu, limit=4, order_direction="ASC")
    eq(sids(asc), [s["subscriber_id"] for s in CREATION_ORDER[:4]], "ASC page items")
    eq(asc.next, ids[CREATION_ORDER[3]["subscriber_id"]], "ASC page next")
    eq(asc.previous, None, "ASC page previous")
    asc2 = search(novu, limit=4, order_direction="ASC", after=asc.next)
    eq(sids(asc2), [s["subscriber_id"] for s in CREATION_ORDER[4:]], "ASC page 2 items")
    eq(asc2.next, None, "ASC page 2 next")
    eq(asc2.previous, ids[CREATION_ORDER[4]["subscriber_id"]], "ASC page 2 previous")

    by_created = search(novu, limit=2, order_by="createdAt", order_direction="DESC")
    eq(sids(by_created), desc[0:2], "orderBy=createdAt DESC items")
    eq(by_created.next, ids[desc[1]], "orderBy=createdAt next")

    incl = search(novu, limit=2, after=ids[desc[1]], include_cursor=True)
    eq(sids(incl), desc[1:3], "includeCursor: the cursor item comes first")
    eq(incl.next, ids[desc[2]], "includeCursor: next")
    eq(incl.previous, ids[desc[1]], "includeCursor: previous")

    filtered = search(novu, limit=1, email="smith@")
    eq(sids(filtered), ["sdk-carol"], "filtered page 1 items")
    eq(filtered.total_count, 2, "filtered page 1 totalCount")
    eq(filtered.next, ids["sdk-carol"], "filtered page 1 next")
    filtered2 = search(novu, limit=1, email="smith@", after=filtered.next)
    eq(sids(filtered2), ["sdk-alice"], "filtered page 2 items")
    eq(filtered2.next, None, "filtered page 2 next")
    eq(filtered2.previous, ids["sdk-alice"], "filtered page 2 previous")

    unknown = search(novu, limit=3, after="ffffffffffffffffffffffff")
    eq(sids(unknown), [], "unknown cursor: empty page")
    eq((unknown.next, unknown.previous), (None, None), "unknown cursor: next/previous")

    e = expect_error(
        lambda: novu.subscribers.search(request={"after": ids["sdk-bob"], "before": ids["sdk-carol"]}),
        models.ErrorDto, 400, "search with both after and before",
    )
    check("before" in str(e.data.message) and "after" in str(e.data.message), f"both cursors: message {e.data.message!r}")
    e = expect_error(lambda: novu.subscribers.search(request={"limit": 101}), models.ValidationErrorDto, 422, "search limit=101")
    check("limit" in e.data.errors, f"limit=101: errors {e.data.errors!r}")
    check(e.data.errors["limit"].messages, f"limit=101: messages {e.data.errors['limit']!r}")

    # ---------------------------------------------------------------- patch
    before_patch = created["sdk-alice"]
    sub = novu.subscribers.patch(
        subscriber_id="sdk-alice",
        patch_subscriber_request_dto={"first_name": "Alicia", "phone": None, "data": {"plan": "enterprise"}},
    ).result
    check_envelope("patch alice", 200)
    # The SDK sends an explicit None as JSON null: it clears the field; absent fields are unchanged.
    sent = RECORDER.last.request.content.decode()
    check('"phone":null' in sent.replace(" ", ""), f"patch body sends phone null: {sent}")
    alice_now = dict(ALICE, first_name="Alicia", phone=None, data={"plan": "enterprise"})
    check_subscriber(sub, alice_now, "patch alice")
    eq(sub.id, before_patch.id, "patch alice: _id")
    eq(sub.created_at, before_patch.created_at, "patch alice: createdAt")
    check(sub.updated_at > before_patch.updated_at, f"patch alice: updatedAt {sub.updated_at} not after {before_patch.updated_at}")
    eq(sub.v, 1, "patch alice: __v")
    check_subscriber(novu.subscribers.retrieve(subscriber_id="sdk-alice").result, alice_now, "retrieve patched alice")

    sub = novu.subscribers.patch(subscriber_id="sdk-alice", patch_subscriber_request_dto={"last_name": None, "data": None}).result
    alice_now = dict(alice_now, last_name=None, data=None)
    check_subscriber(sub, alice_now, "patch alice (clear lastName, data)")
    eq(sub.v, 2, "patch alice again: __v")
    check_filter(novu, {"phone": "555000"}, ["sdk-bob"])  # alice's phone is gone
    check_filter(novu, {"name": "Alicia"}, ["sdk-alice"])
    check_filter(novu, {"name": "Smith"}, ["sdk-carol"])

    sub = novu.subscribers.patch(subscriber_id="frank@example.com", patch_subscriber_request_dto={"email": "frank@example.net"}).result
    check_subscriber(sub, dict(FRANK, email="frank@example.net"), "patch frank")

    e = expect_error(
        lambda: novu.subscribers.patch(subscriber_id="sdk-nobody", patch_subscriber_request_dto={"first_name": "X"}),
        models.ErrorDto, 404, "patch unknown subscriber",
    )
    check_error_body(e, 404, "/v2/subscribers/sdk-nobody", "patch unknown subscriber")

    # ---------------------------------------------------------------- validation (422)
    e = expect_error(
        lambda: novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-bad", "email": "not-an-email"}),
        models.ValidationErrorDto, 422, "create with a bad email",
    )
    check_error_body(e, 422, "/v2/subscribers", "create with a bad email")
    check("email" in e.data.errors, f"bad email: errors {e.data.errors!r}")
    check(e.data.errors["email"].messages and all(isinstance(m, str) for m in e.data.errors["email"].messages),
          f"bad email: messages {e.data.errors['email']!r}")
    eq(e.data.errors["email"].value, "not-an-email", "bad email: value")
    expect_error(lambda: novu.subscribers.retrieve(subscriber_id="sdk-bad"), models.ErrorDto, 404, "the invalid subscriber was not stored")

    e = expect_error(
        lambda: novu.subscribers.patch(subscriber_id="sdk-bob", patch_subscriber_request_dto={"email": "bob-at-example"}),
        models.ValidationErrorDto, 422, "patch with a bad email",
    )
    check("email" in e.data.errors, f"patch bad email: errors {e.data.errors!r}")
    e = expect_error(
        lambda: novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-tz", "timezone": "Mars/Olympus"}),
        models.ValidationErrorDto, 422, "create with a bad timezone",
    )
    check("timezone" in e.data.errors, f"bad timezone: errors {e.data.errors!r}")
    eq(novu.subscribers.retrieve(subscriber_id="sdk-bob").result.email, BOB["email"], "bob's email after the rejected patch")

    # ---------------------------------------------------------------- create an existing subscriber
    # Without failIfExists, create upserts: same _id, given fields replaced, others kept, 201.
    sub = novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-bob", "last_name": "Jonas"}).result
    check_envelope("create existing bob (upsert)", 201)
    check_subscriber(sub, dict(BOB, last_name="Jonas"), "create existing bob (upsert)")
    eq(sub.id, ids["sdk-bob"], "upsert bob: _id unchanged")

    # With failIfExists=true the server answers 409. novu-py maps a 409 from subscribers.create to
    # models.SubscriberResponseDtoError, whose data model (SubscriberResponseDtoErrorData) requires the
    # subscriber fields (subscriberId, _organizationId, _environmentId, deleted, createdAt, updatedAt), i.e.
    # the SDK expects the existing subscriber as the 409 body. An ErrorDto-shaped body {statusCode,
    # timestamp, path, message} makes the SDK raise models.ResponseValidationError instead (still a
    # NovuError with status_code 409). Either is accepted here; the status must be 409.
    try:
        novu.subscribers.create(
            create_subscriber_request_dto={"subscriber_id": "sdk-bob", "first_name": "Robert"}, fail_if_exists=True
        )
        fail("create existing bob with failIfExists=true: expected 409, the call succeeded")
    except models.NovuError as e:
        eq(e.status_code, 409, f"failIfExists: status ({type(e).__name__}: {e.body[:300]})")
        check(isinstance(e, (models.SubscriberResponseDtoError, models.ResponseValidationError, models.ErrorDto)),
              f"failIfExists: error type {type(e).__name__}")
    check("failIfExists=true" in str(RECORDER.last.request.url), f"failIfExists in URL {RECORDER.last.request.url}")
    eq(novu.subscribers.retrieve(subscriber_id="sdk-bob").result.first_name, "Bob", "bob unchanged after the 409")

    # ---------------------------------------------------------------- credentials
    fcm = novu.integrations.create(create_integration_request_dto={
        "name": "FCM", "identifier": "fcm-main", "provider_id": "fcm", "channel": "push",
        "credentials": {"service_account": '{"project_id":"sdk"}'}, "active": True, "check": False,
    }).result
    eq((fcm.provider_id, fcm.identifier, fcm.active), ("fcm", "fcm-main", True), "fcm integration")
    slack = novu.integrations.create(create_integration_request_dto={
        "name": "Novu Slack", "identifier": "novu-slack-main", "provider_id": "novu-slack", "channel": "chat",
        "active": True, "check": False,
    }).result
    eq(slack.provider_id, "novu-slack", "novu-slack integration: providerId spelled novu-…")

    def put(sid, body):
        return novu.subscribers.credentials.update(subscriber_id=sid, update_subscriber_channel_request_dto=body).result

    def patch(sid, body):
        return novu.subscribers.credentials.append(subscriber_id=sid, update_subscriber_channel_request_dto=body).result

    # PUT: creates the fcm entry; duplicate tokens are dropped (first-seen order kept).
    sub = put("sdk-carol", {"provider_id": "fcm", "integration_identifier": "fcm-main",
                            "credentials": {"device_tokens": ["tok-1", "tok-2", "tok-1"]}})
    check_envelope("PUT credentials (fcm)", 200)
    check_subscriber(sub, CAROL, "PUT credentials (fcm)")
    c = channel(sub, FCM)
    eq(c.credentials.device_tokens, ["tok-1", "tok-2"], "PUT fcm: deviceTokens (deduplicated)")
    eq(c.integration_id, fcm.id, "PUT fcm: _integrationId")
    eq(c.integration_identifier, "fcm-main", "PUT fcm: integrationIdentifier")
    eq(len(sub.channels), 1, "PUT fcm: one channel entry")
    eq(sub.v, 1, "PUT fcm: __v")

    # PATCH: appends, still deduplicated.
    sub = patch("sdk-carol", {"provider_id": "fcm", "credentials": {"device_tokens": ["tok-2", "tok-3", "tok-3"]}})
    check_envelope("PATCH credentials (fcm)", 200)
    c = channel(sub, FCM)
    eq(c.credentials.device_tokens, ["tok-1", "tok-2", "tok-3"], "PATCH fcm: deviceTokens appended")
    eq(c.integration_id, fcm.id, "PATCH fcm: _integrationId")
    eq(len(sub.channels), 1, "PATCH fcm: still one channel entry")

    # PUT replaces the list.
    sub = put("sdk-carol", {"provider_id": "fcm", "credentials": {"device_tokens": ["tok-9", "tok-8"]}})
    eq(channel(sub, FCM).credentials.device_tokens, ["tok-9", "tok-8"], "PUT fcm: deviceTokens replaced")

    # Chat credentials for the novu-slack provider: spelled novu-slack on the wire.
    sub = put("sdk-carol", {"provider_id": "novu-slack", "credentials": {"webhook_url": "https://hooks.slack.com/services/T/B/x"}})
    c = channel(sub, NOVU_SLACK)
    eq(c.credentials.webhook_url, "https://hooks.slack.com/services/T/B/x", "PUT novu-slack: webhookUrl")
    eq(c.integration_id, slack.id, "PUT novu-slack: _integrationId")
    eq(channel(sub, FCM).credentials.device_tokens, ["tok-9", "tok-8"], "PUT novu-slack left fcm alone")
    raw_providers = sorted(ch["providerId"] for ch in RECORDER.last_json()["data"]["channels"])
    eq(raw_providers, ["fcm", "novu-slack"], "raw channels[].providerId spelling")

    # PUT with [] clears the tokens.
    sub = put("sdk-carol", {"provider_id": "fcm", "credentials": {"device_tokens": []}})
    eq(channel(sub, FCM).credentials.device_tokens, [], "PUT fcm []: deviceTokens cleared")

    retrieved = novu.subscribers.retrieve(subscriber_id="sdk-carol").result
    eq(sorted(ch.provider_id.value for ch in retrieved.channels), ["fcm", "novu-slack"], "retrieve carol: channels")
    eq(channel(retrieved, NOVU_SLACK).credentials.webhook_url, "https://hooks.slack.com/services/T/B/x", "retrieve carol: webhookUrl")

    # DELETE …/credentials/{providerId}: 204 with no body; the provider's entry is gone.
    novu.subscribers.credentials.delete(subscriber_id="sdk-carol", provider_id="fcm")
    eq(RECORDER.last.status_code, 204, "DELETE credentials fcm: status")
    eq(RECORDER.last.content, b"", "DELETE credentials fcm: empty body")
    retrieved = novu.subscribers.retrieve(subscriber_id="sdk-carol").result
    eq([ch.provider_id for ch in retrieved.channels], [NOVU_SLACK], "after deleting fcm credentials")
    novu.subscribers.credentials.delete(subscriber_id="sdk-carol", provider_id="novu-slack")
    eq(RECORDER.last.status_code, 204, "DELETE credentials novu-slack: status")
    eq(novu.subscribers.retrieve(subscriber_id="sdk-carol").result.channels, [], "after deleting novu-slack credentials")
    e = expect_error(
        lambda: novu.subscribers.credentials.delete(subscriber_id="sdk-carol", provider_id="fcm"),
        models.ErrorDto, 404, "DELETE credentials that are not there",
    )
    check_error_body(e, 404, "/v1/subscribers/sdk-carol/credentials/fcm", "DELETE credentials that are not there")

    e = expect_error(
        lambda: put("sdk-nobody", {"provider_id": "fcm", "credentials": {"device_tokens": ["t"]}}),
        models.ErrorDto, 404, "PUT credentials of an unknown subscriber",
    )
    check_error_body(e, 404, "/v1/subscribers/sdk-nobody/credentials", "PUT credentials of an unknown subscriber")
    e = expect_error(
        lambda: put("sdk-carol", {"provider_id": "apns", "credentials": {"device_tokens": ["t"]}}),
        models.ErrorDto, 400, "PUT credentials without an active apns integration",
    )
    check("apns" in str(e.data.message), f"no apns integration: message {e.data.message!r}")

    # ---------------------------------------------------------------- delete
    res = novu.subscribers.delete(subscriber_id="sdk-erin").result
    check_envelope("delete erin", 200)
    eq((res.acknowledged, res.status), (True, "deleted"), "delete erin: acknowledged/status")
    e = expect_error(lambda: novu.subscribers.retrieve(subscriber_id="sdk-erin"), models.ErrorDto, 404, "retrieve a deleted subscriber")
    check_error_body(e, 404, "/v2/subscribers/sdk-erin", "retrieve a deleted subscriber")
    check("sdk-erin" in str(e.data.message), f"404 message names the subscriber: {e.data.message!r}")
    check(not RECORDER.last_json().get("data"), f"an error body is never wrapped: {RECORDER.last.text}")
    expect_error(lambda: novu.subscribers.delete(subscriber_id="sdk-erin"), models.ErrorDto, 404, "delete a deleted subscriber")
    expect_error(
        lambda: novu.subscribers.patch(subscriber_id="sdk-erin", patch_subscriber_request_dto={"first_name": "E"}),
        models.ErrorDto, 404, "patch a deleted subscriber",
    )
    page = search(novu, limit=100)
    eq(sorted(sids(page)), sorted(s for s in desc if s != "sdk-erin"), "search after delete: erin is gone")
    eq(page.total_count, total - 1, "search after delete: totalCount")
    check_filter(novu, {"subscriber_id": "sdk-erin"}, [])

    res = novu.subscribers.delete(subscriber_id="frank@example.com").result
    eq((res.acknowledged, res.status), (True, "deleted"), "delete frank@example.com")
    expect_error(lambda: novu.subscribers.retrieve(subscriber_id="frank@example.com"), models.ErrorDto, 404, "retrieve deleted frank")

    # The subscriberId of a deleted subscriber can be used again: a new subscriber, nothing carried over.
    sub = novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-erin", "first_name": "Erin"}).result
    check_subscriber(sub, {"subscriber_id": "sdk-erin", "first_name": "Erin"}, "re-create erin")
    eq(sub.v, 0, "re-create erin: __v")
    eq(novu.subscribers.retrieve(subscriber_id="sdk-erin").result.first_name, "Erin", "retrieve re-created erin")

    # ---------------------------------------------------------------- subscriberIds the SDK puts in paths
    # The SDK percent-encodes path parameters except some reserved characters ('+' and '@' travel as is;
    # '+' in a path is a plus, not a space).
    for sid in ["user 1", "a+b@example.com", "h\u00e9llo", "team:ops;eu"]:
        sub = novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": sid, "last_name": "Odd"}).result
        eq(sub.subscriber_id, sid, f"create {sid!r}: subscriberId")
        got = novu.subscribers.retrieve(subscriber_id=sid).result
        eq((got.subscriber_id, got.id, got.last_name), (sid, sub.id, "Odd"), f"retrieve {sid!r}")
        got = novu.subscribers.patch(subscriber_id=sid, patch_subscriber_request_dto={"first_name": "Odd"}).result
        eq((got.subscriber_id, got.first_name), (sid, "Odd"), f"patch {sid!r}")
        check_filter(novu, {"subscriber_id": sid}, [sid])  # and in a query string
        eq(novu.subscribers.delete(subscriber_id=sid).result.acknowledged, True, f"delete {sid!r}")
        expect_error(lambda: novu.subscribers.retrieve(subscriber_id=sid), models.ErrorDto, 404, f"retrieve deleted {sid!r}")

    # ---------------------------------------------------------------- idempotency-key (the SDK's kwarg)
    first = novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-idem", "first_name": "Once"},
                                    idempotency_key="sdk-key-1").result
    eq(RECORDER.last.request.headers.get("idempotency-key"), "sdk-key-1", "idempotency-key header sent")
    eq(RECORDER.last.headers.get("idempotency-key"), "sdk-key-1", "idempotency-key echoed")
    replay = novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-idem", "first_name": "Once"},
                                     idempotency_key="sdk-key-1").result
    eq(RECORDER.last.status_code, 201, "replay: status")
    eq(RECORDER.last.headers.get("idempotency-replay"), "true", "replay: Idempotency-Replay header")
    eq((replay.id, replay.v, replay.updated_at), (first.id, first.v, first.updated_at), "replay: the stored response")
    e = expect_error(
        lambda: novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": "sdk-idem", "first_name": "Twice"},
                                        idempotency_key="sdk-key-1"),
        models.ValidationErrorDto, 422, "same idempotency-key, different body",
    )
    check_error_body(e, 422, "/v2/subscribers", "same idempotency-key, different body")
    eq(novu.subscribers.retrieve(subscriber_id="sdk-idem").result.first_name, "Once", "the reused key changed nothing")

    # ---------------------------------------------------------------- auth
    with client(key="sk_test_wrong") as bad:
        e = expect_error(lambda: bad.subscribers.retrieve(subscriber_id="sdk-bob"), models.ErrorDto, 401, "a wrong API key")
        check_error_body(e, 401, "/v2/subscribers/sdk-bob", "a wrong API key")
    eq(RECORDER.last.request.headers.get("authorization"), "ApiKey sk_test_wrong", "the SDK's Authorization header")



run(main)
