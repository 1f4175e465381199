//! The fake model provider over real HTTP on loopback: the script's turns by order and match,
//! each API's stream events in their documented order, the error shapes, hangs and slow streams
//! a client leaves (recorded as cancelled), bad bodies, the log's bound and the model listing.

use crate::model_support;

use std::time::{Duration, Instant};

use model_support::{anthropic, openai, send};
use serde_json::{Value, json};
use ski_mocks::model::{Api, Config, ErrorKind, FakeModel, FakeModelError, Outcome, Script, Turn};

const WAIT: Duration = Duration::from_secs(10);

async fn start(turns: Vec<Turn>) -> FakeModel {
    FakeModel::start(Config::with_script(Script::new(turns)))
        .await
        .expect("start")
}

fn chat(text: &str, stream: bool) -> Value {
    json!({"model": "gpt-test", "stream": stream,
           "messages": [{"role": "user", "content": text}]})
}

fn message(text: &str, stream: bool) -> Value {
    json!({"model": "claude-test", "max_tokens": 64, "stream": stream,
           "messages": [{"role": "user", "content": text}]})
}

fn weather() -> Value {
    json!({"city": "Paris", "days": 2})
}

#[tokio::test]
async fn turns_are_taken_in_order_by_their_match_then_the_end_of_script_text() {
    let model = start(vec![
        Turn::text("about the weather").when_user_says("weather"),
        Turn::text("anything else"),
    ])
    .await;
    let address = model.address();
    let first = openai(address, "/v1/chat/completions", &chat("hello", false)).await;
    assert_eq!(first.status, 200);
    let first = first.json().await;
    assert_eq!(first["choices"][0]["message"]["content"], "anything else");
    assert_eq!(first["object"], "chat.completion");
    let second = anthropic(address, &message("what weather today?", false))
        .await
        .json()
        .await;
    assert_eq!(second["content"][0]["text"], "about the weather");
    assert_eq!(second["stop_reason"], "end_turn");
    let third = openai(
        address,
        "/v1/responses",
        &json!({"model": "m", "input": "more"}),
    )
    .await
    .json()
    .await;
    assert_eq!(third["output"][0]["content"][0]["text"], "end of script");
    let turns: Vec<_> = model
        .requests()
        .iter()
        .map(|request| request.turn)
        .collect();
    assert_eq!(turns, [Some(1), Some(0), None]);
    let apis: Vec<_> = model.requests().iter().map(|request| request.api).collect();
    assert_eq!(apis, [Api::ChatCompletions, Api::Messages, Api::Responses]);
    assert_eq!(
        model.requests()[1].body["messages"][0]["content"],
        "what weather today?"
    );
    assert_eq!(model.turns_left(), 0);
}

#[tokio::test]
async fn anthropic_streams_text_then_tool_use_in_the_documented_event_order() {
    let mut turn = Turn::tool_call("get_weather", weather());
    if let ski_mocks::model::Reply::ToolCalls { text, .. } = &mut turn.reply {
        *text = Some("Let me look.".into());
    }
    let model = start(vec![turn]).await;
    let exchange = anthropic(model.address(), &message("go", true)).await;
    assert_eq!(exchange.status, 200);
    assert!(
        exchange.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = exchange.events().await;
    let names: Vec<&str> = events
        .iter()
        .map(|(name, _)| name.as_deref().unwrap())
        .collect();
    let text_deltas = ["content_block_delta"; 3];
    let mut wanted = vec!["message_start", "content_block_start", "ping"];
    wanted.extend(text_deltas);
    wanted.extend(["content_block_stop", "content_block_start"]);
    wanted.extend(text_deltas);
    wanted.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names, wanted);
    for (name, data) in &events {
        assert_eq!(data["type"], name.as_deref().unwrap());
    }
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 1);
    assert_eq!(
        events[1].1["content_block"],
        json!({"type": "text", "text": ""})
    );
    let tool_start = &events[7].1["content_block"];
    assert_eq!(tool_start["type"], "tool_use");
    assert_eq!(tool_start["name"], "get_weather");
    let arguments: String = events
        .iter()
        .filter(|(_, data)| data["delta"]["type"] == "input_json_delta")
        .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        weather()
    );
    assert_eq!(events[12].1["delta"]["stop_reason"], "tool_use");
    assert_eq!(model.requests()[0].outcome, Outcome::Answered);
    assert!(model.requests()[0].stream);
}

