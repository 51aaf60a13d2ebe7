"""What the legacy-SDK scripts (preferences_v1.py, topics_v1.py) share: novu-py 0.3.4, pinned in
tests/sdk/requirements-legacy.txt, has the package name of the current novu-py, so it is installed apart in
tests/sdk/.legacy/ (tests/it/support/sdk.rs); importing this module puts that folder first on the path and
imports it, so a script importing `novu_py` afterwards gets the legacy release.

A client recording every exchange, raw requests, `check`/`eq`, and `group`: a group's failure is recorded and
the script goes on; `finish()` prints the failures and exits 1 when there is any.
"""

import os
import sys
import traceback

LEGACY = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".legacy")
sys.path.insert(0, LEGACY)

import httpx  # noqa: E402
from novu_py import Novu  # noqa: E402
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


HTTP = httpx.Client(timeout=30.0, event_hooks={"response": [record]})
novu = Novu(secret_key=KEY, server_url=URL, retry_config=RetryConfig("none", BackoffStrategy(1, 1, 1.0, 1), False),
            client=HTTP)


def raw(method, path, body=None):
    """A request the SDK cannot make: (status, JSON body)."""
    r = HTTP.request(method, f"{URL}{path}", json=body, headers={"Authorization": f"ApiKey {KEY}"})
    return r.status_code, r.json()


def finish():
    """Prints the failures, if any, and exits 1 when there is one."""
    if FAILURES:
        print(f"\n{len(FAILURES)} failure(s) with novu-py 0.3.4:", file=sys.stderr)
        for f in FAILURES:
            print(f"  - {f}", file=sys.stderr)
        sys.exit(1)
    print("ok")
