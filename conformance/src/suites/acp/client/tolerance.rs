//! Client rows on what a client sends and what it must tolerate: schema-valid frames, nothing
//! before the initialize answer, exact ids, unknown requests and notifications, requests before
//! the initialize answer, late updates, a -32800 prompt answer, noise among responses, the agent
//! process at the end, capability gating and unknown fields.

use serde_json::{Value, json};

use super::mock::{
    ClientRun, Mock, end_turn_step, method_of, on_prompt, permission_step, raw_update, run_client,
};
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::vocabulary::capability;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "ACP-CORE-028",
            "Runs the client for one turn (with a permission request, and fs/terminal requests \
             when declared) against the mock agent; every frame the client sent, read from the \
             mock's transcript, must decode with the official ACP schema, with protocolVersion 1, \
             an absolute cwd, an mcpServers array and prompt (not content).",
            core_028,
        ),
        Check::new(
            "ACP-CORE-029",
            "The mock answers initialize only after 500 ms; in its transcript the client must \
             send nothing but initialize before that answer, then finish the turn.",
            core_029,
        ),
        Check::new(
            "ACP-CORE-031",
            "The mock sends session/request_permission with the ids \"perm-1\", a UUID and 0 (and \
             fs/read_text_file and terminal/create when declared); each answer of the client must \
             carry its request's id unchanged, with the same JSON type.",
            core_031,
        ),
        Check::new(
            "ACP-CORE-032",
            "The mock sends the request _mock.conformance/unknown during a turn; the client must \
             answer that id with error -32601 and the turn reach its result.",
            core_032,
        ),
        Check::new(
            "ACP-CORE-033",
            "The mock interleaves _kiro.dev/metadata and other unknown notifications and updates of \
             another session with the turn's updates; the client must answer none of them, end the \
             turn end_turn and print no update of the other session as its own.",
            core_033,
        ),
        Check::new(
            "ACP-CORE-034",
            "The mock sends _kiro/auth/getAccessToken before it answers initialize; the client must \
             answer it (result or -32601) and then complete session/new and the turn.",
            core_034,
        ),
        Check::new(
            "ACP-CORE-035",
            "The mock sends a session_info_update with _meta and an agent_message_chunk after the \
             session/prompt result; the client must exit 0 in time and report end_turn.",
            core_035,
        ),
        Check::new(
            "ACP-CORE-036",
            "Runs two turns; the mock answers the first session/prompt with -32800; the client \
             must report it cancelled and send the second prompt on the same session and \
             connection (one initialize, one session/new).",
            core_036,
        ),
        Check::new(
            "ACP-CORE-037",
            "Runs the client twice, with a mock that exits on EOF and one that ignores EOF; the \
             client must close the mock's stdin and, once it exited, no mock process may remain \
             (the stubborn one ended by a signal).",
            core_037,
        ),
        Check::new(
            "ACP-CORE-038",
            "The mock advertises no optional capability; the client runs a turn and then one on a \
             reused session id; the transcript must hold no session/load, list, resume, close, \
             delete, logout or authenticate and no prompt block but text or resource_link.",
            core_038,
        ),
        Check::new(
            "ACP-CORE-039",
            "The mock's results carry _meta, unknown capability fields and legacy models, and the \
             turn sends the unknown kinds turn_end and tool_call_chunk before a known chunk; the \
             client must accept all, print the known chunk and report end_turn.",
            core_039,
        ),
        Check::new(
            "WS-008",
            "While prompts are pending the mock answers unknown ids (999999, \"noise-1\"), repeats \
             its answers and answers late; both turns must end with their own end_turn result, \
             none with the noise's stop reasons.",
            ws_008,
        ),
    ]
}

/// A one-turn run with the `client` command and `prompt`.
async fn one_turn(ctx: &Ctx, mock: &Mock, prompt: &str) -> Result<ClientRun, crate::CheckError> {
    run_client(ctx, "client", mock, &[("prompt", prompt)]).await
}

fn cwd(ctx: &Ctx) -> String {
    ctx.temp_dir()
        .canonicalize()
        .unwrap_or_else(|_| ctx.temp_dir().to_path_buf())
        .display()
        .to_string()
}

