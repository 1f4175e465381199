//! The README's examples run as written: every `bash` block of the `## ski-mock-agent` section
//! of the workspace README, with the built binary on `PATH`; the Rust example of the
//! `## ski-fake-slack` section is the test `slack_readme.rs` (its Python example runs in
//! `slack_peers.rs`); and every `toml` block of `mocks/README.md` is a valid script.

use crate::agent_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use ski::transport::child::{ChildSpec, spawn};
use ski_mocks::agent::Script;

fn workspace_readme() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")
}

/// The fenced blocks with this info string in `text`.
fn blocks(text: &str, info: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_end() == format!("```{info}") => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

/// The `## <heading>` section of `readme`, up to the next `## ` heading.
fn section<'a>(readme: &'a str, heading: &str) -> &'a str {
    let start = readme
        .find(&format!("## {heading}\n"))
        .unwrap_or_else(|| panic!("the README has a `## {heading}` section"));
    let rest = &readme[start..];
    match rest[3..].find("\n## ") {
        Some(end) => &rest[..end + 3],
        None => rest,
    }
}

async fn run_bash(script: &str) -> (i32, String) {
    let binary_dir = Path::new(agent_support::binary())
        .parent()
        .expect("the binary's directory")
        .to_owned();
    let path = format!(
        "{}:{}",
        binary_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = spawn(
        ChildSpec::new("readme", "bash")
            .args(["-euo", "pipefail", "-c", script])
            .env("PATH", path)
            .grace(Duration::from_millis(500)),
    )
    .expect("bash starts");
    child.close_stdin();
    let mut out = String::new();
    loop {
        match tokio::time::timeout(agent_support::PATIENCE, child.next_line()).await {
            Ok(Ok(Some(line))) => {
                out.push_str(&line);
                out.push('\n');
            }
            Ok(Ok(None)) => break,
            Ok(Err(error)) => panic!("reading the example's output failed: {error}"),
            Err(_) => panic!("the example did not finish in time; output so far:\n{out}"),
        }
    }
    let status = tokio::time::timeout(agent_support::PATIENCE, child.wait())
        .await
        .expect("the example exits in time")
        .expect("an exit status");
    let mut stderr = String::new();
    while let Ok(Some(line)) =
        tokio::time::timeout(Duration::from_millis(50), child.next_stderr_line()).await
    {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    if !status.success() {
        panic!("the example failed with {status}\n--- stdout ---\n{out}--- stderr ---\n{stderr}");
    }
    (status.code().unwrap_or(-1), out)
}

#[tokio::test]
async fn the_three_examples_run_as_written() {
    let readme = std::fs::read_to_string(workspace_readme()).expect("the workspace README");
    let examples = blocks(section(&readme, "ski-mock-agent"), "bash");
    assert_eq!(examples.len(), 3, "three worked examples");
    let expectations: [&[&str]; 3] = [
        &[
            "\"agentInfo\":{\"name\":\"Kiro CLI Agent\"",
            "_kiro.dev/commands/available",
            "\"text\":\"HELLO_AC\"",
            "\"text\":\"P_TEST\"",
            "\"kind\":\"turn_end\"",
        ],
        &[
            "script: flaky.toml: ok",
            "\"text\":\"early\"",
            "\"text\":\"too late\"",
            "\"fragments\":[43,43,42,42]",
        ],
        &[
            "\"identity\":{\"INTERCOM_SESSION_ID\":\"sess-42\"}",
            "\"message\":\"hello from the runner\"",
            "\"id\":\"req-001\",\"method\":\"clearance/request\"",
            "agent exit code: 3",
            "\"code\":3,\"reason\":\"control exit\",\"kind\":\"exit\"",
        ],
    ];
    for (index, (example, expected)) in examples.iter().zip(expectations).enumerate() {
        let (code, out) = run_bash(example).await;
        assert_eq!(code, 0);
        for needle in expected {
            assert!(
                out.contains(needle),
                "example {} lacks {needle}:\n{out}",
                index + 1
            );
        }
    }
}

#[test]
fn the_script_snippets_in_the_package_readme_are_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(&path).expect("mocks/README.md");
    // The mock agent's scripts come first; the fake model provider's section holds its own.
    let (agent_part, model_part) = text
        .split_once("\n## Fake model provider")
        .expect("the README has a fake model provider section");
    let snippets = blocks(agent_part, "toml");
    assert!(!snippets.is_empty());
    for snippet in snippets {
        if let Err(error) = Script::parse(&snippet, "README snippet") {
            panic!("{error}\n{snippet}");
        }
    }
    let model_snippets = blocks(model_part, "toml");
    assert!(!model_snippets.is_empty());
    for snippet in model_snippets {
        if let Err(error) = ski_mocks::model::Script::parse(&snippet) {
            panic!("{error}\n{snippet}");
        }
    }
}

#[test]
fn the_fake_slack_rust_example_is_a_test_that_runs() {
    let readme = std::fs::read_to_string(workspace_readme()).expect("the workspace README");
    let examples = blocks(section(&readme, "ski-fake-slack"), "rust");
    assert_eq!(examples.len(), 1, "one Rust example");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slack_readme.rs");
    let test = std::fs::read_to_string(&path).expect("tests/slack_readme.rs");
    // The test file is the example after its opening `//!` paragraph.
    let (_, body) = test
        .split_once("\n\n")
        .expect("a header paragraph, then the example");
    assert_eq!(
        examples[0], body,
        "the README's Rust example and tests/slack_readme.rs differ: copy one to the other"
    );
}
