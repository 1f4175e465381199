//! Teams under one root directory: creating, opening, shutting down and deleting a team, and the
//! operations of an open team (members, tasks, messages, injection, maintenance) that combine the
//! ledger, the config and the inboxes.

use std::collections::HashMap;
use std::fs::{self, DirBuilder};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::clock::Clock;
use super::config::{
    CONFIG_FILE, Metadata, STATUS_ACTIVE, STATUS_SHUTDOWN, STATUS_SHUTTING_DOWN, TeamConfig,
};
use super::error::{TeamsError, TeamsResult};
use super::ledger::{
    BusyPolicy, LEDGER_FILE, Ledger, Member, MemberRole, MemberStatus, NewTask, TaskFilter,
    TaskStatus,
};
use super::mailbox::{self, Message, MessageKind};
use super::names::{
    TEAM_NAME_PATTERN, check_member_name, check_team_name, inbox_key, normalise_agent_id,
};
use super::xml;
use crate::storage::atomic_file::sync_dir;
use crate::storage::file_lock::FileLock;

/// The limits every command enforces (E-TEAM-17, E-TEAM-18).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Members per team, the lead included.
    pub max_members: usize,
    /// Bytes of UTF-8 message content.
    pub max_message_bytes: usize,
    /// Characters of a message summary.
    pub max_summary_chars: usize,
    /// Teams under one root.
    pub max_teams: usize,
    /// Tasks per team that are not deleted.
    pub max_tasks: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_members: 10,
            max_message_bytes: 100_000,
            max_summary_chars: 50,
            max_teams: 10,
            max_tasks: 10_000,
        }
    }
}

impl Limits {
    /// The `limits` document.
    pub fn to_json(&self) -> Value {
        json!({
            "maxMembersPerTeam": self.max_members,
            "maxMessageBytes": self.max_message_bytes,
            "maxSummaryChars": self.max_summary_chars,
            "maxTeams": self.max_teams,
            "maxTasksPerTeam": self.max_tasks,
            "teamNamePattern": TEAM_NAME_PATTERN,
        })
    }
}

/// The root directory of teams and the settings every command shares.
#[derive(Debug, Clone)]
pub struct Teams {
    root: PathBuf,
    busy: BusyPolicy,
    clock: Clock,
    limits: Limits,
}

fn make_dir(path: &Path) -> TeamsResult<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| TeamsError::storage(format!("creating {}", path.display()), e))
}

