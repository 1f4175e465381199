//! `ski-mock-agent diff`: a recording of the mock agent checked against the same agent reports
//! nothing and exits 0; against an agent whose answers changed shape, or another release of it,
//! it names the change and exits 1.

use crate::agent_support;

use agent_support::{Agent, PATIENCE, Start, binary};
use serde_json::json;
use ski::transport::child::{ChildSpec, OutputStream, spawn};

/// Records one session of `ski-mock-agent --script echo` into `rec.toml` of the returned agent's
/// directory (the agent, ended, keeps the directory alive).
async fn record_echo_session() -> Agent {
    let mut agent = Agent::start(Start::args(&[
        "record",
        "--out",
        "{dir}/rec.toml",
        "--",
        binary(),
        "--script",
        "echo",
    ]));
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "hello").await;
    agent.until_response(&json!(id)).await;
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    agent
}

/// Runs `ski-mock-agent diff` to its end; answers (exit code, stdout).
async fn run_diff(args: &[String]) -> (i32, String) {
    run_diff_in(ChildSpec::new("diff", binary()), args).await
}

/// Runs `ski-mock-agent diff` as `spec` (its environment, its directory) to its end.
async fn run_diff_in(spec: ChildSpec, args: &[String]) -> (i32, String) {
    let spec = spec.arg("diff").args(args);
    let mut child = spawn(spec).expect("diff starts");
    child.close_stdin();
    let mut out = String::new();
    let read = async {
        while let Some((stream, line)) = child.next_output_line().await {
            if stream == OutputStream::Stdout {
                out.push_str(&line);
                out.push('\n');
            }
        }
    };
    tokio::time::timeout(PATIENCE * 3, read)
        .await
        .expect("diff ends");
    let status = child.wait().await.expect("an exit status");
    (status.code().unwrap_or(-1), out)
}

#[tokio::test]
async fn the_same_agent_shows_no_drift() {
    let recorded = record_echo_session().await;
    let recording = recorded.path("rec.toml").display().to_string();
    let (code, out) = run_diff(&[
        recording,
        "--".into(),
        binary().into(),
        "--script".into(),
        "echo".into(),
    ])
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("no structural drift: 3 exchanges"), "{out}");
}

#[tokio::test]
async fn a_changed_field_and_a_changed_stop_reason_are_reported() {
    let recorded = record_echo_session().await;
    let recording = recorded.path("rec.toml").display().to_string();
    let changed = recorded.path("changed.toml");
    std::fs::write(
        &changed,
        "personality = \"standard\"\n[agent]\nsession_result = { _meta = { build = \"new\" } }\n\
         [prompt]\nstop_reason = \"max_tokens\"\n",
    )
    .expect("the changed agent's script");
    let (code, out) = run_diff(&[
        recording,
        "--".into(),
        binary().into(),
        "--script".into(),
        changed.display().to_string(),
    ])
    .await;
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "exchange 1 session/new: result: new field result._meta (object)",
            "exchange 1 session/new: result: new field result._meta.build (string)",
            "exchange 2 session/prompt: result: field result.stopReason changed: end_turn -> max_tokens",
            "drift: 3 difference(s) in 3 exchanges",
        ]
    );
}

#[tokio::test]
async fn text_is_compared_unless_ignored() {
    let recorded = record_echo_session().await;
    let recording = recorded.path("rec.toml").display().to_string();
    let shouting = recorded.path("shout.toml");
    std::fs::write(
        &shouting,
        "personality = \"standard\"\n[[on]]\nprompt = \"*\"\ndo = [{ turn = \"HELLO\" }]\n",
    )
    .expect("the other agent's script");
    let agent = [
        "--".to_owned(),
        binary().to_owned(),
        "--script".to_owned(),
        shouting.display().to_string(),
    ];
    let mut args = vec![recording.clone()];
    args.extend(agent.iter().cloned());
    let (code, out) = run_diff(&args).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("params.update.content.text changed: hello -> HELLO"),
        "{out}"
    );
    let mut args = vec![recording, "--ignore-text".to_owned()];
    args.extend(agent.iter().cloned());
    let (code, out) = run_diff(&args).await;
    assert_eq!(code, 0, "{out}");
}

