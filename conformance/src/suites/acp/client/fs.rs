//! Client rows on the file system methods (E-ACP-43): `fs/read_text_file` by path, line and
//! limit with -32602 for bad params, `fs/write_text_file` with -32603 for a failed write, and
//! neither reaching outside the session's working directory (ACP-CORE-047).

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use super::mock::{ClientRun, Mock, end_turn_step, on_prompt, run_client, toml_str};
use crate::check::{Check, CheckError, CheckResult};
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
        Check::new(
            "ACP-CORE-047",
            "The mock asks the client to read a file outside the session's cwd by its absolute \
             path and by a path that leaves the cwd through `..`, and to write a new file beside \
             it; each request must be answered with an error, no answer may carry the file's \
             content, and nothing may be written.",
            core_047,
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

/// `target` as reached from `dir` through `..`: up to the root, then down to it.
fn through_parents(dir: &Path, target: &Path) -> String {
    let mut path = dir.to_path_buf();
    for _ in dir
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
    {
        path.push("..");
    }
    path.push(target.strip_prefix("/").unwrap_or(target));
    path.display().to_string()
}

/// The directories the client gave its session (`cwd` and `additionalDirectories` of its first
/// `session/new`), as it sent them.
fn session_roots(run: &ClientRun) -> Vec<PathBuf> {
    let Some(params) = run
        .transcript
        .client_requests("session/new")
        .first()
        .and_then(|r| r.get("params"))
    else {
        return Vec::new();
    };
    let extra = params
        .get("additionalDirectories")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    std::iter::once(params.get("cwd"))
        .flatten()
        .chain(extra)
        .filter_map(Value::as_str)
        .map(PathBuf::from)
        .collect()
}

async fn core_047(ctx: Ctx) -> CheckResult {
    let cwd = dir(&ctx);
    let outside = tempfile::Builder::new()
        .prefix("ski-conformance-outside-")
        .tempdir()
        .map_err(|e| {
            CheckError::Harness(format!("cannot create a directory outside the cwd: {e}"))
        })?;
    let outside_dir = outside.path().canonicalize()?;
    let secret_path = outside_dir.join("secret.txt");
    let secret = format!("not for the agent: {}", outside_dir.display());
    std::fs::write(&secret_path, &secret)?;
    let written = outside_dir.join("written-by-the-agent.txt");
    let by_parents = through_parents(Path::new(&cwd), &secret_path);
    let run = turn(
        &ctx,
        &[
            request(
                "fs/read_text_file",
                &format!("path = {}", toml_str(&secret_path.display().to_string())),
            ),
            request(
                "fs/read_text_file",
                &format!("path = {}", toml_str(&by_parents)),
            ),
            request(
                "fs/write_text_file",
                &format!(
                    "path = {}, content = \"written outside the cwd\\n\"",
                    toml_str(&written.display().to_string())
                ),
            ),
        ],
    )
    .await?;
    let roots = session_roots(&run);
    if let Some(root) = roots.iter().find(|root| {
        root.canonicalize()
            .is_ok_and(|root| outside_dir.starts_with(root))
    }) {
        return Err(CheckError::Skip(format!(
            "the client gave its session {} as a directory, which holds {}: no path outside \
             the session's directories was asked for",
            root.display(),
            outside_dir.display()
        )));
    }
    let reads = answers(&run, "fs/read_text_file", 2)?;
    for (answer, how) in reads.iter().zip(["by its absolute path", "through `..`"]) {
        ensure!(
            answer.get("error").is_some() && !answer.to_string().contains(&secret),
            format!("a read of a file outside the session's cwd {how} is answered with an error"),
            "{answer}"
        );
    }
    let writes = answers(&run, "fs/write_text_file", 1)?;
    ensure!(
        writes[0].get("error").is_some(),
        "a write of a new file outside the session's cwd is answered with an error",
        "{}",
        writes[0]
    );
    ensure!(
        !written.exists(),
        "the write outside the session's cwd creates nothing",
        "{} exists",
        written.display()
    );
    Ok(())
}