impl Teams {
    /// Teams under `root` with the default limits.
    pub fn new(root: impl Into<PathBuf>, busy: BusyPolicy, clock: Clock) -> Self {
        Self {
            root: root.into(),
            busy,
            clock,
            limits: Limits::default(),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates team `name` led by `lead`: built in a hidden directory and renamed into place, so
    /// a team is either whole or absent and two creators cannot both win.
    pub fn create(
        &self,
        name: &str,
        lead: &str,
        description: &str,
        agent_type: &str,
    ) -> TeamsResult<Value> {
        check_team_name(name)?;
        let lead_inbox = inbox_key(lead)?;
        make_dir(&self.root)?;
        let _guard = FileLock::exclusive(&self.root.join(".teams.lock"))
            .map_err(|e| TeamsError::storage("locking the teams directory", e))?;
        let dir = self.root.join(name);
        if dir.exists() {
            return Err(TeamsError::TeamExists(name.to_owned()));
        }
        if self.team_names()?.len() >= self.limits.max_teams {
            return Err(TeamsError::TeamLimit(self.limits.max_teams));
        }
        let now = self.clock.now_ms();
        let building = self
            .root
            .join(format!(".creating-{name}.{}", std::process::id()));
        let _ = fs::remove_dir_all(&building);
        let config = TeamConfig {
            team_name: name.to_owned(),
            id: uuid::Uuid::new_v4().to_string(),
            description: description.to_owned(),
            agent_type: agent_type.to_owned(),
            lead: lead.to_owned(),
            metadata: Metadata {
                created_at: now,
                updated_at: now,
                status: STATUS_ACTIVE.to_owned(),
            },
        };
        let built = (|| {
            make_dir(&building.join("inbox"))?;
            let mut ledger = Ledger::create(&building.join(LEDGER_FILE), self.busy)?;
            ledger.add_member(
                &Member {
                    session_key: lead.to_owned(),
                    agent_id: normalise_agent_id(agent_type),
                    name: "lead".to_owned(),
                    role: MemberRole::Lead,
                    agent_type: Some(agent_type.to_owned()),
                    status: MemberStatus::Idle,
                    current_task: None,
                    joined_at: now,
                    inbox_key: lead_inbox.clone(),
                },
                self.limits.max_members,
            )?;
            ledger.close()?;
            config.write(&building)?;
            fs::rename(&building, &dir)
                .map_err(|e| TeamsError::storage(format!("creating {}", dir.display()), e))?;
            sync_dir(&self.root).map_err(|e| TeamsError::storage("syncing the teams directory", e))
        })();
        if let Err(error) = built {
            let _ = fs::remove_dir_all(&building);
            return Err(error);
        }
        Ok(json!({
            "teamId": config.id,
            "teamName": name,
            "status": STATUS_ACTIVE,
            "lead": lead,
        }))
    }

    /// The names of every team (directories holding a config.json, readable or not), sorted.
    pub fn team_names(&self) -> TeamsResult<Vec<String>> {
        let entries = match fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(TeamsError::storage("reading the teams directory", e)),
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| check_team_name(name).is_ok())
            .filter(|name| fs::symlink_metadata(self.root.join(name).join(CONFIG_FILE)).is_ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Every team's summary, by name. A team whose config.json cannot be read is listed as its
    /// name and an `error` (code `team_unreadable`), and is named in the listing's `unreadable`;
    /// it does not hide the others.
    pub fn list(&self) -> TeamsResult<Listing> {
        let mut teams = Vec::new();
        let mut unreadable = Vec::new();
        for name in self.team_names()? {
            match TeamConfig::read(&self.root.join(&name)) {
                Ok(Some(config)) => teams.push(team_summary(&config)),
                Ok(None) => {}
                Err(error) => {
                    let cause = error.to_string();
                    teams.push(json!({
                        "name": name,
                        "error": { "code": "team_unreadable", "message": cause },
                    }));
                    unreadable.push((name, cause));
                }
            }
        }
        Ok(Listing {
            value: json!({ "teams": teams }),
            unreadable: (!unreadable.is_empty()).then_some(TeamsError::TeamsUnreadable(unreadable)),
        })
    }

    /// Opens an existing team; creates nothing when it does not exist (E-TEAM-23).
    pub fn open(&self, name: &str) -> TeamsResult<OpenTeam> {
        self.open_with(name, Ledger::open)
    }

    /// Opens an existing team only to read it: nothing is created, migrated or written, so a
    /// read-only root can be read (see [`Ledger::open_read`]).
    pub fn open_read(&self, name: &str) -> TeamsResult<OpenTeam> {
        self.open_with(name, Ledger::open_read)
    }

    /// Opens an existing team for `maintenance check`: read-only, and a ledger whose schema ski
    /// did not make is kept, so the check can report it.
    pub fn open_to_inspect(&self, name: &str) -> TeamsResult<OpenTeam> {
        self.open_with(name, Ledger::open_to_inspect)
    }

    fn open_with(
        &self,
        name: &str,
        open_ledger: fn(&Path, BusyPolicy) -> TeamsResult<Ledger>,
    ) -> TeamsResult<OpenTeam> {
        check_team_name(name)?;
        let dir = self.root.join(name);
        let config =
            TeamConfig::read(&dir)?.ok_or_else(|| TeamsError::TeamNotFound(name.to_owned()))?;
        let ledger_path = dir.join(LEDGER_FILE);
        if !ledger_path.is_file() {
            return Err(TeamsError::LedgerUnusable {
                path: format!("{name}/{LEDGER_FILE}"),
                reason: "the file is missing".to_owned(),
            });
        }
        let ledger = open_ledger(&ledger_path, self.busy)?;
        Ok(OpenTeam {
            name: name.to_owned(),
            dir,
            config,
            ledger,
            clock: self.clock,
            limits: self.limits,
            root: self.root.clone(),
        })
    }
}

/// What `team list` found.
#[derive(Debug)]
pub struct Listing {
    /// `{"teams": [...]}`.
    pub value: Value,
    /// The teams whose config could not be read, when there are any.
    pub unreadable: Option<TeamsError>,
}

fn team_summary(config: &TeamConfig) -> Value {
    json!({
        "name": config.team_name,
        "id": config.id,
        "lead": config.lead,
        "status": config.metadata.status,
        "createdAt": config.metadata.created_at,
    })
}

/// What `message send` sends.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The recipient's key; `None` for a broadcast.
    pub to: Option<String>,
    /// The kind.
    pub kind: MessageKind,
    /// The content (already checked to be UTF-8).
    pub content: String,
    /// A short summary.
    pub summary: Option<String>,
    /// The shutdown request it belongs to.
    pub request_id: Option<String>,
    /// A shutdown response's answer.
    pub approve: Option<bool>,
    /// A shutdown response's reason.
    pub reason: Option<String>,
}

/// What a drain answers: the JSON to hand over, and the messages it took, which stay in the inbox
/// until [`Delivery::settle`] removes them. Dropped unsettled (the JSON was not delivered), it
/// leaves the inbox as it was.
#[derive(Debug)]
pub struct Delivery {
    /// The command's JSON.
    pub value: Value,
    /// The messages to remove once the JSON was delivered; `None` for a read that keeps them.
    pub taken: Option<mailbox::Taken>,
}

impl Delivery {
    /// The JSON was delivered: removes the messages it holds, and only those; returns the JSON.
    pub fn settle(self) -> TeamsResult<Value> {
        if let Some(taken) = self.taken {
            taken.remove()?;
        }
        Ok(self.value)
    }
}

/// One team, its config read and its ledger open.
#[derive(Debug)]
pub struct OpenTeam {
    name: String,
    dir: PathBuf,
    config: TeamConfig,
    ledger: Ledger,
    clock: Clock,
    limits: Limits,
    root: PathBuf,
}

impl OpenTeam {
    /// The ledger, for the operations that need nothing else.
    pub fn ledger(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    /// The team's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    fn require_active(&self) -> TeamsResult<()> {
        let config = TeamConfig::read(&self.dir)?.unwrap_or_else(|| self.config.clone());
        if config.metadata.status == STATUS_ACTIVE {
            Ok(())
        } else {
            Err(TeamsError::TeamInactive(self.name.clone()))
        }
    }

    fn require_member(&mut self, caller: &str) -> TeamsResult<Member> {
        self.ledger
            .member(caller)?
            .ok_or_else(|| TeamsError::NotAMember(caller.to_owned()))
    }

    fn require_lead(&mut self, caller: &str, what: &str) -> TeamsResult<Member> {
        let member = self.require_member(caller)?;
        if member.is_lead() {
            Ok(member)
        } else {
            Err(TeamsError::NotLead(what.to_owned()))
        }
    }

    /// `team show`: the team, its members and task counts.
    pub fn show(&mut self) -> TeamsResult<Value> {
        let config = TeamConfig::read(&self.dir)?.unwrap_or_else(|| self.config.clone());
        let members = self.ledger.members()?;
        let counts = self.ledger.counts()?;
        Ok(json!({ "team": team_summary(&config), "members": members, "counts": counts }))
    }

    /// A board for people: the team, its members and its open tasks as text.
    pub fn board(&mut self) -> TeamsResult<String> {
        let config = TeamConfig::read(&self.dir)?.unwrap_or_else(|| self.config.clone());
        let members = self.ledger.members()?;
        let tasks = self.ledger.list(&TaskFilter {
            include_completed: true,
            ..TaskFilter::default()
        })?;
        let mut out = format!(
            "team {} ({})\n\nmembers\n",
            config.team_name, config.metadata.status
        );
        for member in &members {
            out.push_str(&format!(
                "  {:<16} {:<6} {:<8} {}\n",
                member.name,
                member.role,
                member.status,
                member
                    .current_task
                    .as_deref()
                    .map(|t| format!("task {t}"))
                    .unwrap_or_default()
            ));
        }
        let names: HashMap<&str, &str> = members
            .iter()
            .map(|m| (m.session_key.as_str(), m.name.as_str()))
            .collect();
        out.push_str("\ntasks\n");
        for task in tasks.iter().filter(|t| t.status != TaskStatus::Deleted) {
            let owner = task
                .owner
                .as_deref()
                .map(|o| names.get(o).copied().unwrap_or(o))
                .unwrap_or("-");
            let blocked = if task.blocked_by.is_empty() {
                String::new()
            } else {
                format!("  blocked by {}", task.blocked_by.join(", "))
            };
            out.push_str(&format!(
                "  #{:<5} {:<12} {:<16} {}{}\n",
                task.id, task.status, owner, task.subject, blocked
            ));
        }
        Ok(out)
    }

    /// `member spawn`: the lead adds a teammate with a generated key `agent:{id}:teammate:{uuid}`.
    pub fn spawn(
        &mut self,
        caller: &str,
        name: &str,
        agent_id: Option<&str>,
    ) -> TeamsResult<Value> {
        check_member_name(name)?;
        self.require_active()?;
        self.require_lead(caller, "spawn teammates")?;
        let agent = normalise_agent_id(agent_id.unwrap_or(&self.config.agent_type));
        let key = format!("agent:{agent}:teammate:{}", uuid::Uuid::new_v4());
        self.add_member(&key, name, &agent)
    }

    /// `member join`: the caller joins under `name`.
    pub fn join(&mut self, caller: &str, name: &str) -> TeamsResult<Value> {
        check_member_name(name)?;
        inbox_key(caller)?;
        self.require_active()?;
        let agent = caller
            .split(':')
            .nth(1)
            .map(normalise_agent_id)
            .unwrap_or_else(|| "main".to_owned());
        self.add_member(caller, name, &agent)
    }

    fn add_member(&mut self, key: &str, name: &str, agent: &str) -> TeamsResult<Value> {
        let member = Member {
            session_key: key.to_owned(),
            agent_id: agent.to_owned(),
            name: name.to_owned(),
            role: MemberRole::Member,
            agent_type: Some(self.config.agent_type.clone()),
            status: MemberStatus::Idle,
            current_task: None,
            joined_at: self.now(),
            inbox_key: inbox_key(key)?,
        };
        let member = self.ledger.add_member(&member, self.limits.max_members)?;
        Ok(json!({ "member": member }))
    }

    /// `member list`.
    pub fn members(&mut self) -> TeamsResult<Value> {
        Ok(json!({ "members": self.ledger.members()? }))
    }

    /// `task create`.
    pub fn create_task(&mut self, caller: &str, new: &NewTask) -> TeamsResult<Value> {
        if new.subject.is_empty() || new.subject.chars().count() > 200 {
            return Err(TeamsError::InvalidArgument(
                "subject must have 1-200 characters".into(),
            ));
        }
        if new.description.chars().count() > 10_000 {
            return Err(TeamsError::InvalidArgument(
                "description must have at most 10000 characters".into(),
            ));
        }
        self.require_active()?;
        let now = self.now();
        let task = self
            .ledger
            .create_task(caller, new, now, self.limits.max_tasks)?;
        Ok(json!({ "task": task }))
    }

    /// `task claim`.
    pub fn claim(&mut self, caller: &str, id: &str) -> TeamsResult<Value> {
        self.require_active()?;
        let now = self.now();
        let task = self.ledger.claim(id, caller, now)?;
        Ok(json!({ "task": task }))
    }

    /// `task complete`.
    pub fn complete(
        &mut self,
        caller: &str,
        id: &str,
        summary: Option<&str>,
    ) -> TeamsResult<Value> {
        let now = self.now();
        let (task, unblocked) = self.ledger.complete(id, caller, summary, now)?;
        Ok(json!({ "task": task, "unblocked": unblocked }))
    }

    /// `task delete`.
    pub fn delete_task(&mut self, caller: &str, id: &str) -> TeamsResult<Value> {
        let now = self.now();
        let (task, unblocked) = self.ledger.delete(id, caller, now)?;
        Ok(json!({ "task": task, "unblocked": unblocked }))
    }

    /// `task release`.
    pub fn release(&mut self, caller: &str, id: &str) -> TeamsResult<Value> {
        let now = self.now();
        let task = self.ledger.release(id, caller, now)?;
        Ok(json!({ "task": task }))
    }

    /// `task depend`.
    pub fn depend(&mut self, caller: &str, id: &str, dep: &str) -> TeamsResult<Value> {
        let now = self.now();
        let task = self.ledger.depend(id, dep, caller, now)?;
        Ok(json!({ "task": task }))
    }

    /// `team shutdown`: stop at once when nobody works, otherwise ask every working member.
    pub fn shutdown(&mut self, caller: &str, reason: Option<&str>) -> TeamsResult<Value> {
        self.require_lead(caller, "shut the team down")?;
        let now = self.now();
        let working: Vec<Member> = self
            .ledger
            .members()?
            .into_iter()
            .filter(|m| !m.is_lead() && m.status == MemberStatus::Working)
            .collect();
        if working.is_empty() {
            for member in self.ledger.members()?.into_iter().filter(|m| !m.is_lead()) {
                self.ledger
                    .set_member_status(&member.session_key, MemberStatus::Shutdown)?;
            }
            TeamConfig::set_status(&self.dir, STATUS_SHUTDOWN, now)?;
            return Ok(json!({ "teamName": self.name, "status": STATUS_SHUTDOWN }));
        }
        let request_id = uuid::Uuid::new_v4().to_string();
        let keys: Vec<String> = working.iter().map(|m| m.session_key.clone()).collect();
        self.ledger
            .record_shutdown_request(&request_id, &keys, now)?;
        TeamConfig::set_status(&self.dir, STATUS_SHUTTING_DOWN, now)?;
        for member in &working {
            let message = Message {
                id: uuid::Uuid::new_v4().to_string(),
                kind: MessageKind::ShutdownRequest,
                from: caller.to_owned(),
                to: member.session_key.clone(),
                content: reason.unwrap_or("the team is shutting down").to_owned(),
                summary: None,
                timestamp: now,
                request_id: Some(request_id.clone()),
                approve: None,
                reason: reason.map(str::to_owned),
            };
            mailbox::append(&mailbox::inbox_dir(&self.dir, &member.inbox_key), &message)?;
        }
        Ok(json!({
            "teamName": self.name,
            "status": "pending_shutdown",
            "requestId": request_id,
            "pendingApprovals": keys,
        }))
    }

    /// `member respond-shutdown`: the caller answers a shutdown request; the answer goes to the
    /// lead's inbox, and the team is shut down once every asked member approved.
    pub fn respond_shutdown(
        &mut self,
        caller: &str,
        request_id: &str,
        approve: bool,
        reason: Option<&str>,
    ) -> TeamsResult<Value> {
        self.require_member(caller)?;
        let now = self.now();
        let Some((pending, rejected)) = self
            .ledger
            .answer_shutdown(request_id, caller, approve, reason, now)?
        else {
            return Err(TeamsError::InvalidArgument(format!(
                "no shutdown request {request_id:?} was sent to {caller:?}"
            )));
        };
        let lead = self.config.lead.clone();
        let lead_member = self.require_member(&lead)?;
        let message = Message {
            id: uuid::Uuid::new_v4().to_string(),
            kind: MessageKind::ShutdownResponse,
            from: caller.to_owned(),
            to: lead.clone(),
            content: reason
                .unwrap_or(if approve { "approved" } else { "rejected" })
                .to_owned(),
            summary: None,
            timestamp: now,
            request_id: Some(request_id.to_owned()),
            approve: Some(approve),
            reason: reason.map(str::to_owned),
        };
        mailbox::append(
            &mailbox::inbox_dir(&self.dir, &lead_member.inbox_key),
            &message,
        )?;
        let status = if pending == 0 && rejected == 0 {
            TeamConfig::set_status(&self.dir, STATUS_SHUTDOWN, now)?;
            STATUS_SHUTDOWN
        } else if pending == 0 {
            TeamConfig::set_status(&self.dir, STATUS_ACTIVE, now)?;
            STATUS_ACTIVE
        } else {
            STATUS_SHUTTING_DOWN
        };
        Ok(json!({ "messageId": message.id, "teamStatus": status }))
    }

    /// `message send`.
    pub fn send(&mut self, caller: &str, outgoing: Outgoing) -> TeamsResult<Value> {
        let bytes = outgoing.content.len();
        if bytes > self.limits.max_message_bytes {
            return Err(TeamsError::MessageTooLarge {
                bytes,
                limit: self.limits.max_message_bytes,
            });
        }
        if let Some(summary) = &outgoing.summary
            && summary.chars().count() > self.limits.max_summary_chars
        {
            return Err(TeamsError::InvalidArgument(format!(
                "summary must have at most {} characters",
                self.limits.max_summary_chars
            )));
        }
        let sender = self.require_member(caller)?;
        match outgoing.kind {
            MessageKind::ShutdownRequest if !sender.is_lead() => {
                return Err(TeamsError::NotLead("send a shutdown_request".into()));
            }
            MessageKind::ShutdownRequest | MessageKind::ShutdownResponse
                if outgoing.request_id.is_none() =>
            {
                return Err(TeamsError::InvalidArgument(format!(
                    "a {} needs --request-id",
                    outgoing.kind.as_str()
                )));
            }
            _ => {}
        }
        if outgoing.approve.is_some() && outgoing.kind != MessageKind::ShutdownResponse {
            return Err(TeamsError::InvalidArgument(
                "--approve belongs to a shutdown_response".into(),
            ));
        }
        let members = self.ledger.members()?;
        let (kind, recipients): (MessageKind, Vec<&Member>) = match &outgoing.to {
            None => (
                MessageKind::Broadcast,
                members.iter().filter(|m| m.session_key != caller).collect(),
            ),
            Some(to) => {
                let recipient = members
                    .iter()
                    .find(|m| &m.session_key == to)
                    .ok_or_else(|| TeamsError::UnknownRecipient(to.clone()))?;
                (outgoing.kind, vec![recipient])
            }
        };
        let id = uuid::Uuid::new_v4().to_string();
        let now = self.now();
        let copies: Vec<(PathBuf, Message)> = recipients
            .iter()
            .map(|recipient| {
                let message = Message {
                    id: id.clone(),
                    kind,
                    from: caller.to_owned(),
                    to: recipient.session_key.clone(),
                    content: outgoing.content.clone(),
                    summary: outgoing.summary.clone(),
                    timestamp: now,
                    request_id: outgoing.request_id.clone(),
                    approve: outgoing.approve,
                    reason: outgoing.reason.clone(),
                };
                (mailbox::inbox_dir(&self.dir, &recipient.inbox_key), message)
            })
            .collect();
        // Every copy or none: a broadcast that cannot reach one recipient reaches nobody.
        let deliveries: Vec<(&Path, &Message)> = copies
            .iter()
            .map(|(dir, message)| (dir.as_path(), message))
            .collect();
        mailbox::append_all(&deliveries)?;
        let keys: Vec<&str> = recipients.iter().map(|m| m.session_key.as_str()).collect();
        Ok(json!({ "messageId": id, "type": kind.as_str(), "recipients": keys }))
    }

    /// `inbox read`: the caller's messages, drained unless `keep`.
    pub fn inbox_read(&mut self, caller: &str, keep: bool) -> TeamsResult<Value> {
        self.inbox_take(caller, keep)?.settle()
    }

    /// `inbox read` for a program that prints the messages: the drain is removed from the inbox
    /// only when [`Delivery::settle`] is called, once they were printed.
    pub fn inbox_take(&mut self, caller: &str, keep: bool) -> TeamsResult<Delivery> {
        let member = self.require_member(caller)?;
        let dir = mailbox::inbox_dir(&self.dir, &member.inbox_key);
        if keep {
            let messages = mailbox::peek(&dir)?;
            return Ok(Delivery {
                value: json!({ "count": messages.len(), "messages": messages }),
                taken: None,
            });
        }
        let taken = mailbox::take(&dir)?;
        Ok(Delivery {
            value: json!({ "count": taken.messages.len(), "messages": taken.messages }),
            taken: Some(taken),
        })
    }

    /// `inbox path`: where `key`'s messages live, relative to the root.
    pub fn inbox_path(&mut self, key: &str) -> TeamsResult<Value> {
        let sanitised = match self.ledger.member(key)? {
            Some(member) => member.inbox_key,
            None => inbox_key(key)?,
        };
        Ok(json!({
            "path": format!("{}/inbox/{sanitised}/{}", self.name, mailbox::MESSAGES_FILE),
            "key": sanitised,
        }))
    }

    /// `context inject`: drains the caller's inbox into `<teammate-message>` elements and puts
    /// them before the system prompt.
    pub fn inject(&mut self, caller: &str, system_prompt: &str) -> TeamsResult<Value> {
        self.inject_take(caller, system_prompt)?.settle()
    }

    /// `context inject` for a program that prints the block: the drain is removed from the inbox
    /// only when [`Delivery::settle`] is called, once it was printed.
    pub fn inject_take(&mut self, caller: &str, system_prompt: &str) -> TeamsResult<Delivery> {
        let member = self.require_member(caller)?;
        let names: HashMap<String, String> = self
            .ledger
            .members()?
            .into_iter()
            .map(|m| (m.session_key, m.name))
            .collect();
        let taken = mailbox::take(&mailbox::inbox_dir(&self.dir, &member.inbox_key))?;
        let block: String = taken
            .messages
            .iter()
            .map(|m| {
                xml::element(
                    names.get(&m.from).map_or(m.from.as_str(), String::as_str),
                    m,
                )
            })
            .collect();
        Ok(Delivery {
            value: json!({
                "injected": taken.messages.len(),
                "block": block,
                "prompt": format!("{block}{system_prompt}"),
            }),
            taken: Some(taken),
        })
    }

    /// `maintenance checkpoint`.
    pub fn checkpoint(&mut self) -> TeamsResult<Value> {
        let (before, after) = self.ledger.checkpoint()?;
        Ok(json!({ "walBytesBefore": before, "walBytesAfter": after }))
    }

    /// `maintenance check`: SQLite's integrity check, schema objects and rows ski did not write
    /// (E-TEAM-29), and inbox directories of no member. Healthy when it found none of these.
    pub fn check(&mut self) -> TeamsResult<Value> {
        let integrity = self.ledger.integrity_check()?;
        let schema = self.ledger.schema_findings()?;
        let (rows, more_rows) = self.ledger.row_findings(&schema)?;
        let members_readable = !schema.iter().any(|f| f.name == "members");
        let mut orphaned = Vec::new();
        if members_readable {
            let keys = self.ledger.stored_inbox_keys()?;
            if let Ok(entries) = fs::read_dir(self.dir.join("inbox")) {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if !keys.iter().any(|k| k == &name) {
                        orphaned.push(name);
                    }
                }
            }
        }
        orphaned.sort();
        let ok = integrity == ["ok"];
        let healthy = ok && orphaned.is_empty() && schema.is_empty() && rows.is_empty();
        Ok(json!({
            "healthy": healthy,
            "integrity": integrity,
            "orphanedInboxes": orphaned,
            "foreignSchema": schema,
            "foreignRows": rows,
            "foreignRowsTruncated": more_rows,
        }))
    }

    /// `maintenance cleanup` (the lead): drops inbox messages older than `older_than_ms`,
    /// removes inbox directories of no member, and checkpoints the WAL.
    pub fn cleanup(&mut self, caller: &str, older_than_ms: i64) -> TeamsResult<Value> {
        self.require_lead(caller, "clean the team up")?;
        let cutoff = self.now().saturating_sub(older_than_ms);
        let keys: Vec<String> = self
            .ledger
            .members()?
            .into_iter()
            .map(|m| m.inbox_key)
            .collect();
        let mut removed_messages = 0;
        let mut removed_inboxes = Vec::new();
        if let Ok(entries) = fs::read_dir(self.dir.join("inbox")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if keys.iter().any(|k| k == &name) {
                    removed_messages += mailbox::prune(&entry.path(), cutoff)?;
                } else if entry.path().is_dir() {
                    fs::remove_dir_all(entry.path()).map_err(|e| {
                        TeamsError::storage(format!("removing {}", entry.path().display()), e)
                    })?;
                    removed_inboxes.push(name);
                }
            }
        }
        removed_inboxes.sort();
        let (before, after) = self.ledger.checkpoint()?;
        Ok(json!({
            "messagesRemoved": removed_messages,
            "orphanedInboxesRemoved": removed_inboxes,
            "walBytesBefore": before,
            "walBytesAfter": after,
        }))
    }

    /// `team delete`: the lead removes the whole directory; refused while members work, unless
    /// the team is shut down or `force`.
    pub fn delete(mut self, caller: &str, force: bool) -> TeamsResult<Value> {
        self.require_lead(caller, "delete the team")?;
        let config = TeamConfig::read(&self.dir)?.unwrap_or_else(|| self.config.clone());
        let working = self
            .ledger
            .members()?
            .iter()
            .any(|m| !m.is_lead() && m.status == MemberStatus::Working);
        if working && !force && config.metadata.status != STATUS_SHUTDOWN {
            return Err(TeamsError::InvalidArgument(
                "members are still working: shut the team down first, or pass --force".into(),
            ));
        }
        self.ledger.close()?;
        let doomed = self
            .root
            .join(format!(".deleting-{}.{}", self.name, std::process::id()));
        fs::rename(&self.dir, &doomed)
            .map_err(|e| TeamsError::storage(format!("removing {}", self.dir.display()), e))?;
        fs::remove_dir_all(&doomed)
            .map_err(|e| TeamsError::storage(format!("removing {}", doomed.display()), e))?;
        Ok(json!({ "teamName": self.name, "deleted": true }))
    }
}
