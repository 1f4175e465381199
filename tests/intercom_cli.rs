//! `ski intercom`'s startup failures as a user meets them: one `error:` line each, exit 1 for a
//! configuration error (the matrix's code), and nothing left on disk when Slack cannot be reached.

use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

use assert_cmd::Command;

fn intercom(config: &Path, tokens: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ski"));
    command
        .arg("intercom")
        .arg("--config")
        .arg(config)
        .env_remove("SLACK_BOT_TOKEN")
        .env_remove("SLACK_APP_TOKEN")
        .env("RUST_LOG", "off")
        .timeout(std::time::Duration::from_secs(60));
    if tokens {
        command
            .env("SLACK_BOT_TOKEN", "xoxb-fake-bot")
            .env("SLACK_APP_TOKEN", "xapp-fake-app");
    }
    command.output().expect("ski intercom runs")
}

/// A loopback URL nothing listens on.
fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    format!("http://127.0.0.1:{port}/api")
}

fn write_config(dir: &Path, api_base_url: &str) -> std::path::PathBuf {
    let path = dir.join("intercom.toml");
    std::fs::write(
        &path,
        format!(
            r#"[[workspace]]
id = "myproj"
channel_id = "C0000000X"

[slack]
api_base_url = "{api_base_url}"
authorized_user_ids = ["U0000000A"]

[mcp]
port = 0

[database]
path = "data/intercom.db"
"#
        ),
    )
    .expect("write config");
    path
}

fn stderr_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_missing_config_file_exits_1_with_one_line_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("absent.toml");
    let output = intercom(&missing, true);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("error: "), "{lines:?}");
    assert!(lines[0].contains("absent.toml"), "{lines:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
}

#[test]
fn missing_tokens_exit_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &closed_port_url());
    let output = intercom(&config, false);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("SLACK_BOT_TOKEN"), "{lines:?}");
    assert!(!dir.path().join("data").exists(), "nothing created");
}

#[test]
fn slack_unreachable_is_one_clear_line_and_leaves_no_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = closed_port_url();
    let config = write_config(dir.path(), &url);
    let output = intercom(&config, true);
    assert_eq!(output.status.code(), Some(4), "{output:?}");
    let lines = stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(
        line.starts_with(&format!("error: cannot reach Slack at {url}: ")),
        "{line}"
    );
    assert!(line.contains("Connection refused"), "{line}");
    for dump in ["{", "Some(", "Os {", "ConnectError("] {
        assert!(!line.contains(dump), "no debug dump ({dump}): {line}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("intercom.toml")]);
}