async fn core_028(ctx: Ctx) -> CheckResult {
    let dir = cwd(&ctx);
    std::fs::write(format!("{dir}/notes.txt"), "one\ntwo\n")?;
    let mut steps = vec![permission_step("\"perm-28\"")];
    if ctx.has(capability::FS) {
        steps.push(format!(
            "{{ request = \"fs/read_text_file\", params = {{ sessionId = \"${{session}}\", path = {} }} }}",
            super::mock::toml_str(&format!("{dir}/notes.txt"))
        ));
    }
    steps.push(end_turn_step("end_turn"));
    let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
    let mock = Mock::new(&ctx, "mock", &on_prompt(&refs), &[])?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    run.expect_turns(&["end_turn"], "the client completes the turn")?;
    let problems = run.transcript.client_problems();
    ensure!(
        problems.is_empty(),
        "every frame of the client validates against the ACP v1 schema",
        "{}",
        problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let t = &run.transcript;
    let init = t.client_requests("initialize");
    let version = init
        .first()
        .and_then(|v| v.pointer("/params/protocolVersion"));
    ensure_eq!(
        Some(&json!(1)),
        version,
        "initialize.params.protocolVersion"
    );
    let new = t.client_requests("session/new");
    let new = new.first().map(|v| &v["params"]);
    ensure!(
        new.and_then(|p| p.get("cwd"))
            .and_then(Value::as_str)
            .is_some_and(|c| c.starts_with('/')),
        "session/new carries an absolute cwd",
        "{new:?}"
    );
    ensure!(
        new.and_then(|p| p.get("mcpServers"))
            .is_some_and(Value::is_array),
        "session/new carries an mcpServers array",
        "{new:?}"
    );
    let prompts = t.client_requests("session/prompt");
    ensure!(
        prompts
            .iter()
            .all(|p| p.pointer("/params/prompt").is_some_and(Value::is_array)
                && p.pointer("/params/content").is_none()),
        "session/prompt carries prompt (not content)",
        "{prompts:?}"
    );
    Ok(())
}

async fn core_029(ctx: Ctx) -> CheckResult {
    let script = format!(
        "[[on]]\nmethod = \"initialize\"\ndo = [{{ sleep_ms = 500 }}, {{ default = true }}]\n{}",
        on_prompt(&["{ turn = \"ok\" }"])
    );
    let mock = Mock::new(&ctx, "mock", &script, &[])?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    run.expect_turns(&["end_turn"], "the client completes the turn")?;
    let t = &run.transcript;
    let answer = t.lines.iter().position(|l| {
        !l.from_client
            && l.value.as_ref().is_some_and(|v| {
                v.get("result")
                    .and_then(|r| r.get("protocolVersion"))
                    .is_some()
            })
    });
    let Some(answer) = answer else {
        fail!("the mock answered initialize", "{}", t.describe());
    };
    let before: Vec<String> = t.lines[..answer]
        .iter()
        .filter(|l| l.from_client)
        .map(|l| {
            l.value
                .as_ref()
                .and_then(method_of)
                .unwrap_or("(not a request)")
                .to_owned()
        })
        .collect();
    ensure_eq!(
        vec!["initialize".to_owned()],
        before,
        "what the client sends before the initialize response"
    );
    Ok(())
}

async fn core_031(ctx: Ctx) -> CheckResult {
    let dir = cwd(&ctx);
    std::fs::write(format!("{dir}/notes.txt"), "one\n")?;
    let mut steps = vec![
        permission_step("\"perm-1\""),
        permission_step("\"${uuid}\""),
        permission_step("0"),
    ];
    if ctx.has(capability::FS) {
        steps.push(format!(
            "{{ request = \"fs/read_text_file\", id = \"fs-${{uuid}}\", params = {{ sessionId = \"${{session}}\", path = {} }} }}",
            super::mock::toml_str(&format!("{dir}/notes.txt"))
        ));
    }
    if ctx.has(capability::TERMINAL) {
        steps.push(
            "{ request = \"terminal/create\", id = 7, params = { sessionId = \"${session}\", command = \"true\" } }"
                .to_owned(),
        );
        steps.push(
            "{ request = \"terminal/release\", id = \"rel-1\", params = { sessionId = \"${session}\", terminalId = \"${reply.terminalId}\" } }"
                .to_owned(),
        );
    }
    steps.push(end_turn_step("end_turn"));
    let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
    let mock = Mock::new(&ctx, "mock", &on_prompt(&refs), &[])?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    run.expect_turns(&["end_turn"], "the client completes the turn")?;
    let t = &run.transcript;
    let requests: Vec<&Value> = t
        .lines
        .iter()
        .filter(|l| !l.from_client)
        .filter_map(|l| l.value.as_ref())
        .filter(|v| super::mock::is_request(v))
        .collect();
    ensure!(
        requests.len() >= 3,
        "the mock sent its requests",
        "{}",
        t.describe()
    );
    for request in requests {
        let id = &request["id"];
        let answers = t.client_answers(id);
        ensure!(
            answers.len() == 1,
            format!(
                "exactly one answer with the id {id} (same value and JSON type) to {}",
                method_of(request).unwrap_or("?")
            ),
            "{} answer(s); transcript:\n{}",
            answers.len(),
            t.describe()
        );
    }
    Ok(())
}

async fn core_032(ctx: Ctx) -> CheckResult {
    let mock = Mock::new(
        &ctx,
        "mock",
        &on_prompt(&[
            "{ request = \"_mock.conformance/unknown\", id = 32, params = {} }",
            "{ turn = \"after the unknown request\" }",
        ]),
        &[],
    )?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    let answers = run.transcript.client_answers(&json!(32));
    let code = answers
        .first()
        .and_then(|a| a.pointer("/error/code"))
        .cloned();
    ensure_eq!(
        Some(json!(-32601)),
        code,
        "the error code of the client's answer to _mock.conformance/unknown (id 32)"
    );
    run.expect_turns(&["end_turn"], "the turn reaches its session/prompt result")?;
    Ok(())
}

async fn core_033(ctx: Ctx) -> CheckResult {
    let other = json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "subagent text"}});
    let other_line = json!({"jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": "sess-subagent-9", "update": other}})
    .to_string();
    let own = json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "own text"}});
    let script = on_prompt(&[
        "{ notify = \"_kiro.dev/metadata\", params = { sessionId = \"${session}\", contextUsagePercentage = 1.5 } }",
        "{ send = { jsonrpc = \"2.0\", method = \"_mock.conformance/notice\", params = { x = 1 } } }",
        &format!("{{ raw = {} }}", super::mock::toml_str(&other_line)),
        &raw_update(&own),
        "{ notify = \"_kiro.dev/metadata\", params = { sessionId = \"${session}\" } }",
        &format!("{{ raw = {} }}", super::mock::toml_str(&other_line)),
        &end_turn_step("end_turn"),
    ]);
    let mock = Mock::new(&ctx, "mock", &script, &[])?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    run.expect_turns(&["end_turn"], "the client completes the turn")?;
    let t = &run.transcript;
    let prompt_at = t.lines.iter().position(|l| {
        l.from_client && l.value.as_ref().and_then(method_of) == Some("session/prompt")
    });
    let after: Vec<&str> = t.lines[prompt_at.map_or(0, |i| i + 1)..]
        .iter()
        .filter(|l| l.from_client)
        .map(|l| l.text.as_str())
        .collect();
    ensure!(
        after.is_empty(),
        "the client sends nothing in reply to unknown notifications and other sessions' updates",
        "it sent {after:?}"
    );
    let own_session = t
        .client_requests("session/prompt")
        .first()
        .and_then(|p| p.pointer("/params/sessionId"))
        .cloned();
    let updates = run.of_type("session_update");
    let foreign: Vec<&&Value> = updates
        .iter()
        .filter(|u| {
            u.get("sessionId") == own_session.as_ref() && u.to_string().contains("subagent text")
        })
        .collect();
    ensure!(
        foreign.is_empty(),
        "the other session's updates are not reported as the client's own session",
        "{foreign:?}"
    );
    ensure!(
        updates.iter().any(|u| u.to_string().contains("own text")),
        "the client reports its own session's update",
        "{}",
        run.describe()
    );
    Ok(())
}