#[tokio::test]
async fn responses_stream_numbers_its_events_and_completes_with_the_function_call() {
    let model = start(vec![Turn::tool_call("get_weather", weather())]).await;
    let request = json!({"model": "gpt-test", "input": "go", "stream": true});
    let events = openai(model.address(), "/v1/responses", &request)
        .await
        .events()
        .await;
    let names: Vec<&str> = events
        .iter()
        .map(|(name, _)| name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (number, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], name.as_deref().unwrap());
        assert_eq!(data["sequence_number"], number);
    }
    assert_eq!(events[0].1["response"]["status"], "in_progress");
    let completed = &events[8].1["response"];
    assert_eq!(completed["status"], "completed");
    let item = &completed["output"][0];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["call_id"], events[2].1["item"]["call_id"]);
    let arguments: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, weather());
    assert_eq!(completed["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn chat_streams_end_with_done_and_carry_usage_only_when_asked() {
    let model = start(vec![Turn::text("one two three"), Turn::refusal("no")]).await;
    let mut request = chat("go", true);
    request["stream_options"] = json!({"include_usage": true});
    let events = openai(model.address(), "/v1/chat/completions", &request)
        .await
        .events()
        .await;
    assert!(events.iter().all(|(name, _)| name.is_none()));
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let usage = &events[events.len() - 2].1;
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 3);
    assert_eq!(
        events[events.len() - 3].1["choices"][0]["finish_reason"],
        "stop"
    );
    let text: String = events
        .iter()
        .filter_map(|(_, data)| data["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "one two three");

    let events = openai(model.address(), "/v1/chat/completions", &chat("go", true))
        .await
        .events()
        .await;
    assert!(events.iter().all(|(_, data)| data.get("usage").is_none()));
    let refusal: String = events
        .iter()
        .filter_map(|(_, data)| data["choices"][0]["delta"]["refusal"].as_str())
        .collect();
    assert_eq!(refusal, "no");
}

#[tokio::test]
async fn errors_carry_each_providers_shape_status_and_retry_after() {
    let model = start(vec![
        Turn::error(ErrorKind::RateLimit, Some(7)),
        Turn::error(ErrorKind::Overloaded, None),
        Turn::error(ErrorKind::Overloaded, None),
        Turn::error(ErrorKind::Server, None),
    ])
    .await;
    let address = model.address();
    let limited = openai(address, "/v1/chat/completions", &chat("a", false)).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.headers["retry-after"], "7");
    assert_eq!(limited.json().await["error"]["code"], "rate_limit_exceeded");
    let overloaded = anthropic(address, &message("b", true)).await;
    assert_eq!(overloaded.status, 529);
    let body = overloaded.json().await;
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error");
    let overloaded = openai(
        address,
        "/v1/responses",
        &json!({"model": "m", "input": "c"}),
    )
    .await;
    assert_eq!(overloaded.status, 503);
    assert_eq!(overloaded.json().await["error"]["type"], "server_error");

    // A wrong or missing key is answered 401 and takes no turn.
    let wrong = send(
        address,
        "POST",
        "/v1/messages",
        &[("x-api-key", "nope")],
        "{}",
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json().await["error"]["type"], "authentication_error");
    let missing = send(address, "POST", "/v1/chat/completions", &[], "{}").await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.json().await["error"]["code"], "invalid_api_key");
    assert_eq!(model.turns_left(), 1);
    let failed = anthropic(address, &message("d", false)).await;
    assert_eq!(failed.status, 500);
    assert_eq!(failed.json().await["error"]["type"], "api_error");
    let statuses: Vec<u16> = model
        .requests()
        .iter()
        .map(|request| request.status)
        .collect();
    assert_eq!(statuses, [429, 529, 503, 401, 401, 500]);
}

