//! The kiro suites' defect corpus, for `cargo test -p ski-conformance --test trials --
//! kiro_defects` (libtest-mimic trials): each row is proven against an adapter broken in one way.
//!
//! The broken adapter is this test binary started again as `<test> --kiro-defect DEFECT SKI
//! LEFTOVER ARGS…`. It answers through the reference `ski kiro` except where its one defect
//! changes what happens (see [`DEFECTS`]); LEFTOVER is a file where it notes a process group it
//! leaves behind, which the test ends. Some defects put a `kiro-cli` of their own first on `PATH`:
//! this binary again, as `<test> --kiro-cli-shim MODE REAL ARGS…`, in front of the suite's
//! `kiro-cli`. Each defect must make its rows fail, with words of the reason the row exists for,
//! and leave the rows it names passing: a defect against one of ski's decisions (`kiro-ski`)
//! fails that row while the `kiro` rows of the same rule, which judge only the document, still
//! pass. Every row named here also passes against the reference.

use crate::defects;
use crate::one_row;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use defects::Defect;
use libtest_mimic::Trial;
use serde_json::Value;
use ski::transport::child::reap_adopted_orphans;
use ski_conformance::Target;
use ski_conformance::runner::ScenarioResult;

/// The first argument that turns this binary into the broken adapter.
const BROKEN: &str = "--kiro-defect";
/// The first argument that turns this binary into the `kiro-cli` in front of the suite's.
const SHIM: &str = "--kiro-cli-shim";
/// The first argument that turns this binary into a process that waits until it is killed.
const IDLE: &str = "--idle";
/// The first argument that turns this binary into a process that ends by itself a moment later.
const LINGER: &str = "--linger";
/// How long a lingering process lives: a moment for a person, ages for a check that looks at once.
const LINGERING: std::time::Duration = std::time::Duration::from_secs(2);

/// Every defect, the rows it must fail and the rows it must leave passing.
const DEFECTS: &[Defect] = &[
    Defect {
        name: "dash-name-accepted",
        what: "the agent name is checked against `^[a-zA-Z0-9_-]+$` only",
        fails: &[("KIRO-SKI-01", "is refused")],
        passes: &["BR-01.3", "BR-T08"],
    },
    Defect {
        name: "name-unchecked",
        what: "the agent name is not checked against the document's pattern",
        fails: &[("BR-01.3", "is refused"), ("BR-T08", "is refused")],
        passes: &[],
    },
    Defect {
        name: "env-file-in-bot-dir",
        what: "the bot reads .env from its own directory, `bot/` in the world, and the profile does not say so",
        fails: &[
            ("BR-01.7", "the level loaded at startup"),
            ("BR-T06", "accepts the configuration"),
        ],
        passes: &[],
    },
    Defect {
        name: "env-file-in-bot-dir-declared",
        what: "the bot reads .env from `bot/`, as the profile's env_file says",
        fails: &[],
        passes: &["BR-01.7", "BR-T06"],
    },
    Defect {
        name: "stop-reason-dropped",
        what: "turn_end carries no stopReason and the profile does not say so",
        fails: &[("BR-07.3", "the stopReason")],
        passes: &[],
    },
    Defect {
        name: "stop-reason-dropped-declared",
        what: "turn_end carries no stopReason, as the profile's stop_reason = absent says",
        fails: &[],
        passes: &["BR-07.3"],
    },
    Defect {
        name: "missing-template-tolerated",
        what: "a missing template only skips the sync: kiro-cli is started anyway",
        fails: &[("BR-02.5", "exits 3")],
        passes: &[],
    },
    Defect {
        name: "first-violation-only",
        what: "only the first prerequisite failure is reported",
        fails: &[(
            "KIRO-SKI-02",
            "every prerequisite failure is reported at once",
        )],
        passes: &["BR-02.5"],
    },
    Defect {
        name: "link-target-emptied",
        what: "a prefixed link in the kiro home is followed when it is deleted",
        fails: &[(
            "KIRO-SKI-03",
            "the target of a prefixed link is not touched",
        )],
        passes: &["BR-03.2", "BR-T13"],
    },
    Defect {
        name: "name-anywhere",
        what: "the sync deletes entries that hold the agent name anywhere, not only at the start",
        fails: &[
            (
                "BR-03.2",
                "entries without the prefix are neither modified nor deleted",
            ),
            (
                "BR-T13",
                "entries without the prefix are neither modified nor deleted",
            ),
        ],
        passes: &[],
    },
    Defect {
        name: "template-cap-ignored",
        what: "the safety cap counts only the kiro home",
        fails: &[("KIRO-SKI-04", "a template with 21 prefixed entries")],
        passes: &["BR-03.3", "BR-T10"],
    },
    Defect {
        name: "home-cap-ignored",
        what: "a kiro home with more than 20 prefixed entries is synced anyway",
        fails: &[
            ("BR-03.3", "a home with 21 prefixed entries is refused"),
            ("BR-T10", "a home with 21 prefixed entries is refused"),
        ],
        passes: &[],
    },
    Defect {
        name: "busy-cancel-unread",
        what: "kiro-cli is closed while the cancel sent in BUSY still waits in its pipe",
        fails: &[],
        passes: &["BR-05.4", "BR-06.3"],
    },
    Defect {
        name: "one-cancel",
        what: "no session/cancel is sent in BUSY",
        fails: &[
            ("BR-05.4", "the states session/cancel was sent in"),
            ("BR-06.3", "the states session/cancel was sent in"),
        ],
        passes: &[],
    },
    Defect {
        name: "ready-cancel-unsent",
        what: "the cancel reported in READY is never written",
        fails: &[
            (
                "BR-05.4",
                "the READY session/cancel reaches kiro-cli before session/prompt",
            ),
            (
                "BR-06.3",
                "the READY session/cancel reaches kiro-cli before session/prompt",
            ),
        ],
        passes: &[],
    },
    Defect {
        name: "unreaped-grandchild",
        what: "a member of kiro-cli's group is left a zombie nobody reaps",
        fails: &[],
        passes: &["BR-06.6"],
    },
    Defect {
        name: "late-group-end",
        what: "kiro-cli's group still has a member for a moment after the adapter exits",
        fails: &[],
        passes: &["BR-06.6", "BR-T04"],
    },
    Defect {
        name: "shutdown-group-unseen",
        what: "the adapter reports kiro-cli's group as not gone after its clean shutdown (looked at once, while a member was still exiting)",
        fails: &[],
        passes: &["BR-T01"],
    },
    Defect {
        name: "live-grandchild",
        what: "a member of kiro-cli's group is left running after the kill",
        fails: &[("BR-06.6", "no process of kiro-cli's group is left")],
        passes: &[],
    },
];

