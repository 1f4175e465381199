// The fake Slack scenario driven by Node @slack/web-api + @slack/socket-mode.
// Usage: node scenario.cjs READY_JSON  (the readiness line of `ski-fake-slack serve`), with
// NODE_PATH pointing at the node_modules install.sh made. Configured only through the documented
// `slackApiUrl` option. Prints "slack-node: ok" and exits 0 on success.
const assert = require('node:assert/strict');
const { WebClient, ErrorCode } = require('@slack/web-api');
const { SocketModeClient } = require('@slack/socket-mode');

const GENERAL = 'C0000000001';
const ALICE = 'U0000000002';
const ready = JSON.parse(process.argv[2]);
const slackApiUrl = `${ready.api_base_url}/`;

async function control(operation, body) {
  const response = await fetch(`${ready.control_url}/${operation}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return response.json();
}

async function main() {
  const web = new WebClient('xoxb-node', { slackApiUrl });
  assert.equal((await web.auth.test()).user_id, 'U0000000001');
  const blocks = [{
    type: 'actions', block_id: 'approval_1',
    elements: [{ type: 'button', action_id: 'approve_accept', text: { type: 'plain_text', text: 'Accept' }, value: '1' }],
  }];
  const posted = await web.chat.postMessage({ channel: GENERAL, text: 'approve?', blocks });
  const ts = posted.ts;
  const reply = await web.chat.postMessage({ channel: GENERAL, text: 'in thread', thread_ts: ts });
  assert.equal(reply.message.thread_ts, ts);
  assert.equal((await web.chat.update({ channel: GENERAL, ts, text: 'approved' })).message.text, 'approved');
  const upload = await web.filesUploadV2({ channel_id: GENERAL, thread_ts: ts, content: 'hello file', filename: 'notes.txt', title: 'Notes' });
  assert.equal(upload.files[0].files[0].title, 'Notes');
  const replies = (await web.conversations.replies({ channel: GENERAL, ts })).messages;
  assert.deepEqual(replies.slice(0, 2).map((m) => m.text), ['approved', 'in thread']);

  await assert.rejects(web.chat.postMessage({ channel: 'C404', text: 'x' }), (error) => {
    assert.equal(error.code, ErrorCode.PlatformError);
    assert.equal(error.data.error, 'channel_not_found');
    return true;
  });
  const limited = new WebClient('xoxb-node', { slackApiUrl, rejectRateLimitedCalls: true });
  await control('fail_next', { method: 'chat.postMessage', fault: { kind: 'rate_limited', retry_after: 1 } });
  await assert.rejects(limited.chat.postMessage({ channel: GENERAL, text: 'limited' }), (error) => {
    assert.equal(error.code, ErrorCode.RateLimitedError);
    assert.equal(error.retryAfter, 1);
    return true;
  });
  // By default the client waits Retry-After and sends the call again.
  await control('fail_next', { method: 'chat.postMessage', fault: { kind: 'rate_limited', retry_after: 1 } });
  assert.equal((await web.chat.postMessage({ channel: GENERAL, text: 'after the limit' })).ok, true);
  const retried = (await control('requests', { method: 'chat.postMessage' })).requests
    .filter((r) => r.params.text === 'after the limit').map((r) => r.status);
  assert.deepEqual(retried, [429, 200]);
  // An HTTP 500 is retried by the default client's retry policy; without retries it is an HTTPError.
  const once = new WebClient('xoxb-node', { slackApiUrl, retryConfig: { retries: 0 } });
  await control('fail_next', { method: 'chat.postMessage', fault: { kind: 'status', status: 500 } });
  await assert.rejects(once.chat.postMessage({ channel: GENERAL, text: 'server error' }), (error) => {
    assert.equal(error.code, ErrorCode.HTTPError);
    assert.equal(error.statusCode, 500);
    return true;
  });

  const socket = new SocketModeClient({ appToken: 'xapp-node', clientOptions: { slackApiUrl } });
  socket.on('slash_commands', async ({ ack, body }) => { await ack({ text: `node got ${body.text}` }); });
  socket.on('interactive', async ({ ack }) => { await ack(); });
  await socket.start();
  const command = await control('slash_command', { command: '/ski', text: 'status', channel: GENERAL, user: ALICE });
  const commandAck = (await control('ack', { envelope_id: command.envelope_id, timeout_ms: 10000 })).ack;
  assert.equal(commandAck.payload.text, 'node got status');
  const click = await control('click', { channel: GENERAL, message_ts: ts, action_id: 'approve_accept', user: ALICE });
  const clickAck = (await control('ack', { envelope_id: click.envelope_id, timeout_ms: 10000 })).ack;
  assert.equal(clickAck.payload, null);
  // A dropped socket: the client opens a new connection and the next command reaches it.
  await control('drop_connections', {});
  await control('wait_for_connections', { count: 1, timeout_ms: 20000 });
  const again = await control('slash_command', { command: '/ski', text: 'again', channel: GENERAL, user: ALICE });
  const againAck = (await control('ack', { envelope_id: again.envelope_id, timeout_ms: 20000 })).ack;
  assert.equal(againAck.payload.text, 'node got again');
  assert.equal((await control('requests', { method: 'apps.connections.open' })).requests.length, 2);
  await socket.disconnect();
  console.log('slack-node: ok');
}

main().catch((error) => { console.error(error); process.exit(1); });
