//! `ski kiro provision` with a template whose matching entries hold a FIFO (at the top of a
//! managed directory or deep in a skill): the sync is refused before anything is touched, with
//! exit 3 and a message naming the FIFO, instead of blocking on it forever.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use nix::sys::stat::Mode;

const AGENT: &str = "tg-acp";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, text).expect("write");
}

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    nix::unistd::mkfifo(path, Mode::from_bits_truncate(0o600)).expect("mkfifo");
}

fn provision(dir: &Path) -> assert_cmd::assert::Assert {
    Command::new(env!("CARGO_BIN_EXE_ski"))
        // A guard for a copy that blocks (the defect), not a timing assertion.
        .timeout(Duration::from_secs(120))
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("BOT_TOKEN", "t0k")
        .env("KIRO_AGENT_NAME", AGENT)
        .env("KIRO_CONFIG_PATH", dir.join("template"))
        .args(["kiro", "provision", "--kiro-home"])
        .arg(dir.join("home"))
        .assert()
}

#[test]
fn a_fifo_among_the_template_entries_refuses_the_sync_without_blocking() {
    for fifo in [
        format!("steering/{AGENT}-pipe.md"),
        format!("skills/{AGENT}-skill/pipe"),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let template = dir.path().join("template");
        write(&template.join(format!("agents/{AGENT}.json")), "{}");
        write(
            &template.join(format!("skills/{AGENT}-skill/SKILL.md")),
            "skill",
        );
        mkfifo(&template.join(&fifo));
        let assert = provision(dir.path()).code(3);
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        assert!(
            stderr.contains(&format!("{fifo}: it is a FIFO")),
            "{fifo}: {stderr}"
        );
        assert!(
            !dir.path().join("home").exists(),
            "{fifo}: the kiro home was touched"
        );
    }
}
