"""The fake Slack scenario driven by Python slack_sdk (WebClient + builtin SocketModeClient).

Usage: scenario.py READY_JSON   (the readiness line of `ski-fake-slack serve`)
Configured only through the documented options: WebClient(base_url=...) and
SocketModeClient(web_client=WebClient(base_url=...)). Prints "slack-python: ok" and exits 0 on success.
"""

import json
import sys
import urllib.request

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.socket_mode import SocketModeClient
from slack_sdk.socket_mode.response import SocketModeResponse

GENERAL = "C0000000001"
ALICE = "U0000000002"

ready = json.loads(sys.argv[1])
api = ready["api_base_url"] + "/"
control_url = ready["control_url"]


def control(operation, body):
    request = urllib.request.Request(
        f"{control_url}/{operation}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)


web = WebClient(token="xoxb-python", base_url=api)
assert web.auth_test()["user_id"] == "U0000000001"
blocks = [{
    "type": "actions", "block_id": "approval_1",
    "elements": [{"type": "button", "action_id": "approve_accept",
                  "text": {"type": "plain_text", "text": "Accept"}, "value": "1"}],
}]
posted = web.chat_postMessage(channel=GENERAL, text="approve?", blocks=blocks)
ts = posted["ts"]
reply = web.chat_postMessage(channel=GENERAL, text="in thread", thread_ts=ts)
assert reply["message"]["thread_ts"] == ts
assert web.chat_update(channel=GENERAL, ts=ts, text="approved")["message"]["text"] == "approved"
upload = web.files_upload_v2(channel=GENERAL, thread_ts=ts, content="hello file",
                             filename="notes.txt", title="Notes")
assert upload["file"]["title"] == "Notes"
replies = web.conversations_replies(channel=GENERAL, ts=ts)["messages"]
assert [m["text"] for m in replies[:2]] == ["approved", "in thread"], replies

try:
    web.chat_postMessage(channel="C404", text="x")
    raise AssertionError("an unknown channel must fail")
except SlackApiError as error:
    assert error.response["error"] == "channel_not_found"
control("fail_next", {"method": "chat.postMessage", "fault": {"kind": "rate_limited", "retry_after": 1}})
try:
    web.chat_postMessage(channel=GENERAL, text="limited")
    raise AssertionError("a 429 must raise without a retry handler")
except SlackApiError as error:
    assert error.response.status_code == 429
    assert error.response.headers.get("retry-after", error.response.headers.get("Retry-After")) == "1"
# With its rate-limit retry handler installed, slack_sdk waits Retry-After and the call succeeds.
patient = WebClient(token="xoxb-python", base_url=api, retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)])
control("fail_next", {"method": "chat.postMessage", "fault": {"kind": "rate_limited", "retry_after": 1}})
assert patient.chat_postMessage(channel=GENERAL, text="after the limit")["ok"]
limited = [r for r in control("requests", {"method": "chat.postMessage"})["requests"]
           if r["params"].get("text") == "after the limit"]
assert [r["status"] for r in limited] == [429, 200], limited
control("fail_next", {"method": "chat.postMessage", "fault": {"kind": "status", "status": 500}})
try:
    web.chat_postMessage(channel=GENERAL, text="server error")
    raise AssertionError("an HTTP 500 must raise")
except SlackApiError as error:
    assert error.response.status_code == 500


def listener(client, request):
    if request.type == "slash_commands":
        text = "python got " + request.payload["text"]
        client.send_socket_mode_response(
            SocketModeResponse(envelope_id=request.envelope_id, payload={"text": text}))
    elif request.type == "interactive":
        client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))


socket = SocketModeClient(app_token="xapp-python", web_client=WebClient(base_url=api))
socket.socket_mode_request_listeners.append(listener)
socket.connect()
control("wait_for_connections", {"count": 1, "timeout_ms": 10000})
command = control("slash_command", {"command": "/ski", "text": "status", "channel": GENERAL, "user": ALICE})
ack = control("ack", {"envelope_id": command["envelope_id"], "timeout_ms": 10000})["ack"]
assert ack["payload"]["text"] == "python got status", ack
click = control("click", {"channel": GENERAL, "message_ts": ts, "action_id": "approve_accept", "user": ALICE})
ack = control("ack", {"envelope_id": click["envelope_id"], "timeout_ms": 10000})["ack"]
assert ack["payload"] is None, ack
# Slack asks for a fresh connection: the client opens a new one and the next command reaches it.
control("disconnect", {"reason": "refresh_requested"})
control("wait_for_connections", {"count": 1, "timeout_ms": 20000})
command = control("slash_command", {"command": "/ski", "text": "again", "channel": GENERAL, "user": ALICE})
ack = control("ack", {"envelope_id": command["envelope_id"], "timeout_ms": 20000})["ack"]
assert ack["payload"]["text"] == "python got again", ack
opened = control("requests", {"method": "apps.connections.open"})["requests"]
assert len(opened) == 2, "the client asked for a new connection"
socket.close()
print("slack-python: ok")
