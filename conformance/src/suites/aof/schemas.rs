//! TASK-057 scenarios on message validation (AOF-057-01 to AOF-057-20): envelopes and bare
//! payloads through `validate --kind K`, judged by the report's `valid`, `type`, `value` and
//! each error's `path` and `kind` (E-AOF-07), and by the exit code.

use serde_json::{Value, json};

use super::adapter::Adapter;
use super::expect::{self, OUTCOMES};
use super::message::{self, TASK_1, TASK_2};
use crate::{Check, CheckError, CheckResult, Ctx, Failure, ensure_eq};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "AOF-057-01",
            "Validates a complete completion.report envelope; expects valid, type completion.report, \
             known, and every envelope field echoed in the typed value.",
            aof_057_01,
        ),
        Check::new(
            "AOF-057-02",
            "Validates four status.update envelopes, each carrying only one of status, progress, \
             blockers and notes; expects each valid and typed status.update.",
            aof_057_02,
        ),
        Check::new(
            "AOF-057-03",
            "Validates a handoff.request envelope with parentTaskId and acceptanceCriteria; expects \
             valid, typed handoff.request, both fields kept.",
            aof_057_03,
        ),
        Check::new(
            "AOF-057-04",
            "Validates handoff.accepted and handoff.rejected envelopes with and without a reason; \
             expects each valid and typed after its type.",
            aof_057_04,
        ),
        Check::new(
            "AOF-057-05",
            "Validates an envelope with protocol \"custom\"; expects invalid (exit 2) with an \
             invalid_literal error at protocol.",
            aof_057_05,
        ),
        Check::new(
            "AOF-057-06",
            "Validates an envelope with version 2; expects invalid with an unsupported_version error \
             at version.",
            aof_057_06,
        ),
        Check::new(
            "AOF-057-07",
            "Validates an envelope without taskId; expects invalid with a missing error at taskId.",
            aof_057_07,
        ),
        Check::new(
            "AOF-057-08",
            "Validates an envelope with taskId \"invalid-format\"; expects invalid with an \
             invalid_task_id error at taskId.",
            aof_057_08,
        ),
        Check::new(
            "AOF-057-09",
            "Validates an envelope with sentAt \"not-a-timestamp\"; expects invalid with an \
             invalid_datetime error at sentAt.",
            aof_057_09,
        ),
        Check::new(
            "AOF-057-10",
            "Validates a bare CompletionReportPayload with outcome done; expects valid with the \
             outcome kept.",
            aof_057_10,
        ),
        Check::new(
            "AOF-057-10b",
            "Validates a CompletionReportPayload for each of done, blocked, needs_review and partial; \
             expects all four valid.",
            aof_057_10b,
        ),
        Check::new(
            "AOF-057-11",
            "Validates a CompletionReportPayload with outcome \"in-progress\"; expects invalid with an \
             invalid_enum error at outcome.",
            aof_057_11,
        ),
        Check::new(
            "AOF-057-12",
            "Validates a TestReport 10/8/2; expects valid with the counts kept, and 10/8/3 (passed + \
             failed over total) invalid with an inconsistent error.",
            aof_057_12,
        ),
        Check::new(
            "AOF-057-13",
            "Validates a TestReport with failed -1; expects invalid with a negative error at failed.",
            aof_057_13,
        ),
        Check::new(
            "AOF-057-14",
            "Validates a CompletionReportPayload without deliverables; expects valid with \
             deliverables [] in the value.",
            aof_057_14,
        ),
        Check::new(
            "AOF-057-15",
            "Validates a StatusUpdatePayload with only taskId and agentId; expects invalid with a \
             no_update_field error.",
            aof_057_15,
        ),
        Check::new(
            "AOF-057-16",
            "Validates a StatusUpdatePayload with only progress; expects valid without a status.",
            aof_057_16,
        ),
        Check::new(
            "AOF-057-17",
            "Validates a StatusUpdatePayload with two blockers; expects valid with blockers kept as \
             the same array of strings, and a non-string blocker rejected.",
            aof_057_17,
        ),
        Check::new(
            "AOF-057-18",
            "Validates a HandoffRequestPayload with every field of the scenario; expects valid with \
             every field kept.",
            aof_057_18,
        ),
        Check::new(
            "AOF-057-19",
            "Validates a HandoffRequestPayload with only the required fields; expects valid with \
             acceptanceCriteria, expectedOutputs, contextRefs and constraints defaulting to [].",
            aof_057_19,
        ),
        Check::new(
            "AOF-057-20",
            "Validates a HandoffRequestPayload with dueBy \"tomorrow\"; expects invalid with an \
             invalid_datetime error at dueBy.",
            aof_057_20,
        ),
    ]
}