#[tokio::test]
async fn a_hang_holds_the_answer_until_the_client_hangs_up_and_is_recorded_cancelled() {
    let model = start(vec![Turn::hang(), Turn::hang()]).await;
    for (stream, content_type) in [(true, "text/event-stream"), (false, "application/json")] {
        let exchange = anthropic(model.address(), &message("wait", stream)).await;
        assert_eq!(exchange.status, 200);
        assert!(
            exchange.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with(content_type)
        );
        let held = model
            .await_request(|request| request.outcome == Outcome::InProgress, WAIT)
            .await
            .expect("the hang in progress");
        exchange.hang_up();
        let cancelled = model
            .await_request(
                |request| request.seq == held.seq && request.outcome == Outcome::Cancelled,
                WAIT,
            )
            .await
            .expect("the hang recorded as cancelled");
        assert_eq!(cancelled.stream, stream);
    }
}

#[tokio::test]
async fn a_slow_stream_paces_its_pieces_and_a_client_leaving_it_is_recorded_cancelled() {
    let delay = Duration::from_millis(40);
    let model = start(vec![
        Turn::text("slow but whole").paced(3, delay),
        Turn::text("never finished").paced(3, Duration::from_secs(3600)),
    ])
    .await;
    let started = Instant::now();
    let events = openai(model.address(), "/v1/chat/completions", &chat("a", true))
        .await
        .events()
        .await;
    assert!(started.elapsed() >= delay * 3, "{:?}", started.elapsed());
    assert_eq!(events.len(), 6);
    assert_eq!(model.requests()[0].outcome, Outcome::Answered);

    let mut exchange = anthropic(model.address(), &message("b", true)).await;
    let first = exchange.next_data().await.expect("the first event");
    assert!(String::from_utf8_lossy(&first).starts_with("event: message_start"));
    exchange.hang_up();
    let cancelled = model
        .await_request(|request| request.outcome == Outcome::Cancelled, WAIT)
        .await
        .expect("the slow stream recorded as cancelled");
    assert_eq!(cancelled.api, Api::Messages);
}

#[tokio::test]
async fn bad_requests_get_clear_json_errors_and_take_no_turn() {
    let model = FakeModel::start(Config {
        max_body_bytes: 1024,
        ..Config::with_script(Script::new(vec![Turn::text("kept")]))
    })
    .await
    .expect("start");
    let address = model.address();
    let bearer = format!("Bearer {}", ski_mocks::model::DEFAULT_API_KEY);
    let auth = [("authorization", bearer.as_str())];
    let malformed = send(address, "POST", "/v1/chat/completions", &auth, "{nope").await;
    assert_eq!(malformed.status, 400);
    let body = malformed.json().await;
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON"),
        "{body}"
    );
    let no_model = openai(address, "/v1/chat/completions", &json!({"messages": []})).await;
    assert_eq!(no_model.status, 400);
    assert!(
        no_model.json().await["error"]["message"]
            .as_str()
            .unwrap()
            .contains("model")
    );
    let no_max_tokens = anthropic(address, &json!({"model": "m", "messages": []})).await;
    assert_eq!(no_max_tokens.status, 400);
    assert_eq!(
        no_max_tokens.json().await["error"]["type"],
        "invalid_request_error"
    );
    let large = openai(
        address,
        "/v1/chat/completions",
        &chat(&"x".repeat(2000), false),
    )
    .await;
    assert_eq!(large.status, 413);
    assert!(
        large.json().await["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1024")
    );
    let unknown = send(address, "POST", "/v1/embeddings", &auth, "{}").await;
    assert_eq!(unknown.status, 404);
    assert_eq!(model.turns_left(), 1);
    let kept = openai(address, "/v1/chat/completions", &chat("a", false)).await;
    assert_eq!(
        kept.json().await["choices"][0]["message"]["content"],
        "kept"
    );

    let outside = FakeModel::start(Config {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..Config::default()
    })
    .await;
    assert!(matches!(outside, Err(FakeModelError::NotLoopback(_))));
}

#[tokio::test]
async fn the_request_log_keeps_the_newest_requests_within_its_bound() {
    let model = FakeModel::start(Config {
        max_log_bytes: 2000,
        ..Config::default()
    })
    .await
    .expect("start");
    for index in 0..6 {
        let text = format!("{index} {}", "word ".repeat(100));
        openai(model.address(), "/v1/chat/completions", &chat(&text, false))
            .await
            .text()
            .await;
    }
    let requests = model.requests();
    assert!(
        requests.len() < 6 && !requests.is_empty(),
        "{}",
        requests.len()
    );
    assert_eq!(requests.last().unwrap().seq, 6);
    assert_eq!(model.dropped_requests(), 6 - requests.len() as u64);
    model.reset(Script::new(vec![Turn::text("again")]));
    assert!(model.requests().is_empty());
    assert_eq!(model.turns_left(), 1);
}

