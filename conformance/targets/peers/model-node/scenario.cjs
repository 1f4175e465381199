// The official Node clients `openai` and `@anthropic-ai/sdk` against ski-fake-model.
//
// Run with the fake's readiness line as the last argument, the fake serving
// mocks/tests/model_support/peer_turns.toml. Every step asserts what the client returned; the
// last line is "model-node: ok".
'use strict';

const assert = require('node:assert/strict');
const OpenAIModule = require('openai');
const AnthropicModule = require('@anthropic-ai/sdk');

const OpenAI = OpenAIModule.OpenAI || OpenAIModule.default || OpenAIModule;
const Anthropic = AnthropicModule.Anthropic || AnthropicModule.default || AnthropicModule;

const ready = JSON.parse(process.argv[process.argv.length - 1]);
const KEY = ready.api_keys[0];
const WEATHER = { city: 'Paris', days: 2 };
const PARAMETERS = {
  type: 'object',
  properties: { city: { type: 'string' }, days: { type: 'integer' } },
  required: ['city'],
};
const TOOL = {
  type: 'function',
  function: { name: 'get_weather', description: 'The weather in a city', parameters: PARAMETERS },
};
const user = (text) => [{ role: 'user', content: text }];

async function openaiSteps() {
  const client = new OpenAI({ baseURL: ready.openai_base_url, apiKey: KEY, maxRetries: 0 });

  const completion = await client.chat.completions.create({
    model: 'gpt-test',
    messages: user('chat text please'),
  });
  assert.equal(completion.choices[0].message.content, 'Hello from the fake model.');
  assert.equal(completion.choices[0].finish_reason, 'stop');
  assert.equal(completion.usage.completion_tokens, 5);

  const stream = await client.chat.completions.create({
    model: 'gpt-test',
    messages: user('chat stream please'),
    stream: true,
    stream_options: { include_usage: true },
  });
  const pieces = [];
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.content) pieces.push(choice.delta.content);
      finish = choice.finish_reason || finish;
    }
  }
  assert.equal(pieces.join(''), 'Streamed in four pieces.');
  assert.equal(pieces.length, 4);
  assert.equal(finish, 'stop');
  assert.equal(usage.completion_tokens, 4);

  // A streamed tool call through the SDK's accumulating helper.
  const runner = client.chat.completions.stream({
    model: 'gpt-test',
    messages: user('chat tool please'),
    tools: [TOOL],
  });
  let argumentDeltas = 0;
  runner.on('tool_calls.function.arguments.delta', () => {
    argumentDeltas += 1;
  });
  const final = await runner.finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), WEATHER);
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.ok(argumentDeltas >= 2, `${argumentDeltas} argument deltas`);

  const whole = await client.chat.completions.create({
    model: 'gpt-test',
    messages: user('chat whole tool please'),
    tools: [TOOL],
  });
  assert.deepEqual(JSON.parse(whole.choices[0].message.tool_calls[0].function.arguments), WEATHER);
  const refused = await client.chat.completions.create({
    model: 'gpt-test',
    messages: user('chat refusal please'),
  });
  assert.equal(refused.choices[0].message.refusal, 'I cannot help with that.');

  const response = await client.responses.create({ model: 'gpt-test', input: 'responses text please' });
  assert.equal(response.output_text, 'Hello from the responses API.');
  assert.equal(response.usage.output_tokens, 5);

  const responseStream = client.responses.stream({ model: 'gpt-test', input: 'responses stream please' });
  const deltas = [];
  for await (const event of responseStream) {
    if (event.type === 'response.output_text.delta') deltas.push(event.delta);
  }
  const finalResponse = await responseStream.finalResponse();
  assert.equal(deltas.join(''), 'Streamed responses text.');
  assert.equal(finalResponse.output_text, 'Streamed responses text.');

  const events = [];
  const raw = await client.responses.create({
    model: 'gpt-test',
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'responses tool please' }] }],
    tools: [{ type: 'function', name: 'get_weather', parameters: PARAMETERS }],
    stream: true,
  });
  for await (const event of raw) events.push(event);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[events.length - 1].type, 'response.completed');
  const args = events
    .filter((event) => event.type === 'response.function_call_arguments.delta')
    .map((event) => event.delta)
    .join('');
  assert.deepEqual(JSON.parse(args), WEATHER);
  const item = events[events.length - 1].response.output[0];
  assert.equal(item.type, 'function_call');
  assert.deepEqual(JSON.parse(item.arguments), WEATHER);

  const wrong = new OpenAI({ baseURL: ready.openai_base_url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (error) => error instanceof OpenAI.AuthenticationError && error.status === 401);
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-test', messages: user('fail me') }),
    (error) => error instanceof OpenAI.InternalServerError && error.status === 500,
  );
  const retried = await client.chat.completions.create(
    { model: 'gpt-test', messages: user('retry me') },
    { maxRetries: 1 },
  );
  assert.equal(retried.choices[0].message.content, 'After the retry.');
  const models = [];
  for await (const model of client.models.list()) models.push(model.id);
  assert.deepEqual(models, ['ski-fake-model']);
}

