"""The fake Slack scenario driven by Bolt for Python's asyncio flavour: AsyncApp over Socket Mode
through AsyncSocketModeHandler (slack_sdk's aiohttp client).

Usage: scenario_async.py READY_JSON   (the readiness line of `ski-fake-slack serve`)
Configured only through documented options: AsyncApp(client=AsyncWebClient(base_url=...)) and
AsyncSocketModeHandler(app, app_token). The control-API steps run in a worker thread so that the
event loop keeps serving the socket. Prints "slack-bolt-python-async: ok" and exits 0.
"""

import asyncio

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from steps import API, BLOCKS, BOT, GENERAL, MODAL, control, drive


async def main():
    app = AsyncApp(client=AsyncWebClient(token="xoxb-bolt-python-async", base_url=API))

    # The Web API part of the scenario, through the app's client.
    assert (await app.client.auth_test())["user_id"] == BOT
    ts = (await app.client.chat_postMessage(channel=GENERAL, text="approve?", blocks=BLOCKS))["ts"]
    reply = await app.client.chat_postMessage(channel=GENERAL, text="in thread", thread_ts=ts)
    assert reply["message"]["thread_ts"] == ts
    upload = await app.client.files_upload_v2(channel=GENERAL, thread_ts=ts, content="hello file",
                                              filename="notes.txt", title="Notes")
    assert upload["file"]["title"] == "Notes"
    try:
        await app.client.chat_postMessage(channel="C404", text="x")
        raise AssertionError("an unknown channel must fail")
    except SlackApiError as error:
        assert error.response["error"] == "channel_not_found"

    @app.command("/ski")
    async def command(ack, body, client):
        # The modal opens before the ack, so that the ack tells the scenario it is open.
        if body["text"] == "why":
            await client.views_open(trigger_id=body["trigger_id"], view=MODAL)
        await ack(f"bolt-python got {body['text']}")

    @app.action("approve_accept")
    async def approve(ack, respond):
        await ack()
        await respond(replace_original=True, text="approved by bolt-python")

    @app.view("why")
    async def why(ack, view):
        reason = view["state"]["values"]["reason"]["text"]["value"]
        await ack(response_action="errors", errors={"reason": f"{reason} is too short"})

    @app.event("app_mention")
    async def mention(event, say):
        await say(text=f"bolt-python heard <@{event['user']}>", thread_ts=event["ts"])

    @app.event("message")
    async def message():
        pass

    handler = AsyncSocketModeHandler(app, app_token="xapp-bolt-python-async")
    await handler.connect_async()
    await asyncio.to_thread(control, "wait_for_connections", {"count": 1, "timeout_ms": 20000})
    await asyncio.to_thread(drive, ts, True)
    await handler.close_async()
    print("slack-bolt-python-async: ok")


asyncio.run(main())
