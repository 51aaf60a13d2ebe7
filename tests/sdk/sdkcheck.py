"""Helpers shared by the SDK-compatibility scripts in this folder.

Each script builds a client with `client()`, asserts with `eq`/`check`/`expect_error`, and runs its body
through `run(main)`, which prints "ok" on success or the failure, the traceback and the last HTTP exchange
(method, URL, status, body) and exits 1.

Besides the SDK's own parsing, a response hook records every raw exchange so a script can also assert the
wire shape the SDK does not check itself: the `{"data": …}` envelope of the `novu` profile and the absence
of fields (e.g. integration `credentials`).
"""

import json
import os
import re
import sys
import traceback

import httpx
from novu_py import Novu, models
from novu_py.types.basemodel import Unset
from novu_py.utils import BackoffStrategy, RetryConfig

URL = os.environ["TIDINGS_URL"]
KEY = os.environ["TIDINGS_KEY"]

# The SDK's default policy retries 408/409/429/5XX with backoff for up to an hour: off, so a failure
# surfaces at once.
NO_RETRY = RetryConfig("none", BackoffStrategy(1, 1, 1.0, 1), False)

OBJECT_ID = re.compile(r"^[0-9a-f]{24}$")
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


class Recorder:
    """Keeps every response the SDK received (body already read)."""

    def __init__(self):
        self.exchanges = []

    def hook(self, response):
        response.read()
        self.exchanges.append(response)

    @property
    def last(self):
        if not self.exchanges:
            raise AssertionError("no HTTP exchange recorded")
        return self.exchanges[-1]

    def last_json(self):
        return self.last.json()

    def describe_last(self):
        if not self.exchanges:
            return "(no HTTP exchange yet)"
        r = self.exchanges[-1]
        req = r.request
        req_body = req.content.decode("utf-8", "replace") if req.content else ""
        return (
            f"{req.method} {req.url}\n  request body: {req_body[:1000]}\n"
            f"  -> {r.status_code} {r.headers.get('content-type')}\n  response body: {r.text[:2000]}"
        )


RECORDER = Recorder()


def client(key=None):
    """A Novu client against the server under test, with retries off and the recorder attached."""
    http = httpx.Client(follow_redirects=True, timeout=30.0, event_hooks={"response": [RECORDER.hook]})
    return Novu(
        secret_key=KEY if key is None else key,
        server_url=URL,
        retry_config=NO_RETRY,
        client=http,
    )


def fail(what):
    raise AssertionError(f"{what}\n  last exchange: {RECORDER.describe_last()}")


def check(cond, what):
    if not cond:
        fail(what)


def eq(actual, expected, what):
    if actual != expected:
        fail(f"{what}: expected {expected!r}, got {actual!r}")


def is_null(value):
    """True for JSON null (None) or a missing OptionalNullable field (Unset)."""
    return value is None or isinstance(value, Unset)


def expect_error(call, cls, status, what):
    """Runs `call`, which must raise the SDK error `cls` with HTTP `status`; returns the error."""
    try:
        result = call()
    except models.NovuError as e:
        if not isinstance(e, cls) or e.status_code != status:
            fail(
                f"{what}: expected {cls.__name__} with status {status}, got {type(e).__name__} "
                f"with status {e.status_code}: {e.message[:500]}\n  body: {e.body[:1000]}"
            )
        return e
    fail(f"{what}: expected {cls.__name__} ({status}), but the call succeeded with {result!r}")


def check_error_body(e, status, path, what):
    """The parsed ErrorDto/ValidationErrorDto data: statusCode, path and an ISO timestamp."""
    eq(e.data.status_code, status, f"{what}: statusCode")
    eq(e.data.path, path, f"{what}: path")
    check(isinstance(e.data.timestamp, str) and ISO_UTC.match(e.data.timestamp), f"{what}: timestamp {e.data.timestamp!r}")
    check(isinstance(e.data.message, str) and e.data.message, f"{what}: message {e.data.message!r}")


def check_envelope(what, status):
    """The last response is `{"data": …}` and nothing else, with `status` and a JSON content type."""
    r = RECORDER.last
    eq(r.status_code, status, f"{what}: HTTP status")
    check(r.headers.get("content-type", "").startswith("application/json"), f"{what}: content-type {r.headers.get('content-type')!r}")
    body = r.json()
    check(isinstance(body, dict) and list(body.keys()) == ["data"], f"{what}: expected a {{\"data\": …}} envelope, got {json.dumps(body)[:500]}")
    return body["data"]


def run(main):
    try:
        main()
    except Exception as e:  # noqa: BLE001 - report anything, then fail
        print(f"FAILED: {type(e).__name__}", file=sys.stderr)
        if isinstance(e, models.NovuError):
            print(f"  SDK error status={e.status_code} body={e.body[:2000]}", file=sys.stderr)
        traceback.print_exc()
        if not isinstance(e, AssertionError):
            print(f"last exchange: {RECORDER.describe_last()}", file=sys.stderr)
        sys.exit(1)
    print("ok")
