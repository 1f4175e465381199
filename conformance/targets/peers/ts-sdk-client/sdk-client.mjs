// A client on the official TypeScript ACP SDK (@agentclientprotocol/sdk 2.4.0): everything it
// sends is the SDK's own. It starts the agent command after `--` on stdio, sends initialize,
// session/new with the current directory and one session/prompt per --prompt, allows the first
// allow_once option of every permission request, and prints one JSON line per thing it sees:
//
//   {"type":"initialize","protocolVersion":1,"agent":"NAME"}
//   {"type":"session"}
//   {"type":"session_update","update":"agent_message_chunk","text":"..."}
//   {"type":"permission","granted":"OPTION"}
//   {"type":"prompt_result","stopReason":"end_turn"}
//   {"type":"error","method":"...","code":-32603,"message":"..."}
//
// Usage: node sdk-client.mjs [--prompt TEXT]... -- AGENT [ARG...]
// Exit codes: 0 when every request was answered with a result, 1 when one got an error, 2 a bad
// argument.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

import { PROTOCOL_VERSION, client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const args = process.argv.slice(2);
const dashes = args.indexOf("--");
if (dashes === -1 || dashes === args.length - 1) {
  console.error("usage: node sdk-client.mjs [--prompt TEXT]... -- AGENT [ARG...]");
  process.exit(2);
}
const prompts = [];
for (let at = 0; at < dashes; at += 1) {
  if (args[at] === "--prompt" && at + 1 < dashes) {
    prompts.push(args[at + 1]);
    at += 1;
  } else {
    console.error(`unknown argument ${args[at]}`);
    process.exit(2);
  }
}
const [program, ...programArgs] = args.slice(dashes + 1);

const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

const app = client({ name: "ski-ts-sdk-client" })
  .onNotification(methods.client.session.update, ({ params }) => {
    const update = params.update;
    print({
      type: "session_update",
      update: update.sessionUpdate,
      text: update.content?.type === "text" ? update.content.text : "",
    });
  })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    const option =
      params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
    print({ type: "permission", granted: option.optionId });
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  });

const agent = spawn(program, programArgs, { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));
const connection = app.connect(
  ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout)),
);

let failed = false;
const call = async (method, params) => {
  try {
    return await connection.agent.request(method, params);
  } catch (error) {
    failed = true;
    print({ type: "error", method, code: error.code ?? null, message: String(error.message) });
    return null;
  }
};

const init = await call(methods.agent.initialize, {
  protocolVersion: PROTOCOL_VERSION,
  clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  clientInfo: { name: "ski-ts-sdk-client", version: "2.4.0" },
});
if (init) {
  print({ type: "initialize", protocolVersion: init.protocolVersion, agent: init.agentInfo?.name ?? null });
  const session = await call(methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
  if (session) {
    print({ type: "session" });
    for (const text of prompts) {
      const result = await call(methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text }],
      });
      if (result) {
        print({ type: "prompt_result", stopReason: result.stopReason });
      }
    }
  }
}
agent.stdin.end();
await exited;
process.exit(failed ? 1 : 0);
