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
from checks import CheckFailed, check, eq, exchange_line, run_group  # noqa: E402,F401 - re-exported
from novu_py import Novu  # noqa: E402
from novu_py.utils import BackoffStrategy, RetryConfig  # noqa: E402

URL = os.environ["TIDINGS_URL"]
KEY = os.environ["TIDINGS_KEY"]
FAILURES = []
EXCHANGES = []


def last_exchange():
    return exchange_line(EXCHANGES[-1]) if EXCHANGES else "(none)"


def describe(e):
    return f"{type(e).__name__}: {e}\n{traceback.format_exc()}      last exchange: {last_exchange()}"


def group(name, fn):
    """Runs one route group; a failure is recorded and the script goes on."""
    run_group(FAILURES, name, fn, describe)


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
