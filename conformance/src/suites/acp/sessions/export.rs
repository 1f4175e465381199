//! Exporting a session: `session/export` as JSONL (a header line, then the messages).

use serde_json::{Value, json};

use super::super::agent::PLAIN;
use super::super::connection;
use super::super::exchange::{expect_error, open, prompt_ok};
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub(super) fn checks() -> Vec<Check> {
    vec![Check::new(
        "WS-063a",
        "After a prompt turn, exports the session as jsonl: application/x-ndjson, a session \
         header line, user and assistant message lines, a final newline; format xml answers \
         -32602.",
        ws_063a,
    )]
}

async fn ws_063a(ctx: Ctx) -> CheckResult {
    let mut opened = open(&ctx, PLAIN).await?;
    let text = "export this conversation";
    prompt_ok(&mut opened.conn, &opened.session, text).await?;
    let result = opened
        .conn
        .call_ok(
            "session/export",
            json!({"sessionId": opened.session, "format": "jsonl"}),
        )
        .await?;
    ensure_eq!(
        Some(json!("application/x-ndjson")),
        result.get("mimeType").cloned(),
        "the export's mimeType"
    );
    let content = result
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    ensure!(
        content.ends_with('\n'),
        "the JSONL content ends with a newline",
        "{}",
        connection::clip(&content, 300)
    );
    let mut lines = Vec::new();
    for line in content.lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(value) if value.is_object() => lines.push(value),
            _ => fail!("every JSONL line is a JSON object", "line {line:?}"),
        }
    }
    let Some(header) = lines.first() else {
        fail!("a header line", "empty content");
    };
    ensure_eq!(
        Some(json!("session")),
        header.get("type").cloned(),
        "the header's type"
    );
    ensure_eq!(
        Some(json!(1)),
        header.get("version").cloned(),
        "the header's version"
    );
    ensure_eq!(
        Some(json!(opened.session)),
        header.get("id").cloned(),
        "the header's id"
    );
    ensure_eq!(
        Some(json!(ctx.temp_dir().display().to_string())),
        header.get("cwd").cloned(),
        "the header's cwd"
    );
    ensure!(
        header.get("timestamp").is_some_and(Value::is_string),
        "the header has a string timestamp",
        "{header}"
    );
    let role = |r: &'static str| {
        lines
            .iter()
            .skip(1)
            .filter(move |l| l.pointer("/message/role") == Some(&json!(r)))
    };
    ensure!(
        role("user").any(|l| l
            .pointer("/message/content")
            .is_some_and(|c| c.to_string().contains(text))),
        "a user message line containing the prompt",
        "{}",
        connection::clip(&content, 400)
    );
    ensure!(
        role("assistant").next().is_some(),
        "an assistant message line",
        "{}",
        connection::clip(&content, 400)
    );
    let reply = opened
        .conn
        .call(
            "session/export",
            json!({"sessionId": opened.session, "format": "xml"}),
        )
        .await?;
    expect_error(
        &reply,
        &[-32602],
        "an export format other than jsonl answers -32602",
    )?;
    Ok(())
}
