// The fake Slack scenario driven by Bolt for JavaScript in HTTP mode (the Events API over HTTP)
// or, with --socket-mode, over Socket Mode.
// Usage: node scenario.cjs [--socket-mode] READY_JSON  (the readiness line of
// `ski-fake-slack serve`), with NODE_PATH pointing at the node_modules install.sh made.
// Configured only through documented options: `clientOptions.slackApiUrl` and `signingSecret`;
// in HTTP mode the app's built-in HTTP receiver listens on a port-0 loopback address and the fake
// learns the Request URL through its control API (set_request_url), which Bolt answers the
// url_verification challenge for: every request Bolt takes has passed its signature check. With
// --socket-mode, `socketMode`, `appToken` and the receiver's `installerOptions.clientOptions.
// slackApiUrl`. Prints "slack-bolt-node: ok" (or "slack-bolt-node-socket: ok") and exits 0.
const assert = require('node:assert/strict');
const { App, LogLevel } = require('@slack/bolt');

const GENERAL = 'C0000000001';
const ALICE = 'U0000000002';
const BOT = 'U0000000001';
const WAIT = 20000;
const ready = JSON.parse(process.argv[process.argv.length - 1]);
const socketMode = process.argv.slice(2, -1).includes('--socket-mode');
const slackApiUrl = `${ready.api_base_url}/`;

async function control(operation, body) {
  const response = await fetch(`${ready.control_url}/${operation}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return response.json();
}

const MODAL = {
  type: 'modal', callback_id: 'why',
  title: { type: 'plain_text', text: 'Why' },
  blocks: [{ type: 'input', block_id: 'reason', element: { type: 'plain_text_input', action_id: 'text' },
    label: { type: 'plain_text', text: 'Reason' } }],
};

async function main() {
  const transport = socketMode
    ? { socketMode: true, appToken: 'xapp-bolt-node', installerOptions: { clientOptions: { slackApiUrl } } }
    : { signingSecret: ready.signing_secret };
  const app = new App({
    token: 'xoxb-bolt-node',
    clientOptions: { slackApiUrl },
    logLevel: LogLevel.ERROR,
    ...transport,
  });

  // The Web API part of the scenario, through the app's client.
  assert.equal((await app.client.auth.test()).user_id, BOT);
  const blocks = [{
    type: 'actions', block_id: 'approval_1',
    elements: [{ type: 'button', action_id: 'approve_accept', text: { type: 'plain_text', text: 'Accept' }, value: '1' }],
  }];
  const { ts } = await app.client.chat.postMessage({ channel: GENERAL, text: 'approve?', blocks });
  const reply = await app.client.chat.postMessage({ channel: GENERAL, text: 'in thread', thread_ts: ts });
  assert.equal(reply.message.thread_ts, ts);
  const upload = await app.client.filesUploadV2({ channel_id: GENERAL, thread_ts: ts, content: 'hello file', filename: 'notes.txt', title: 'Notes' });
  assert.equal(upload.files[0].files[0].title, 'Notes');
  await assert.rejects(app.client.chat.postMessage({ channel: 'C404', text: 'x' }), (error) => {
    assert.equal(error.data.error, 'channel_not_found');
    return true;
  });

  app.command('/ski', async ({ command, ack, client }) => {
    // The modal opens before the ack, so that the ack tells the scenario it is open.
    if (command.text === 'why') {
      await client.views.open({ trigger_id: command.trigger_id, view: MODAL });
    }
    await ack({ text: `bolt-node got ${command.text}` });
  });
  app.action('approve_accept', async ({ ack, respond }) => {
    await ack();
    await respond({ replace_original: true, text: 'approved by bolt-node' });
  });
  app.view('why', async ({ ack, view }) => {
    const reason = view.state.values.reason.text.value;
    await ack({ response_action: 'errors', errors: { reason: `${reason} is too short` } });
  });
  app.event('app_mention', async ({ event, say }) => {
    await say({ text: `bolt-node heard <@${event.user}>`, thread_ts: event.ts });
  });
  app.event('message', async () => {});

  if (socketMode) {
    await app.start();
    await control('wait_for_connections', { count: 1, timeout_ms: WAIT });
  } else {
    const server = await app.start({ port: 0, host: '127.0.0.1' });
    const { port } = server.address();
    const set = await control('set_request_url', { url: `http://127.0.0.1:${port}/slack/events` });
    assert.equal(set.ok, true, JSON.stringify(set));
  }

  const command = await control('slash_command', { command: '/ski', text: 'status', channel: GENERAL, user: ALICE });
  const commandAck = (await control('ack', { envelope_id: command.envelope_id, timeout_ms: WAIT })).ack;
  assert.equal(commandAck.payload.text, 'bolt-node got status');

  const click = await control('click', { channel: GENERAL, message_ts: ts, action_id: 'approve_accept', user: ALICE });
  const clickAck = (await control('ack', { envelope_id: click.envelope_id, timeout_ms: WAIT })).ack;
  assert.equal(clickAck.payload, null);
  const replaced = (await control('wait_for_message', { channel: GENERAL, text_contains: 'approved by bolt-node', timeout_ms: WAIT })).message;
  assert.equal(replaced.message.ts, ts);

  const mentioned = await control('user_message', { channel: GENERAL, text: `<@${BOT}> hello`, user: ALICE });
  for (const envelope of [mentioned.envelope_id, mentioned.mention_envelope_id]) {
    await control('ack', { envelope_id: envelope, timeout_ms: WAIT });
  }
  const said = await control('wait_for_message', { channel: GENERAL, thread_ts: mentioned.ts, text_contains: 'bolt-node heard', timeout_ms: WAIT });
  assert.equal(said.message.message.text, `bolt-node heard <@${ALICE}>`);

  const why = await control('slash_command', { command: '/ski', text: 'why', channel: GENERAL, user: ALICE });
  await control('ack', { envelope_id: why.envelope_id, timeout_ms: WAIT });
  const opened = (await control('requests', { method: 'views.open' })).requests;
  const viewId = opened[opened.length - 1].response.view.id;
  const submitted = await control('submit_view', { view_id: viewId, user: ALICE, values: { reason: { text: 'because' } } });
  const submitAck = (await control('ack', { envelope_id: submitted.envelope_id, timeout_ms: WAIT })).ack;
  assert.deepEqual(submitAck.payload, { response_action: 'errors', errors: { reason: 'because is too short' } });

  const deliveries = (await control('deliveries', {})).deliveries;
  const frames = (await control('frames', {})).frames;
  if (socketMode) {
    // A dropped socket: the receiver opens a new connection and the next command reaches it.
    await control('drop_connections', {});
    await control('wait_for_connections', { count: 1, timeout_ms: WAIT });
    const again = await control('slash_command', { command: '/ski', text: 'again', channel: GENERAL, user: ALICE });
    const againAck = (await control('ack', { envelope_id: again.envelope_id, timeout_ms: WAIT })).ack;
    assert.equal(againAck.payload.text, 'bolt-node got again');
    assert.equal(deliveries.length, 0, 'nothing went to a Request URL');
    assert.ok(frames.length > 0, 'the envelopes went over Socket Mode');
  } else {
    assert.equal(deliveries[0].kind, 'url_verification');
    assert.ok(deliveries.every((d) => d.status === 200), JSON.stringify(deliveries));
    assert.equal(frames.length, 0, 'nothing went over Socket Mode');
  }
  await app.stop();
  console.log(socketMode ? 'slack-bolt-node-socket: ok' : 'slack-bolt-node: ok');
}

main().catch((error) => { console.error(error); process.exit(1); });