async fn core_034(ctx: Ctx) -> CheckResult {
    let script = format!(
        "[[on]]\nmethod = \"initialize\"\ndo = [{{ request = \"_kiro/auth/getAccessToken\", id = \"tok-1\", params = {{}}, timeout_ms = 5000 }}, {{ default = true }}]\n{}",
        on_prompt(&["{ turn = \"ok\" }"])
    );
    let mock = Mock::new(&ctx, "mock", &script, &[])?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    let answers = run.transcript.client_answers(&json!("tok-1"));
    let ok = answers.first().is_some_and(|a| {
        a.get("result").is_some() || a.pointer("/error/code") == Some(&json!(-32601))
    });
    ensure!(
        ok,
        "the client answers _kiro/auth/getAccessToken (id \"tok-1\") with a result or -32601",
        "answers {answers:?}; transcript:\n{}",
        run.transcript.describe()
    );
    run.expect_turns(
        &["end_turn"],
        "initialize, session/new and the turn complete",
    )?;
    Ok(())
}

async fn core_035(ctx: Ctx) -> CheckResult {
    let info = json!({"sessionUpdate": "session_info_update", "title": "late",
        "_meta": {"kiro": {"kind": "turn_end"}}});
    let chunk = json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "late chunk"}});
    let script = on_prompt(&[
        "{ update = { sessionUpdate = \"agent_message_chunk\", content = { type = \"text\", text = \"reply\" } } }",
        &end_turn_step("end_turn"),
        &raw_update(&info),
        &raw_update(&chunk),
    ]);
    let mock = Mock::new(&ctx, "mock", &script, &[])?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    run.expect_turns(
        &["end_turn"],
        "the client reports the stop reason of the result",
    )?;
    Ok(())
}

