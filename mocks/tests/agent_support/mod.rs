//! Test support: the built `ski-mock-agent` spawned through `ski::transport::child`, read as raw
//! bytes, with helpers for JSON-RPC exchanges, control commands and transcripts.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::{Value, json};
use ski::transport::WireLog;
use ski::transport::child::{Child, ChildSpec, spawn};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// How long any single wait in a test may take before the test fails with the wire log.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The built binary.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_ski-mock-agent")
}

/// The ready scripts' directory.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts")
}

/// A spawned agent with its stdout read as bytes.
pub struct Agent {
    pub child: Child,
    stdout: ski::transport::LoggedRead<tokio::process::ChildStdout>,
    pending: Vec<u8>,
    pub log: WireLog,
    pub dir: tempfile::TempDir,
    next_id: i64,
}

/// What to start.
pub struct Start {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub env_clear: bool,
    pub program: Option<PathBuf>,
    pub files: Vec<(String, String)>,
}

impl Start {
    pub fn args<S: AsRef<str>>(args: &[S]) -> Self {
        Self {
            args: args.iter().map(|a| a.as_ref().to_owned()).collect(),
            env: Vec::new(),
            env_clear: false,
            program: None,
            files: Vec::new(),
        }
    }

    /// A file written into the agent's directory before it starts.
    pub fn file(mut self, name: &str, text: &str) -> Self {
        self.files.push((name.to_owned(), text.to_owned()));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    pub fn program(mut self, program: PathBuf) -> Self {
        self.program = Some(program);
        self
    }
}

impl Agent {
    /// Spawns the agent with these arguments; `{dir}` in an argument is replaced by the test's
    /// temporary directory.
    pub fn spawn<S: AsRef<str>>(args: &[S]) -> Self {
        Self::start(Start::args(args))
    }

    pub fn start(start: Start) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (name, text) in &start.files {
            if let Some(parent) = dir.path().join(name).parent() {
                std::fs::create_dir_all(parent).expect("create a file's directory");
            }
            std::fs::write(dir.path().join(name), text).expect("write a file for the agent");
        }
        let log = WireLog::new();
        let program = start.program.unwrap_or_else(|| PathBuf::from(binary()));
        let args: Vec<String> = start
            .args
            .iter()
            .map(|a| a.replace("{dir}", &dir.path().display().to_string()))
            .collect();
        let mut spec = ChildSpec::new("agent", &program)
            .args(&args)
            .cwd(dir.path())
            .wire_log(log.clone())
            .grace(Duration::from_millis(500));
        if start.env_clear {
            spec = spec.env_clear();
        }
        for (key, value) in &start.env {
            spec = spec.env(
                key,
                value.replace("{dir}", &dir.path().display().to_string()),
            );
        }
        let mut child = spawn(spec).expect("the mock agent starts");
        let stdout = child.take_stdout().expect("stdout");
        Self {
            child,
            stdout,
            pending: Vec::new(),
            log,
            dir,
            next_id: 0,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn fail(&self, what: &str) -> ! {
        panic!("{what}\n--- wire log ---\n{}", self.log.render());
    }

    /// Writes one line to the agent's stdin.
    pub async fn send(&mut self, line: &str) {
        if let Err(error) = self.child.send_line(line).await {
            self.fail(&format!("cannot write to the agent: {error}"));
        }
    }

    /// Writes one line, answering the error instead of failing the test.
    pub async fn try_send(&mut self, line: &str) -> Result<(), ski::transport::child::ChildError> {
        self.child.send_line(line).await
    }

    pub async fn send_json(&mut self, value: Value) {
        self.send(&value.to_string()).await;
    }

    /// Sends a request with the next integer id; returns the id.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send_json(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    async fn fill(&mut self) -> bool {
        let mut buf = vec![0u8; 65536];
        match tokio::time::timeout(PATIENCE, self.stdout.read(&mut buf)).await {
            Ok(Ok(0)) => false,
            Ok(Ok(n)) => {
                self.pending.extend_from_slice(&buf[..n]);
                true
            }
            Ok(Err(error)) => self.fail(&format!("reading stdout failed: {error}")),
            Err(_) => self.fail("timed out waiting for agent output"),
        }
    }

