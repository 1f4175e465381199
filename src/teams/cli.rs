//! `ski teams`: the command-line adapter over the agent-teams reference implementation.
//!
//! Every command prints one JSON document on stdout: `{"ok": true, …}`, or on refusal
//! `{"ok": false, "error": {"code", "message", …}}` together with `error: …` on stderr. Exit
//! codes are those of `ski::exit`: 0 ok, 2 invalid input or a refused operation, 3 an unusable
//! teams directory or ledger, 5 an internal failure (a busy budget that ran out included).
//! `team list` lists every team it can read, and a team whose config.json cannot be read with its
//! `error` (then `"ok": false`, code `team_unreadable`, exit 3). A drain (`inbox read`, `context
//! inject`) removes its messages only once its JSON was written out; commands that only read open
//! the ledger read-only and write nothing. The contract is `conformance/targets/teams-adapter.md`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::clock::Clock;
use super::error::{TeamsError, TeamsResult};
use super::ledger::{BusyPolicy, NewTask, TaskFilter, TaskStatus};
use super::mailbox::{self, MessageKind};
use super::names::check_team_name;
use super::team::{Delivery, OpenTeam, Outgoing, Teams};
use crate::cli::output;
use crate::exit::FailureClass;

/// What `ski teams` is, in one line (also the stub `ski --help` lists before it is built).
pub const ABOUT: &str =
    "Agent teams: a lead and teammates sharing a SQLite task ledger and JSONL inboxes";

const LONG_ABOUT: &str = "Agent teams: a lead and teammates sharing a SQLite task ledger and JSONL inboxes.

The root (--root, else $OPENCLAW_STATE_DIR/teams, else ~/.openclaw/teams) holds one directory per
team: config.json, ledger.db (SQLite, WAL) and inbox/<sanitised session key>/messages.jsonl.
Every command acts as the session key given with --as.