async function anthropicSteps() {
  const client = new Anthropic({ baseURL: ready.anthropic_base_url, apiKey: KEY, maxRetries: 0 });

  const message = await client.messages.create({
    model: 'claude-test',
    max_tokens: 100,
    messages: user('messages text please'),
  });
  assert.equal(message.content[0].text, 'Hello from the messages API.');
  assert.equal(message.stop_reason, 'end_turn');
  assert.equal(message.usage.output_tokens, 5);

  const stream = client.messages.stream({
    model: 'claude-test',
    max_tokens: 100,
    messages: user('messages stream please'),
  });
  const pieces = [];
  stream.on('text', (text) => pieces.push(text));
  const final = await stream.finalMessage();
  assert.equal(pieces.join(''), 'Streamed messages text.');
  assert.equal(final.content[0].text, 'Streamed messages text.');
  assert.equal(final.usage.output_tokens, 3);

  const toolStream = client.messages.stream({
    model: 'claude-test',
    max_tokens: 100,
    tools: [{ name: 'get_weather', description: 'The weather', input_schema: PARAMETERS }],
    messages: user('messages tool please'),
  });
  let jsonDeltas = 0;
  toolStream.on('inputJson', () => {
    jsonDeltas += 1;
  });
  const withTool = await toolStream.finalMessage();
  assert.deepEqual(
    withTool.content.map((block) => block.type),
    ['text', 'tool_use'],
  );
  assert.equal(withTool.content[1].name, 'get_weather');
  assert.deepEqual(withTool.content[1].input, WEATHER);
  assert.equal(withTool.stop_reason, 'tool_use');
  assert.ok(jsonDeltas >= 2, `${jsonDeltas} inputJson events`);

  const wrong = new Anthropic({ baseURL: ready.anthropic_base_url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(
    wrong.messages.create({ model: 'claude-test', max_tokens: 10, messages: user('hi') }),
    (error) => error instanceof Anthropic.AuthenticationError && error.status === 401,
  );
  const retried = await client.messages.create(
    { model: 'claude-test', max_tokens: 100, messages: user('overload me') },
    { maxRetries: 1 },
  );
  assert.equal(retried.content[0].text, 'After the overload.');

  // An overloaded_error event after the stream began: the client rejects with it.
  const failing = client.messages.stream({
    model: 'claude-test',
    max_tokens: 10,
    messages: user('overload mid-stream'),
  });
  failing.on('error', () => {});
  await assert.rejects(failing.finalMessage(), (error) => {
    assert.equal(error.error.error.type, 'overloaded_error');
    return true;
  });
}

openaiSteps()
  .then(anthropicSteps)
  .then(() => console.log('model-node: ok'))
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