    /// The next line of stdout as raw bytes, without its newline; `None` at end of stream.
    pub async fn raw_line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                return Some(line[..line.len() - 1].to_vec());
            }
            if !self.fill().await {
                if self.pending.is_empty() {
                    return None;
                }
                return Some(std::mem::take(&mut self.pending));
            }
        }
    }

    /// The next line of stdout as text.
    pub async fn line(&mut self) -> String {
        match self.raw_line().await {
            Some(line) => String::from_utf8(line)
                .unwrap_or_else(|e| self.fail(&format!("stdout line is not utf-8: {e}"))),
            None => self.fail("stdout closed while a line was expected"),
        }
    }

    /// The next line of stdout as JSON.
    pub async fn json(&mut self) -> Value {
        let line = self.line().await;
        serde_json::from_str(&line)
            .unwrap_or_else(|e| self.fail(&format!("not json ({e}): {line}")))
    }

    /// Exactly `n` bytes of stdout.
    pub async fn bytes(&mut self, n: usize) -> Vec<u8> {
        while self.pending.len() < n {
            if !self.fill().await {
                self.fail(&format!("stdout closed before {n} bytes arrived"));
            }
        }
        self.pending.drain(..n).collect()
    }

    /// Whether any stdout byte arrives within `wait` (used only where the agent provably cannot
    /// write, so the answer never depends on timing).
    pub async fn quiet_for(&mut self, wait: Duration) -> bool {
        if !self.pending.is_empty() {
            return false;
        }
        let mut buf = [0u8; 1024];
        match tokio::time::timeout(wait, self.stdout.read(&mut buf)).await {
            Err(_) => true,
            Ok(Ok(n)) => {
                self.pending.extend_from_slice(&buf[..n]);
                false
            }
            Ok(Err(_)) => false,
        }
    }

    /// Reads until stdout closes; returns the remaining bytes.
    pub async fn rest(&mut self) -> Vec<u8> {
        while self.fill().await {}
        std::mem::take(&mut self.pending)
    }

    /// Lines until (and including) the response with `id`; returns (notifications and
    /// requests before it, the response).
    pub async fn until_response(&mut self, id: &Value) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.json().await;
            if message.get("id") == Some(id)
                && (message.get("result").is_some() || message.get("error").is_some())
            {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// One `initialize` round trip: once it is answered, the agent is listening on its
    /// control socket.
    pub async fn initialize(&mut self) {
        let id = self
            .request("initialize", json!({"protocolVersion": 1}))
            .await;
        let (_, response) = self.until_response(&json!(id)).await;
        assert!(response.get("result").is_some(), "{response}");
    }

    /// initialize + session/new; returns the session id.
    pub async fn handshake(&mut self) -> String {
        let id = self
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}}),
            )
            .await;
        let (_, response) = self.until_response(&json!(id)).await;
        assert_eq!(response["result"]["protocolVersion"], 1, "{response}");
        let cwd = self.dir.path().display().to_string();
        let id = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let (_, response) = self.until_response(&json!(id)).await;
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| self.fail(&format!("no sessionId in {response}")))
            .to_owned()
    }

    /// Sends a text prompt; returns its request id.
    pub async fn prompt(&mut self, session: &str, text: &str) -> i64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Closes stdin.
    pub fn close_stdin(&mut self) {
        self.child.close_stdin();
    }

    /// Waits for the process to exit.
    pub async fn status(&self) -> ExitStatus {
        match tokio::time::timeout(PATIENCE, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(error)) => self.fail(&format!("waiting for the agent failed: {error}")),
            Err(_) => self.fail("timed out waiting for the agent to exit"),
        }
    }

    /// Waits for the exit code.
    pub async fn code(&self) -> i32 {
        let status = self.status().await;
        status
            .code()
            .unwrap_or_else(|| self.fail(&format!("no exit code: {status}")))
    }

    /// Every stderr line so far until `predicate` holds for the collected text.
    pub async fn stderr_until(&mut self, predicate: impl Fn(&str) -> bool) -> String {
        let mut text = String::new();
        while !predicate(&text) {
            match tokio::time::timeout(PATIENCE, self.child.next_stderr_line()).await {
                Ok(Some(line)) => {
                    text.push_str(&line);
                    text.push('\n');
                }
                Ok(None) => break,
                Err(_) => self.fail(&format!("timed out reading stderr; so far: {text:?}")),
            }
        }
        text
    }
}

/// A connection to an agent's control socket.
pub struct Control {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl Control {
    /// Connects. The agent binds its socket before it reads stdin, so once it has answered
    /// anything on stdout the socket is there; call this only after such an answer.
    pub async fn connect(path: &Path) -> Self {
        let stream = UnixStream::connect(path).await.unwrap_or_else(|error| {
            panic!("control socket {} does not accept: {error}", path.display())
        });
        let (read, write) = stream.into_split();
        Self {
            reader: BufReader::new(read),
            writer: write,
        }
    }

    /// Wraps an accepted stream (for `--control-connect`).
    pub fn from_stream(stream: UnixStream) -> Self {
        let (read, write) = stream.into_split();
        Self {
            reader: BufReader::new(read),
            writer: write,
        }
    }

    pub async fn send(&mut self, command: Value) {
        let mut line = command.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .await
            .expect("write a control command");
    }

    pub async fn read(&mut self) -> Value {
        let mut line = String::new();
        let read = tokio::time::timeout(PATIENCE, self.reader.read_line(&mut line))
            .await
            .expect("a control reply in time")
            .expect("read a control reply");
        assert!(read > 0, "control connection closed");
        serde_json::from_str(&line).expect("a json control reply")
    }

    /// Sends a command and reads its reply.
    pub async fn call(&mut self, command: Value) -> Value {
        self.send(command).await;
        self.read().await
    }
}

/// The records of a transcript file.
pub fn transcript(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read transcript {}: {e}", path.display()));
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("bad record {line}: {e}")))
        .collect()
}

/// The texts of the transcript records of one kind.
pub fn texts(records: &[Value], kind: &str) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["kind"] == kind)
        .map(|r| r["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A `session/update` text chunk.
pub fn chunk_text(message: &Value) -> Option<&str> {
    message["params"]["update"]["content"]["text"].as_str()
}
