// A client on the official TypeScript ACP SDK's experimental v2 (draft)
// (@agentclientprotocol/sdk 2.4.0, `experimental/v2`): everything it sends is the SDK's own. It
// starts the agent command after `--` on stdio, sends initialize at 2, session/new with the
// current directory and one session/prompt, cancels with tool_call/cancel every tool call that
// advertises `cancel`, follows the turn to its idle state, and prints one JSON line per thing it
// sees:
//
//   {"type":"initialize","protocolVersion":2,"session":true}
//   {"type":"session","sessionId":"..."}
//   {"type":"prompt_ack","messageId":"..."}
//   {"type":"session_update","payload":{...}}
//   {"type":"tool_call_cancel","toolCallId":"..."}
//   {"type":"idle","stopReason":"end_turn"}
//   {"type":"error","method":"...","code":-32603,"message":"..."}
//
// Usage: node v2-client.mjs --prompt TEXT -- AGENT [ARG...]
// Exit codes: 0 when the turn ended idle, 1 on an error, 2 a bad argument.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import { PROTOCOL_VERSION, client, methods, ndJsonStream } from "@agentclientprotocol/sdk/experimental/v2";

const args = process.argv.slice(2);
const dashes = args.indexOf("--");
if (dashes !== 2 || args[0] !== "--prompt" || dashes === args.length - 1) {
  console.error("usage: node v2-client.mjs --prompt TEXT -- AGENT [ARG...]");
  process.exit(2);
}
const text = args[1];
const [program, ...programArgs] = args.slice(dashes + 1);

const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

let sessionId = null;
let ended;
const idle = new Promise((resolve) => {
  ended = resolve;
});
let context = null;
const failures = [];

const fail = (method, error) => {
  failures.push(method);
  print({ type: "error", method, code: error.code ?? null, message: String(error.message) });
};

const app = client({ name: "ski-ts-sdk-v2-client" }).onNotification(
  methods.client.session.update,
  ({ params }) => {
    if (params.sessionId !== sessionId) return;
    const update = params.update;
    print({ type: "session_update", payload: update });
    if (
      update.sessionUpdate === "tool_call_update" &&
      update.capabilities?.cancel &&
      !["completed", "failed", "cancelled"].includes(update.status)
    ) {
      context
        .request(methods.agent.toolCall.cancel, { sessionId, toolCallId: update.toolCallId })
        .then(() => print({ type: "tool_call_cancel", toolCallId: update.toolCallId }))
        .catch((error) => fail(methods.agent.toolCall.cancel, error));
    }
    if (update.sessionUpdate === "state_update" && update.state === "idle" && update.stopReason) {
      print({ type: "idle", stopReason: update.stopReason });
      ended();
    }
  },
);

const agentProcess = spawn(program, programArgs, { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agentProcess.on("exit", (code) => resolve(code)));
const stream = ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout));

try {
  await app.connectWith(stream, async (ctx) => {
    context = ctx;
    const init = await ctx.request(methods.agent.initialize, {
      protocolVersion: PROTOCOL_VERSION,
      info: { name: "ski-ts-sdk-v2-client", version: "2.4.0" },
      capabilities: {},
    });
    print({
      type: "initialize",
      protocolVersion: init.protocolVersion,
      session: init.capabilities?.session !== undefined,
    });
    const session = await ctx.request(methods.agent.session.new, { cwd: process.cwd() });
    sessionId = session.sessionId;
    print({ type: "session", sessionId });
    const ack = await ctx.request(methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    print({ type: "prompt_ack", messageId: ack.messageId });
    await idle;
  });
} catch (error) {
  fail("connection", error);
}
agentProcess.stdin.end();
agentProcess.kill();
await exited;
process.exit(failures.length > 0 ? 1 : 0);
