//! ACP v1's newer additions between the real binaries over real pipes: `additionalDirectories`
//! (advertised, validated, the agent's file tool calls bounded by the session's roots, the
//! client's `--add-dir`), message ids on streamed chunks (one per reply, grouped by the client),
//! the `usage_update` that ends every full turn, and the `notice` and compaction updates of the
//! reference's `/notice` and `/compact` commands, sent only to a client that advertised them.
//! The agent's messages are snapshotted in `golden/acp_v1/` with generated ids numbered.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::{Value, json};
use ski::transport::child::{self, ChildSpec};

const SKI: &str = env!("CARGO_BIN_EXE_ski");
const SNAPSHOTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/golden/acp_v1");

/// How long any wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Generated ids (`sess_…`, `msg_…`, `call_…`, `compaction_…`) numbered in order of
/// appearance, so snapshots do not depend on them.
#[derive(Default)]
struct Ids(HashMap<String, String>);

impl Ids {
    fn normalize(&mut self, value: &Value) -> Value {
        match value {
            Value::String(text) => {
                for prefix in ["sess_", "msg_", "call_", "compaction_"] {
                    if let Some(rest) = text.strip_prefix(prefix)
                        && rest.len() == 32
                        && rest.chars().all(|c| c.is_ascii_hexdigit())
                    {
                        let next = self.0.len() + 1;
                        let named = self
                            .0
                            .entry(text.clone())
                            .or_insert_with(|| format!("{prefix}{next}"));
                        return json!(named);
                    }
                }
                value.clone()
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.normalize(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.normalize(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

fn agent_cmd(args: &str) -> String {
    format!("{SKI} acp serve --log-level error --permission-mode disabled {args}")
}

/// The JSON lines of the client's stdout.
fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
        })
        .collect()
}

/// The `payload`s of the client's `session_update` lines of kind `kind`.
fn updates<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|line| line["type"] == "session_update" && line["update"] == kind)
        .map(|line| &line["payload"])
        .collect()
}

/// Runs `ski acp client connect --json` with `args` and the prompts, against `agent`.
fn client(agent: &str, args: &[&str], prompts: &[&str]) -> std::process::Output {
    let mut command = cargo_bin_cmd!("ski");
    command
        .args(["acp", "client", "connect", "--json", "--log-level", "error"])
        .args(["--agent-cmd", agent])
        .args(args);
    for prompt in prompts {
        command.args(["--prompt", prompt]);
    }
    command
        .timeout(PATIENCE)
        .output()
        .expect("ski acp client runs")
}

/// A raw JSON-RPC peer on a spawned `ski acp serve`'s stdin and stdout.
struct Raw {
    agent: child::Child,
    next: u64,
    /// Every notification seen, in order.
    notifications: Vec<Value>,
}

impl Raw {
    async fn spawn(args: &[&str]) -> Raw {
        let mut argv = vec!["acp", "serve", "--log-level", "error"];
        argv.extend(args);
        let agent = child::spawn(ChildSpec::new("agent", SKI).args(argv)).expect("spawn ski");
        Raw {
            agent,
            next: 0,
            notifications: Vec::new(),
        }
    }

    /// Sends a request and returns its response, keeping the notifications before it.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.agent.send_line(&request.to_string()).await.unwrap();
        loop {
            let line = within(method, self.agent.next_line())
                .await
                .unwrap()
                .expect("the agent answers");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) {
                return message;
            }
            if message.get("id").is_none() {
                self.notifications.push(message);
            }
        }
    }

    async fn initialize(&mut self, capabilities: Value) -> Value {
        let init = self
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        init
    }

    async fn new_session(&mut self, cwd: &str, additional: Value) -> Value {
        self.call(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [], "additionalDirectories": additional}),
        )
        .await
    }

    /// The `update`s of `session/update` notifications seen so far, of kind `kind`.
    fn updates(&self, kind: &str) -> Vec<Value> {
        self.notifications
            .iter()
            .filter(|n| n["method"] == "session/update")
            .map(|n| n["params"]["update"].clone())
            .filter(|u| u["sessionUpdate"] == kind)
            .collect()
    }

    async fn shutdown(self) {
        self.agent.shutdown().await.unwrap();
    }
}

