// An agent on the official TypeScript ACP SDK's experimental v2 (draft)
// (@agentclientprotocol/sdk 2.4.0, `experimental/v2`): everything it sends is the SDK's own.
// It serves one client on stdio: initialize at 2 with the session baseline, session/new, and
// each prompt acknowledged with its user message id, then the user message, `running`, a tool
// call that advertises `cancel` and runs until tool_call/cancel, `cancelled`, one chunk of the
// reply and idle with end_turn. session/cancel also ends a held tool call.
//
// Usage: node v2-agent.mjs

import { Readable, Writable } from "node:stream";

import { PROTOCOL_VERSION, agent, methods, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";

const REPLY = "ts v2 agent says hello";
const held = new Map();
let next = 0;

const app = agent({ name: "ski-ts-sdk-v2-agent" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: PROTOCOL_VERSION,
    info: { name: "ts-sdk-v2-agent", version: "2.4.0" },
    capabilities: { session: {} },
  }))
  .onRequest(methods.agent.session.new, () => {
    next += 1;
    return { sessionId: `ts-session-${next}` };
  })
  .onRequest(methods.agent.toolCall.cancel, ({ params }) => {
    const release = held.get(params.toolCallId);
    if (!release) {
      throw Object.assign(new Error("unknown tool call"), { code: -32602 });
    }
    held.delete(params.toolCallId);
    release();
    return {};
  })
  .onNotification(methods.agent.session.cancel, () => {
    for (const release of held.values()) release();
    held.clear();
  })
  .onRequest(methods.agent.session.prompt, ({ params, client }) => {
    next += 1;
    const user = `ts-user-${next}`;
    const reply = `ts-agent-${next}`;
    const call = `ts-call-${next}`;
    const sessionId = params.sessionId;
    const update = (value) =>
      client.notify(methods.client.session.update, { sessionId, update: value });
    const cancelled = new Promise((resolve) => held.set(call, resolve));
    setImmediate(async () => {
      await update({ sessionUpdate: "user_message", messageId: user, content: params.prompt });
      await update({ sessionUpdate: "state_update", state: "running" });
      await update({
        sessionUpdate: "tool_call_update",
        toolCallId: call,
        title: "Wait until cancelled",
        status: "in_progress",
        capabilities: { cancel: {} },
      });
      await cancelled;
      await update({ sessionUpdate: "tool_call_update", toolCallId: call, status: "cancelled" });
      await update({
        sessionUpdate: "agent_message_chunk",
        messageId: reply,
        content: { type: "text", text: REPLY },
      });
      await update({ sessionUpdate: "state_update", state: "idle", stopReason: "end_turn" });
    });
    return { messageId: user };
  });

const connection = app.connect(
  ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);
await connection.closed;
