//! The teams suites' defect corpus, for `cargo test -p ski-conformance --test trials --
//! teams_defects` (libtest-mimic trials): each row is proven against an adapter broken in one way.
//!
//! The broken adapter is this test binary started again as `<test> --teams-defect DEFECT SKI
//! ARGS…`. It answers through the reference `ski teams` except where its one defect changes an
//! answer (see [`DEFECTS`]). Each defect must make its row fail, with words of the reason the row
//! exists for, and leave the rows it names passing: a defect against one of ski's decisions
//! (`teams-ski`) fails that row while the `teams` row of the same scenario, which judges only the
//! document, still passes. Every row named here also passes against the reference.
//! The concurrency rows have their own broken adapter (`teams_races.rs`).

use crate::defects;
use crate::one_row;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use defects::Defect;
use libtest_mimic::Trial;
use serde_json::{Value, json};
use ski_conformance::Target;

/// The first argument that turns this binary into the broken adapter.
const BROKEN: &str = "--teams-defect";

/// The lead's session key, as the suite uses it.
const LEAD: &str = "agent:main:main";

/// Every defect, the row it must fail and the rows it must leave passing.
const DEFECTS: &[Defect] = &[
    Defect {
        name: "lead-role-member",
        what: "`member list` gives the lead the role member",
        fails: &[("TEAM-SKI-01", "the lead's role")],
        passes: &["TEAM-LC-01"],
    },
    Defect {
        name: "lead-unregistered",
        what: "`member list` leaves the lead out",
        fails: &[("TEAM-LC-01", "the lead is registered as a team member")],
        passes: &[],
    },
    Defect {
        name: "deleted-team-listed-empty",
        what: "`task list` on a team that does not exist lists no tasks",
        fails: &[("TEAM-SKI-02", "is refused with team_not_found")],
        passes: &["TEAM-LC-07"],
    },
    Defect {
        name: "delete-leaves-directory",
        what: "`team delete` reports deleted and leaves the team's directory",
        fails: &[("TEAM-LC-07", "D/alpha-squad is gone")],
        passes: &[],
    },
    Defect {
        name: "teammate-shutdown-delivered",
        what: "anyone's shutdown_request is delivered as the lead's",
        fails: &[("TEAM-SKI-03", "a teammate's shutdown_request is refused")],
        passes: &["TEAM-MB-06"],
    },
    Defect {
        name: "shutdown-request-dropped",
        what: "a shutdown_request is reported sent and never written",
        fails: &[("TEAM-MB-06", "holds a shutdown_request")],
        passes: &[],
    },
    Defect {
        name: "drops-one-in-a-hundred",
        what: "`message send` of one message in TEAM-CC-03's hundred (writer2's #13) reports sent and writes nothing: 99 of 100 delivered, every run, and the runner keeps that observation (no re-run)",
        fails: &[("TEAM-CC-03", "messages injected plus left")],
        passes: &["TEAM-MB-06"],
    },
    Defect {
        name: "xml-unescaped",
        what: "`context inject` puts the messages in the block without escaping them",
        fails: &[("TEAM-MB-04", "parses as <teammate-message> elements")],
        passes: &[],
    },
    Defect {
        name: "inject-keeps-inbox",
        what: "`context inject` leaves the injected messages in the inbox",
        fails: &[("TEAM-MB-05", "messages.jsonl is deleted after injection")],
        passes: &[],
    },
    Defect {
        name: "unknown-dependency-ignored",
        what: "`task create` drops a dependency on a task that does not exist",
        fails: &[("TEAM-SKI-04", "unknown_dependency")],
        passes: &["TEAM-TL-02"],
    },
    Defect {
        name: "no-blocked-by",
        what: "`task show` leaves out blockedBy",
        fails: &[("TEAM-TL-02", "T2.blockedBy")],
        passes: &[],
    },
    Defect {
        name: "kib-limit",
        what: "100KB is 102,400 bytes: a larger message is refused, a smaller one delivered",
        fails: &[("TEAM-SKI-05", "is refused with message_too_large")],
        passes: &["TEAM-SEC-03"],
    },
    Defect {
        name: "hard-delete",
        what: "`task delete` removes the task: shown and claimed afterwards it is task_not_found",
        fails: &[("TEAM-SKI-06", "the deleted task's status")],
        passes: &["TEAM-TL-09"],
    },
    Defect {
        name: "task-kept-after-delete",
        what: "`task delete` reports the task deleted and leaves it pending",
        fails: &[("TEAM-TL-09", "the default list hides the deleted task")],
        passes: &[],
    },
    Defect {
        name: "teammate-id-key",
        what: "`context inject` names each sender by its session key in teammate_id",
        fails: &[("TEAM-SKI-07", "teammate_id (the sender's member name)")],
        passes: &["TEAM-MB-04"],
    },
    Defect {
        name: "no-size-limit",
        what: "a message of any size is delivered",
        fails: &[("TEAM-SEC-03", "message_too_large")],
        passes: &[],
    },
];