fn path_text(path: &Path) -> String {
    path.to_str().expect("a UTF-8 temporary path").to_owned()
}

#[tokio::test]
async fn additional_directories_are_advertised_validated_and_replaced_on_resume() {
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    let extra = cwd.join("extra");
    std::fs::create_dir(&extra).unwrap();
    let (cwd, extra) = (path_text(&cwd), path_text(&extra));
    let mut raw = Raw::spawn(&["--permission-mode", "disabled"]).await;
    let init = raw.initialize(json!({})).await;
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"],
        json!({}),
        "{init}"
    );
    // ACP: not an array, a non-string entry, an empty entry or a relative one is refused.
    for bad in [
        json!("not-a-list"),
        json!([7]),
        json!([""]),
        json!(["relative/dir"]),
    ] {
        let refused = raw.new_session(&cwd, bad.clone()).await;
        assert_eq!(refused["error"]["code"], -32602, "{bad}: {refused}");
    }
    let created = raw.new_session(&cwd, json!([extra])).await;
    let session = created["result"]["sessionId"].clone();
    assert!(session.is_string(), "{created}");
    let listed = |list: &Value| {
        list["result"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["sessionId"] == session)
            .cloned()
            .expect("the session is listed")
    };
    let list = raw.call("session/list", json!({})).await;
    assert_eq!(
        listed(&list)["additionalDirectories"],
        json!([extra]),
        "{list}"
    );
    // A resume without them activates none: stored roots are never reactivated implicitly.
    let resumed = raw
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(resumed["result"].is_object(), "{resumed}");
    let list = raw.call("session/list", json!({})).await;
    assert!(
        listed(&list).get("additionalDirectories").is_none(),
        "{list}"
    );
    // With roots, a resume must name the session's own cwd.
    let elsewhere = raw
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": extra, "mcpServers": [], "additionalDirectories": [cwd]}),
        )
        .await;
    assert_eq!(elsewhere["error"]["code"], -32602, "{elsewhere}");
    raw.shutdown().await;

    // --minimal advertises no session capability, so the client sends no --add-dir to it.
    let output = client(
        &agent_cmd("--minimal"),
        &["--cwd", &cwd, "--add-dir", &extra],
        &["hi"],
    );
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("sessionCapabilities.additionalDirectories"),
        "{stderr}"
    );
}

#[test]
fn the_agent_reads_only_inside_the_session_roots_and_the_client_serves_its_added_dirs() {
    let work = tempfile::tempdir().unwrap();
    let base = work.path().canonicalize().unwrap();
    let (cwd, extra, outside) = (base.join("cwd"), base.join("extra"), base.join("outside"));
    for dir in [&cwd, &extra, &outside] {
        std::fs::create_dir(dir).unwrap();
    }
    std::fs::write(extra.join("in.txt"), "inside an added root").unwrap();
    std::fs::write(outside.join("out.txt"), "outside every root").unwrap();
    // A link inside the cwd that leads out of every root.
    std::os::unix::fs::symlink(&outside, cwd.join("link")).unwrap();
    let agent = agent_cmd(&format!(
        "--turn-updates message --tool-call read:{} --tool-call read:../outside/out.txt \
         --tool-call read:link/out.txt",
        extra.join("in.txt").display()
    ));
    let output = client(
        &agent,
        &[
            "--cwd",
            &path_text(&cwd),
            "--fs",
            "--add-dir",
            &path_text(&extra),
        ],
        &["read them"],
    );
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output.stdout);
    let finished = updates(&lines, "tool_call_update");
    assert_eq!(finished.len(), 3, "{lines:?}");
    assert_eq!(finished[0]["status"], "completed", "{lines:?}");
    assert_eq!(finished[0]["rawOutput"]["content"], "inside an added root");
    for refused in &finished[1..] {
        assert_eq!(refused["status"], "failed", "{refused}");
        let error = refused["rawOutput"]["error"].as_str().unwrap();
        assert!(error.contains("outside the session's roots"), "{error}");
    }
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("outside every root"),
        "nothing outside the roots was read"
    );
}

