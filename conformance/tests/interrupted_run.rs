//! A run interrupted by SIGTERM (a CI timeout or cancel, sent to the process and its group) while
//! it runs the intercom suite: it exits with 143, leaves no process it started, and writes the
//! report of what ran, marked interrupted. The test runs in a process of its own, the test program
//! started again and filtered to it: there it adopts orphans (a child subreaper), so a process the
//! run left behind becomes its child and is seen, and no other test's process is counted.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use ski::transport::child::{ChildSpec, adopt_orphans, group_exists, process_exists, spawn};

/// The live (not zombie) processes whose parent is this test process.
fn live_children_of_this_process() -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …: the comm may hold spaces, so split after its last ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(state), Some(ppid)) = (fields.first(), fields.get(1)) else {
            continue;
        };
        if *state != "Z" && ppid.parse::<u32>().ok() == Some(me) {
            let comm = head.split_once('(').map_or("", |(_, c)| c).to_owned();
            found.push((pid, comm));
        }
    }
    found
}

/// Set in the environment of the test program started again to run [`sigterm_ends_every_process_of_the_run_and_leaves_a_report_marked_interrupted`]
/// alone.
const ALONE: &str = "SKI_CONFORMANCE_INTERRUPTED_RUN_ALONE";

#[test]
fn sigterm_ends_every_process_of_the_run_and_leaves_a_report_marked_interrupted() {
    if std::env::var_os(ALONE).is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(interrupt_a_run());
        return;
    }
    let this_test = concat!(
        module_path!(),
        "::sigterm_ends_every_process_of_the_run_and_leaves_a_report_marked_interrupted"
    );
    let this_test = this_test
        .split_once("::")
        .map_or(this_test, |(_, path)| path);
    let program = std::env::current_exe().expect("this test program");
    let output = std::process::Command::new(program)
        .args(["--exact", this_test, "--test-threads", "1"])
        .env(ALONE, "1")
        .output()
        .expect("the test program started again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "the test alone in its process: {:?}\n{stdout}{stderr}",
        output.status
    );
}

/// The test itself, in a process where it is the only one.
async fn interrupt_a_run() {
    assert!(adopt_orphans(), "this test needs to be a child subreaper");
    let dir = tempfile::tempdir().expect("a temp dir");
    let out = dir.path().join("out");
    let spec = ChildSpec::new("ski-conformance", env!("CARGO_BIN_EXE_ski-conformance"))
        .args([
            "run",
            "--target",
            "reference",
            "--suite",
            "intercom",
            "-j",
            "2",
            "--out",
        ])
        .arg(out.as_os_str())
        .env_remove("CI")
        .cwd(dir.path());
    let mut run = spawn(spec).expect("ski-conformance starts");
    let runner_pid = run.pid();
    // A row's result line means the rows run: the next ones are in flight, with their processes.
    let mut first_row = None;
    while let Some(line) = run.next_line().await.expect("its stdout") {
        if line.split_whitespace().nth(1) == Some("intercom") {
            first_row = Some(line);
            break;
        }
    }
    let first_row = first_row.expect("the run printed a row's result before it ended");
    // As `timeout` and CI runners stop a command: SIGTERM to the process, then to its group at
    // once. The same stop delivered twice is one signal: the run still writes its report.
    let pid = Pid::from_raw(i32::try_from(runner_pid).expect("a pid"));
    kill(pid, Signal::SIGTERM).expect("SIGTERM is sent");
    killpg(pid, Signal::SIGTERM).expect("SIGTERM is sent to the group");
    let status = run.wait().await.expect("the run ends");
    assert_eq!(
        status.code(),
        Some(143),
        "an interrupted run exits with 128 + SIGTERM ({status}); first row: {first_row}"
    );
    let termination = run.shutdown().await.expect("the run's group is torn down");
    assert!(termination.group_gone, "{termination}");

    let results = std::fs::read_to_string(out.join("results.json"))
        .expect("an interrupted run writes results.json");
    let report: serde_json::Value = serde_json::from_str(&results).expect("valid JSON");
    assert_eq!(report["interrupted"], "SIGTERM", "{results:.2000}");
    let rows = report["results"].as_array().expect("results");
    let interrupted: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| {
            r["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("interrupted:"))
        })
        .collect();
    assert!(
        !interrupted.is_empty(),
        "a row in flight is reported as interrupted: {results:.4000}"
    );
    assert!(
        report["not_started"].as_u64().unwrap_or(0) > 0,
        "the rows after the signal never started"
    );
    let markdown = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        markdown.contains("Interrupted by SIGTERM"),
        "{markdown:.2000}"
    );

    // Every process any row started is gone, and so is its group.
    let mut started = 0;
    for row in rows {
        for process in row["processes"].as_array().into_iter().flatten() {
            let pid = u32::try_from(process["pid"].as_u64().expect("a pid")).expect("a pid");
            started += 1;
            assert!(
                !process_exists(pid) && !group_exists(pid),
                "{} (pid {pid}) of {} outlived the run",
                process["name"],
                row["id"]
            );
        }
    }
    assert!(started > 0, "the rows that ran started processes");
    // A process the run lost track of would have been re-parented to this subreaper.
    let left = live_children_of_this_process();
    assert!(left.is_empty(), "processes left by the run: {left:?}");
}
