//! `ski kiro check --env-file FILE` with files that are not a small regular file: a FIFO, a
//! directory, `/dev/zero` and a file past the cap are refused at once with exit 3 and a message
//! that names the file and why; nothing blocks and nothing is read past the cap. A link to a
//! regular file is still read.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use nix::sys::stat::Mode;
use ski::kiro::config::MAX_DOTENV_BYTES;

fn check(env_file: &Path) -> assert_cmd::assert::Assert {
    Command::new(env!("CARGO_BIN_EXE_ski"))
        // A guard for a read that blocks (the defect), not a timing assertion.
        .timeout(Duration::from_secs(120))
        .env_remove("RUST_LOG")
        .env_remove("BOT_TOKEN")
        .env_remove("KIRO_AGENT_NAME")
        .args(["kiro", "check", "--env-file"])
        .arg(env_file)
        .assert()
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[test]
fn an_env_file_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("bot.env");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let cases = [
        (fifo.clone(), "is a FIFO, not a regular file"),
        (dir.path().to_owned(), "is a directory, not a regular file"),
        (
            Path::new("/dev/zero").to_owned(),
            "is a character device, not a regular file",
        ),
    ];
    for (path, why) in cases {
        let assert = check(&path).code(3);
        let stderr = stderr(&assert);
        assert!(
            stderr.contains(&format!("env file {}", path.display())) && stderr.contains(why),
            "{}: {stderr}",
            path.display()
        );
    }
}

#[test]
fn an_env_file_past_the_cap_is_refused_and_a_link_to_a_small_one_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let large = dir.path().join("large.env");
    let mut text = String::from("BOT_TOKEN=t0k\nKIRO_AGENT_NAME=tg-acp\n");
    while text.len() as u64 <= MAX_DOTENV_BYTES {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&large, &text).expect("large");
    let assert = check(&large).code(3);
    let stderr = stderr(&assert);
    assert!(
        stderr.contains(&format!("env file {}", large.display()))
            && stderr.contains("is larger than the 1 MiB limit"),
        "{stderr}"
    );

    // A small file through a link: read (BOT_TOKEN is empty there, so BR-01.1 is reported).
    let small = dir.path().join("small.env");
    std::fs::write(&small, "BOT_TOKEN=\nKIRO_AGENT_NAME=tg-acp\n").expect("small");
    let link = dir.path().join("link.env");
    symlink(&small, &link).expect("link");
    let assert = check(&link).code(3);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("BOT_TOKEN"), "{stdout}");
}
