"""Outbound webhooks (issue 39) with the official Python clients: an endpoint made with `svix` points at a local
receiver; novu-py triggers a workflow; every request is verified with svix's `Webhook.verify` through the
`svix-*` headers and again through the `webhook-*` ones alone; then the attempt and message lists, the
destinations of a message, `send-example` and `recover` are read and asked through the `svix` client, each
answer parsed by its pydantic model made strict (no key it does not know). tests/sdk-ts/webhook_deliveries.mjs
covers the same routes with the JavaScript clients.

TIDINGS_APP_ID is the environment's applicationIdentifier. Prints "ok" or fails with context.
"""

import datetime
import http.server
import json
import os
import re
import threading
import time

import httpx
import pydantic
from svix.api import (
    EndpointIn,
    EventExampleIn,
    MessageAttemptListByEndpointOptions,
    MessageAttemptListAttemptedMessagesOptions,
    RecoverIn,
    Svix,
    SvixOptions,
)
from svix.models import EndpointMessageOut, MessageAttemptOut, MessageEndpointOut, MessageOut, RecoverOut
from svix.webhooks import Webhook

from sdkcheck import KEY, URL, check, client, eq, run

APP = os.environ["TIDINGS_APP_ID"]
RECEIVED = []
FAILED = []
STATE = {"failing": True}


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"])).decode()
        entry = {"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
        if self.path == "/retry":
            self.send_response(503)
            self.end_headers()
            self.wfile.write(b"later")
            return
        if self.path == "/fail":
            FAILED.append(entry)
            if STATE["failing"]:
                self.send_response(500)
                self.send_header("webhook-delivery", "abort-message")
                self.end_headers()
                self.wfile.write(b"down")
                return
        else:
            RECEIVED.append(entry)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def strict(model, obj, what):
    made = type(f"Strict{model.__name__}", (model,), {"model_config": {**model.model_config, "extra": "forbid"}})
    try:
        made.model_validate(obj)
    except pydantic.ValidationError as e:
        raise AssertionError(f"{what}: {e}\n  body: {json.dumps(obj)[:800]}") from e


def raw(path):
    r = httpx.get(URL + path, headers={"Authorization": f"Bearer {KEY}"}, timeout=30.0)
    eq(r.status_code, 200, f"GET {path}")
    return r.json()


def until(what, probe, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what}: not reached in {seconds} s")


def verified(entry, secret):
    headers = entry["headers"]
    for prefix in ("svix-", "webhook-"):
        only = {k: v for k, v in headers.items() if k.startswith(prefix)}
        eq(sorted(only), [f"{prefix}id", f"{prefix}signature", f"{prefix}timestamp"], f"{prefix}* headers")
        Webhook(secret).verify(entry["body"], only)
    return json.loads(entry["body"])


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    svix = Svix(KEY, SvixOptions(server_url=URL, retry_schedule=[]))
    ep = svix.endpoint.create(APP, EndpointIn(url=f"{base}/hooks", event_types=["message.sent"]))
    secret = svix.endpoint.get_secret(APP, ep.id).key

    novu = client()
    httpx.post(URL + "/v2/workflows", headers={"Authorization": f"ApiKey {KEY}"}, json={
        "name": "Hooks", "workflowId": "py-hooks", "active": True,
        "steps": [{"name": "Inbox", "type": "in_app", "controlValues": {"body": "Hi {{ payload.n }}"}}],
    }).raise_for_status()
    tx = novu.trigger(trigger_event_request_dto={"workflow_id": "py-hooks", "to": "py-ann", "payload": {"n": 1}}).result
    until("message.sent", lambda: RECEIVED)
    event = verified(RECEIVED[0], secret)
    eq((event["type"], event["environmentId"], event["data"]["object"]["transactionId"]),
       ("message.sent", APP, tx.transaction_id), "the envelope")
    msg_id = RECEIVED[0]["headers"]["webhook-id"]
    eq(event["id"], "evt_" + msg_id[4:], "event and message ids")

    attempts = until("the attempt recorded", lambda: svix.message_attempt.list_by_endpoint(
        APP, ep.id, MessageAttemptListByEndpointOptions(limit=10)).data)
    eq([(a.msg_id, a.status.value, a.response_status_code) for a in attempts], [(msg_id, 0, 200)], "attempts")
    for a in raw(f"/api/v1/app/{APP}/attempt/endpoint/{ep.id}")["data"]:
        strict(MessageAttemptOut, a, "attempt")
    messages = svix.message_attempt.list_attempted_messages(
        APP, ep.id, MessageAttemptListAttemptedMessagesOptions(with_content=True)).data
    eq([(m.id, m.event_id, m.event_type, m.status.value) for m in messages],
       [(msg_id, event["id"], "message.sent", 0)], "messages")
    eq(messages[0].payload, event, "the payload is the envelope sent")
    for m in raw(f"/api/v1/app/{APP}/endpoint/{ep.id}/msg")["data"]:
        strict(EndpointMessageOut, m, "message")
    dest = svix.message_attempt.list_attempted_destinations(APP, msg_id).data
    eq([(d.id, d.status.value) for d in dest], [(ep.id, 0)], "destinations")
    for d in raw(f"/api/v1/app/{APP}/msg/{msg_id}/endpoint")["data"]:
        strict(MessageEndpointOut, d, "destination")

    bad = svix.endpoint.create(APP, EndpointIn(url=f"{base}/fail", event_types=["workflow.deleted"]))
    example = svix.endpoint.send_example(APP, bad.id, EventExampleIn(event_type="preference.updated"))
    check(re.match(r"^msg_[0-9a-f]{24}$", example.id), f"example id {example.id}")
    strict(MessageOut, json.loads(example.model_dump_json(by_alias=True, exclude_none=True)), "send-example")
    until("the example attempted", lambda: FAILED)
    until("the example failed for good", lambda: [m for m in svix.message_attempt.list_attempted_messages(
        APP, bad.id).data if m.status.value == 2])
    eq(len(FAILED), 1, "aborted: no retry")
    STATE["failing"] = False
    since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=1)
    recovered = svix.endpoint.recover(APP, bad.id, RecoverIn(since=since))
    eq((recovered.status.value, recovered.task.value), ("finished", "endpoint.recover"), "recover")
    strict(RecoverOut, json.loads(recovered.model_dump_json(by_alias=True, exclude_none=True)), "recover answer")
    until("sent again", lambda: len(FAILED) == 2)
    eq(FAILED[1]["headers"]["webhook-id"], example.id, "the same id")
    eq(FAILED[1]["body"], FAILED[0]["body"], "the same body")
    verified(FAILED[1], svix.endpoint.get_secret(APP, bad.id).key)
    by_msg = until("both attempts", lambda: (lambda d: len(d) == 2 and d)(
        svix.message_attempt.list_by_msg(APP, example.id).data))
    eq([(a.status.value, a.response_status_code) for a in by_msg], [(0, 200), (2, 500)], "attempts of the example")

    # A message waiting for its retry: pending, with its next attempt, parsed strictly.
    later = svix.endpoint.create(APP, EndpointIn(url=f"{base}/retry", event_types=["message.read"]))
    waiting = svix.endpoint.send_example(APP, later.id, EventExampleIn(event_type="message.read"))
    pending = until("pending after a 503", lambda: [m for m in svix.message_attempt.list_attempted_messages(
        APP, later.id).data if m.id == waiting.id and m.status.value == 1])
    check(pending[0].next_attempt is not None, "a next attempt")
    for m in raw(f"/api/v1/app/{APP}/endpoint/{later.id}/msg")["data"]:
        strict(EndpointMessageOut, m, "pending message")
    for d in raw(f"/api/v1/app/{APP}/msg/{waiting.id}/endpoint")["data"]:
        strict(MessageEndpointOut, d, "pending destination")
    svix.endpoint.delete(APP, later.id)
    server.shutdown()


if __name__ == "__main__":
    run(main)