/// A release of an agent, as a mock agent script: its version, one capability and its auth
/// methods, which is where real agents' releases differ (claude-code-acp 0.16.2 and 0.14.0 by
/// `loadSession`, gemini-cli 0.61.0 and 0.60.0 only by `agentInfo.version`).
fn release(version: &str, load_session: bool, second_auth_method: &str) -> String {
    format!(
        "personality = \"standard\"\n[agent]\nname = \"agent\"\nversion = \"{version}\"\n\
         capabilities = {{ loadSession = {load_session} }}\n\
         auth_methods = [{{ id = \"login\", name = \"Log in\" }}, \
         {{ id = \"{second_auth_method}\", name = \"Key\" }}]\n"
    )
}

#[tokio::test]
async fn another_release_is_reported_by_version_capability_and_auth_method() {
    let mut agent = Agent::start(
        Start::args(&[
            "record",
            "--out",
            "{dir}/rec.toml",
            "--",
            binary(),
            "--script",
            "{dir}/1.0.0.toml",
        ])
        .file("1.0.0.toml", &release("1.0.0", true, "api-key"))
        .file("1.1.0.toml", &release("1.1.0", false, "token")),
    );
    agent.handshake().await;
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let recording = agent.path("rec.toml").display().to_string();
    let against = |version: &str| {
        vec![
            recording.clone(),
            "--".into(),
            binary().into(),
            "--script".into(),
            agent.path(&format!("{version}.toml")).display().to_string(),
        ]
    };
    let (code, out) = run_diff(&against("1.0.0")).await;
    assert_eq!(code, 0, "{out}");
    let (code, out) = run_diff(&against("1.1.0")).await;
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "exchange 0 initialize: result: field result.agentCapabilities.loadSession changed: true -> false",
            "exchange 0 initialize: result: field result.agentInfo.version changed: 1.0.0 -> 1.1.0",
            "exchange 0 initialize: result: field result.authMethods[].id changed: [login, api-key] -> [login, token]",
            "drift: 3 difference(s) in 2 exchanges",
        ]
    );
}

#[tokio::test]
async fn what_the_recording_redacted_is_redacted_in_the_live_answers_too() {
    const PLANTED: &str = "planted-Secret-5f3a9c";
    let mut agent = Agent::start(
        Start::args(&[
            "record",
            "--out",
            "{dir}/rec.toml",
            "--",
            binary(),
            "--script",
            "{dir}/says.toml",
        ])
        .env("PLANTED_TOKEN", PLANTED)
        .env("WORKDIR", "{dir}")
        .file(
            "says.toml",
            "personality = \"standard\"\n[[on]]\nprompt = \"*\"\n\
             do = [{ turn = \"my key is ${env.PLANTED_TOKEN}, I work in ${env.WORKDIR}/src\" }]\n",
        ),
    );
    let session = agent.handshake().await;
    let id = agent.prompt(&session, "hello").await;
    agent.until_response(&json!(id)).await;
    agent.close_stdin();
    assert_eq!(agent.code().await, 0);
    let recording = std::fs::read_to_string(agent.path("rec.toml")).expect("the recording");
    assert!(
        recording.contains("my key is [redacted:env:PLANTED_TOKEN], I work in ./src"),
        "{recording}"
    );
    let spec = ChildSpec::new("diff", binary())
        .env("PLANTED_TOKEN", PLANTED)
        .env("WORKDIR", agent.dir.path())
        .cwd(agent.dir.path());
    let args = [
        agent.path("rec.toml").display().to_string(),
        "--".into(),
        binary().into(),
        "--script".into(),
        agent.path("says.toml").display().to_string(),
    ];
    let (code, out) = run_diff_in(spec, &args).await;
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains(PLANTED), "{out}");
}

#[tokio::test]
async fn a_script_that_is_not_a_recording_is_refused() {
    let (code, _) = run_diff(&["echo".into(), "--".into(), binary().into()]).await;
    assert_eq!(code, 3);
}