/// Plays this module's part when the command line names it (this test program started again
/// as a stand-in), and then exits; otherwise returns.
pub fn play_role(argv: &[String]) {
    match argv.get(1).map(String::as_str) {
        Some(BROKEN) => std::process::exit(broken(&argv[2..])),
        Some(SHIM) => std::process::exit(shim(&argv[2..])),
        Some(IDLE) => loop {
            std::thread::park();
        },
        Some(LINGER) => {
            std::thread::sleep(LINGERING);
            std::process::exit(0)
        }
        _ => {}
    }
}

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    defects::trials(DEFECTS, run_row, Vec::new())
}

/// Runs row `id` against the adapter with `defect` (or the reference), then ends the process
/// group the adapter noted it left behind, and reaps what this process adopted.
fn run_row(id: &str, defect: Option<&str>) -> Result<ScenarioResult, String> {
    let leftover = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let result = one_row::run_row(id, |bin_dir, reference| match defect {
        Some(defect) => profile(defect, bin_dir, leftover.path()),
        None => Ok(reference),
    });
    if let Ok(text) = std::fs::read_to_string(leftover.path())
        && let Ok(pgid) = text.trim().parse::<i32>()
        && pgid > 1
    {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    reap_adopted_orphans();
    result
}

/// The profile of the adapter with `defect` over the reference `ski` in `bin_dir`: the `kiro`
/// and `kiro-ski` suites with the reference's capabilities and settings.
fn profile(defect: &str, bin_dir: &Path, leftover: &Path) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let adapter = format!(
        "'{}' {BROKEN} {defect} '{}' '{}'",
        exe.display(),
        bin_dir.join("ski").display(),
        leftover.display()
    );
    let mut text = format!("name = \"kiro-defect-{defect}\"\n");
    // A defect the profile declares is described by the setting that says so.
    let declared = match defect {
        "env-file-in-bot-dir-declared" => ", env_file = \"bot/.env\"",
        "stop-reason-dropped-declared" => ", stop_reason = \"absent\"",
        _ => "",
    };
    for (suite, extra) in [("kiro", ""), ("kiro-ski", ", \"kiro-ski-extensions\"")] {
        text.push_str(&format!(
            "[suites.{suite}]\n\
             capabilities = [\"kiro-check\", \"kiro-provision\", \"kiro-echo\"{extra}]\n\
             settings = {{ mock_agent = \"{{bin_dir}}/ski-mock-agent\", grace_ms = \"300\"{declared} }}\n\
             [suites.{suite}.commands]\nadapter = {adapter:?}\n"
        ));
    }
    Target::parse("kiro-defect", &text).map_err(|e| e.to_string())
}