#[tokio::test]
async fn models_are_listed_in_each_providers_shape() {
    let model = start(Vec::new()).await;
    let address = model.address();
    let bearer = format!("Bearer {}", ski_mocks::model::DEFAULT_API_KEY);
    let listed = send(
        address,
        "GET",
        "/v1/models",
        &[("authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(
        listed.json().await,
        json!({"object": "list", "data": [
            {"id": "ski-fake-model", "object": "model", "created": 0, "owned_by": "ski"}
        ]})
    );
    let key = ski_mocks::model::DEFAULT_API_KEY;
    let listed = send(address, "GET", "/v1/models", &[("x-api-key", key)], "")
        .await
        .json()
        .await;
    assert_eq!(listed["data"][0]["type"], "model");
    assert_eq!(listed["has_more"], false);
    let one = send(
        address,
        "GET",
        "/v1/models/ski-fake-model",
        &[("x-api-key", key)],
        "",
    )
    .await;
    assert_eq!(one.json().await["id"], "ski-fake-model");
    let none = send(
        address,
        "GET",
        "/v1/models/gpt-9",
        &[("x-api-key", key)],
        "",
    )
    .await;
    assert_eq!(none.status, 404);
    assert_eq!(none.json().await["error"]["type"], "not_found_error");
}

#[tokio::test]
async fn a_tool_result_matches_a_turn_and_counting_tokens_takes_none() {
    let model = start(vec![
        Turn::text("saw the result").when_user_says("sunny-from-tool"),
        Turn::text("first"),
    ])
    .await;
    let count = send(
        model.address(),
        "POST",
        "/v1/messages/count_tokens",
        &[("x-api-key", ski_mocks::model::DEFAULT_API_KEY)],
        json!({"model": "m", "messages": [{"role": "user", "content": "three words here"}]})
            .to_string(),
    )
    .await;
    assert_eq!(count.status, 200);
    assert_eq!(count.json().await, json!({"input_tokens": 3}));
    assert_eq!(model.turns_left(), 2);
    let request = json!({"model": "m", "max_tokens": 64, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny-from-tool"}]}
    ]});
    let answer = anthropic(model.address(), &request).await.json().await;
    assert_eq!(answer["content"][0]["text"], "saw the result");
    let chat_request = json!({"model": "m", "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "tool", "tool_call_id": "call_1", "content": "rainy"}
    ]});
    let answer = openai(model.address(), "/v1/chat/completions", &chat_request)
        .await
        .json()
        .await;
    assert_eq!(answer["choices"][0]["message"]["content"], "first");
    let apis: Vec<_> = model.requests().iter().map(|request| request.api).collect();
    assert_eq!(
        apis,
        [Api::CountTokens, Api::Messages, Api::ChatCompletions]
    );
}

#[tokio::test]
async fn an_error_in_the_stream_follows_the_streams_opening_in_each_apis_shape() {
    let overloaded = || Turn::error(ErrorKind::Overloaded, None).in_stream();
    let model = start(vec![overloaded(), overloaded(), overloaded(), overloaded()]).await;
    let address = model.address();

    let events = anthropic(address, &message("a", true)).await.events().await;
    let names: Vec<_> = events
        .iter()
        .map(|(name, _)| name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["message_start", "error"]);
    assert_eq!(
        events[1].1,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );

    let events = openai(address, "/v1/chat/completions", &chat("b", true))
        .await
        .events()
        .await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].1["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(events[1].1["error"]["type"], "server_error");

    let request = json!({"model": "m", "input": "c", "stream": true});
    let events = openai(address, "/v1/responses", &request)
        .await
        .events()
        .await;
    let names: Vec<_> = events
        .iter()
        .map(|(name, _)| name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["response.created", "response.in_progress", "error"]);
    assert_eq!(events[2].1["sequence_number"], 2);

    // A request that does not stream gets the error as its HTTP status.
    let whole = anthropic(address, &message("d", false)).await;
    assert_eq!(whole.status, 529);
    let statuses: Vec<_> = model
        .requests()
        .iter()
        .map(|request| request.status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 529]);
}
