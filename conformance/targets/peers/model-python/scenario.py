"""The official Python clients `openai` and `anthropic` against ski-fake-model.

Run with the fake's readiness line as the last argument, the fake serving
mocks/tests/model_support/peer_turns.toml. Every step asserts what the client returned; the
last line is "model-python: ok".
"""

import json
import sys

import anthropic
import openai

ready = json.loads(sys.argv[-1])
KEY = ready["api_keys"][0]
WEATHER = {"city": "Paris", "days": 2}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def user(text):
    return [{"role": "user", "content": text}]


def check(what, got, wanted):
    if got != wanted:
        raise SystemExit(f"{what}: got {got!r}, wanted {wanted!r}")


oai = openai.OpenAI(base_url=ready["openai_base_url"], api_key=KEY, max_retries=0)

# Chat Completions, whole.
completion = oai.chat.completions.create(model="gpt-test", messages=user("chat text please"))
check("chat text", completion.choices[0].message.content, "Hello from the fake model.")
check("chat finish", completion.choices[0].finish_reason, "stop")
check("chat model", completion.model, "gpt-test")
check("chat usage", completion.usage.completion_tokens, 5)
check("chat usage total", completion.usage.total_tokens, completion.usage.prompt_tokens + 5)

# Chat Completions, streamed, with the usage chunk.
stream = oai.chat.completions.create(
    model="gpt-test",
    messages=user("chat stream please"),
    stream=True,
    stream_options={"include_usage": True},
)
pieces, usage, finish = [], None, None
for chunk in stream:
    if chunk.usage is not None:
        usage = chunk.usage
    for choice in chunk.choices:
        if choice.delta.content:
            pieces.append(choice.delta.content)
        finish = choice.finish_reason or finish
check("chat stream text", "".join(pieces), "Streamed in four pieces.")
check("chat stream pieces", len(pieces), 4)
check("chat stream finish", finish, "stop")
check("chat stream usage", usage.completion_tokens, 4)

# Chat Completions, a streamed tool call, through the SDK's own accumulating helper.
with oai.chat.completions.stream(
    model="gpt-test", messages=user("chat tool please"), tools=[TOOL]
) as stream:
    argument_deltas = sum(
        1 for event in stream if event.type == "tool_calls.function.arguments.delta"
    )
    final = stream.get_final_completion()
call = final.choices[0].message.tool_calls[0]
check("chat tool name", call.function.name, "get_weather")
check("chat tool arguments", json.loads(call.function.arguments), WEATHER)
check("chat tool finish", final.choices[0].finish_reason, "tool_calls")
if argument_deltas < 2:
    raise SystemExit(f"chat tool: {argument_deltas} argument deltas, wanted several")

# Chat Completions, a whole tool call, then a refusal.
whole = oai.chat.completions.create(
    model="gpt-test", messages=user("chat whole tool please"), tools=[TOOL]
)
check("chat whole tool", json.loads(whole.choices[0].message.tool_calls[0].function.arguments), WEATHER)
refused = oai.chat.completions.create(model="gpt-test", messages=user("chat refusal please"))
check("chat refusal", refused.choices[0].message.refusal, "I cannot help with that.")
check("chat refusal content", refused.choices[0].message.content, None)

# Responses, whole.
response = oai.responses.create(model="gpt-test", input="responses text please")
check("responses text", response.output_text, "Hello from the responses API.")
check("responses status", response.status, "completed")
check("responses usage", response.usage.output_tokens, 5)

# Responses, streamed through the SDK's helper.
with oai.responses.stream(model="gpt-test", input="responses stream please") as stream:
    deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
    final = stream.get_final_response()
check("responses stream deltas", "".join(deltas), "Streamed responses text.")
check("responses stream final", final.output_text, "Streamed responses text.")