// The broken adapter.

/// Runs the broken adapter with `[defect, ski, leftover, args…]`; returns its exit code.
fn broken(argv: &[String]) -> i32 {
    let [defect, ski, leftover, args @ ..] = argv else {
        eprintln!("error: usage: {BROKEN} DEFECT SKI LEFTOVER ARGS…");
        return 2;
    };
    let adapter = Adapter {
        ski: ski.clone(),
        args: args.to_vec(),
    };
    let command = args.first().map(String::as_str);
    let name = std::env::var("KIRO_AGENT_NAME").unwrap_or_default();
    let result = match (defect.as_str(), command) {
        ("dash-name-accepted", Some("check")) if name.starts_with('-') => {
            adapter.name_accepted(&name, &format!("x{}", &name[1..]))
        }
        ("name-unchecked", Some("check")) if !document_name(&name) => {
            let stand_in: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { 'x' })
                .collect();
            adapter.name_accepted(&name, &stand_in)
        }
        ("env-file-in-bot-dir" | "env-file-in-bot-dir-declared", _) => adapter.in_bot_dir(),
        ("stop-reason-dropped" | "stop-reason-dropped-declared", Some("echo")) => {
            adapter.through(None, |line| {
                let mut event: Value = serde_json::from_str(line).ok()?;
                if let Some(end) = event.as_object_mut().filter(|e| e["event"] == "turn_end") {
                    end.remove("stopReason");
                }
                Some(event.to_string())
            })
        }
        ("shutdown-group-unseen", Some("echo")) => adapter.through(None, |line| {
            let mut event: Value = serde_json::from_str(line).ok()?;
            if let Some(closed) = event.as_object_mut().filter(|e| e["event"] == "closed") {
                closed.insert("groupGone".to_owned(), Value::Bool(false));
            }
            Some(event.to_string())
        }),
        ("missing-template-tolerated", Some("echo")) => adapter.without_template(&name),
        ("first-violation-only", Some("check" | "echo")) => {
            adapter.through(None, first_violation_only)
        }
        ("link-target-emptied", Some("provision")) => {
            empty_link_targets(&name).and_then(|()| adapter.exec())
        }
        ("name-anywhere", Some("provision")) => delete_holding(&name).and_then(|()| adapter.exec()),
        ("template-cap-ignored", Some("provision")) => adapter.sync_past_cap(&name, Cap::Home),
        ("home-cap-ignored", Some("provision")) => adapter.sync_past_cap(&name, Cap::Template),
        ("busy-cancel-unread", Some("echo")) => {
            adapter.through(Some("drop-busy-cancel"), |line| Some(line.to_owned()))
        }
        ("one-cancel", Some("echo")) => adapter.through(Some("drop-busy-cancel"), |line| {
            let busy_cancel = serde_json::from_str::<Value>(line)
                .is_ok_and(|e| e["event"] == "cancel_sent" && e["state"] == "BUSY");
            (!busy_cancel).then(|| line.to_owned())
        }),
        ("ready-cancel-unsent", Some("echo")) => {
            adapter.through(Some("drop-ready-cancel"), |line| Some(line.to_owned()))
        }
        ("unreaped-grandchild", Some("echo")) if first_world() => {
            adapter.grandchild(Joins::Nothing)
        }
        ("late-group-end", Some("echo")) if first_world() => adapter.grandchild(Joins::Lingering),
        ("live-grandchild", Some("echo")) if first_world() => {
            adapter.grandchild(Joins::Live(Path::new(leftover)))
        }
        _ => adapter.exec(),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            5
        }
    }
}

/// `ski kiro ARGS…`.
struct Adapter {
    ski: String,
    args: Vec<String>,
}

/// What joins kiro-cli's group once `ski kiro` is done with it.
enum Joins<'a> {
    Nothing,
    /// A process that ends by itself a moment later.
    Lingering,
    /// A live process, whose group is noted in the file.
    Live(&'a Path),
}

