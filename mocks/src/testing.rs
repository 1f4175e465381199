//! Test support shared by ski's integration tests and the conformance suites that test the same
//! systems (one copy for both): the kiro-cli rules of the mock agent, the intercom server's MCP
//! tool names, a directory listing, and a program run with its stdout closed.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The rules of the `kiro-cli` stand-in (`ski-mock-agent` with `personality = "kiro"`), one prompt
/// per behaviour: `Say exactly: X` answers X; `Count to 3…`; `stream` (chunks, tool calls, a plan,
/// `_session/terminate`, a fragmented line and a response to an id nobody sent); `permission`;
/// `die` (exit 3 mid-turn); `flood` (1 MiB of stderr); `noise` (a 10 MiB stderr flood, invalid
/// UTF-8, a 10 MiB line and a malformed one, then a normal answer). `initialize` writes
/// [`KIRO_STDERR_MARKER`] on stderr. Rules placed before these win.
pub const KIRO_RULES: &str = r#"
[[on]]
method = "initialize"
do = [{ stderr = "kiro-cli stderr marker 7f3a" }, { default = true }]

[[on]]
prompt_regex = '^Say exactly: (.*)$'
do = [{ turn = "${match.1}" }]

[[on]]
prompt = "Count to 3*"
do = [{ turn = "1, 2, 3" }]

[[on]]
prompt = "stream"
do = [
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "one " } } },
  { update = { sessionUpdate = "tool_call", toolCallId = "tooluse_abc", title = "Read notes", kind = "read", status = "pending" } },
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "two " } } },
  { update = { sessionUpdate = "tool_call_update", toolCallId = "tooluse_abc", title = "Read notes", kind = "read", status = "completed" } },
  { update = { sessionUpdate = "plan", entries = [{ content = "answer", priority = "high", status = "completed" }] } },
  { notify = "_session/terminate", params = { sessionId = "sub-1" } },
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "three" } }, fragments = 4 },
  { respond = { stopReason = "end_turn" }, id = 999999 },
  { respond = { stopReason = "end_turn" } },
]

[[on]]
prompt = "permission"
do = [
  { update = { sessionUpdate = "tool_call", toolCallId = "tooluse_p1", title = "Run ls", kind = "execute", status = "pending" } },
  { request = "session/request_permission", params = { sessionId = "${session}", toolCall = { toolCallId = "tooluse_p1", title = "Run ls", kind = "execute", status = "pending" }, options = [{ optionId = "allow-once", name = "Yes", kind = "allow_once" }, { optionId = "reject-once", name = "No", kind = "reject_once" }] } },
  { update = { sessionUpdate = "tool_call_update", toolCallId = "tooluse_p1", title = "Run ls", kind = "execute", status = "completed" } },
  { turn = "permission ${reply.outcome.optionId}" },
]

[[on]]
prompt = "die"
do = [
  { update = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = "partial" } } },
  { exit = 3 },
]

[[on]]
prompt = "flood"
do = [{ stderr_bytes = 1048576 }, { stderr = "" }, { turn = "after the flood" }]

[[on]]
prompt = "noise"
do = [
  { stderr = "warning from kiro" },
  { stderr_bytes = 10485760 },
  { stderr = "after the flood" },
  { raw_hex = "ff fe 0a" },
  { oversize = 10485760 },
  { malformed = true },
  { turn = "still fine" },
]
"#;

/// The line the `kiro-cli` stand-in writes on stderr while answering `initialize`.
pub const KIRO_STDERR_MARKER: &str = "kiro-cli stderr marker 7f3a";

/// The intercom server's nine MCP tools, sorted by name.
pub const INTERCOM_TOOLS: [&str; 9] = [
    "auto_check",
    "broadcast",
    "check_clearance",
    "check_diff",
    "ping",
    "reboot",
    "standby",
    "switch_freq",
    "transmit",
];

/// Every file and directory under `dir`, relative, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                out.push(
                    path.strip_prefix(base)
                        .unwrap_or(&path)
                        .display()
                        .to_string(),
                );
                if path.is_dir() {
                    walk(base, &path, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// How a run with a closed stdout ended.
#[derive(Debug)]
pub struct ClosedRun {
    /// The exit code (`None` if a signal ended it).
    pub code: Option<i32>,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `command` with stdout a pipe whose read end is closed before the program starts (as under
/// `| head -0`), `stdin` written to its stdin, to its end. The command's program, arguments,
/// environment and directory are the caller's.
pub fn run_with_closed_stdout(command: &mut Command, stdin: &str) -> ClosedRun {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the program starts");
    drop(child.stdout.take());
    let mut input = child.stdin.take().expect("stdin");
    // A program that exits without reading its stdin closes the pipe: not the test's failure.
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    let output = child.wait_with_output().expect("the program ends");
    ClosedRun {
        code: output.status.code(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
