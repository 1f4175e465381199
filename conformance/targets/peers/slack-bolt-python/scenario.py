"""The fake Slack scenario driven by Bolt for Python in HTTP mode (the Events API over HTTP).

Usage: scenario.py READY_JSON   (the readiness line of `ski-fake-slack serve`)
Configured only through documented options: App(client=WebClient(base_url=...), signing_secret=...)
served by Bolt's WSGI adapter on a port-0 loopback address; the fake learns the Request URL through
its control API (set_request_url), which Bolt answers the url_verification challenge for. Every
request Bolt takes has passed its signature check. Prints "slack-bolt-python: ok" and exits 0.
"""

import json
import sys
import threading
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

GENERAL = "C0000000001"
ALICE = "U0000000002"
BOT = "U0000000001"
WAIT = 20000

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


web = WebClient(token="xoxb-bolt-python", base_url=api)
app = App(client=web, signing_secret=ready["signing_secret"])

# The Web API part of the scenario, through the app's client.
assert app.client.auth_test()["user_id"] == BOT
blocks = [{
    "type": "actions", "block_id": "approval_1",
    "elements": [{"type": "button", "action_id": "approve_accept",
                  "text": {"type": "plain_text", "text": "Accept"}, "value": "1"}],
}]
ts = app.client.chat_postMessage(channel=GENERAL, text="approve?", blocks=blocks)["ts"]
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

MODAL = {
    "type": "modal", "callback_id": "why",
    "title": {"type": "plain_text", "text": "Why"},
    "blocks": [{"type": "input", "block_id": "reason",
                "element": {"type": "plain_text_input", "action_id": "text"},
                "label": {"type": "plain_text", "text": "Reason"}}],
}


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


server = make_server("127.0.0.1", 0, SlackRequestHandler(app), handler_class=Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
control("set_request_url", {"url": f"http://127.0.0.1:{server.server_port}/slack/events"})

command_id = control("slash_command", {"command": "/ski", "text": "status", "channel": GENERAL,
                                       "user": ALICE})["envelope_id"]
ack = control("ack", {"envelope_id": command_id, "timeout_ms": WAIT})["ack"]
assert ack["payload"]["text"] == "bolt-python got status", ack

click = control("click", {"channel": GENERAL, "message_ts": ts, "action_id": "approve_accept",
                          "user": ALICE})
ack = control("ack", {"envelope_id": click["envelope_id"], "timeout_ms": WAIT})["ack"]
assert ack["payload"] is None, ack
replaced = control("wait_for_message", {"channel": GENERAL, "text_contains": "approved by bolt-python",
                                        "timeout_ms": WAIT})["message"]
assert replaced["message"]["ts"] == ts, replaced

mentioned = control("user_message", {"channel": GENERAL, "text": f"<@{BOT}> hello", "user": ALICE})
for envelope in (mentioned["envelope_id"], mentioned["mention_envelope_id"]):
    control("ack", {"envelope_id": envelope, "timeout_ms": WAIT})
said = control("wait_for_message", {"channel": GENERAL, "thread_ts": mentioned["ts"],
                                    "text_contains": "bolt-python heard", "timeout_ms": WAIT})
assert said["message"]["message"]["text"] == f"bolt-python heard <@{ALICE}>", said

command_id = control("slash_command", {"command": "/ski", "text": "why", "channel": GENERAL,
                                       "user": ALICE})["envelope_id"]
control("ack", {"envelope_id": command_id, "timeout_ms": WAIT})
opened = control("requests", {"method": "views.open"})["requests"]
view_id = opened[-1]["response"]["view"]["id"]
submitted = control("submit_view", {"view_id": view_id, "user": ALICE,
                                    "values": {"reason": {"text": "because"}}})
ack = control("ack", {"envelope_id": submitted["envelope_id"], "timeout_ms": WAIT})["ack"]
assert ack["payload"] == {"response_action": "errors",
                          "errors": {"reason": "because is too short"}}, ack

deliveries = control("deliveries", {})["deliveries"]
assert deliveries[0]["kind"] == "url_verification", deliveries[0]
assert all(d["status"] == 200 for d in deliveries), deliveries
assert not control("frames", {})["frames"], "nothing went over Socket Mode"
server.shutdown()
print("slack-bolt-python: ok")