/// Which side of the sync the safety cap counts.
#[derive(Clone, Copy, PartialEq)]
enum Cap {
    Home,
    Template,
}

impl Adapter {
    fn command(&self) -> Command {
        let mut command = Command::new(&self.ski);
        command.arg("kiro").args(&self.args);
        command
    }

    /// Becomes `ski kiro ARGS…`.
    fn exec(&self) -> Result<i32, String> {
        let error = self.command().exec();
        Err(format!("cannot start {}: {error}", self.ski))
    }

    /// Runs `ski kiro ARGS…` to its end, with `shim` (a [`shim`] mode) as the `kiro-cli` on
    /// `PATH` in front of the suite's; prints each line of its stdout that `line` keeps (as
    /// `line` rewrites it) as soon as it comes. Returns its exit code.
    fn through(
        &self,
        shim: Option<&str>,
        mut line: impl FnMut(&str) -> Option<String>,
    ) -> Result<i32, String> {
        let mut command = self.command();
        if let Some(mode) = shim {
            command.env("PATH", shim_path(mode)?);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.ski))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut out = std::io::stdout().lock();
        for read in BufReader::new(stdout).lines() {
            let read = read.map_err(|e| format!("cannot read {}: {e}", self.ski))?;
            if let Some(kept) = line(&read) {
                writeln!(out, "{kept}")
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("cannot print: {e}"))?;
            }
        }
        let status = child.wait().map_err(|e| format!("cannot wait: {e}"))?;
        Ok(status.code().unwrap_or(5))
    }

    /// `check` with an agent name `ski kiro` refuses, as a build that accepts it: `ski kiro`
    /// checks `stand_in` instead, and the name is put back in what it prints.
    fn name_accepted(&self, name: &str, stand_in: &str) -> Result<i32, String> {
        let output = self
            .command()
            .env("KIRO_AGENT_NAME", stand_in)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.ski))?;
        let put_back = |text: &[u8]| String::from_utf8_lossy(text).replace(stand_in, name);
        print!("{}", put_back(&output.stdout));
        eprint!("{}", put_back(&output.stderr));
        Ok(output.status.code().unwrap_or(5))
    }

    /// Runs `ski kiro ARGS…` in `bot/` of the world: a bot that reads `.env` from its own
    /// directory.
    fn in_bot_dir(&self) -> Result<i32, String> {
        std::fs::create_dir_all("bot").map_err(|e| format!("cannot create bot/: {e}"))?;
        let error = self.command().current_dir("bot").exec();
        Err(format!("cannot start {}: {error}", self.ski))
    }

    /// `echo` when the template is missing: a bot that only skips the sync, so kiro-cli starts
    /// (with a template of the one agent file `ski kiro` needs to start it).
    fn without_template(&self, name: &str) -> Result<i32, String> {
        let configured = std::env::var("KIRO_CONFIG_PATH").unwrap_or_default();
        if Path::new(&configured).is_dir() {
            return self.exec();
        }
        let stand_in = std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join("defect-template");
        let agent = stand_in.join("agents").join(format!("{name}.json"));
        std::fs::create_dir_all(stand_in.join("agents")).map_err(|e| e.to_string())?;
        std::fs::write(&agent, "{}").map_err(|e| e.to_string())?;
        let error = self.command().env("KIRO_CONFIG_PATH", &stand_in).exec();
        Err(format!("cannot start {}: {error}", self.ski))
    }

    /// `provision`: when `ski kiro` refuses a sync only because the side the cap should not count
    /// has more than 20 prefixed entries, syncs anyway (deletes the home's prefixed entries,
    /// copies the template's) and reports success.
    fn sync_past_cap(&self, prefix: &str, counted: Cap) -> Result<i32, String> {
        let output = self
            .command()
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.ski))?;
        let home = PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".kiro");
        let template = PathBuf::from(std::env::var("KIRO_CONFIG_PATH").unwrap_or_default());
        let (ignored, kept) = match counted {
            Cap::Home => (&template, &home),
            Cap::Template => (&home, &template),
        };
        let past_cap = output.status.code() == Some(3)
            && prefixed(ignored, prefix).len() > 20
            && prefixed(kept, prefix).len() <= 20;
        if !past_cap {
            print!("{}", String::from_utf8_lossy(&output.stdout));
            eprint!("{}", String::from_utf8_lossy(&output.stderr));
            return Ok(output.status.code().unwrap_or(5));
        }
        let mut deleted = Vec::new();
        for entry in prefixed(&home, prefix) {
            let path = home.join(&entry);
            std::fs::remove_dir_all(&path)
                .or_else(|_| std::fs::remove_file(&path))
                .map_err(|e| format!("cannot delete {}: {e}", path.display()))?;
            deleted.push(entry);
        }
        let mut copied = Vec::new();
        for entry in prefixed(&template, prefix) {
            copy(&template.join(&entry), &home.join(&entry))?;
            copied.push(entry);
        }
        println!(
            "{}",
            serde_json::json!({"ok": true, "kiroHome": home, "deleted": deleted, "copied": copied})
        );
        Ok(0)
    }

    /// `echo` whose kiro-cli group gets one more member: a process this adapter starts and never
    /// reaps. It joins the group before kiro-cli starts (the `kiro-cli` in front asks for it and
    /// waits), dies with the group, and stays a zombie (`ski kiro` judges the group by its live
    /// members, as the contract allows). Once `ski kiro` is done, `joins` says what joins the
    /// group the zombie keeps.
    fn grandchild(&self, joins: Joins<'_>) -> Result<i32, String> {
        let name = format!("ski-kiro-defect-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).map_err(|e| e.to_string())?;
        let listener = UnixListener::bind_addr(&address).map_err(|e| e.to_string())?;
        let joined = std::thread::spawn(move || -> Result<(u32, std::process::Child), String> {
            let (mut stream, _) = listener.accept().map_err(|e| e.to_string())?;
            let mut pid = String::new();
            BufReader::new(&stream)
                .read_line(&mut pid)
                .map_err(|e| e.to_string())?;
            let pgid: u32 = pid
                .trim()
                .parse()
                .map_err(|_| format!("a pid, got {pid:?}"))?;
            let member = member(pgid, IDLE)?;
            stream.write_all(b"ok\n").map_err(|e| e.to_string())?;
            Ok((pgid, member))
        });
        let code = self.through(Some(&format!("join:{name}")), |line| Some(line.to_owned()))?;
        if !joined.is_finished() {
            // kiro-cli never asked: wake the listener so that the thread ends.
            let _ = UnixStream::connect_addr(&address);
        }
        let (pgid, zombie) = joined
            .join()
            .map_err(|_| "the join thread panicked".to_owned())??;
        // Never reaped here: the process stays a zombie until whoever adopts it reaps it.
        std::mem::forget(zombie);
        match joins {
            Joins::Nothing => {}
            Joins::Lingering => std::mem::forget(member(pgid, LINGER)?),
            Joins::Live(leftover) => {
                std::mem::forget(member(pgid, IDLE)?);
                std::fs::write(leftover, pgid.to_string()).map_err(|e| e.to_string())?;
            }
        }
        Ok(code)
    }
}

