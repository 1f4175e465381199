//! `ski aof batch`: many adapter commands in one process, for suites that would otherwise start
//! one process per call. Each stdin line is a request `{"args": ["task", "show", …], "stdin":
//! "…"}` (stdin optional); each gets exactly one compact line `{"code": n, "stdout": "…",
//! "stderr": "…"}` with what the same command run alone would have printed and its exit code. A
//! line that is not JSON, or not UTF-8 text, gets code 2 and the batch goes on.

use std::io::{BufRead, Cursor, Write};

use anyhow::{Context, anyhow};
use clap::Parser;
use serde::Deserialize;
use serde_json::json;

use super::{AofCommand, Io, execute};
use crate::exit::{CommandError, CommandResult};

/// One request line.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    /// The command and its arguments, as they would follow `ski aof`.
    args: Vec<String>,
    /// What the command reads on stdin (nothing when absent).
    #[serde(default)]
    stdin: Option<String>,
}

/// The command line of one request.
#[derive(Debug, Parser)]
#[command(name = "ski aof", no_binary_name = true)]
struct Line {
    #[command(subcommand)]
    command: AofCommand,
}

/// What one request printed and how it ended.
struct Answer {
    code: u8,
    stdout: String,
    stderr: String,
}

/// Runs one request line to its answer; a malformed line is answered with code 2.
fn answer(line: &str) -> Answer {
    let request: Request = match serde_json::from_str(line) {
        Ok(request) => request,
        Err(error) => {
            return Answer {
                code: 2,
                stdout: String::new(),
                stderr: format!(
                    "error: a batch line must be {{\"args\": [...], \"stdin\"?: \"...\"}}: {error}\n"
                ),
            };
        }
    };
    let parsed = match Line::try_parse_from(&request.args) {
        Ok(parsed) => parsed,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let text = error.render().to_string();
            let (stdout, stderr) = if code == 0 {
                (text, String::new())
            } else {
                (String::new(), text)
            };
            return Answer {
                code,
                stdout,
                stderr,
            };
        }
    };
    let mut input = Cursor::new(request.stdin.unwrap_or_default().into_bytes());
    let mut output: Vec<u8> = Vec::new();
    let result = execute(
        &mut Io {
            input: &mut input,
            output: &mut output,
        },
        parsed.command,
    );
    let stdout = String::from_utf8_lossy(&output).into_owned();
    match result {
        Ok(()) => Answer {
            code: 0,
            stdout,
            stderr: String::new(),
        },
        Err(error) => Answer {
            code: error.class.code(),
            stdout,
            stderr: format!("error: {:#}\n", error.error),
        },
    }
}

/// The answer to a line that is not UTF-8 text: refused like malformed JSON, and the batch goes on.
fn not_utf8(error: &std::str::Utf8Error) -> Answer {
    Answer {
        code: 2,
        stdout: String::new(),
        stderr: format!("error: a batch line must be UTF-8 text: {error}\n"),
    }
}

/// Answers every request line of `input` on `output`, in order, until `input` ends.
pub(super) fn serve(mut input: impl BufRead, mut output: impl Write) -> CommandResult {
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        let read = input
            .read_until(b'\n', &mut bytes)
            .context("cannot read stdin")
            .map_err(CommandError::invalid_input)?;
        if read == 0 {
            return Ok(());
        }
        let answer = match std::str::from_utf8(&bytes) {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => answer(line.trim_end_matches(['\n', '\r'])),
            Err(error) => not_utf8(&error),
        };
        let printed = json!({
            "code": answer.code,
            "stdout": answer.stdout,
            "stderr": answer.stderr,
        });
        writeln!(output, "{printed}")
            .and_then(|()| output.flush())
            .map_err(|error| CommandError::internal(anyhow!(error).context("writing to stdout")))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_text(text: &str) -> Vec<serde_json::Value> {
        let mut output = Vec::new();
        serve(Cursor::new(text.as_bytes().to_vec()), &mut output).expect("batch runs");
        String::from_utf8(output)
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    }

    #[test]
    fn each_request_gets_one_answer_with_its_exit_code() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let data = data.to_str().expect("utf-8 path");
        let requests = [
            json!({"args": ["resolve", "--status", "in-progress", "--outcome", "done"]}),
            json!({"args": ["validate", "--kind", "status-update"], "stdin": "{\"taskId\": 1}"}),
            json!({"args": ["task", "create", "--data-dir", data, "--now",
                "2026-02-09T20:00:00.000Z", "--title", "T", "--id", "TASK-2026-02-09-001"]}),
            json!({"args": ["task", "show", "--data-dir", data, "TASK-2026-02-09-009"]}),
            json!({"args": ["no-such-command"]}),
            json!({"args": ["batch"]}),
        ];
        let text: Vec<String> = requests.iter().map(|r| r.to_string()).collect();
        let answers = serve_text(&format!("{}\nnot json\n", text.join("\n")));
        let codes: Vec<u64> = answers
            .iter()
            .map(|a| a["code"].as_u64().unwrap_or(99))
            .collect();
        assert_eq!(codes, [0, 2, 0, 2, 2, 2, 2], "{answers:#?}");
        let resolved: serde_json::Value =
            serde_json::from_str(answers[0]["stdout"].as_str().unwrap_or("")).expect("json");
        assert_eq!(resolved, json!(["review"]));
        assert!(
            answers[3]["stderr"]
                .as_str()
                .unwrap_or("")
                .contains("not found")
        );
        assert!(
            answers[6]["stderr"]
                .as_str()
                .unwrap_or("")
                .starts_with("error: a batch line")
        );
    }
}
