// An echo agent on the official TypeScript ACP SDK (@agentclientprotocol/sdk 2.4.0): a target
// built by nobody in this project, for the ski ACP conformance suite (profile ts-sdk-echo.toml).
//
// It answers initialize, session/new and session/prompt over stdio; a prompt's reply is the text
// of its text blocks, sent as one agent_message_chunk, and the turn ends end_turn. session/cancel
// is accepted (turns end at once, so there is nothing to stop). Everything else is left to the
// SDK, which answers unknown requests with -32601.

import { randomUUID } from "node:crypto";
import { Readable, Writable } from "node:stream";

import {
  PROTOCOL_VERSION,
  RequestError,
  agent,
  methods,
  ndJsonStream,
} from "@agentclientprotocol/sdk";

const sessions = new Set();

const app = agent({ name: "ski-ts-sdk-echo" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "ts-sdk-echo", version: "2.4.0" },
  }))
  .onRequest(methods.agent.session.new, () => {
    const sessionId = `sess_${randomUUID()}`;
    sessions.add(sessionId);
    return { sessionId };
  })
  .onRequest(methods.agent.session.prompt, async ({ params, client }) => {
    if (!sessions.has(params.sessionId)) {
      throw RequestError.sessionNotFound(params.sessionId);
    }
    const text = params.prompt
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("");
    await client.notify(methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
    });
    return { stopReason: "end_turn" };
  })
  .onNotification(methods.agent.session.cancel, () => {});

const connection = app.connect(
  ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);
await connection.closed;
