"""novu-py against /v1/environments in the `novu` profile (issue 38): create, list, update, delete, and their
errors, every answer parsed by the SDK's models. tests/sdk-ts/environments.mjs runs the same scenario with
@novu/api.
"""

import time

from novu_py import models

from sdkcheck import (
    OBJECT_ID,
    RECORDER,
    check,
    check_envelope,
    check_error_body,
    client,
    eq,
    expect_error,
    run,
)

UNKNOWN_ID = "0123456789abcdef01234567"


def check_environment(e, what, **expected):
    """An EnvironmentResponseDto with the `expected` attribute values."""
    check(isinstance(e, models.EnvironmentResponseDto), f"{what}: type {type(e).__name__}")
    check(isinstance(e.id, str) and OBJECT_ID.match(e.id), f"{what}: _id {e.id!r}")
    check(isinstance(e.organization_id, str) and e.organization_id, f"{what}: _organizationId {e.organization_id!r}")
    check(isinstance(e.identifier, str) and e.identifier, f"{what}: identifier {e.identifier!r}")
    for field, value in expected.items():
        eq(getattr(e, field), value, f"{what}: {field}")


def main():
    novu = client()
    run_id = str(int(time.time() * 1000))
    name = f"SDK {run_id}"
    me = novu.environments.list().result
    dev = next(e for e in me if e.name == "Development")

    # ---------------------------------------------------------------- create: the key, shown this once
    created = novu.environments.create(create_environment_request_dto={"name": name, "color": "#3366ff"}).result
    check_envelope("create", 201)
    check_environment(created, "create", name=name, organization_id=dev.organization_id)
    eq(len(created.identifier), 12, "create: identifier length")
    check(created.api_keys is not None and len(created.api_keys) == 1, f"create: apiKeys {created.api_keys!r}")
    key = created.api_keys[0].key
    check(isinstance(key, str) and len(key) >= 32, f"create: key {key!r}")
    eq(created.api_keys[0].user_id, dev.id, "create: _userId (the creating key's environment)")

    # ---------------------------------------------------------------- list: never a key
    listed = novu.environments.list().result
    check_envelope("list", 200)
    for e in listed:
        check_environment(e, f"list {e.name}")
        eq(e.api_keys, None, f"list {e.name}: apiKeys")
    check(all("apiKeys" not in raw for raw in RECORDER.last_json()["data"]), "list: a key in the raw answer")
    check(key not in RECORDER.last.text, "list: the new key in the answer")
    eq([e.identifier for e in listed if e.id == created.id], [created.identifier], "list: the new one")

    # ---------------------------------------------------------------- update: the key's own environment
    mine = client(key=key)
    new_name = f"SDK renamed {run_id}"
    updated = mine.environments.update(
        environment_id=created.id,
        update_environment_request_dto={"name": new_name, "identifier": f"sdk-{run_id}", "color": "#00ff00"},
    ).result
    check_envelope("update", 200)
    check_environment(updated, "update", id=created.id, name=new_name, identifier=f"sdk-{run_id}", api_keys=None)

    # ---------------------------------------------------------------- errors
    path = f"/v1/environments/{created.id}"
    e = expect_error(
        lambda: novu.environments.update(environment_id=created.id, update_environment_request_dto={"name": "X"}),
        models.ErrorDto, 403, "update another environment than the key's")
    check_error_body(e, 403, path, "403")
    e = expect_error(
        lambda: novu.environments.update(environment_id=UNKNOWN_ID, update_environment_request_dto={"name": "X"}),
        models.ErrorDto, 404, "update an unknown environment")
    check_error_body(e, 404, f"/v1/environments/{UNKNOWN_ID}", "404")
    e = expect_error(
        lambda: mine.environments.update(
            environment_id=created.id,
            update_environment_request_dto={"parent_id": dev.id, "bridge": {"url": "https://bridge.example.com"}}),
        models.ValidationErrorDto, 422, "update with what Tidings has not")
    check_error_body(e, 422, path, "422")
    check(set(e.data.errors.keys()) == {"parentId", "bridge"}, f"422 fields: {list(e.data.errors.keys())}")
    expect_error(
        lambda: novu.environments.create(create_environment_request_dto={"name": new_name, "color": "#000000"}),
        models.ErrorDto, 409, "create a taken name")
    expect_error(
        lambda: novu.environments.create(create_environment_request_dto={"name": "Production", "color": "#000000"}),
        models.ValidationErrorDto, 422, "create a protected name")
    expect_error(
        lambda: novu.environments.create(create_environment_request_dto={"name": "Bad color", "color": "blue"}),
        models.ValidationErrorDto, 422, "create with a bad color")
    expect_error(lambda: novu.environments.delete(environment_id=dev.id), models.ErrorDto, 400, "delete Development")
    expect_error(lambda: novu.environments.delete(environment_id=created.id), models.ErrorDto, 403, "delete a sibling")

    # ---------------------------------------------------------------- delete: its key is refused at once
    mine.environments.delete(environment_id=created.id)
    eq(RECORDER.last.status_code, 200, "delete: status")
    expect_error(lambda: mine.environments.list(), models.ErrorDto, 401, "the deleted environment's key")
    eq([e.id for e in novu.environments.list().result if e.id == created.id], [], "list after delete")
    expect_error(lambda: novu.environments.delete(environment_id=created.id), models.ErrorDto, 404, "delete again")


run(main)