/// Validates `value` as `kind`.
async fn validate(
    ctx: &Ctx,
    kind: &str,
    value: &Value,
) -> Result<super::adapter::Output, CheckError> {
    Adapter::new(ctx)?.validate(kind, &value.to_string()).await
}

/// A valid envelope of `kind`: the report names the type as known and the value keeps every
/// envelope field of `sent`. Returns the value.
async fn valid_envelope(ctx: &Ctx, sent: &Value) -> Result<Value, CheckError> {
    let output = validate(ctx, "envelope", sent).await?;
    let report = expect::valid(&output)?;
    let kind = &sent["type"];
    ensure_eq!(*kind, report["type"], "the envelope's type");
    ensure_eq!(json!(true), report["known"], "{kind} is a known type");
    let value = expect::valid_value(&output)?;
    for field in [
        "protocol",
        "version",
        "type",
        "taskId",
        "fromAgent",
        "toAgent",
        "sentAt",
    ] {
        expect::value_at(&value, field, &sent[field])?;
    }
    if !value["payload"].is_object() {
        return Err(Failure::new("the envelope has its payload", "payload: {…}")
            .actual(format!("payload: {}", value["payload"]))
            .into());
    }
    Ok(value)
}

async fn aof_057_01(ctx: Ctx) -> CheckResult {
    let sent = message::completion_report(TASK_1, "done");
    let value = valid_envelope(&ctx, &sent).await?;
    for field in ["outcome", "summaryRef", "tests", "notes", "deliverables"] {
        expect::value_at(&value, &format!("payload.{field}"), &sent["payload"][field])?;
    }
    Ok(())
}

async fn aof_057_02(ctx: Ctx) -> CheckResult {
    for fields in [
        json!({"status": "blocked"}),
        json!({"progress": "50% complete"}),
        json!({"blockers": ["API key needed"]}),
        json!({"notes": "on track"}),
    ] {
        let sent = message::status_update(TASK_1, fields.clone());
        let value = valid_envelope(&ctx, &sent).await?;
        for (key, field) in fields.as_object().into_iter().flatten() {
            expect::value_at(&value, &format!("payload.{key}"), field)?;
        }
    }
    Ok(())
}

async fn aof_057_03(ctx: Ctx) -> CheckResult {
    let sent = message::handoff_request(TASK_2, TASK_1);
    let value = valid_envelope(&ctx, &sent).await?;
    expect::value_at(&value, "payload.parentTaskId", &json!(TASK_1))?;
    expect::value_at(
        &value,
        "payload.acceptanceCriteria",
        &sent["payload"]["acceptanceCriteria"],
    )?;
    Ok(())
}

async fn aof_057_04(ctx: Ctx) -> CheckResult {
    for (accepted, reason) in [
        (true, None),
        (true, Some("Context is enough")),
        (false, None),
        (false, Some("Insufficient context")),
    ] {
        let sent = message::handoff_ack(TASK_2, accepted, reason);
        let value = valid_envelope(&ctx, &sent).await?;
        expect::value_at(&value, "payload.taskId", &json!(TASK_2))?;
        if let Some(reason) = reason {
            expect::value_at(&value, "payload.reason", &json!(reason))?;
        }
    }
    Ok(())
}

/// An envelope changed at `path` to `value` is invalid with an error of `kind` at `path`.
async fn invalid_envelope(ctx: &Ctx, sent: Value, path: &str, kind: &str) -> CheckResult {
    let output = validate(ctx, "envelope", &sent).await?;
    expect::invalid(&output, path, kind)?;
    Ok(())
}

async fn aof_057_05(ctx: Ctx) -> CheckResult {
    let sent = message::set(
        message::completion_report(TASK_1, "done"),
        "protocol",
        json!("custom"),
    );
    invalid_envelope(&ctx, sent, "protocol", "invalid_literal").await
}

async fn aof_057_06(ctx: Ctx) -> CheckResult {
    let sent = message::set(
        message::completion_report(TASK_1, "done"),
        "version",
        json!(2),
    );
    invalid_envelope(&ctx, sent, "version", "unsupported_version").await
}

async fn aof_057_07(ctx: Ctx) -> CheckResult {
    let sent = message::without(message::completion_report(TASK_1, "done"), "taskId");
    invalid_envelope(&ctx, sent, "taskId", "missing").await
}

async fn aof_057_08(ctx: Ctx) -> CheckResult {
    let sent = message::set(
        message::completion_report(TASK_1, "done"),
        "taskId",
        json!("invalid-format"),
    );
    invalid_envelope(&ctx, sent, "taskId", "invalid_task_id").await
}

async fn aof_057_09(ctx: Ctx) -> CheckResult {
    let sent = message::set(
        message::completion_report(TASK_1, "done"),
        "sentAt",
        json!("not-a-timestamp"),
    );
    invalid_envelope(&ctx, sent, "sentAt", "invalid_datetime").await
}

