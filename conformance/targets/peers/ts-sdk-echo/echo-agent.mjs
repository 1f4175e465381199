// An echo agent on the official TypeScript ACP SDK (@agentclientprotocol/sdk 2.4.0): a target
// built by nobody in this project, for the ski ACP conformance suite (profile ts-sdk-echo.toml).
//
// It answers initialize, session/new and session/prompt; a prompt's reply is the text of its text
// blocks, sent as one agent_message_chunk, and the turn ends end_turn. session/cancel is accepted
// (turns end at once, so there is nothing to stop). Everything else is left to the SDK, which
// answers unknown requests with -32601.
//
// By default it serves one client on stdio. With `--ws HOST:PORT` (port 0 picks a free one) it
// serves WebSocket clients through the SDK's experimental AcpServer on /acp and prints
// `listening on ws://HOST:PORT/acp` on stderr once it accepts connections.

import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { Readable, Writable } from "node:stream";

import {
  PROTOCOL_VERSION,
  RequestError,
  agent,
  methods,
  ndJsonStream,
} from "@agentclientprotocol/sdk";
import {
  createNodeHttpHandler,
  createNodeWebSocketUpgradeHandler,
} from "@agentclientprotocol/sdk/experimental/node";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import { WebSocketServer } from "ws";

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

const wsAt = process.argv.indexOf("--ws");
if (wsAt === -1) {
  const connection = app.connect(
    ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
  );
  await connection.closed;
} else {
  const listen = process.argv[wsAt + 1] ?? "127.0.0.1:0";
  const split = listen.lastIndexOf(":");
  const host = listen.slice(0, split);
  const port = Number(listen.slice(split + 1));
  const server = new AcpServer({ agent: app });
  const sockets = new WebSocketServer({ noServer: true });
  const http = createServer(createNodeHttpHandler(server));
  http.on("upgrade", createNodeWebSocketUpgradeHandler(server, sockets));
  http.on("error", (error) => {
    console.error(`cannot listen on ${listen}: ${error.message}`);
    process.exit(4);
  });
  http.listen(port, host, () => {
    console.error(`listening on ws://${host}:${http.address().port}/acp`);
  });
}
