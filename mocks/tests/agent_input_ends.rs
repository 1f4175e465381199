//! Input that ends at once loses no answer: a client that writes its requests and closes stdin
//! straight away (`printf ... | ski-mock-agent > out`) gets every response, whatever stdout is:
//! a pipe of its own, a file, or one pipe shared with stderr (`2>&1`).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rstest::rstest;

/// `initialize`, `session/new` and one prompt, written in one go.
const REQUESTS: &str = concat!(
    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"hello"}]}}"#,
    "\n",
);

/// Where the agent's stdout goes.
#[derive(Debug, Clone, Copy)]
enum Stdout {
    /// A pipe only stdout writes to (read on the agent's reactor).
    OwnPipe,
    /// A regular file (written through tokio's blocking pool).
    File,
    /// One pipe for stdout and stderr, as under `2>&1` (also the blocking pool).
    SharedWithStderr,
}

/// Kills the agent if the test ends before it did (by its own id).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs the mock with `REQUESTS` on stdin, closed at once; returns everything it wrote to
/// stdout (and, for a shared pipe, stderr).
fn run(stdout: Stdout) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("out.jsonl");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ski-mock-agent"));
    command.stdin(Stdio::piped());
    let mut shared = None;
    match stdout {
        Stdout::OwnPipe => {
            command.stdout(Stdio::piped()).stderr(Stdio::null());
        }
        Stdout::File => {
            let out = std::fs::File::create(&file).expect("create the output file");
            command.stdout(out).stderr(Stdio::null());
        }
        Stdout::SharedWithStderr => {
            let (reader, writer) = std::io::pipe().expect("a pipe");
            let second = writer.try_clone().expect("clone the pipe's write end");
            command.stdout(writer).stderr(second);
            shared = Some(reader);
        }
    }
    let mut agent = Running(command.spawn().expect("start ski-mock-agent"));
    // The command still holds the shared pipe's write ends: drop them, or the read never ends.
    drop(command);
    let mut input = agent.0.stdin.take().expect("stdin");
    input
        .write_all(REQUESTS.as_bytes())
        .expect("write the requests");
    drop(input);
    let mut text = String::new();
    if let Some(mut pipe) = agent.0.stdout.take() {
        pipe.read_to_string(&mut text).expect("read stdout");
    }
    if let Some(mut pipe) = shared {
        pipe.read_to_string(&mut text)
            .expect("read the shared pipe");
    }
    let status = agent.0.wait().expect("wait for the agent");
    assert!(status.success(), "the agent ended with {status}");
    if let Stdout::File = stdout {
        text = std::fs::read_to_string(&file).expect("read the output file");
    }
    text
}

#[rstest]
#[case::own_pipe(Stdout::OwnPipe)]
#[case::file(Stdout::File)]
#[case::shared_with_stderr(Stdout::SharedWithStderr)]
fn every_request_is_answered_when_stdin_closes_at_once(#[case] stdout: Stdout) {
    let text = run(stdout);
    for id in 0..3 {
        assert!(
            text.contains(&format!(r#""id":{id},"result""#)),
            "no answer to request {id} with stdout {stdout:?}; it wrote:\n{text}"
        );
    }
    assert!(
        text.contains(r#""sessionUpdate":"agent_message_chunk""#),
        "the prompt's reply is missing with stdout {stdout:?}; it wrote:\n{text}"
    );
}

/// An agent that stays after stdin closes (`--fault ignore-eof`) still answers the last request,
/// even one whose line has no newline: nothing but the stdin reader would write it.
#[test]
fn an_agent_that_stays_after_stdin_closes_answers_an_unterminated_last_line() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ski-mock-agent"));
    command
        .args(["--fault", "ignore-eof"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut agent = Running(command.spawn().expect("start ski-mock-agent"));
    let mut input = agent.0.stdin.take().expect("stdin");
    input
        .write_all(REQUESTS.lines().next().expect("a request").as_bytes())
        .expect("write the request");
    drop(input);
    let stdout = agent.0.stdout.take().expect("stdout");
    // The agent keeps running, so the line is read on a thread and waited for with a bound.
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    let line = receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("no answer to the unterminated request within 30 s");
    assert!(line.contains(r#""id":0,"result""#), "it wrote: {line}");
}
