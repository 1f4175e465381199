"""The fake Slack scenario driven by Python slack_sdk's asyncio clients (AsyncWebClient and the
aiohttp SocketModeClient).

Usage: scenario_aiohttp.py READY_JSON   (the readiness line of `ski-fake-slack serve`)
Configured only through the documented options: AsyncWebClient(base_url=...) and
SocketModeClient(web_client=AsyncWebClient(base_url=...)). The control API is called from a
worker thread so that the event loop keeps serving the socket. Prints "slack-python-aiohttp: ok"
and exits 0 on success.
"""

import asyncio
import json
import sys
import urllib.request

from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

GENERAL = "C0000000001"
ALICE = "U0000000002"
WAIT = 20000

ready = json.loads(sys.argv[-1])
api = ready["api_base_url"] + "/"
control_url = ready["control_url"]


def blocking_control(operation, body):
    request = urllib.request.Request(
        f"{control_url}/{operation}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)


async def control(operation, body):
    return await asyncio.to_thread(blocking_control, operation, body)


async def expect_error(call, check):
    try:
        await call
    except SlackApiError as error:
        check(error)
        return
    raise AssertionError("the call must fail")


async def web_api():
    web = AsyncWebClient(token="xoxb-python-aiohttp", base_url=api)
    assert (await web.auth_test())["user_id"] == "U0000000001"
    blocks = [{
        "type": "actions", "block_id": "approval_1",
        "elements": [{"type": "button", "action_id": "approve_accept",
                      "text": {"type": "plain_text", "text": "Accept"}, "value": "1"}],
    }]
    ts = (await web.chat_postMessage(channel=GENERAL, text="approve?", blocks=blocks))["ts"]
    reply = await web.chat_postMessage(channel=GENERAL, text="in thread", thread_ts=ts)
    assert reply["message"]["thread_ts"] == ts
    updated = await web.chat_update(channel=GENERAL, ts=ts, text="approved")
    assert updated["message"]["text"] == "approved"
    upload = await web.files_upload_v2(channel=GENERAL, thread_ts=ts, content="hello file",
                                       filename="notes.txt", title="Notes")
    assert upload["file"]["title"] == "Notes"
    replies = (await web.conversations_replies(channel=GENERAL, ts=ts))["messages"]
    assert [m["text"] for m in replies[:2]] == ["approved", "in thread"], replies

    def unknown_channel(error):
        assert error.response["error"] == "channel_not_found"

    await expect_error(web.chat_postMessage(channel="C404", text="x"), unknown_channel)
    await control("fail_next", {"method": "chat.postMessage",
                                "fault": {"kind": "rate_limited", "retry_after": 1}})

    def limited(error):
        assert error.response.status_code == 429
        assert error.response.headers.get("Retry-After",
                                          error.response.headers.get("retry-after")) == "1"

    await expect_error(web.chat_postMessage(channel=GENERAL, text="limited"), limited)
    return ts


async def socket_mode(ts):
    async def listener(client, request):
        if request.type == "slash_commands":
            text = "aiohttp got " + request.payload["text"]
            await client.send_socket_mode_response(
                SocketModeResponse(envelope_id=request.envelope_id, payload={"text": text}))
        elif request.type == "interactive":
            await client.send_socket_mode_response(
                SocketModeResponse(envelope_id=request.envelope_id))

    socket = SocketModeClient(app_token="xapp-python-aiohttp",
                              web_client=AsyncWebClient(base_url=api))
    socket.socket_mode_request_listeners.append(listener)
    await socket.connect()
    await control("wait_for_connections", {"count": 1, "timeout_ms": WAIT})
    command = await control("slash_command", {"command": "/ski", "text": "status",
                                              "channel": GENERAL, "user": ALICE})
    ack = (await control("ack", {"envelope_id": command["envelope_id"], "timeout_ms": WAIT}))["ack"]
    assert ack["payload"]["text"] == "aiohttp got status", ack
    click = await control("click", {"channel": GENERAL, "message_ts": ts,
                                    "action_id": "approve_accept", "user": ALICE})
    ack = (await control("ack", {"envelope_id": click["envelope_id"], "timeout_ms": WAIT}))["ack"]
    assert ack["payload"] is None, ack
    # Slack asks for a fresh connection: the client opens a new one and the next command reaches it.
    await control("disconnect", {"reason": "refresh_requested"})
    await control("wait_for_connections", {"count": 1, "timeout_ms": WAIT})
    command = await control("slash_command", {"command": "/ski", "text": "again",
                                              "channel": GENERAL, "user": ALICE})
    ack = (await control("ack", {"envelope_id": command["envelope_id"], "timeout_ms": WAIT}))["ack"]
    assert ack["payload"]["text"] == "aiohttp got again", ack
    opened = (await control("requests", {"method": "apps.connections.open"}))["requests"]
    assert len(opened) >= 2, "the client asked for a new connection"
    await socket.close()


async def main():
    ts = await web_api()
    await socket_mode(ts)
    print("slack-python-aiohttp: ok")


asyncio.run(main())
