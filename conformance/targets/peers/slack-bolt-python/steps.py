"""What every Bolt for Python scenario shares: the fake's readiness line and control API, the
message and modal the listeners work on, and the steps driven through the control API once the
app listens, over HTTP (a Request URL) or over Socket Mode. Blocking calls: an asyncio app runs
`drive` in a worker thread.
"""

import json
import sys
import urllib.request

GENERAL = "C0000000001"
ALICE = "U0000000002"
BOT = "U0000000001"
WAIT = 20000

READY = json.loads(sys.argv[-1])
API = READY["api_base_url"] + "/"
SOCKET_MODE = "--socket-mode" in sys.argv[1:-1]

BLOCKS = [{
    "type": "actions", "block_id": "approval_1",
    "elements": [{"type": "button", "action_id": "approve_accept",
                  "text": {"type": "plain_text", "text": "Accept"}, "value": "1"}],
}]

MODAL = {
    "type": "modal", "callback_id": "why",
    "title": {"type": "plain_text", "text": "Why"},
    "blocks": [{"type": "input", "block_id": "reason",
                "element": {"type": "plain_text_input", "action_id": "text"},
                "label": {"type": "plain_text", "text": "Reason"}}],
}


def control(operation, body):
    request = urllib.request.Request(
        f"{READY['control_url']}/{operation}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def command(text):
    """Runs `/ski text` and returns its ack."""
    envelope = control("slash_command", {"command": "/ski", "text": text, "channel": GENERAL,
                                         "user": ALICE})["envelope_id"]
    return control("ack", {"envelope_id": envelope, "timeout_ms": WAIT})["ack"]


def drive(ts, socket_mode):
    """The steps once the app listens: a command, a click answered with `respond`, a mention
    answered with `say`, a view submission; over Socket Mode also a reconnection Slack asks for."""
    ack = command("status")
    assert ack["payload"]["text"] == "bolt-python got status", ack

    click = control("click", {"channel": GENERAL, "message_ts": ts, "action_id": "approve_accept",
                              "user": ALICE})
    ack = control("ack", {"envelope_id": click["envelope_id"], "timeout_ms": WAIT})["ack"]
    assert ack["payload"] is None, ack
    replaced = control("wait_for_message", {"channel": GENERAL,
                                            "text_contains": "approved by bolt-python",
                                            "timeout_ms": WAIT})["message"]
    assert replaced["message"]["ts"] == ts, replaced

    mentioned = control("user_message", {"channel": GENERAL, "text": f"<@{BOT}> hello",
                                         "user": ALICE})
    for envelope in (mentioned["envelope_id"], mentioned["mention_envelope_id"]):
        control("ack", {"envelope_id": envelope, "timeout_ms": WAIT})
    said = control("wait_for_message", {"channel": GENERAL, "thread_ts": mentioned["ts"],
                                        "text_contains": "bolt-python heard", "timeout_ms": WAIT})
    assert said["message"]["message"]["text"] == f"bolt-python heard <@{ALICE}>", said

    command("why")
    opened = control("requests", {"method": "views.open"})["requests"]
    view_id = opened[-1]["response"]["view"]["id"]
    submitted = control("submit_view", {"view_id": view_id, "user": ALICE,
                                        "values": {"reason": {"text": "because"}}})
    ack = control("ack", {"envelope_id": submitted["envelope_id"], "timeout_ms": WAIT})["ack"]
    assert ack["payload"] == {"response_action": "errors",
                              "errors": {"reason": "because is too short"}}, ack

    deliveries = control("deliveries", {})["deliveries"]
    frames = control("frames", {})["frames"]
    if socket_mode:
        # Slack asks for a fresh connection: the handler opens a new one and the next command
        # reaches it.
        control("disconnect", {"reason": "refresh_requested"})
        control("wait_for_connections", {"count": 1, "timeout_ms": WAIT})
        ack = command("again")
        assert ack["payload"]["text"] == "bolt-python got again", ack
        assert not deliveries, "nothing went to a Request URL"
        assert frames, "the envelopes went over Socket Mode"
    else:
        assert deliveries[0]["kind"] == "url_verification", deliveries[0]
        assert all(d["status"] == 200 for d in deliveries), deliveries
        assert not frames, "nothing went over Socket Mode"