Every command prints JSON on stdout ({\"ok\": true, …} or {\"ok\": false, \"error\": {\"code\", …}}).
Exit codes: 0 ok; 2 invalid input or a refused operation; 3 unusable teams directory or ledger;
5 internal failure, including a ledger that stayed locked past --busy-timeout-ms.
Time comes from --now-ms (or SKI_TEAMS_NOW_MS) when given, else from the system clock.";

const EXAMPLES: &str = "Examples:
  ski teams --root D --as agent:main:main team create alpha-squad
  ski teams --root D --as agent:main:main member spawn alpha-squad researcher
      Prints the teammate, with its session key (agent:general-purpose:teammate:UUID).
  ski teams --root D --as agent:main:main task create alpha-squad --subject Parse --description 'the parser'
  ski teams --root D --as agent:main:main task claim alpha-squad 1
  ski teams --root D --as agent:main:main team board alpha-squad";

/// One example per subcommand, shown under its `--help` (`D` a teams root, the lead
/// `agent:main:main`).
const SUBCOMMAND_EXAMPLES: &[(&str, &str, &str)] = &[
    (
        "team",
        "create",
        "ski teams --root D --as agent:main:main team create alpha-squad",
    ),
    (
        "team",
        "show",
        "ski teams --root D --as agent:main:main team show alpha-squad",
    ),
    (
        "team",
        "board",
        "ski teams --root D --as agent:main:main team board alpha-squad",
    ),
    (
        "team",
        "list",
        "ski teams --root D --as agent:main:main team list",
    ),
    (
        "team",
        "shutdown",
        "ski teams --root D --as agent:main:main team shutdown alpha-squad",
    ),
    (
        "team",
        "delete",
        "ski teams --root D --as agent:main:main team delete alpha-squad",
    ),
    (
        "member",
        "spawn",
        "ski teams --root D --as agent:main:main member spawn alpha-squad researcher",
    ),
    (
        "member",
        "join",
        "ski teams --root D --as agent:reviewer:main member join alpha-squad reviewer",
    ),
    (
        "member",
        "list",
        "ski teams --root D --as agent:main:main member list alpha-squad",
    ),
    (
        "member",
        "respond-shutdown",
        "ski teams --root D --as KEY member respond-shutdown alpha-squad --request-id REQ --approve\n      (KEY: the teammate's session key; REQ: the requestId of the shutdown_request it read)",
    ),
    (
        "task",
        "create",
        "ski teams --root D --as agent:main:main task create alpha-squad --subject Parse --description 'the parser'",
    ),
    (
        "task",
        "list",
        "ski teams --root D --as agent:main:main task list alpha-squad --available",
    ),
    (
        "task",
        "next-available",
        "ski teams --root D --as agent:main:main task next-available alpha-squad",
    ),
    (
        "task",
        "show",
        "ski teams --root D --as agent:main:main task show alpha-squad 1",
    ),
    (
        "task",
        "claim",
        "ski teams --root D --as agent:main:main task claim alpha-squad 1",
    ),
    (
        "task",
        "complete",
        "ski teams --root D --as agent:main:main task complete alpha-squad 1 --summary done",
    ),
    (
        "task",
        "delete",
        "ski teams --root D --as agent:main:main task delete alpha-squad 2",
    ),
    (
        "task",
        "release",
        "ski teams --root D --as agent:main:main task release alpha-squad 1",
    ),
    (
        "task",
        "depend",
        "ski teams --root D --as agent:main:main task depend alpha-squad 2 --on 1",
    ),
    (
        "task",
        "activity",
        "ski teams --root D --as agent:main:main task activity alpha-squad --limit 10",
    ),
    (
        "message",
        "send",
        "ski teams --root D --as agent:main:main message send alpha-squad --broadcast --content 'stand-up in 5'",
    ),
    (
        "inbox",
        "read",
        "ski teams --root D --as agent:main:main inbox read alpha-squad --keep",
    ),
    (
        "inbox",
        "path",
        "ski teams --root D --as agent:main:main inbox path alpha-squad agent:main:main",
    ),
    (
        "context",
        "inject",
        "ski teams --root D --as agent:main:main context inject alpha-squad",
    ),
    (
        "maintenance",
        "checkpoint",
        "ski teams --root D --as agent:main:main maintenance checkpoint alpha-squad",
    ),
    (
        "maintenance",
        "check",
        "ski teams --root D --as agent:main:main maintenance check alpha-squad",
    ),
    (
        "maintenance",
        "cleanup",
        "ski teams --root D --as agent:main:main maintenance cleanup alpha-squad --older-than-ms 3600000",
    ),
];

/// `ski teams`'s arguments with an example under each subcommand's help: what the `ski` program
/// builds when `ski teams` is invoked.
pub fn augment_args(command: clap::Command) -> clap::Command {
    let mut command = <TeamsArgs as Args>::augment_args(command);
    for (group, name, example) in SUBCOMMAND_EXAMPLES {
        command = command.mut_subcommand(group, |group| {
            group.mut_subcommand(name, |leaf| {
                leaf.after_help(format!("Example:\n  {example}"))
            })
        });
    }
    command.mut_subcommand("limits", |leaf| {
        leaf.after_help("Example:\n  ski teams --root D --as agent:main:main limits")
    })
}

/// `ski teams`.
#[derive(Debug, Args)]
#[command(about = ABOUT, long_about = LONG_ABOUT, after_help = EXAMPLES)]
pub struct TeamsArgs {
    /// The teams root directory (created when missing).
    #[arg(long, global = true, visible_alias = "teams-dir", value_name = "DIR")]
    root: Option<PathBuf>,
    /// The caller's session key.
    #[arg(long = "as", global = true, env = "SKI_TEAMS_AS", value_name = "KEY")]
    caller: Option<String>,
    /// Every timestamp this command writes, in epoch milliseconds.
    #[arg(long, global = true, env = "SKI_TEAMS_NOW_MS", value_name = "MS")]
    now_ms: Option<i64>,
    /// Print {"event":"ready"} on stderr once the ledger is open, then wait for stdin to close.
    #[arg(long, global = true)]
    gate: bool,
    /// Print trace events (busy waits) on stderr as JSON lines.
    #[arg(long, global = true)]
    trace: bool,
    /// The total time to retry a locked ledger before giving up (exit 5, code busy).
    #[arg(long, global = true, default_value_t = 5000, value_name = "MS")]
    busy_timeout_ms: u64,
    #[command(subcommand)]
    command: TeamsCommand,
}

#[derive(Debug, Subcommand)]
enum TeamsCommand {
    /// Create, show, list, shut down and delete teams
    #[command(subcommand)]
    Team(TeamCommand),
    /// Spawn, join and list members; answer shutdown requests
    #[command(subcommand)]
    Member(MemberCommand),
    /// The task ledger: create, list, claim, complete, delete, depend, release
    #[command(subcommand)]
    Task(TaskCommand),
    /// Send a direct message or a broadcast
    #[command(subcommand)]
    Message(MessageCommand),
    /// Read the caller's inbox, or tell where an inbox lives
    #[command(subcommand)]
    Inbox(InboxCommand),
    /// Inject the caller's pending messages as <teammate-message> elements
    #[command(subcommand)]
    Context(ContextCommand),
    /// WAL checkpoint and integrity check
    #[command(subcommand)]
    Maintenance(MaintenanceCommand),
    /// The limits in force
    Limits,
}

#[derive(Debug, Subcommand)]
enum TeamCommand {
    /// Create a team led by the caller
    Create {
        /// The team name: 1-50 of [a-z0-9_-], starting with a letter or digit.
        name: String,
        /// Free text.
        #[arg(long, default_value = "")]
        description: String,
        /// The default agent type of spawned teammates.
        #[arg(long, default_value = "general-purpose")]
        agent_type: String,
    },
    /// The team, its members and task counts
    Show {
        /// The team name.
        name: String,
    },
    /// A readable board of members and tasks (text, for people)
    Board {
        /// The team name.
        name: String,
    },
    /// Every team under the root
    List,
    /// Shut the team down (the lead), asking working members first
    Shutdown {
        /// The team name.
        name: String,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Delete the team's directory (the lead)
    Delete {
        /// The team name.
        name: String,
        /// Delete even while members are working.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
enum MemberCommand {
    /// Add a teammate with a generated session key (the lead)
    Spawn {
        /// The team name.
        team: String,
        /// The unique member name.
        name: String,
        /// The agent id in the key agent:{id}:teammate:{uuid}.
        #[arg(long)]
        agent_id: Option<String>,
    },
    /// Join the team as the caller
    Join {
        /// The team name.
        team: String,
        /// The unique member name.
        name: String,
    },
    /// Every member
    List {
        /// The team name.
        team: String,
    },
    /// Answer a shutdown request
    RespondShutdown {
        /// The team name.
        team: String,
        /// The request id.
        #[arg(long)]
        request_id: String,
        /// Approve.
        #[arg(long, conflicts_with = "reject", required_unless_present = "reject")]
        approve: bool,
        /// Reject.
        #[arg(long)]
        reject: bool,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum TaskCommand {
    /// Create a pending task
    Create {
        /// The team name.
        team: String,
        /// The subject (1-200 characters).
        #[arg(long)]
        subject: String,
        /// The description.
        #[arg(long, default_value = "")]
        description: String,
        /// A task this one waits for (repeatable).
        #[arg(long = "depends-on", value_name = "ID")]
        depends_on: Vec<String>,
        /// The present-tense form shown while in progress.
        #[arg(long)]
        active_form: Option<String>,
        /// Free JSON metadata.
        #[arg(long)]
        metadata: Option<String>,
    },
    /// List tasks (completed and deleted hidden unless asked for)
    List {
        /// The team name.
        team: String,
        /// Only this status.
        #[arg(long)]
        status: Option<String>,
        /// Only tasks held by this session key.
        #[arg(long)]
        owner: Option<String>,
        /// Only pending, unowned, unblocked tasks, oldest first.
        #[arg(long)]
        available: bool,
        /// Include completed and deleted tasks.
        #[arg(long)]
        include_completed: bool,
    },
    /// The oldest available task, or null
    NextAvailable {
        /// The team name.
        team: String,
    },
    /// One task
    Show {
        /// The team name.
        team: String,
        /// The task id.
        id: String,
    },
    /// Claim a task for the caller
    Claim {
        /// The team name.
        team: String,
        /// The task id.
        id: String,
    },
    /// Complete an in-progress task (its owner or the lead)
    Complete {
        /// The team name.
        team: String,
        /// The task id.
        id: String,
        /// What was done.
        #[arg(long)]
        summary: Option<String>,
    },
    /// Delete a pending or in-progress task (the lead)
    Delete {
        /// The team name.
        team: String,
        /// The task id.
        id: String,
    },
    /// Return an in-progress task to pending (its owner or the lead)
    Release {
        /// The team name.
        team: String,
        /// The task id.
        id: String,
    },
    /// Make a task wait for another
    Depend {
        /// The team name.
        team: String,
        /// The task id.
        id: String,
        /// The task it waits for.
        #[arg(long)]
        on: String,
    },
    /// The activity trail (who claimed, completed, deleted what and when)
    Activity {
        /// The team name.
        team: String,
        /// At most this many entries, newest last.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

#[derive(Debug, Subcommand)]
enum MessageCommand {
    /// Send a message to one member or to all others
    Send {
        /// The team name.
        team: String,
        /// The recipient's session key.
        #[arg(
            long,
            conflicts_with = "broadcast",
            required_unless_present = "broadcast"
        )]
        to: Option<String>,
        /// Send to every member except the caller.
        #[arg(long)]
        broadcast: bool,
        /// message, broadcast, shutdown_request, shutdown_response or idle.
        #[arg(long = "type", default_value = "message")]
        kind: String,
        /// The content.
        #[arg(
            long,
            conflicts_with = "content_file",
            required_unless_present = "content_file"
        )]
        content: Option<String>,
        /// Read the content from this file (must be UTF-8).
        #[arg(long)]
        content_file: Option<PathBuf>,
        /// A short summary (at most 50 characters).
        #[arg(long)]
        summary: Option<String>,
        /// The shutdown request this message belongs to.
        #[arg(long)]
        request_id: Option<String>,
        /// A shutdown response's answer.
        #[arg(long)]
        approve: Option<bool>,
        /// A shutdown response's reason.
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum InboxCommand {
    /// The caller's messages; drains the inbox unless --keep
    Read {
        /// The team name.
        team: String,
        /// Leave the messages in place.
        #[arg(long)]
        keep: bool,
    },
    /// The inbox file of a session key, relative to the root
    Path {
        /// The team name.
        team: String,
        /// The session key.
        key: String,
    },
}

#[derive(Debug, Subcommand)]
enum ContextCommand {
    /// Drain the caller's inbox into <teammate-message> elements before the system prompt
    Inject {
        /// The team name.
        team: String,
        /// The system prompt the block is put before.
        #[arg(long, default_value = "")]
        system_prompt: String,
    },
}

#[derive(Debug, Subcommand)]
enum MaintenanceCommand {
    /// Checkpoint the WAL into the database and truncate it
    Checkpoint {
        /// The team name.
        team: String,
    },
    /// Integrity check of the ledger and inbox directories of no member
    Check {
        /// The team name.
        team: String,
    },
    /// Drop old inbox messages, remove inbox directories of no member, checkpoint the WAL (the lead)
    Cleanup {
        /// The team name.
        team: String,
        /// Drop messages older than this many milliseconds (default: 24 hours).
        #[arg(long, default_value_t = 86_400_000)]
        older_than_ms: i64,
    },
}

/// The default root: `$OPENCLAW_STATE_DIR/teams`, else `~/.openclaw/teams`.
fn default_root() -> TeamsResult<PathBuf> {
    if let Some(state) = std::env::var_os("OPENCLAW_STATE_DIR").filter(|s| !s.is_empty()) {
        return Ok(PathBuf::from(state).join("teams"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| PathBuf::from(home).join(".openclaw").join("teams"))
        .ok_or_else(|| TeamsError::InvalidArgument("no --root given and HOME is not set".into()))
}

/// What a command prints when it ran.
enum Printed {
    Json(Value),
    Text(String),
    /// A result with a refusal in it (`team list` with teams it cannot read): printed with
    /// `"ok": false` and the error, exit code of the error.
    Partial(Value, TeamsError),
    /// A drain: the messages leave the inbox only once their JSON was written out.
    Drain(Delivery),
}

/// Runs `ski teams` and returns the exit code; all output is printed here.
pub fn run(args: TeamsArgs) -> ExitCode {
    // Files 0600 and directories 0700, from creation on (E-TEAM-24).
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let mut retries = 0;
    match execute(&args, &mut retries) {
        Ok(Printed::Text(text)) => {
            output::text(&text);
            ExitCode::SUCCESS
        }
        Ok(Printed::Json(value)) => {
            output::line(document(true, value, retries));
            ExitCode::SUCCESS
        }
        Ok(Printed::Drain(delivery)) => deliver(delivery, retries),
        Ok(Printed::Partial(value, error)) => refuse(value, &error, retries),
        Err(error) => refuse(json!({}), &error, retries),
    }
}

/// `{"ok": ok, …fields, "busyRetries"?}`.
fn document(ok: bool, fields: Value, retries: u32) -> Value {
    let mut object = Map::new();
    object.insert("ok".into(), Value::Bool(ok));
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    if retries > 0 {
        object.insert("busyRetries".into(), Value::from(retries));
    }
    Value::Object(object)
}

/// Prints `{"ok": false, …fields, "error": …}` and `error: …` on stderr; the error's exit code.
fn refuse(fields: Value, error: &TeamsError, retries: u32) -> ExitCode {
    let mut body = error.to_json();
    if retries > 0
        && let Value::Object(fields) = &mut body
    {
        fields.insert("busyRetries".into(), Value::from(retries));
    }
    let mut printed = document(false, fields, 0);
    if let Value::Object(object) = &mut printed {
        object.insert("error".into(), body);
    }
    output::line(printed);
    eprintln!("error: {error}");
    ExitCode::from(error.class().code())
}

/// Prints a drain's JSON and, only once it was written out whole, removes its messages from the
/// inbox. A reader that went away (a closed pipe) or a failed write delivers nothing, so the
/// messages stay; a process killed before the removal leaves them too (delivery is at least once).
fn deliver(delivery: Delivery, retries: u32) -> ExitCode {
    let Delivery { value, taken } = delivery;
    match output::try_line(document(true, value, retries)) {
        Ok(()) if output::is_closed() => ExitCode::SUCCESS,
        Ok(()) => match taken.map_or(Ok(()), mailbox::Taken::remove) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: the messages were printed but stay in the inbox: {error}");
                ExitCode::from(error.class().code())
            }
        },
        Err(error) => {
            eprintln!("error: cannot write to stdout: {error}; the messages stay in the inbox");
            ExitCode::from(FailureClass::Internal.code())
        }
    }
}

fn caller(args: &TeamsArgs) -> TeamsResult<&str> {
    args.caller
        .as_deref()
        .ok_or_else(|| TeamsError::InvalidArgument("this command needs --as SESSION_KEY".into()))
}

/// Prints the ready event and waits for stdin to close (`--gate`).
fn gate(args: &TeamsArgs) -> TeamsResult<()> {
    if !args.gate {
        return Ok(());
    }
    eprintln!("{}", json!({"event": "ready"}));
    let mut sink = Vec::new();
    std::io::stdin()
        .read_to_end(&mut sink)
        .map_err(|e| TeamsError::storage("reading the gate on stdin", e))?;
    Ok(())
}

/// The team name of a command, checked before any filesystem call.
fn team_of(command: &TeamsCommand) -> Option<&str> {
    let name = match command {
        TeamsCommand::Team(TeamCommand::Show { name } | TeamCommand::Board { name })
        | TeamsCommand::Team(
            TeamCommand::Shutdown { name, .. } | TeamCommand::Delete { name, .. },
        ) => name,
        TeamsCommand::Member(
            MemberCommand::Spawn { team, .. }
            | MemberCommand::Join { team, .. }
            | MemberCommand::List { team }
            | MemberCommand::RespondShutdown { team, .. },
        )
        | TeamsCommand::Task(
            TaskCommand::Create { team, .. }
            | TaskCommand::List { team, .. }
            | TaskCommand::NextAvailable { team }
            | TaskCommand::Show { team, .. }
            | TaskCommand::Claim { team, .. }
            | TaskCommand::Complete { team, .. }
            | TaskCommand::Delete { team, .. }
            | TaskCommand::Release { team, .. }
            | TaskCommand::Depend { team, .. }
            | TaskCommand::Activity { team, .. },
        )
        | TeamsCommand::Message(MessageCommand::Send { team, .. })
        | TeamsCommand::Inbox(InboxCommand::Read { team, .. } | InboxCommand::Path { team, .. })
        | TeamsCommand::Context(ContextCommand::Inject { team, .. })
        | TeamsCommand::Maintenance(
            MaintenanceCommand::Checkpoint { team }
            | MaintenanceCommand::Check { team }
            | MaintenanceCommand::Cleanup { team, .. },
        ) => team,
        TeamsCommand::Team(TeamCommand::Create { name, .. }) => name,
        TeamsCommand::Team(TeamCommand::List) | TeamsCommand::Limits => return None,
    };
    Some(name)
}

/// Whether a command on a team only reads: its ledger is opened read-only and nothing is
/// created, migrated or written, so it works on a read-only root.
fn only_reads(command: &TeamsCommand) -> bool {
    matches!(
        command,
        TeamsCommand::Team(TeamCommand::Show { .. } | TeamCommand::Board { .. })
            | TeamsCommand::Member(MemberCommand::List { .. })
            | TeamsCommand::Task(
                TaskCommand::List { .. }
                    | TaskCommand::NextAvailable { .. }
                    | TaskCommand::Show { .. }
                    | TaskCommand::Activity { .. }
            )
            | TeamsCommand::Inbox(
                InboxCommand::Read { keep: true, .. } | InboxCommand::Path { .. }
            )
            | TeamsCommand::Maintenance(MaintenanceCommand::Check { .. })
    )
}

fn execute(args: &TeamsArgs, retries: &mut u32) -> TeamsResult<Printed> {
    if let Some(name) = team_of(&args.command) {
        check_team_name(name)?;
    }
    let clock = args.now_ms.map_or_else(Clock::system, Clock::fixed);
    let busy = BusyPolicy {
        budget: Duration::from_millis(args.busy_timeout_ms),
        trace: args.trace,
    };
    let root = match &args.root {
        Some(root) => root.clone(),
        None => default_root()?,
    };
    let teams = Teams::new(root, busy, clock);
    match &args.command {
        TeamsCommand::Limits => return Ok(Printed::Json(teams.limits().to_json())),
        TeamsCommand::Team(TeamCommand::List) => {
            let listing = teams.list()?;
            return Ok(match listing.unreadable {
                None => Printed::Json(listing.value),
                Some(error) => Printed::Partial(listing.value, error),
            });
        }
        TeamsCommand::Team(TeamCommand::Create {
            name,
            description,
            agent_type,
        }) => {
            let lead = caller(args)?;
            gate(args)?;
            return teams
                .create(name, lead, description, agent_type)
                .map(Printed::Json);
        }
        _ => {}
    }
    let Some(name) = team_of(&args.command) else {
        return Err(TeamsError::InvalidArgument("no team named".into()));
    };
    let mut team = if matches!(
        args.command,
        TeamsCommand::Maintenance(MaintenanceCommand::Check { .. })
    ) {
        teams.open_to_inspect(name)?
    } else if only_reads(&args.command) {
        teams.open_read(name)?
    } else {
        teams.open(name)?
    };
    gate(args)?;
    if let TeamsCommand::Team(TeamCommand::Delete { force, .. }) = &args.command {
        return team.delete(caller(args)?, *force).map(Printed::Json);
    }
    let result = on_team(args, &mut team);
    *retries = team.ledger().retries();
    result
}

fn on_team(args: &TeamsArgs, team: &mut OpenTeam) -> TeamsResult<Printed> {
    let value = match &args.command {
        TeamsCommand::Team(TeamCommand::Show { .. }) => team.show()?,
        TeamsCommand::Team(TeamCommand::Board { .. }) => return team.board().map(Printed::Text),
        TeamsCommand::Team(TeamCommand::Shutdown { reason, .. }) => {
            team.shutdown(caller(args)?, reason.as_deref())?
        }
        TeamsCommand::Member(MemberCommand::Spawn { name, agent_id, .. }) => {
            team.spawn(caller(args)?, name, agent_id.as_deref())?
        }
        TeamsCommand::Member(MemberCommand::Join { name, .. }) => team.join(caller(args)?, name)?,
        TeamsCommand::Member(MemberCommand::List { .. }) => team.members()?,
        TeamsCommand::Member(MemberCommand::RespondShutdown {
            request_id,
            approve,
            reason,
            ..
        }) => team.respond_shutdown(caller(args)?, request_id, *approve, reason.as_deref())?,
        TeamsCommand::Task(command) => task_command(args, team, command)?,
        TeamsCommand::Message(MessageCommand::Send {
            to,
            broadcast,
            kind,
            content,
            content_file,
            summary,
            request_id,
            approve,
            reason,
            ..
        }) => {
            let kind = MessageKind::parse(kind).ok_or_else(|| {
                TeamsError::InvalidArgument(format!(
                    "unknown message type {kind:?}: use message, broadcast, shutdown_request, shutdown_response or idle"
                ))
            })?;
            let content = match (content, content_file) {
                (Some(text), _) => text.clone(),
                (None, Some(path)) => read_content(path)?,
                (None, None) => {
                    return Err(TeamsError::InvalidArgument(
                        "give --content or --content-file".into(),
                    ));
                }
            };
            let to = if *broadcast || kind == MessageKind::Broadcast {
                None
            } else {
                to.clone()
            };
            if to.is_none() && !*broadcast && kind != MessageKind::Broadcast {
                return Err(TeamsError::InvalidArgument(
                    "give --to KEY or --broadcast".into(),
                ));
            }
            team.send(
                caller(args)?,
                Outgoing {
                    to,
                    kind,
                    content,
                    summary: summary.clone(),
                    request_id: request_id.clone(),
                    approve: *approve,
                    reason: reason.clone(),
                },
            )?
        }
        TeamsCommand::Inbox(InboxCommand::Read { keep, .. }) => {
            return team.inbox_take(caller(args)?, *keep).map(Printed::Drain);
        }
        TeamsCommand::Inbox(InboxCommand::Path { key, .. }) => team.inbox_path(key)?,
        TeamsCommand::Context(ContextCommand::Inject { system_prompt, .. }) => {
            return team
                .inject_take(caller(args)?, system_prompt)
                .map(Printed::Drain);
        }
        TeamsCommand::Maintenance(MaintenanceCommand::Checkpoint { .. }) => team.checkpoint()?,
        TeamsCommand::Maintenance(MaintenanceCommand::Check { .. }) => team.check()?,
        TeamsCommand::Maintenance(MaintenanceCommand::Cleanup { older_than_ms, .. }) => {
            team.cleanup(caller(args)?, *older_than_ms)?
        }
        TeamsCommand::Team(
            TeamCommand::Create { .. } | TeamCommand::List | TeamCommand::Delete { .. },
        )
        | TeamsCommand::Limits => {
            return Err(TeamsError::InvalidArgument("not a team command".into()));
        }
    };
    Ok(Printed::Json(value))
}

/// Message content from a file: at most one byte over any limit is read, and it must be UTF-8.
fn read_content(path: &PathBuf) -> TeamsResult<String> {
    let file = std::fs::File::open(path)
        .map_err(|e| TeamsError::InvalidArgument(format!("cannot read {}: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(16 * 1024 * 1024 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| TeamsError::InvalidArgument(format!("cannot read {}: {e}", path.display())))?;
    String::from_utf8(bytes)
        .map_err(|_| TeamsError::InvalidArgument(format!("{} is not UTF-8 text", path.display())))
}

fn task_command(
    args: &TeamsArgs,
    team: &mut OpenTeam,
    command: &TaskCommand,
) -> TeamsResult<Value> {
    Ok(match command {
        TaskCommand::Create {
            subject,
            description,
            depends_on,
            active_form,
            metadata,
            ..
        } => {
            let metadata = match metadata {
                Some(text) => Some(serde_json::from_str::<Value>(text).map_err(|e| {
                    TeamsError::InvalidArgument(format!("--metadata is not JSON: {e}"))
                })?),
                None => None,
            };
            team.create_task(
                caller(args)?,
                &NewTask {
                    subject: subject.clone(),
                    description: description.clone(),
                    depends_on: depends_on.clone(),
                    active_form: active_form.clone(),
                    metadata,
                },
            )?
        }
        TaskCommand::List {
            status,
            owner,
            available,
            include_completed,
            ..
        } => {
            let status = status
                .as_deref()
                .map(str::parse::<TaskStatus>)
                .transpose()
                .map_err(|error| {
                    TeamsError::InvalidArgument(format!(
                        "unknown status {:?}: use pending, in_progress, completed or deleted",
                        error.value
                    ))
                })?;
            let tasks = team.ledger().list(&TaskFilter {
                status,
                owner: owner.clone(),
                available: *available,
                include_completed: *include_completed,
                limit: None,
            })?;
            json!({ "count": tasks.len(), "tasks": tasks })
        }
        TaskCommand::NextAvailable { .. } => {
            let tasks = team.ledger().list(&TaskFilter {
                available: true,
                limit: Some(1),
                ..TaskFilter::default()
            })?;
            json!({ "task": tasks.into_iter().next() })
        }
        TaskCommand::Show { id, .. } => json!({ "task": team.ledger().task(id)? }),
        TaskCommand::Claim { id, .. } => team.claim(caller(args)?, id)?,
        TaskCommand::Complete { id, summary, .. } => {
            team.complete(caller(args)?, id, summary.as_deref())?
        }
        TaskCommand::Delete { id, .. } => team.delete_task(caller(args)?, id)?,
        TaskCommand::Release { id, .. } => team.release(caller(args)?, id)?,
        TaskCommand::Depend { id, on, .. } => team.depend(caller(args)?, id, on)?,
        TaskCommand::Activity { limit, .. } => {
            json!({ "activity": team.ledger().activity(*limit)? })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_help_has_an_example() {
        let command = augment_args(clap::Command::new("teams"));
        let mut missing = Vec::new();
        for group in command.get_subcommands() {
            let leaves: Vec<&clap::Command> = group.get_subcommands().collect();
            if leaves.is_empty() && group.get_after_help().is_none() {
                missing.push(group.get_name().to_owned());
            }
            for leaf in leaves {
                if leaf.get_after_help().is_none() {
                    missing.push(format!("{} {}", group.get_name(), leaf.get_name()));
                }
            }
        }
        assert!(missing.is_empty(), "no example under: {missing:?}");
    }
}