/// Plays this module's part when the command line names it (this test program started again
/// as a stand-in), and then exits; otherwise returns.
pub fn play_role(argv: &[String]) {
    if argv.get(1).map(String::as_str) == Some(BROKEN) {
        std::process::exit(broken(&argv[2..]));
    }
}

/// This module's trials (the root runs them with every other module's).
pub fn trials() -> Vec<Trial> {
    defects::trials(
        DEFECTS,
        |id, defect| {
            one_row::run_row(id, |bin_dir, reference| match defect {
                Some(defect) => profile(defect, bin_dir),
                None => Ok(reference),
            })
        },
        Vec::new(),
    )
}

/// The profile of the adapter with `defect` over the reference `ski` in `bin_dir`: the `teams`
/// and `teams-ski` suites, with the reference's capabilities but the busy trace.
fn profile(defect: &str, bin_dir: &Path) -> Result<Target, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let adapter = format!(
        "'{}' {BROKEN} {defect} '{}'",
        exe.display(),
        bin_dir.join("ski").display()
    );
    let mut text = format!("name = \"teams-defect-{defect}\"\n");
    for (suite, capabilities) in [
        (
            "teams",
            "\"teams-core\", \"teams-ledger-read\", \"teams-gate\", \"teams-context\", \
             \"teams-shutdown\", \"teams-maintenance\"",
        ),
        (
            "teams-ski",
            "\"teams-core\", \"teams-context\", \"teams-shutdown\", \"teams-ski-extensions\"",
        ),
    ] {
        text.push_str(&format!(
            "[suites.{suite}]\ncapabilities = [{capabilities}]\n\
             [suites.{suite}.commands]\nadapter = {adapter:?}\n"
        ));
    }
    Target::parse("teams-defect", &text).map_err(|e| e.to_string())
}

// The broken adapter.

/// The global options the suite passes and the command words after them.
#[derive(Clone)]
struct Call {
    root: PathBuf,
    caller: String,
    words: Vec<String>,
}

impl Call {
    fn parse(args: &[String]) -> Self {
        let mut call = Call {
            root: PathBuf::new(),
            caller: String::new(),
            words: Vec::new(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--root" => call.root = args.next().cloned().unwrap_or_default().into(),
                "--as" => call.caller = args.next().cloned().unwrap_or_default(),
                word => call.words.push(word.to_owned()),
            }
        }
        call
    }

    /// The value after `flag` among the command words.
    fn flag(&self, flag: &str) -> Option<&str> {
        let at = self.words.iter().position(|w| w == flag)?;
        self.words.get(at + 1).map(String::as_str)
    }

    /// `ski teams --root R --as CALLER WORDS…`, ready to run.
    fn ski(&self, ski: &str, caller: &str, words: &[String]) -> Command {
        let mut command = Command::new(ski);
        command
            .arg("teams")
            .arg("--root")
            .arg(&self.root)
            .args(["--as", caller])
            .args(words);
        command
    }
}

