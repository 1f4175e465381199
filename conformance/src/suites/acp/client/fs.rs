//! Client rows on the file system methods (E-ACP-43): `fs/read_text_file` by path, line and
//! limit with -32602 for bad params, and `fs/write_text_file` with -32603 for a failed write.

use serde_json::{Value, json};

use super::mock::{ClientRun, Mock, end_turn_step, on_prompt, run_client, toml_str};
use crate::check::{Check, CheckResult};
use crate::context::Ctx;
use crate::{ensure, ensure_eq, fail};

/// The checks of this module.
pub fn checks() -> Vec<Check> {
    vec![
        Check::new(
            "WS-033",
            "The mock asks the client to read a five-line file in the session's cwd whole, from \
             line 2 with limit 2, and by a relative path; the contents must be the whole file and \
             lines 2 and 3, and the relative path must get -32602.",
            ws_033,
        ),
        Check::new(
            "WS-034",
            "The mock asks the client to write a new file in the session's cwd and to write to a \
             path that is a directory; the first must answer a result and create the file with \
             that content, the second -32603.",
            ws_034,
        ),
    ]
}

fn dir(ctx: &Ctx) -> String {
    ctx.temp_dir()
        .canonicalize()
        .unwrap_or_else(|_| ctx.temp_dir().to_path_buf())
        .display()
        .to_string()
}

/// A request step of `method` with `params` (TOML inline members after sessionId).
fn request(method: &str, params: &str) -> String {
    format!(
        "{{ request = \"{method}\", params = {{ sessionId = \"${{session}}\", {params} }}, timeout_ms = 15000 }}"
    )
}

async fn turn(ctx: &Ctx, steps: &[String]) -> Result<ClientRun, crate::CheckError> {
    let mut steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let end = end_turn_step("end_turn");
    steps.push(&end);
    let mock = Mock::new(ctx, "mock", &on_prompt(&steps), &[])?;
    let run = run_client(ctx, "client", &mock, &[("prompt", "files")]).await?;
    run.expect_turns(&["end_turn"], "the client completes the turn")?;
    Ok(run)
}

/// The client's answers to the mock's `method` requests, in order; a missing one fails.
fn answers(run: &ClientRun, method: &str, count: usize) -> Result<Vec<Value>, crate::CheckError> {
    let found = run.transcript.answers_to(method);
    let answers: Vec<Value> = found.iter().filter_map(|(_, a)| a.cloned()).collect();
    if answers.len() != count {
        fail!(
            format!("the client answers all {count} {method} requests"),
            "{} answer(s); transcript:\n{}",
            answers.len(),
            run.transcript.describe()
        );
    }
    Ok(answers)
}

fn error_code(answer: &Value) -> Option<i64> {
    answer.pointer("/error/code").and_then(Value::as_i64)
}

async fn ws_033(ctx: Ctx) -> CheckResult {
    let dir = dir(&ctx);
    let path = format!("{dir}/five.txt");
    std::fs::write(&path, "l1\nl2\nl3\nl4\nl5\n")?;
    let run = turn(
        &ctx,
        &[
            request("fs/read_text_file", &format!("path = {}", toml_str(&path))),
            request(
                "fs/read_text_file",
                &format!("path = {}, line = 2, limit = 2", toml_str(&path)),
            ),
            request("fs/read_text_file", "path = \"five.txt\""),
        ],
    )
    .await?;
    let answers = answers(&run, "fs/read_text_file", 3)?;
    ensure_eq!(
        Some(&json!("l1\nl2\nl3\nl4\nl5\n")),
        answers[0].pointer("/result/content"),
        "the content of the whole five-line file"
    );
    let part = answers[1]
        .pointer("/result/content")
        .and_then(Value::as_str)
        .map(|c| c.trim_end_matches('\n').to_owned());
    ensure_eq!(
        Some("l2\nl3".to_owned()),
        part,
        "the content from line 2 with limit 2 (a final newline aside)"
    );
    ensure_eq!(
        Some(-32602),
        error_code(&answers[2]),
        "the error code for a relative path"
    );
    Ok(())
}

async fn ws_034(ctx: Ctx) -> CheckResult {
    let dir = dir(&ctx);
    let path = format!("{dir}/written.txt");
    let sub = format!("{dir}/a-directory");
    std::fs::create_dir_all(&sub)?;
    let run = turn(
        &ctx,
        &[
            request(
                "fs/write_text_file",
                &format!(
                    "path = {}, content = \"written by the agent\\n\"",
                    toml_str(&path)
                ),
            ),
            request(
                "fs/write_text_file",
                &format!("path = {}, content = \"x\"", toml_str(&sub)),
            ),
        ],
    )
    .await?;
    let answers = answers(&run, "fs/write_text_file", 2)?;
    ensure!(
        answers[0].get("result").is_some_and(Value::is_object),
        "a result for the write of a new file",
        "{}",
        answers[0]
    );
    let written = std::fs::read_to_string(&path).ok();
    ensure_eq!(
        Some("written by the agent\n".to_owned()),
        written,
        "the new file's content on disk"
    );
    ensure_eq!(
        Some(-32603),
        error_code(&answers[1]),
        "the error code for a write to a path that is a directory"
    );
    Ok(())
}