#[test]
fn chunks_carry_one_message_id_per_reply_and_the_client_groups_them() {
    let output = client(
        &agent_cmd("--turn-updates full"),
        &[],
        &["first reply", "second reply"],
    );
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output.stdout);
    let chunks = updates(&lines, "agent_message_chunk");
    assert_eq!(chunks.len(), 2, "{lines:?}");
    let ids: Vec<&str> = chunks
        .iter()
        .map(|c| c["messageId"].as_str().expect("a messageId"))
        .collect();
    assert_ne!(ids[0], ids[1], "each reply is a new message");
    let messages: Vec<&Value> = lines.iter().filter(|l| l["type"] == "message").collect();
    assert_eq!(messages.len(), 2, "{lines:?}");
    for (message, (id, text)) in messages
        .iter()
        .zip(ids.iter().zip(["first reply", "second reply"]))
    {
        assert_eq!(message["messageId"], *id);
        assert_eq!(message["role"], "agent");
        assert_eq!(message["text"], text);
        assert_eq!(message["chunks"], 1);
    }
    // The turn's last update is its usage_update: the words of the history in context.
    let usage = updates(&lines, "usage_update");
    assert_eq!(usage.len(), 2, "{lines:?}");
    assert_eq!(usage[0]["size"], 200_000);
    assert_eq!(usage[0]["used"], 4, "two words asked, two echoed");
    assert_eq!(usage[1]["used"], 8);
    let first_result = lines
        .iter()
        .position(|l| l["type"] == "prompt_result")
        .unwrap();
    let last_update = lines[..first_result]
        .iter()
        .rposition(|l| l["type"] == "session_update")
        .unwrap();
    assert_eq!(lines[last_update]["update"], "usage_update", "{lines:?}");
}

#[tokio::test]
async fn session_load_replays_each_message_under_the_id_it_was_streamed_with() {
    let work = tempfile::tempdir().unwrap();
    let cwd = path_text(&work.path().canonicalize().unwrap());
    let mut raw = Raw::spawn(&["--permission-mode", "disabled"]).await;
    raw.initialize(json!({})).await;
    let created = raw.new_session(&cwd, json!([])).await;
    let session = created["result"]["sessionId"].clone();
    for text in ["first message", "second message"] {
        let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        let answer = raw.call("session/prompt", prompt).await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    let live: Vec<Value> = raw
        .updates("agent_message_chunk")
        .iter()
        .map(|u| u["messageId"].clone())
        .collect();
    assert_eq!(live.len(), 2, "{live:?}");
    raw.notifications.clear();
    let loaded = raw
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let replayed: Vec<(String, Value, Value)> = raw
        .notifications
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| {
            u["sessionUpdate"] == "user_message_chunk"
                || u["sessionUpdate"] == "agent_message_chunk"
        })
        .map(|u| {
            (
                u["sessionUpdate"].as_str().unwrap().to_owned(),
                u["content"]["text"].clone(),
                u["messageId"].clone(),
            )
        })
        .collect();
    let kinds: Vec<(&str, &Value)> = replayed.iter().map(|(k, t, _)| (k.as_str(), t)).collect();
    assert_eq!(
        kinds,
        [
            ("user_message_chunk", &json!("first message")),
            ("agent_message_chunk", &json!("first message")),
            ("user_message_chunk", &json!("second message")),
            ("agent_message_chunk", &json!("second message")),
        ]
    );
    // The replies keep the ids they were streamed with; every message has an id of its own.
    assert_eq!(replayed[1].2, live[0]);
    assert_eq!(replayed[3].2, live[1]);
    let ids: std::collections::HashSet<String> = replayed
        .iter()
        .map(|(_, _, id)| id.as_str().expect("a messageId").to_owned())
        .collect();
    assert_eq!(ids.len(), 4, "{replayed:?}");
    raw.shutdown().await;
}

#[tokio::test]
async fn a_flooded_reply_is_one_message_of_many_chunks() {
    let mut raw = Raw::spawn(&["--permission-mode", "disabled"]).await;
    raw.initialize(json!({})).await;
    let created = raw.new_session("/", json!([])).await;
    let session = created["result"]["sessionId"].clone();
    let answer = raw
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}],
                   "_meta": {"ski": {"floodChunks": 3}}}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let chunks = raw.updates("agent_message_chunk");
    assert_eq!(chunks.len(), 3);
    assert!(chunks[0]["messageId"].is_string());
    assert!(
        chunks
            .iter()
            .all(|c| c["messageId"] == chunks[0]["messageId"])
    );
    raw.shutdown().await;
}

