//! What `ski kiro echo` hands kiro-cli of its own environment: the allowlist only. The kiro-cli on
//! `PATH` is a script that writes its environment to a file and then runs `ski acp serve` (the
//! reference agent) for the turn; `BOT_TOKEN` and anything else not on the list stay behind.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use ski::transport::child::{self, ChildSpec};

const SKI: &str = env!("CARGO_BIN_EXE_ski");
const AGENT: &str = "tg-acp";

/// Installs `bin/kiro-cli`, the template and the workspace base under `root`.
fn arrange(root: &Path) {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::fs::create_dir_all(root.join("template/agents")).expect("template");
    std::fs::create_dir_all(root.join("home")).expect("home");
    std::fs::write(
        root.join(format!("template/agents/{AGENT}.json")),
        format!(r#"{{"name":"{AGENT}","prompt":"be brief"}}"#),
    )
    .expect("agent json");
    let program = bin.join("kiro-cli");
    std::fs::write(
        &program,
        format!(
            "#!/bin/sh\nenv -0 > '{}'\nexec '{SKI}' acp serve\n",
            root.join("env.dump").display()
        ),
    )
    .expect("kiro-cli");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The environment kiro-cli started with.
fn dumped(root: &Path) -> BTreeMap<String, String> {
    let bytes = std::fs::read(root.join("env.dump")).expect("kiro-cli wrote its environment");
    String::from_utf8_lossy(&bytes)
        .split('\0')
        .filter_map(|var| var.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// How long the run may take before the test fails (and its process group is ended).
const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn kiro_cli_gets_the_allowlist_and_never_the_bot_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    arrange(root);
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned())
    );
    let spec = ChildSpec::new("ski kiro", SKI)
        .args(["kiro", "echo", "--no-provision", "Say exactly: HI"])
        .cwd(root)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", root.join("home"))
        .env("LANG", "C.UTF-8")
        .env("LC_ALL", "C.UTF-8")
        .env("HTTPS_PROXY", "http://proxy.invalid:3128")
        .env("KIRO_LOG_LEVEL", "debug")
        .env("AWS_PROFILE", "bot")
        .env("BOT_TOKEN", "123456:telegram-secret")
        .env("SECRET_X", "not-for-the-agent")
        .env("KIRO_AGENT_NAME", AGENT)
        .env("KIRO_CONFIG_PATH", root.join("template"))
        .env("WORKSPACE_BASE_PATH", root.join("workspaces"))
        .env("LOG_LEVEL", "ERROR");
    // Dropping the child (also on a failed assertion) ends its process group.
    let mut ski = child::spawn(spec).expect("ski kiro starts");
    ski.close_stdin();
    let run = async {
        let mut output = Vec::new();
        while let Some((stream, line)) = ski.next_output_line().await {
            output.push(format!("{stream:?}: {line}"));
        }
        (ski.wait().await.expect("status").code(), output.join("\n"))
    };
    let (code, output) = tokio::time::timeout(WAIT, run)
        .await
        .expect("ski kiro ends");
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains(r#""event":"turn_end""#), "{output}");
    let env = dumped(root);
    for withheld in ["BOT_TOKEN", "SECRET_X", "KIRO_AGENT_NAME", "LOG_LEVEL"] {
        assert!(!env.contains_key(withheld), "{withheld} reached kiro-cli");
    }
    assert!(
        !env.values().any(|value| value.contains("telegram-secret")),
        "the token's value reached kiro-cli: {env:?}"
    );
    assert_eq!(env.get("PATH"), Some(&path));
    assert_eq!(
        env.get("HOME").map(String::as_str),
        root.join("home").to_str()
    );
    for passed in [
        "LANG",
        "LC_ALL",
        "HTTPS_PROXY",
        "KIRO_LOG_LEVEL",
        "AWS_PROFILE",
    ] {
        assert!(env.contains_key(passed), "{passed} was withheld: {env:?}");
    }
}