# Responses, a streamed function call, raw events.
events = list(
    oai.responses.create(
        model="gpt-test",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "responses tool please"}]}],
        tools=[{"type": "function", "name": "get_weather", "parameters": TOOL["function"]["parameters"]}],
        stream=True,
    )
)
kinds = [event.type for event in events]
check("responses tool first", kinds[0], "response.created")
check("responses tool last", kinds[-1], "response.completed")
arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
check("responses tool arguments", json.loads(arguments), WEATHER)
item = events[-1].response.output[0]
check("responses tool item", (item.type, item.name, json.loads(item.arguments)), ("function_call", "get_weather", WEATHER))
check("responses sequence", [e.sequence_number for e in events], list(range(len(events))))

# Errors: a wrong key, a scripted 500, and a 429 with retry-after that the client retries.
try:
    openai.OpenAI(base_url=ready["openai_base_url"], api_key="wrong", max_retries=0).models.list()
    raise SystemExit("a wrong key was accepted")
except openai.AuthenticationError as error:
    check("openai 401", error.status_code, 401)
try:
    oai.chat.completions.create(model="gpt-test", messages=user("fail me"))
    raise SystemExit("a scripted 500 was not raised")
except openai.InternalServerError as error:
    check("openai 500", (error.status_code, error.body["message"]), (500, "scripted failure"))
retried = oai.with_options(max_retries=1).chat.completions.create(
    model="gpt-test", messages=user("retry me")
)
check("openai retry", retried.choices[0].message.content, "After the retry.")
check("models", [model.id for model in oai.models.list()], ["ski-fake-model"])

ant = anthropic.Anthropic(base_url=ready["anthropic_base_url"], api_key=KEY, max_retries=0)

# Messages, whole.
message = ant.messages.create(model="claude-test", max_tokens=100, messages=user("messages text please"))
check("messages text", message.content[0].text, "Hello from the messages API.")
check("messages stop", message.stop_reason, "end_turn")
check("messages usage", message.usage.output_tokens, 5)

# Messages, streamed through the SDK's helper.
with ant.messages.stream(model="claude-test", max_tokens=100, messages=user("messages stream please")) as stream:
    text = "".join(stream.text_stream)
    final = stream.get_final_message()
check("messages stream text", text, "Streamed messages text.")
check("messages stream final", final.content[0].text, "Streamed messages text.")
check("messages stream usage", final.usage.output_tokens, 3)

# Messages, text then a streamed tool_use.
tool = {"name": "get_weather", "description": "The weather", "input_schema": TOOL["function"]["parameters"]}
with ant.messages.stream(
    model="claude-test", max_tokens=100, tools=[tool], messages=user("messages tool please")
) as stream:
    json_deltas = sum(1 for event in stream if event.type == "input_json")
    final = stream.get_final_message()
check("messages tool kinds", [block.type for block in final.content], ["text", "tool_use"])
check("messages tool input", (final.content[1].name, final.content[1].input), ("get_weather", WEATHER))
check("messages tool stop", final.stop_reason, "tool_use")
if json_deltas < 2:
    raise SystemExit(f"messages tool: {json_deltas} input_json events, wanted several")

# Errors: a wrong key, and a 529 overloaded that the client retries.
try:
    anthropic.Anthropic(base_url=ready["anthropic_base_url"], api_key="wrong", max_retries=0).messages.create(
        model="claude-test", max_tokens=10, messages=user("hi")
    )
    raise SystemExit("a wrong key was accepted")
except anthropic.AuthenticationError as error:
    check("anthropic 401", error.status_code, 401)
retried = ant.with_options(max_retries=1).messages.create(
    model="claude-test", max_tokens=100, messages=user("overload me")
)
check("anthropic retry", retried.content[0].text, "After the overload.")

# An overloaded_error event after the stream began: the client raises it.
try:
    with ant.messages.stream(model="claude-test", max_tokens=10, messages=user("overload mid-stream")) as stream:
        stream.get_final_message()
    raise SystemExit("an overloaded_error event was not raised")
except anthropic.APIStatusError as error:
    check("anthropic stream error", error.body["error"]["type"], "overloaded_error")

print("model-python: ok")