async fn core_036(ctx: Ctx) -> CheckResult {
    let script = "[[on]]\nprompt = \"first\"\ndo = [{ error = { code = -32800, message = \"Request cancelled\" } }]\n\
                  [[on]]\nprompt = \"*\"\ndo = [{ turn = \"second done\" }]\n";
    let mock = Mock::new(&ctx, "mock", script, &[])?;
    let run = run_client(
        &ctx,
        "client_two_turns",
        &mock,
        &[("prompt", "first"), ("prompt2", "second")],
    )
    .await?;
    run.expect_turns(
        &["cancelled", "end_turn"],
        "the -32800 turn ends cancelled and the second turn runs",
    )?;
    let t = &run.transcript;
    let sessions: Vec<Option<&Value>> = t
        .client_requests("session/prompt")
        .iter()
        .map(|p| p.pointer("/params/sessionId"))
        .collect();
    ensure!(
        sessions.len() == 2 && sessions[0] == sessions[1],
        "both prompts on the same session",
        "{sessions:?}"
    );
    ensure_eq!(
        (1, 1),
        (
            t.client_requests("initialize").len(),
            t.client_requests("session/new").len()
        ),
        "initialize and session/new requests (the connection is kept)"
    );
    Ok(())
}

async fn core_037(ctx: Ctx) -> CheckResult {
    for (name, extra) in [
        ("eof", &[][..]),
        ("stubborn", &["--fault", "ignore-eof"][..]),
    ] {
        let mock = Mock::new(&ctx, name, &on_prompt(&["{ turn = \"ok\" }"]), extra)?;
        let run = one_turn(&ctx, &mock, "hello").await?;
        run.expect_turns(&["end_turn"], "the client completes the turn")?;
        let text = std::fs::read_to_string(&mock.transcript).unwrap_or_default();
        let pid = text
            .lines()
            .next()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v.get("pid").and_then(Value::as_u64))
            .and_then(|p| u32::try_from(p).ok());
        let Some(pid) = pid else {
            fail!(
                "the mock agent ran",
                "no start record in {}",
                mock.transcript.display()
            );
        };
        let t = &run.transcript;
        ensure!(
            t.notes.iter().any(|n| n.contains("stdin closed")),
            format!("the client closes the agent's stdin ({name} agent)"),
            "mock notes: {:?}",
            t.notes
        );
        let alive =
            ski::transport::child::process_exists(pid) || ski::transport::child::group_exists(pid);
        ensure!(
            !alive,
            format!("no process of the {name} agent's group remains once the client exited"),
            "the mock agent (pid {pid}) still runs; notes {:?}",
            t.notes
        );
    }
    Ok(())
}

