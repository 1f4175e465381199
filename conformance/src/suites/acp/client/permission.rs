//! Client rows on `session/request_permission`: an answer on the same id, the `outcome`
//! structure of E-ACP-24, and `cancelled` for a request pending when the turn is cancelled.

use serde_json::{Value, json};

use super::mock::{Mock, end_turn_step, on_prompt, permission_step, run_client, run_drive};
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-022",
            "The mock sends session/request_permission (id \"perm-22\") during a turn; the client, \
             set to allow, must answer with a result (not an error) holding an outcome on that same \
             id, and the turn end end_turn.",
            ws_022,
        ),
        Check::new(
            "WS-037",
            "The mock sends session/request_permission; the client's answer must be \
             {outcome: {outcome: \"selected\", optionId}} naming an offered allow option (the \
             client is set to allow), decode with the official schema, and carry no allow, \
             message or granted member.",
            ws_037,
        ),
        Check::new(
            "ACP-CORE-030",
            "Through the driver (permission decision hold): the mock asks for permission during a \
             turn; the driver cancels the turn; the client must send session/cancel and answer \
             the pending request {\"outcome\":{\"outcome\":\"cancelled\"}}.",
            core_030,
        ),
    ]
}

/// One turn with one permission request of `id`; the client's answer.
async fn ask_once(
    ctx: &Ctx,
    id: &str,
) -> Result<(super::mock::ClientRun, Value), crate::CheckError> {
    let mock = Mock::new(
        ctx,
        "mock",
        &on_prompt(&[&permission_step(id), &end_turn_step("end_turn")]),
        &[],
    )?;
    let run = run_client(ctx, "client", &mock, &[("prompt", "hello")]).await?;
    let answers = run.transcript.answers_to("session/request_permission");
    let answer = answers.first().and_then(|(_, a)| a.cloned());
    let Some(answer) = answer else {
        fail!(
            "the client answers session/request_permission",
            "no answer; {}\ntranscript:\n{}",
            run.describe(),
            run.transcript.describe()
        );
    };
    Ok((run, answer))
}

async fn ws_022(ctx: Ctx) -> CheckResult {
    let (run, answer) = ask_once(&ctx, "\"perm-22\"").await?;
    ensure_eq!(
        Some(&json!("perm-22")),
        answer.get("id"),
        "the id of the answer"
    );
    ensure!(
        answer.get("result").is_some_and(Value::is_object) && answer.get("error").is_none(),
        "a JSON-RPC result on the request's id",
        "{answer}"
    );
    ensure!(
        answer
            .pointer("/result/outcome")
            .is_some_and(Value::is_object),
        "the result carries the permission decision (an outcome object)",
        "{answer}"
    );
    run.expect_turns(&["end_turn"], "the turn goes on after the decision")?;
    Ok(())
}

async fn ws_037(ctx: Ctx) -> CheckResult {
    let (_, answer) = ask_once(&ctx, "7").await?;
    let result = answer.get("result").cloned().unwrap_or(Value::Null);
    let legacy: Vec<&str> = ["allow", "message", "granted", "approved"]
        .into_iter()
        .filter(|k| result.get(*k).is_some())
        .collect();
    ensure!(
        legacy.is_empty(),
        "no allow/message structure in the permission result",
        "result {result} carries {legacy:?}"
    );
    ensure_eq!(
        Some(&json!("selected")),
        result.pointer("/outcome/outcome"),
        "result.outcome.outcome of an allowing client"
    );
    let option = result.pointer("/outcome/optionId").and_then(Value::as_str);
    ensure!(
        option.is_some_and(|o| ["opt-allow", "opt-always"].contains(&o)),
        "result.outcome.optionId names an offered allow option (opt-allow or opt-always)",
        "result {result}"
    );
    if let Err(error) = serde_json::from_value::<
        agent_client_protocol_schema::v1::RequestPermissionResponse,
    >(result.clone())
    {
        fail!(
            "the result decodes as the official RequestPermissionResponse",
            "{error}: {result}"
        );
    }
    Ok(())
}

async fn core_030(ctx: Ctx) -> CheckResult {
    let mock = Mock::new(
        &ctx,
        "mock",
        &on_prompt(&[&permission_step("\"perm-30\""), &end_turn_step("cancelled")]),
        &[],
    )?;
    let steps = json!([
        {"op": "initialize"},
        {"op": "new_session"},
        {"op": "prompt", "text": "hold", "wait": false},
        {"op": "wait_permission", "count": 1},
        {"op": "cancel"},
        {"op": "await"},
    ]);
    let run = run_drive(&ctx, &mock, &steps).await?;
    let t = &run.transcript;
    let methods = t.client_methods();
    ensure!(
        methods.iter().any(|m| m == "session/cancel"),
        "the client sends session/cancel",
        "client methods {methods:?}"
    );
    let answers = t.client_answers(&json!("perm-30"));
    let result = answers.first().and_then(|a| a.get("result")).cloned();
    ensure_eq!(
        Some(json!({"outcome": {"outcome": "cancelled"}})),
        result,
        "the answer to the pending permission request (id \"perm-30\")"
    );
    Ok(())
}