#[test]
fn notices_and_compaction_reach_a_client_that_advertised_them() {
    let output = client(
        &agent_cmd("--turn-updates message"),
        &[],
        &["/notice Build finished", "/compact"],
    );
    assert!(output.status.success(), "{output:?}");
    let lines = lines(&output.stdout);
    let notices = updates(&lines, "notice");
    assert_eq!(
        notices,
        [&json!({"sessionUpdate": "notice", "severity": "info", "title": "Build finished"})]
    );
    let progress = updates(&lines, "compaction_update");
    assert_eq!(progress.len(), 2, "{lines:?}");
    assert_eq!(progress[0]["status"], "in_progress");
    assert_eq!(progress[1]["status"], "completed");
    let summary = updates(&lines, "compaction_summary_chunk");
    assert_eq!(summary.len(), 1, "{lines:?}");
    let id = &progress[0]["compactionId"];
    assert!(id.is_string());
    assert_eq!(&progress[1]["compactionId"], id);
    assert_eq!(&summary[0]["compactionId"], id);
    assert_eq!(
        summary[0]["content"]["text"],
        "3 earlier entries of the conversation, compacted"
    );

    // The human form shows them on stderr.
    let output = cargo_bin_cmd!("ski")
        .args(["acp", "client", "connect", "--log-level", "error"])
        .args(["--agent-cmd", &agent_cmd("")])
        .args(["--prompt", "/notice Heads up"])
        .timeout(PATIENCE)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("notice (info): Heads up"), "{stderr}");
    assert!(stderr.contains("context: "), "{stderr}");
}

#[tokio::test]
async fn no_notice_or_compaction_goes_to_a_client_that_did_not_advertise_them() {
    let mut raw = Raw::spawn(&["--permission-mode", "disabled"]).await;
    raw.initialize(json!({})).await;
    let created = raw.new_session("/", json!([])).await;
    let session = created["result"]["sessionId"].clone();
    for text in ["/notice Build finished", "/compact"] {
        let answer = raw
            .call(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    for kind in ["notice", "compaction_update", "compaction_summary_chunk"] {
        assert!(
            raw.updates(kind).is_empty(),
            "{kind}: {:?}",
            raw.notifications
        );
    }
    // The notice's text went out as an agent message instead.
    let texts: Vec<Value> = raw
        .updates("agent_message_chunk")
        .iter()
        .map(|c| c["content"]["text"].clone())
        .collect();
    assert!(texts.contains(&json!("Build finished")), "{texts:?}");
    raw.shutdown().await;
}

#[tokio::test]
async fn the_agent_messages_of_the_additions_match_their_snapshots() {
    let mut raw = Raw::spawn(&["--permission-mode", "disabled"]).await;
    let init = raw
        .initialize(json!({"session": {"notices": {}, "compaction": {}}}))
        .await;
    let work = tempfile::tempdir().unwrap();
    let extra = path_text(&work.path().canonicalize().unwrap());
    let created = raw.new_session("/", json!([extra])).await;
    let session = created["result"]["sessionId"].clone();
    for text in ["hello", "/notice Build finished", "/compact"] {
        raw.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await;
    }
    let mut ids = Ids::default();
    let mut kinds = Vec::new();
    let mut golden = serde_json::Map::new();
    golden.insert(
        "initialize.sessionCapabilities".into(),
        init["result"]["agentCapabilities"]["sessionCapabilities"].clone(),
    );
    for notification in &raw.notifications {
        let update = &notification["params"]["update"];
        let kind = update["sessionUpdate"].as_str().unwrap_or("?").to_owned();
        if [
            "agent_message_chunk",
            "usage_update",
            "notice",
            "compaction_update",
            "compaction_summary_chunk",
            "available_commands_update",
        ]
        .contains(&kind.as_str())
        {
            kinds.push(kind);
            golden.insert(
                format!("{:02} {}", kinds.len(), kinds.last().unwrap()),
                ids.normalize(notification),
            );
        }
    }
    insta::with_settings!({ snapshot_path => SNAPSHOTS, prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_json_snapshot!("agent_updates", golden);
    });
    raw.shutdown().await;
}
