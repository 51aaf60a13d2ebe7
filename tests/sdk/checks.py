"""What the route-group scripts share whatever novu-py release they drive (contract.py with the current one,
preferences_v1.py and topics_v1.py with 0.3.4 through legacy.py): assertions, and running a group of checks
whose failure is recorded while the script goes on. Imports no SDK.
"""


class CheckFailed(AssertionError):
    pass


def check(cond, what):
    if not cond:
        raise CheckFailed(what)


def eq(actual, expected, what):
    if actual != expected:
        raise CheckFailed(f"{what}: expected {expected!r}, got {actual!r}")


def exchange_line(r):
    """One recorded httpx response as `METHOD path -> status body…`, for failure messages."""
    return f"{r.request.method} {r.request.url.raw_path.decode()} -> {r.status_code} {r.text[:800]}"


def run_group(failures, name, fn, describe):
    """Runs one route group; a failure is appended to `failures` as `describe` tells it, and the script goes
    on."""
    try:
        fn()
        print(f"ok    {name}", flush=True)
    except Exception as e:  # noqa: BLE001 - record anything, go on
        failures.append(f"{name}: {describe(e)}")
        print(f"FAIL  {name}", flush=True)