/// Starts this binary as `mode` ([`IDLE`] or [`LINGER`]) in process group `pgid`.
fn member(pgid: u32, mode: &str) -> Result<std::process::Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .arg(mode)
        .process_group(i32::try_from(pgid).map_err(|e| e.to_string())?)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start a member of group {pgid}: {e}"))
}

/// Whether `name` matches the document's pattern `^[a-zA-Z0-9_-]+$`.
fn document_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether this is the first world of the row (the defect applies to it alone): the first call
/// to make the marker in the row's temp dir.
fn first_world() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open("../defect-applied")
        .is_ok()
}

/// A `PATH` with a `kiro-cli` first that is this binary as a [`shim`] in `mode` in front of the
/// suite's `kiro-cli` (the first on the current `PATH`).
fn shim_path(mode: &str) -> Result<String, String> {
    let path = std::env::var("PATH").unwrap_or_default();
    let real = std::env::split_paths(&path)
        .map(|dir| dir.join("kiro-cli"))
        .find(|candidate| candidate.is_file())
        .ok_or("no kiro-cli on PATH")?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join("defect-bin");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let script = dir.join("kiro-cli");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec '{}' {SHIM} '{mode}' '{}' \"$@\"\n",
            exe.display(),
            real.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    Ok(format!("{}:{path}", dir.display()))
}

/// Keeps the first violation of a refusal's list.
fn first_violation_only(line: &str) -> Option<String> {
    let Ok(mut value) = serde_json::from_str::<Value>(line) else {
        return Some(line.to_owned());
    };
    if let Some(violations) = value["violations"].as_array_mut() {
        violations.truncate(1);
    }
    Some(value.to_string())
}