/// A bare completion payload with `outcome` is valid and keeps the outcome.
async fn valid_outcome(ctx: &Ctx, outcome: &str) -> CheckResult {
    let output = validate(ctx, "completion-report", &message::completion(outcome)).await?;
    let value = expect::valid_value(&output)?;
    expect::value_at(&value, "outcome", &json!(outcome))
}

async fn aof_057_10(ctx: Ctx) -> CheckResult {
    valid_outcome(&ctx, "done").await
}

async fn aof_057_10b(ctx: Ctx) -> CheckResult {
    for outcome in OUTCOMES {
        valid_outcome(&ctx, outcome).await?;
    }
    Ok(())
}

async fn aof_057_11(ctx: Ctx) -> CheckResult {
    let sent = message::set(message::completion("done"), "outcome", json!("in-progress"));
    let output = validate(&ctx, "completion-report", &sent).await?;
    expect::invalid(&output, "outcome", "invalid_enum")?;
    Ok(())
}

async fn aof_057_12(ctx: Ctx) -> CheckResult {
    let counts = json!({"total": 10, "passed": 8, "failed": 2});
    let output = validate(&ctx, "test-report", &counts).await?;
    let value = expect::valid_value(&output)?;
    ensure_eq!(counts, value, "the validated test report");
    let over = json!({"total": 10, "passed": 8, "failed": 3});
    let output = validate(&ctx, "test-report", &over).await?;
    expect::invalid_kind(&output, "inconsistent")?;
    Ok(())
}

async fn aof_057_13(ctx: Ctx) -> CheckResult {
    let sent = json!({"total": 10, "passed": 8, "failed": -1});
    let output = validate(&ctx, "test-report", &sent).await?;
    expect::invalid(&output, "failed", "negative")?;
    Ok(())
}

async fn aof_057_14(ctx: Ctx) -> CheckResult {
    let sent = message::without(message::completion("done"), "deliverables");
    let output = validate(&ctx, "completion-report", &sent).await?;
    let value = expect::valid_value(&output)?;
    expect::value_at(&value, "deliverables", &json!([]))
}

async fn aof_057_15(ctx: Ctx) -> CheckResult {
    let sent = message::status(TASK_1, json!({}));
    let output = validate(&ctx, "status-update", &sent).await?;
    expect::invalid_kind(&output, "no_update_field")?;
    Ok(())
}

async fn aof_057_16(ctx: Ctx) -> CheckResult {
    let sent = message::status(TASK_1, json!({"progress": "50% complete"}));
    let output = validate(&ctx, "status-update", &sent).await?;
    let value = expect::valid_value(&output)?;
    expect::value_at(&value, "progress", &json!("50% complete"))?;
    if value.get("status").is_some_and(|s| !s.is_null()) {
        return Err(
            Failure::new("no status is invented", "no status in the value")
                .actual(format!("status: {}", value["status"]))
                .into(),
        );
    }
    Ok(())
}

async fn aof_057_17(ctx: Ctx) -> CheckResult {
    let blockers = json!(["API key needed", "Dependency not ready"]);
    let sent = message::status(TASK_1, json!({"blockers": blockers}));
    let output = validate(&ctx, "status-update", &sent).await?;
    let value = expect::valid_value(&output)?;
    expect::value_at(&value, "blockers", &blockers)?;
    let not_strings = message::status(TASK_1, json!({"blockers": ["API key needed", 7]}));
    let output = validate(&ctx, "status-update", &not_strings).await?;
    expect::invalid(&output, "blockers.1", "invalid_type")?;
    Ok(())
}

async fn aof_057_18(ctx: Ctx) -> CheckResult {
    let sent = message::handoff_full(TASK_2, TASK_1);
    let output = validate(&ctx, "handoff-request", &sent).await?;
    let value = expect::valid_value(&output)?;
    ensure_eq!(sent, value, "the validated handoff request");
    Ok(())
}

async fn aof_057_19(ctx: Ctx) -> CheckResult {
    let sent = message::handoff_minimal(TASK_2, TASK_1);
    let output = validate(&ctx, "handoff-request", &sent).await?;
    let value = expect::valid_value(&output)?;
    for list in [
        "acceptanceCriteria",
        "expectedOutputs",
        "contextRefs",
        "constraints",
    ] {
        expect::value_at(&value, list, &json!([]))?;
    }
    Ok(())
}

async fn aof_057_20(ctx: Ctx) -> CheckResult {
    let sent = message::set(
        message::handoff_minimal(TASK_2, TASK_1),
        "dueBy",
        json!("tomorrow"),
    );
    let output = validate(&ctx, "handoff-request", &sent).await?;
    expect::invalid(&output, "dueBy", "invalid_datetime")?;
    Ok(())
}
