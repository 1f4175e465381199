"""The fake Slack scenario driven by Bolt for Python (App, the sync flavour), in HTTP mode (the
Events API over HTTP) or, with --socket-mode, over Socket Mode.

Usage: scenario.py [--socket-mode] READY_JSON   (the readiness line of `ski-fake-slack serve`)
Configured only through documented options: App(client=WebClient(base_url=...), signing_secret=...).
In HTTP mode the app is served by Bolt's WSGI adapter on a port-0 loopback address and the fake
learns the Request URL through its control API (set_request_url), which Bolt answers the
url_verification challenge for: every request Bolt takes has passed its signature check. With
--socket-mode, SocketModeHandler (slack_sdk's built-in client) connects with an app token through
the same WebClient. Prints "slack-bolt-python: ok" (or "slack-bolt-python-socket: ok") and exits 0.
"""

import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from steps import API, BLOCKS, BOT, GENERAL, MODAL, READY, SOCKET_MODE, control, drive

web = WebClient(token="xoxb-bolt-python", base_url=API)
app = App(client=web, signing_secret=READY["signing_secret"] or "unused-in-socket-mode")

# The Web API part of the scenario, through the app's client.
assert app.client.auth_test()["user_id"] == BOT
ts = app.client.chat_postMessage(channel=GENERAL, text="approve?", blocks=BLOCKS)["ts"]
reply = app.client.chat_postMessage(channel=GENERAL, text="in thread", thread_ts=ts)
assert reply["message"]["thread_ts"] == ts
upload = app.client.files_upload_v2(channel=GENERAL, thread_ts=ts, content="hello file",
                                    filename="notes.txt", title="Notes")
assert upload["file"]["title"] == "Notes"
try:
    app.client.chat_postMessage(channel="C404", text="x")
    raise AssertionError("an unknown channel must fail")
except SlackApiError as error:
    assert error.response["error"] == "channel_not_found"


@app.command("/ski")
def command(ack, body, client):
    # The modal opens before the ack, so that the ack tells the scenario it is open.
    if body["text"] == "why":
        client.views_open(trigger_id=body["trigger_id"], view=MODAL)
    ack(f"bolt-python got {body['text']}")


@app.action("approve_accept")
def approve(ack, respond):
    ack()
    respond(replace_original=True, text="approved by bolt-python")


@app.view("why")
def why(ack, view):
    reason = view["state"]["values"]["reason"]["text"]["value"]
    ack(response_action="errors", errors={"reason": f"{reason} is too short"})


@app.event("app_mention")
def mention(event, say):
    say(text=f"bolt-python heard <@{event['user']}>", thread_ts=event["ts"])


@app.event("message")
def message():
    pass


class Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


if SOCKET_MODE:
    handler = SocketModeHandler(app, app_token="xapp-bolt-python")
    handler.connect()
    control("wait_for_connections", {"count": 1, "timeout_ms": 20000})
    drive(ts, socket_mode=True)
    handler.close()
    print("slack-bolt-python-socket: ok")
else:
    server = make_server("127.0.0.1", 0, SlackRequestHandler(app), handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    control("set_request_url", {"url": f"http://127.0.0.1:{server.server_port}/slack/events"})
    drive(ts, socket_mode=False)
    server.shutdown()
    print("slack-bolt-python: ok")