/// Empties the directory behind every prefixed link of the kiro home (a deletion that follows
/// links).
fn empty_link_targets(prefix: &str) -> Result<(), String> {
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".kiro");
    for entry in prefixed(&home, prefix) {
        let path = home.join(entry);
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if is_link && path.is_dir() {
            let target = std::fs::canonicalize(&path).map_err(|e| e.to_string())?;
            std::fs::remove_dir_all(&target).map_err(|e| e.to_string())?;
            std::fs::create_dir(&target).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Deletes the kiro home's entries whose name holds `name` after its start (those a sync that
/// matches the name anywhere deletes beyond `ski kiro`'s).
fn delete_holding(name: &str) -> Result<(), String> {
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".kiro");
    for dir in ["agents", "steering", "skills"] {
        let Ok(entries) = std::fs::read_dir(home.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if file.contains(name) && !file.starts_with(name) {
                let path = entry.path();
                std::fs::remove_dir_all(&path)
                    .or_else(|_| std::fs::remove_file(&path))
                    .map_err(|e| format!("cannot delete {}: {e}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// The entries `dir/name` of `agents/`, `steering/`, `skills/` under `root` whose name starts
/// with `prefix`.
fn prefixed(root: &Path, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for dir in ["agents", "steering", "skills"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(prefix) {
                found.push(format!("{dir}/{name}"));
            }
        }
    }
    found.sort();
    found
}

/// Copies a file or a directory tree.
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    if from.is_dir() {
        std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
        for entry in std::fs::read_dir(from)
            .map_err(|e| e.to_string())?
            .flatten()
        {
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
        return Ok(());
    }
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("cannot copy {}: {e}", from.display()))
}

// The kiro-cli in front of the suite's.

/// Runs the `kiro-cli` in front with `[mode, real, args…]`; returns its exit code.
///
/// - `join:NAME`: asks the adapter listening on the abstract socket NAME to add a member to this
///   process group, waits until it has, then becomes the real kiro-cli;
/// - `drop-busy-cancel`, `drop-ready-cancel`: runs the real kiro-cli and passes it every line the
///   client writes except each `session/cancel` after (BUSY) or before (READY) `session/prompt`.
fn shim(argv: &[String]) -> i32 {
    let [mode, real, args @ ..] = argv else {
        eprintln!("kiro-cli shim: usage: {SHIM} MODE REAL ARGS…");
        return 2;
    };
    let result = match mode.strip_prefix("join:") {
        Some(name) => join(name).and_then(|()| {
            let error = Command::new(real).args(args).exec();
            Err(format!("cannot start {real}: {error}"))
        }),
        None => filter(real, args, mode == "drop-busy-cancel"),
    };
    result.unwrap_or_else(|message| {
        eprintln!("kiro-cli shim: {message}");
        1
    })
}

/// Asks the adapter on the abstract socket `name` to add a member to this process group.
fn join(name: &str) -> Result<(), String> {
    let address = SocketAddr::from_abstract_name(name.as_bytes()).map_err(|e| e.to_string())?;
    let mut stream = UnixStream::connect_addr(&address).map_err(|e| e.to_string())?;
    writeln!(stream, "{}", std::process::id()).map_err(|e| e.to_string())?;
    let mut ack = String::new();
    stream.read_to_string(&mut ack).map_err(|e| e.to_string())?;
    if ack.trim() == "ok" {
        Ok(())
    } else {
        Err(format!("the adapter answered {ack:?}"))
    }
}

/// Runs `real ARGS…` and passes it stdin's lines but the cancels `after_prompt` selects.
fn filter(real: &str, args: &[String], after_prompt: bool) -> Result<i32, String> {
    let mut child = Command::new(real)
        .args(args)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {real}: {e}"))?;
    let mut to_child = child.stdin.take().ok_or("no stdin")?;
    let mut prompted = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let method = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|m| m["method"].as_str().map(str::to_owned));
        match method.as_deref() {
            Some("session/prompt") => prompted = true,
            Some("session/cancel") if prompted == after_prompt => continue,
            _ => {}
        }
        if writeln!(to_child, "{line}")
            .and_then(|()| to_child.flush())
            .is_err()
        {
            break;
        }
    }
    drop(to_child);
    let status = child.wait().map_err(|e| e.to_string())?;
    Ok(status.code().unwrap_or(1))
}