/// Runs the broken adapter with `[defect, ski, args…]`; returns its exit code.
fn broken(argv: &[String]) -> i32 {
    let [defect, ski, args @ ..] = argv else {
        eprintln!("error: usage: {BROKEN} DEFECT SKI ARGS…");
        return 2;
    };
    let call = Call::parse(args);
    let words: Vec<&str> = call.words.iter().map(String::as_str).collect();
    let shutdown = words.contains(&"shutdown_request");
    let result = match (defect.as_str(), words.as_slice()) {
        ("lead-role-member", ["member", "list", ..]) => rewritten(&call, ski, |value| {
            each_lead(value, |lead| lead["role"] = json!("member"))
        }),
        ("lead-unregistered", ["member", "list", ..]) => rewritten(&call, ski, |value| {
            if let Some(members) = value["members"].as_array_mut() {
                members.retain(|m| m["sessionKey"] != LEAD);
            }
        }),
        ("deleted-team-listed-empty", ["task", "list", team, ..])
            if !call.root.join(team).exists() =>
        {
            answer(json!({"ok": true, "tasks": []}), 0)
        }
        ("delete-leaves-directory", ["team", "delete", team]) => {
            answer(json!({"ok": true, "team": team, "deleted": true}), 0)
        }
        ("teammate-shutdown-delivered", ["message", "send", ..]) if shutdown => {
            let error = call.ski(ski, LEAD, &call.words).exec();
            Err(format!("cannot start {ski}: {error}"))
        }
        ("shutdown-request-dropped", ["message", "send", ..]) if shutdown => {
            answer(json!({"ok": true}), 0)
        }
        ("drops-one-in-a-hundred", ["message", "send", ..])
            if words.last() == Some(&"agent:writer2:main #13") =>
        {
            answer(json!({"ok": true}), 0)
        }
        ("xml-unescaped", ["context", "inject", ..]) => rewritten(&call, ski, |value| {
            for key in ["block", "prompt"] {
                if let Some(text) = value[key].as_str() {
                    value[key] = json!(unescaped(text));
                }
            }
        }),
        ("inject-keeps-inbox", ["context", "inject", team, ..]) => {
            inject_keeping_inbox(&call, ski, team)
        }
        ("unknown-dependency-ignored", ["task", "create", team, ..]) => {
            create_with_known_dependencies(&call, ski, team)
        }
        ("hard-delete", ["task", "delete", team, id]) => hard_delete(&call, ski, team, id),
        ("hard-delete", ["task", "show" | "claim", _, id]) if hard_deleted(&call, id) => answer(
            json!({"ok": false, "error": {"code": "task_not_found", "message": "Task not found"}}),
            2,
        ),
        ("task-kept-after-delete", ["task", "delete", team, id]) => {
            let show = ["task", "show", team, id].map(str::to_owned);
            rewritten(
                &Call {
                    words: show.to_vec(),
                    ..call.clone()
                },
                ski,
                |value| {
                    value["task"]["status"] = json!("deleted");
                },
            )
        }
        ("teammate-id-key", ["context", "inject", ..]) => rewritten(&call, ski, |value| {
            for key in ["block", "prompt"] {
                if let Some(text) = value[key].as_str() {
                    value[key] = json!(sender_keys(text));
                }
            }
        }),
        ("no-blocked-by", ["task", "show", ..]) => rewritten(&call, ski, |value| {
            if let Some(task) = value["task"].as_object_mut() {
                task.remove("blockedBy");
            }
        }),
        ("kib-limit", ["message", "send", team, ..]) => send_up_to(&call, ski, team, 102_400),
        ("no-size-limit", ["message", "send", team, ..]) => send_up_to(&call, ski, team, u64::MAX),
        _ => {
            let error = call.ski(ski, &call.caller, &call.words).exec();
            Err(format!("cannot start {ski}: {error}"))
        }
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            5
        }
    }
}

/// Prints `value` and returns `code`.
fn answer(value: Value, code: i32) -> Result<i32, String> {
    println!("{value}");
    Ok(code)
}

/// Applies `change` to every member object of a `member list` answer that is the lead.
fn each_lead(value: &mut Value, change: impl Fn(&mut Value)) {
    for member in value["members"].as_array_mut().into_iter().flatten() {
        if member["sessionKey"] == LEAD {
            change(member);
        }
    }
}

/// Runs the call through `ski teams` and prints its JSON answer after `change`.
fn rewritten(call: &Call, ski: &str, change: impl FnOnce(&mut Value)) -> Result<i32, String> {
    let output = call
        .ski(ski, &call.caller, &call.words)
        .output()
        .map_err(|e| format!("cannot run {ski}: {e}"))?;
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    let mut value: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("{ski} printed no JSON: {e}"))?;
    change(&mut value);
    answer(value, output.status.code().unwrap_or(5))
}

/// The file where `hard-delete` keeps the ids it removed.
fn hard_deleted_file(call: &Call) -> PathBuf {
    call.root.join(".hard-deleted")
}

/// Whether `hard-delete` removed task `id`.
fn hard_deleted(call: &Call, id: &str) -> bool {
    std::fs::read_to_string(hard_deleted_file(call))
        .is_ok_and(|text| text.lines().any(|line| line == id))
}

/// `task delete` that removes the task: deleted through `ski teams`, then remembered so that
/// showing or claiming it is task_not_found; the answer carries no status.
fn hard_delete(call: &Call, ski: &str, team: &str, id: &str) -> Result<i32, String> {
    let output = call
        .ski(ski, &call.caller, &call.words)
        .output()
        .map_err(|e| format!("cannot run {ski}: {e}"))?;
    if !output.status.success() {
        print!("{}", String::from_utf8_lossy(&output.stdout));
        return Ok(output.status.code().unwrap_or(5));
    }
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(hard_deleted_file(call))
        .and_then(|mut f| writeln!(f, "{id}"))
        .map_err(|e| format!("cannot record the deletion: {e}"))?;
    answer(
        json!({"ok": true, "deleted": true, "task": {"id": id}, "team": team}),
        0,
    )
}