async fn core_038(ctx: Ctx) -> CheckResult {
    let script = format!(
        "[agent]\ncapabilities = {{}}\n{}",
        on_prompt(&["{ turn = \"ok\" }"])
    );
    let mock = Mock::new(&ctx, "mock", &script, &[])?;
    let first = one_turn(&ctx, &mock, "hello").await?;
    first.expect_turns(&["end_turn"], "the client completes a turn")?;
    let second = run_client(
        &ctx,
        "client_resume",
        &mock,
        &[("prompt", "again"), ("session_id", "sess-1")],
    )
    .await?;
    second.expect_turns(
        &["end_turn"],
        "the client completes a turn on the reused session",
    )?;
    const GATED: &[&str] = &[
        "session/load",
        "session/list",
        "session/resume",
        "session/close",
        "session/delete",
        "logout",
        "authenticate",
    ];
    for run in [&first, &second] {
        let called: Vec<String> = run
            .transcript
            .client_methods()
            .into_iter()
            .filter(|m| GATED.contains(&m.as_str()))
            .collect();
        ensure!(
            called.is_empty(),
            "no method whose capability was not advertised",
            "the client called {called:?}"
        );
        let blocks: Vec<String> = run
            .transcript
            .client_requests("session/prompt")
            .iter()
            .filter_map(|p| p.pointer("/params/prompt").and_then(Value::as_array))
            .flatten()
            .filter_map(|b| b.get("type").and_then(Value::as_str))
            .filter(|t| !["text", "resource_link"].contains(t))
            .map(str::to_owned)
            .collect();
        ensure!(
            blocks.is_empty(),
            "no image, audio or embedded resource block without promptCapabilities",
            "prompt blocks {blocks:?}"
        );
    }
    Ok(())
}

async fn core_039(ctx: Ctx) -> CheckResult {
    let script = format!(
        "[agent]\nlegacy_models = true\n\
         capabilities = {{ loadSession = false, futureFlag = true, _meta = {{ vendor = {{ x = 1 }} }}, \
         promptCapabilities = {{ image = false, futureBlock = true, _meta = {{ y = 2 }} }}, \
         mcpCapabilities = {{ http = false, quic = true }} }}\n\
         initialize_result = {{ _meta = {{ vendor = {{ build = \"x\" }} }}, futureTop = {{ a = 1 }} }}\n\
         session_result = {{ _meta = {{ vendor = {{ s = 1 }} }}, futureSession = [1, 2] }}\n{}",
        on_prompt(&[
            &raw_update(
                &json!({"sessionUpdate": "turn_end", "stopReason": "end_turn", "_meta": {"x": 1}})
            ),
            &raw_update(
                &json!({"sessionUpdate": "tool_call_chunk", "toolCallId": "t1", "delta": "{"})
            ),
            &raw_update(&json!({"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "known chunk", "_meta": {"z": 3}}, "_meta": {"w": 4}})),
            "{ respond = { stopReason = \"end_turn\", _meta = { vendor = { t = 1 } } } }",
        ])
    );
    let mock = Mock::new(&ctx, "mock", &script, &[])?;
    let run = one_turn(&ctx, &mock, "hello").await?;
    run.expect_turns(
        &["end_turn"],
        "the client accepts every message and ends the turn",
    )?;
    ensure!(
        run.of_type("session_update")
            .iter()
            .any(|u| u.to_string().contains("known chunk")),
        "the known update after the unknown kinds is reported",
        "{}",
        run.describe()
    );
    let errors: Vec<&Value> = run
        .transcript
        .from_client()
        .into_iter()
        .filter(|v| v.get("error").is_some())
        .collect();
    ensure!(
        errors.is_empty(),
        "the client answers no message of the agent with an error",
        "{errors:?}"
    );
    Ok(())
}

async fn ws_008(ctx: Ctx) -> CheckResult {
    let script = "[[on]]\nmethod = \"session/new\"\ndo = [{ default = true, repeat = 2 }]\n\
        [[on]]\nprompt = \"*\"\ndo = [\n\
          { respond = { stopReason = \"max_tokens\" }, id = 999999 },\n\
          { respond = { stopReason = \"refusal\" }, id = \"noise-1\" },\n\
          { update = { sessionUpdate = \"agent_message_chunk\", content = { type = \"text\", text = \"${prompt}\" } }, delay_ms = 50 },\n\
          { respond = { stopReason = \"end_turn\" }, repeat = 2 },\n\
          { respond = { stopReason = \"max_turn_requests\" }, id = \"${id}\" },\n\
        ]\n";
    let mock = Mock::new(&ctx, "mock", script, &[])?;
    let run = run_client(
        &ctx,
        "client_two_turns",
        &mock,
        &[("prompt", "first"), ("prompt2", "second")],
    )
    .await?;
    run.expect_turns(
        &["end_turn", "end_turn"],
        "each prompt ends with its own result despite unknown-id, duplicate and late answers",
    )?;
    ensure_eq!(
        2,
        run.transcript.client_requests("session/prompt").len(),
        "prompts sent (the request after the noise goes out and succeeds)"
    );
    Ok(())
}