/// `text` with every `teammate_id="NAME"` turned into the suite's session key of that member,
/// `agent:NAME:main` (the lead, `lead`, is `agent:main:main`).
fn sender_keys(text: &str) -> String {
    const ATTRIBUTE: &str = "teammate_id=\"";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(ATTRIBUTE) {
        let (before, after) = rest.split_at(at + ATTRIBUTE.len());
        out.push_str(before);
        let end = after.find('"').unwrap_or(after.len());
        let name = &after[..end];
        if name == "lead" {
            out.push_str(LEAD);
        } else {
            out.push_str(&format!("agent:{name}:main"));
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with the XML escapes of the block undone.
fn unescaped(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The inbox file of `key` in `team`, from `ski teams inbox path`.
fn inbox_of(call: &Call, ski: &str, team: &str, key: &str) -> Result<PathBuf, String> {
    let words = ["inbox", "path", team, key].map(str::to_owned);
    let located = call
        .ski(ski, LEAD, &words)
        .output()
        .map_err(|e| format!("cannot run {ski}: {e}"))?;
    let located: Value = serde_json::from_slice(&located.stdout)
        .map_err(|e| format!("inbox path printed no JSON: {e}"))?;
    Ok(call.root.join(located["path"].as_str().unwrap_or_default()))
}

/// `context inject` through `ski teams`, with the caller's inbox put back as it was.
fn inject_keeping_inbox(call: &Call, ski: &str, team: &str) -> Result<i32, String> {
    let inbox = inbox_of(call, ski, team, &call.caller)?;
    let kept = std::fs::read(&inbox).ok();
    let output = call
        .ski(ski, &call.caller, &call.words)
        .output()
        .map_err(|e| format!("cannot run {ski}: {e}"))?;
    if let Some(kept) = kept {
        std::fs::write(&inbox, kept).map_err(|e| format!("cannot put the inbox back: {e}"))?;
    }
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    Ok(output.status.code().unwrap_or(5))
}

/// `task create` without the `--depends-on` ids that name no task of `team`.
fn create_with_known_dependencies(call: &Call, ski: &str, team: &str) -> Result<i32, String> {
    let mut words = Vec::new();
    let mut given = call.words.iter();
    while let Some(word) = given.next() {
        if word != "--depends-on" {
            words.push(word.clone());
            continue;
        }
        let Some(id) = given.next() else { break };
        let show = ["task", "show", team, id].map(str::to_owned);
        let known = call
            .ski(ski, LEAD, &show)
            .output()
            .map_err(|e| format!("cannot run {ski}: {e}"))?
            .status
            .success();
        if known {
            words.extend(["--depends-on".to_owned(), id.clone()]);
        }
    }
    let error = call.ski(ski, &call.caller, &words).exec();
    Err(format!("cannot start {ski}: {error}"))
}

/// `message send --content-file F`: a content of more than 100,000 bytes and at most `limit`
/// bytes is appended to the recipient's inbox here, one line without a lock; anything else goes
/// to `ski teams`, which refuses more than 100,000 bytes.
fn send_up_to(call: &Call, ski: &str, team: &str, limit: u64) -> Result<i32, String> {
    let (Some(to), Some(file)) = (call.flag("--to"), call.flag("--content-file")) else {
        let error = call.ski(ski, &call.caller, &call.words).exec();
        return Err(format!("cannot start {ski}: {error}"));
    };
    let size = std::fs::metadata(file)
        .map_err(|e| format!("cannot read {file}: {e}"))?
        .len();
    if size <= 100_000 || size > limit {
        let error = call.ski(ski, &call.caller, &call.words).exec();
        return Err(format!("cannot start {ski}: {error}"));
    }
    let content = std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))?;
    let inbox = inbox_of(call, ski, team, to)?;
    let message = json!({"id": format!("stand-in-{size}"), "type": "message",
        "from": call.caller, "to": to, "content": content, "timestamp": 1});
    let mut line = message.to_string();
    line.push('\n');
    if let Some(dir) = inbox.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the inbox: {e}"))?;
    }
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&inbox)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| format!("cannot append to the inbox: {e}"))?;
    answer(json!({"ok": true, "message": message}), 0)
}
