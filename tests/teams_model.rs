//! The teams ledger and inboxes checked against a model: proptest generates sequences of
//! operations (members joining and changing status; tasks created, linked, claimed, completed,
//! released and deleted; messages sent and read, drained or kept) and runs each one against the
//! real implementation (a team under a temp dir, its SQLite ledger and JSONL inboxes) and against a
//! plain sequential model written here. After every step the results must be equal, and so must
//! the whole observable state: members, every task, the counts and every member's inbox.
//!
//! Failures are injected between and during steps, each with the model's "nothing or all"
//! expectation: the ledger dropped and reopened (nothing changes); a write while another
//! connection holds the write lock, with no busy budget (`busy`, nothing changes); a direct send, a
//! broadcast or a read one of whose inbox locks cannot be taken (`storage`, nothing sent to anyone,
//! nothing drained); a line torn
//! at the end of an inbox, as a sender killed in the middle of its write leaves it (no whole
//! message, sent before or after, is lost).
//!
//! 64 cases of up to 65 steps, or `PROPTEST_CASES`.

use crate::ledger_history;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use rusqlite::{Connection, TransactionBehavior};
use ski::teams::clock::Clock;
use ski::teams::error::TeamsError;
use ski::teams::ledger::{
    BusyPolicy, LEDGER_FILE, Ledger, Member, MemberRole, MemberStatus, NewTask, Task, TaskFilter,
    TaskStatus,
};
use ski::teams::mailbox::{self, LOCK_FILE, MESSAGES_FILE, Message, MessageKind};
use ski::teams::names::inbox_key;
use ski::teams::team::{OpenTeam, Outgoing, Teams};

const TEAM: &str = "model";
const LEAD: &str = "agent:main:main";
/// Session keys: the lead, two members joined at the start, one whose inbox key differs from
/// `agent:ana:main`'s only in case, one whose inbox key equals `agent:bo:main`'s, and a free one.
const KEYS: [&str; 6] = [
    LEAD,
    "agent:ana:main",
    "agent:ANA:main",
    "agent:bo:main",
    "agent:bo_main",
    "agent:cy:main",
];
/// Member names; `Ana` collides with `ana` (names are unique without regard to case).
const NAMES: [&str; 5] = ["ana", "Ana", "bo", "cy", "dee"];
const MAX_MEMBERS: usize = 4;
const MAX_TASKS: usize = 6;
const T0: i64 = 1_760_000_000_000;

/// A ledger write. Generated task references are resolved against the model before the step
/// ([`Model::resolve`]), so that most name a task that exists.
#[derive(Debug, Clone)]
enum Write {
    Join {
        key: usize,
        name: usize,
    },
    SetStatus {
        key: usize,
        status: MemberStatus,
    },
    Create {
        caller: usize,
        deps: Vec<u8>,
    },
    Claim {
        caller: usize,
        task: u8,
    },
    Complete {
        caller: usize,
        task: u8,
        summary: bool,
    },
    Release {
        caller: usize,
        task: u8,
    },
    Delete {
        caller: usize,
        task: u8,
    },
    Depend {
        caller: usize,
        task: u8,
        on: u8,
    },
}

/// Which tasks a `List` asks for.
#[derive(Debug, Clone)]
enum Selection {
    Open,
    All,
    Available,
    Status(TaskStatus),
}

/// One step.
#[derive(Debug, Clone)]
enum Op {
    Write(Write),
    List {
        selection: Selection,
        owner: Option<usize>,
        limit: Option<usize>,
    },
    Send {
        caller: usize,
        to: Option<usize>,
    },
    Read {
        caller: usize,
        keep: bool,
    },
    /// The ledger is closed and opened again.
    Reopen,
    /// The write meets a write lock another connection holds, with no busy budget.
    Locked(Write),
    /// A send while the inbox lock of `broken` cannot be taken: a direct send to `to`, which is
    /// `broken`, or a broadcast (`to` is `None`).
    SendLockBroken {
        caller: usize,
        to: Option<usize>,
        broken: usize,
    },
    /// A read whose inbox lock cannot be taken.
    ReadLockBroken {
        caller: usize,
        keep: bool,
    },
    /// The end of an inbox holds the start of a line, as a sender killed mid-write leaves it.
    TornTail {
        key: usize,
    },
}

/// A task as the model knows it.
#[derive(Debug, Clone, PartialEq)]
struct TaskView {
    id: String,
    subject: String,
    status: TaskStatus,
    owner: Option<String>,
    blocked_by: Vec<String>,
    blocks: Vec<String>,
    depends_on: Vec<String>,
    created_at: i64,
    claimed_at: Option<i64>,
    completed_at: Option<i64>,
    deleted_at: Option<i64>,
    summary: Option<String>,
}

impl From<&Task> for TaskView {
    fn from(task: &Task) -> Self {
        Self {
            id: task.id.clone(),
            subject: task.subject.clone(),
            status: task.status,
            owner: task.owner.clone(),
            blocked_by: task.blocked_by.clone(),
            blocks: task.blocks.clone(),
            depends_on: task.depends_on.clone(),
            created_at: task.created_at,
            claimed_at: task.claimed_at,
            completed_at: task.completed_at,
            deleted_at: task.deleted_at,
            summary: task.summary.clone(),
        }
    }
}

/// A member as the model knows it.
#[derive(Debug, Clone, PartialEq)]
struct MemberView {
    key: String,
    name: String,
    role: MemberRole,
    status: MemberStatus,
    current_task: Option<String>,
    joined_at: i64,
    inbox_key: String,
}

impl From<&Member> for MemberView {
    fn from(member: &Member) -> Self {
        Self {
            key: member.session_key.clone(),
            name: member.name.clone(),
            role: member.role,
            status: member.status,
            current_task: member.current_task.clone(),
            joined_at: member.joined_at,
            inbox_key: member.inbox_key.clone(),
        }
    }
}

/// A message as the model knows it.
#[derive(Debug, Clone, PartialEq)]
struct MessageView {
    id: String,
    kind: MessageKind,
    from: String,
    to: String,
    content: String,
}

impl From<&Message> for MessageView {
    fn from(message: &Message) -> Self {
        Self {
            id: message.id.clone(),
            kind: message.kind,
            from: message.from.clone(),
            to: message.to.clone(),
            content: message.content.clone(),
        }
    }
}

/// What a step returned.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Done,
    Member(MemberView),
    Task(TaskView),
    /// A completed or deleted task and the dependents it unblocked.
    Finished(TaskView, Vec<String>),
    Tasks(Vec<TaskView>),
    /// The recipients of a send.
    Sent(Vec<String>),
    Messages(Vec<MessageView>),
}

/// A step's result: the outcome or the error code.
type Answer = Result<Outcome, String>;

/// Everything observable after a step.
#[derive(Debug, PartialEq)]
struct State {
    members: Vec<MemberView>,
    tasks: Vec<TaskView>,
    /// Pending, in progress, completed, deleted.
    counts: [i64; 4],
    /// Each member's inbox, read without draining.
    inboxes: Vec<(String, Vec<MessageView>)>,
}

fn refuse(code: &str) -> Answer {
    Err(code.to_owned())
}

fn subject(now: i64) -> String {
    format!("task made at {now}")
}

/// The sequential model.
#[derive(Debug)]
struct Model {
    members: Vec<MemberView>,
    tasks: Vec<TaskView>,
    inboxes: HashMap<String, Vec<MessageView>>,
}

impl Model {
    fn new() -> Self {
        Self {
            members: vec![MemberView {
                key: LEAD.to_owned(),
                name: "lead".to_owned(),
                role: MemberRole::Lead,
                status: MemberStatus::Idle,
                current_task: None,
                joined_at: T0,
                inbox_key: inbox_key(LEAD).expect("valid key"),
            }],
            tasks: Vec::new(),
            inboxes: HashMap::new(),
        }
    }

    fn member(&self, key: &str) -> Option<&MemberView> {
        self.members.iter().find(|m| m.key == key)
    }

    fn task(&self, id: &str) -> Option<&TaskView> {
        self.tasks.iter().find(|t| t.id == id)
    }

    fn task_mut(&mut self, id: &str) -> &mut TaskView {
        self.tasks
            .iter_mut()
            .find(|t| t.id == id)
            .expect("the model checked the task exists")
    }

    /// Whether `to` is reachable from `from` along `dependsOn` (a task reaches itself).
    fn reaches(&self, from: &str, to: &str) -> bool {
        let mut stack = vec![from.to_owned()];
        let mut seen = Vec::new();
        while let Some(id) = stack.pop() {
            if id == to {
                return true;
            }
            if seen.contains(&id) {
                continue;
            }
            if let Some(task) = self.task(&id) {
                stack.extend(task.depends_on.iter().cloned());
            }
            seen.push(id);
        }
        false
    }

    /// Takes `id` out of its dependents' `blockedBy`; returns the pending ones left unblocked.
    fn unblock(&mut self, id: &str, dependents: &[String]) -> Vec<String> {
        let mut unblocked = Vec::new();
        for dependent in dependents {
            let task = self.task_mut(dependent);
            if task.blocked_by.iter().any(|b| b == id) {
                task.blocked_by.retain(|b| b != id);
                if task.blocked_by.is_empty() && task.status == TaskStatus::Pending {
                    unblocked.push(dependent.clone());
                }
            }
        }
        unblocked
    }

    /// The member holding `id` as its current task becomes idle.
    fn free_holder(&mut self, owner: &str, id: &str) {
        for member in &mut self.members {
            if member.key == owner && member.current_task.as_deref() == Some(id) {
                member.status = MemberStatus::Idle;
                member.current_task = None;
            }
        }
    }

    /// The task a generated reference names: mostly one of the tasks created so far, one time in
    /// eight the next id (which does not exist yet).
    fn task_ref(&self, reference: u8) -> u8 {
        let created = self.tasks.len();
        let id = if created == 0 || reference.is_multiple_of(8) {
            created + 1
        } else {
            usize::from(reference / 8) % created + 1
        };
        u8::try_from(id).expect("fewer than 255 tasks")
    }

    /// `write` with its task references resolved.
    fn resolve(&self, write: &Write) -> Write {
        let mut write = write.clone();
        match &mut write {
            Write::Join { .. } | Write::SetStatus { .. } => {}
            Write::Create { deps, .. } => {
                for dep in deps {
                    *dep = self.task_ref(*dep);
                }
            }
            Write::Claim { task, .. }
            | Write::Complete { task, .. }
            | Write::Release { task, .. }
            | Write::Delete { task, .. } => *task = self.task_ref(*task),
            Write::Depend { task, on, .. } => {
                *task = self.task_ref(*task);
                *on = self.task_ref(*on);
            }
        }
        write
    }

    fn write(&mut self, write: &Write, now: i64) -> Answer {
        match write {
            Write::Join { key, name } => self.join(KEYS[*key], NAMES[*name], now),
            Write::SetStatus { key, status } => {
                for member in &mut self.members {
                    if member.key == KEYS[*key] {
                        member.status = *status;
                    }
                }
                Ok(Outcome::Done)
            }
            Write::Create { caller, deps } => self.create(KEYS[*caller], deps, now),
            Write::Claim { caller, task } => self.claim(KEYS[*caller], &task.to_string(), now),
            Write::Complete {
                caller,
                task,
                summary,
            } => self.complete(KEYS[*caller], &task.to_string(), *summary, now),
            Write::Release { caller, task } => self.release(KEYS[*caller], &task.to_string()),
            Write::Delete { caller, task } => self.delete(KEYS[*caller], &task.to_string(), now),
            Write::Depend { caller, task, on } => {
                self.depend(KEYS[*caller], &task.to_string(), &on.to_string())
            }
        }
    }

    fn join(&mut self, key: &str, name: &str, now: i64) -> Answer {
        let inbox = inbox_key(key).expect("valid key");
        if self.members.len() >= MAX_MEMBERS {
            return refuse("member_limit");
        }
        let taken = self.members.iter().any(|m| {
            m.key == key
                || m.name.eq_ignore_ascii_case(name)
                || m.inbox_key.eq_ignore_ascii_case(&inbox)
        });
        if taken {
            return refuse("member_exists");
        }
        let member = MemberView {
            key: key.to_owned(),
            name: name.to_owned(),
            role: MemberRole::Member,
            status: MemberStatus::Idle,
            current_task: None,
            joined_at: now,
            inbox_key: inbox,
        };
        self.members.push(member.clone());
        Ok(Outcome::Member(member))
    }

    fn create(&mut self, caller: &str, deps: &[u8], now: i64) -> Answer {
        if self.member(caller).is_none() {
            return refuse("not_a_member");
        }
        let live = self
            .tasks
            .iter()
            .filter(|t| t.status != TaskStatus::Deleted)
            .count();
        if live >= MAX_TASKS {
            return refuse("task_limit");
        }
        let mut depends_on: Vec<String> = Vec::new();
        let mut blocked_by = Vec::new();
        for dep in deps.iter().map(u8::to_string) {
            if depends_on.contains(&dep) {
                continue;
            }
            match self.task(&dep) {
                Some(task) if task.status != TaskStatus::Deleted => {
                    if task.status != TaskStatus::Completed {
                        blocked_by.push(dep.clone());
                    }
                }
                _ => return refuse("unknown_dependency"),
            }
            depends_on.push(dep);
        }
        let id = (self.tasks.len() + 1).to_string();
        for dep in &depends_on {
            let task = self.task_mut(dep);
            if !task.blocks.contains(&id) {
                task.blocks.push(id.clone());
            }
        }
        let task = TaskView {
            id,
            subject: subject(now),
            status: TaskStatus::Pending,
            owner: None,
            blocked_by,
            blocks: Vec::new(),
            depends_on,
            created_at: now,
            claimed_at: None,
            completed_at: None,
            deleted_at: None,
            summary: None,
        };
        self.tasks.push(task.clone());
        Ok(Outcome::Task(task))
    }

    fn claim(&mut self, caller: &str, id: &str, now: i64) -> Answer {
        if self.member(caller).is_none() {
            return refuse("not_a_member");
        }
        let Some(task) = self.task(id).cloned() else {
            return refuse("task_not_found");
        };
        let claimable = task.status == TaskStatus::Pending
            && task.owner.is_none()
            && task.blocked_by.is_empty();
        if !claimable {
            if task.status.is_finished() {
                return refuse("invalid_transition");
            }
            return match task.owner.as_deref() {
                Some(owner) if owner == caller => Ok(Outcome::Task(task)),
                Some(_) => refuse("already_claimed"),
                None => refuse("blocked"),
            };
        }
        let task = self.task_mut(id);
        task.status = TaskStatus::InProgress;
        task.owner = Some(caller.to_owned());
        task.claimed_at = Some(now);
        let task = task.clone();
        for member in &mut self.members {
            if member.key == caller {
                member.status = MemberStatus::Working;
                member.current_task = Some(id.to_owned());
            }
        }
        Ok(Outcome::Task(task))
    }

    /// The checks `complete` and `release` share: a member, an existing in-progress task, held
    /// by the caller unless the caller leads.
    fn check_holder(&self, caller: &str, id: &str) -> Result<TaskView, String> {
        let Some(member) = self.member(caller) else {
            return Err("not_a_member".into());
        };
        let Some(task) = self.task(id) else {
            return Err("task_not_found".into());
        };
        if task.status != TaskStatus::InProgress {
            return Err("invalid_transition".into());
        }
        if task.owner.as_deref() != Some(caller) && member.role != MemberRole::Lead {
            return Err("not_owner".into());
        }
        Ok(task.clone())
    }

    fn complete(&mut self, caller: &str, id: &str, summary: bool, now: i64) -> Answer {
        let before = self.check_holder(caller, id)?;
        let task = self.task_mut(id);
        task.status = TaskStatus::Completed;
        task.completed_at = Some(now);
        task.summary = summary.then(|| "done".to_owned());
        let unblocked = self.unblock(id, &before.blocks);
        self.free_holder(before.owner.as_deref().unwrap_or_default(), id);
        let task = self.task(id).cloned().expect("exists");
        Ok(Outcome::Finished(task, unblocked))
    }

    fn release(&mut self, caller: &str, id: &str) -> Answer {
        let before = self.check_holder(caller, id)?;
        let task = self.task_mut(id);
        task.status = TaskStatus::Pending;
        task.owner = None;
        task.claimed_at = None;
        let task = task.clone();
        self.free_holder(before.owner.as_deref().unwrap_or_default(), id);
        Ok(Outcome::Task(task))
    }

    fn delete(&mut self, caller: &str, id: &str, now: i64) -> Answer {
        match self.member(caller) {
            None => return refuse("not_a_member"),
            Some(member) if member.role != MemberRole::Lead => return refuse("not_lead"),
            Some(_) => {}
        }
        let Some(before) = self.task(id).cloned() else {
            return refuse("task_not_found");
        };
        if before.status.is_finished() {
            return refuse("invalid_transition");
        }
        let task = self.task_mut(id);
        task.status = TaskStatus::Deleted;
        task.deleted_at = Some(now);
        let unblocked = self.unblock(id, &before.blocks);
        if let Some(owner) = &before.owner {
            self.free_holder(owner, id);
        }
        let task = self.task(id).cloned().expect("exists");
        Ok(Outcome::Finished(task, unblocked))
    }

    fn depend(&mut self, caller: &str, id: &str, dep: &str) -> Answer {
        if self.member(caller).is_none() {
            return refuse("not_a_member");
        }
        let Some(task) = self.task(id).cloned() else {
            return refuse("task_not_found");
        };
        let target = match self.task(dep) {
            Some(target) if target.status != TaskStatus::Deleted => target.clone(),
            _ => return refuse("unknown_dependency"),
        };
        if task.status != TaskStatus::Pending {
            return refuse("invalid_transition");
        }
        if task.depends_on.iter().any(|d| d == dep) {
            return Ok(Outcome::Task(task));
        }
        if self.reaches(dep, id) {
            return refuse("dependency_cycle");
        }
        let waiting = self.task_mut(id);
        waiting.depends_on.push(dep.to_owned());
        if target.status != TaskStatus::Completed {
            waiting.blocked_by.push(dep.to_owned());
        }
        let waiting = waiting.clone();
        let target = self.task_mut(dep);
        if !target.blocks.iter().any(|b| b == id) {
            target.blocks.push(id.to_owned());
        }
        Ok(Outcome::Task(waiting))
    }

    fn list(&self, selection: &Selection, owner: Option<usize>, limit: Option<usize>) -> Answer {
        let tasks: Vec<TaskView> = self
            .tasks
            .iter()
            .filter(|t| match selection {
                Selection::Available => {
                    t.status == TaskStatus::Pending && t.owner.is_none() && t.blocked_by.is_empty()
                }
                Selection::Status(status) => t.status == *status,
                Selection::Open => !t.status.is_finished(),
                Selection::All => true,
            })
            .filter(|t| owner.is_none_or(|o| t.owner.as_deref() == Some(KEYS[o])))
            .take(limit.unwrap_or(usize::MAX))
            .cloned()
            .collect();
        Ok(Outcome::Tasks(tasks))
    }

    /// The recipients of a send, in joining order.
    fn send(&self, caller: &str, to: Option<&str>) -> Answer {
        if self.member(caller).is_none() {
            return refuse("not_a_member");
        }
        let recipients: Vec<String> = match to {
            Some(to) => match self.member(to) {
                Some(member) => vec![member.key.clone()],
                None => return refuse("unknown_recipient"),
            },
            None => self
                .members
                .iter()
                .filter(|m| m.key != caller)
                .map(|m| m.key.clone())
                .collect(),
        };
        Ok(Outcome::Sent(recipients))
    }

    /// A send the implementation confirmed with `id`: one copy per recipient.
    fn deliver(&mut self, id: &str, caller: &str, broadcast: bool, content: &str, to: &[String]) {
        for recipient in to {
            let inbox = self.member(recipient).expect("a member").inbox_key.clone();
            self.inboxes.entry(inbox).or_default().push(MessageView {
                id: id.to_owned(),
                kind: if broadcast {
                    MessageKind::Broadcast
                } else {
                    MessageKind::Message
                },
                from: caller.to_owned(),
                to: recipient.clone(),
                content: content.to_owned(),
            });
        }
    }

    fn read(&mut self, caller: &str, keep: bool) -> Answer {
        let Some(member) = self.member(caller) else {
            return refuse("not_a_member");
        };
        let inbox = member.inbox_key.clone();
        let messages = if keep {
            self.inboxes.get(&inbox).cloned().unwrap_or_default()
        } else {
            self.inboxes.remove(&inbox).unwrap_or_default()
        };
        Ok(Outcome::Messages(messages))
    }

    fn state(&self) -> State {
        let mut counts = [0; 4];
        for task in &self.tasks {
            counts[status_index(task.status)] += 1;
        }
        State {
            members: self.members.clone(),
            tasks: self.tasks.clone(),
            counts,
            inboxes: self
                .members
                .iter()
                .map(|m| {
                    let messages = self.inboxes.get(&m.inbox_key).cloned().unwrap_or_default();
                    (m.key.clone(), messages)
                })
                .collect(),
        }
    }
}

fn status_index(status: TaskStatus) -> usize {
    match status {
        TaskStatus::Pending => 0,
        TaskStatus::InProgress => 1,
        TaskStatus::Completed => 2,
        TaskStatus::Deleted => 3,
    }
}

/// The code of an error; a reported cycle must be a real one: `id`, the new edge's target, then
/// existing `dependsOn` edges back to `id`.
fn code(error: TeamsError, write: &Write, model: &Model) -> String {
    if let (TeamsError::DependencyCycle(cycle), Write::Depend { task, on, .. }) = (&error, write) {
        let (id, on) = (task.to_string(), on.to_string());
        assert_eq!(
            cycle.first(),
            Some(&id),
            "cycle {cycle:?} starts at the task"
        );
        assert_eq!(
            cycle.get(1),
            Some(&on),
            "cycle {cycle:?} follows the new edge"
        );
        assert_eq!(
            cycle.last(),
            Some(&id),
            "cycle {cycle:?} closes at the task"
        );
        for pair in cycle[1..].windows(2) {
            let edge = model
                .task(&pair[0])
                .is_some_and(|t| t.depends_on.contains(&pair[1]));
            assert!(
                edge,
                "cycle {cycle:?}: {} does not wait for {}",
                pair[0], pair[1]
            );
        }
    }
    error.code().to_owned()
}

/// One write on the real ledger.
fn real_write(ledger: &mut Ledger, write: &Write, now: i64, model: &Model) -> Answer {
    let result = match write {
        Write::Join { key, name } => ledger
            .add_member(
                &Member {
                    session_key: KEYS[*key].to_owned(),
                    agent_id: "main".to_owned(),
                    name: NAMES[*name].to_owned(),
                    role: MemberRole::Member,
                    agent_type: None,
                    status: MemberStatus::Idle,
                    current_task: None,
                    joined_at: now,
                    inbox_key: inbox_key(KEYS[*key]).expect("valid key"),
                },
                MAX_MEMBERS,
            )
            .map(|m| Outcome::Member(MemberView::from(&m))),
        Write::SetStatus { key, status } => ledger
            .set_member_status(KEYS[*key], *status)
            .map(|()| Outcome::Done),
        Write::Create { caller, deps } => ledger
            .create_task(
                KEYS[*caller],
                &NewTask {
                    subject: subject(now),
                    depends_on: deps.iter().map(u8::to_string).collect(),
                    ..NewTask::default()
                },
                now,
                MAX_TASKS,
            )
            .map(|t| Outcome::Task(TaskView::from(&t))),
        Write::Claim { caller, task } => ledger
            .claim(&task.to_string(), KEYS[*caller], now)
            .map(|t| Outcome::Task(TaskView::from(&t))),
        Write::Complete {
            caller,
            task,
            summary,
        } => ledger
            .complete(
                &task.to_string(),
                KEYS[*caller],
                summary.then_some("done"),
                now,
            )
            .map(|(t, unblocked)| Outcome::Finished(TaskView::from(&t), unblocked)),
        Write::Release { caller, task } => ledger
            .release(&task.to_string(), KEYS[*caller], now)
            .map(|t| Outcome::Task(TaskView::from(&t))),
        Write::Delete { caller, task } => ledger
            .delete(&task.to_string(), KEYS[*caller], now)
            .map(|(t, unblocked)| Outcome::Finished(TaskView::from(&t), unblocked)),
        Write::Depend { caller, task, on } => ledger
            .depend(&task.to_string(), &on.to_string(), KEYS[*caller], now)
            .map(|t| Outcome::Task(TaskView::from(&t))),
    };
    result.map_err(|e| code(e, write, model))
}

/// The team under test.
struct Real {
    _dir: tempfile::TempDir,
    teams: Teams,
    team: Option<OpenTeam>,
}

impl Real {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let teams = Teams::new(
            dir.path().join("teams"),
            BusyPolicy::default(),
            Clock::fixed(T0),
        );
        teams
            .create(TEAM, LEAD, "", "general-purpose")
            .expect("create the team");
        let team = teams.open(TEAM).expect("open the team");
        Self {
            _dir: dir,
            teams,
            team: Some(team),
        }
    }

    fn team(&mut self) -> &mut OpenTeam {
        self.team.as_mut().expect("the team is open")
    }

    fn reopen(&mut self) {
        self.team = None;
        self.team = Some(self.teams.open(TEAM).expect("reopen the team"));
    }

    fn ledger_path(&mut self) -> PathBuf {
        self.team().dir().join(LEDGER_FILE)
    }

    /// The inbox directory of a session key.
    fn inbox(&mut self, key: &str) -> PathBuf {
        mailbox::inbox_dir(self.team().dir(), &inbox_key(key).expect("valid key"))
    }

    fn send(&mut self, caller: &str, to: Option<&str>, content: &str) -> (Answer, Option<String>) {
        let sent = self.team().send(
            caller,
            Outgoing {
                to: to.map(str::to_owned),
                kind: MessageKind::Message,
                content: content.to_owned(),
                summary: None,
                request_id: None,
                approve: None,
                reason: None,
            },
        );
        match sent {
            Ok(value) => {
                let recipients = value["recipients"]
                    .as_array()
                    .expect("recipients")
                    .iter()
                    .map(|r| r.as_str().expect("a key").to_owned())
                    .collect();
                let id = value["messageId"].as_str().expect("messageId").to_owned();
                (Ok(Outcome::Sent(recipients)), Some(id))
            }
            Err(error) => (Err(error.code().to_owned()), None),
        }
    }

    fn read(&mut self, caller: &str, keep: bool) -> Answer {
        let value = self
            .team()
            .inbox_read(caller, keep)
            .map_err(|e| e.code().to_owned())?;
        let messages: Vec<Message> =
            serde_json::from_value(value["messages"].clone()).expect("messages");
        assert_eq!(value["count"], messages.len(), "count and messages agree");
        Ok(Outcome::Messages(
            messages.iter().map(MessageView::from).collect(),
        ))
    }

    fn list(
        &mut self,
        selection: &Selection,
        owner: Option<usize>,
        limit: Option<usize>,
    ) -> Answer {
        let filter = TaskFilter {
            status: match selection {
                Selection::Status(status) => Some(*status),
                _ => None,
            },
            owner: owner.map(|o| KEYS[o].to_owned()),
            available: matches!(selection, Selection::Available),
            include_completed: matches!(selection, Selection::All),
            limit,
        };
        let tasks = self
            .team()
            .ledger()
            .list(&filter)
            .map_err(|e| e.code().to_owned())?;
        Ok(Outcome::Tasks(tasks.iter().map(TaskView::from).collect()))
    }

    fn state(&mut self) -> State {
        let ledger = self.team().ledger();
        let members: Vec<MemberView> = ledger
            .members()
            .expect("members")
            .iter()
            .map(MemberView::from)
            .collect();
        let tasks = ledger
            .list(&TaskFilter {
                include_completed: true,
                ..TaskFilter::default()
            })
            .expect("tasks")
            .iter()
            .map(TaskView::from)
            .collect();
        let counts = ledger.counts().expect("counts");
        let dir = self.team().dir().to_owned();
        let inboxes = members
            .iter()
            .map(|m| {
                let messages = mailbox::read(&mailbox::inbox_dir(&dir, &m.inbox_key), false)
                    .expect("read an inbox");
                (
                    m.key.clone(),
                    messages.iter().map(MessageView::from).collect(),
                )
            })
            .collect();
        State {
            members,
            tasks,
            counts: [
                counts.pending,
                counts.in_progress,
                counts.completed,
                counts.deleted,
            ],
            inboxes,
        }
    }
}

/// Makes the lock of the inbox in `dir` impossible to take (a directory where its file belongs);
/// the returned guard puts it right.
struct BrokenLock(PathBuf);

impl BrokenLock {
    fn new(dir: &Path) -> Self {
        let lock = dir.join(LOCK_FILE);
        fs::create_dir_all(dir).expect("inbox dir");
        let _ = fs::remove_file(&lock);
        fs::create_dir(&lock).expect("a directory in the lock's place");
        Self(lock)
    }
}

impl Drop for BrokenLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

/// `op` with its task references resolved against the model.
fn resolve(model: &Model, op: &Op) -> Op {
    match op {
        Op::Write(write) => Op::Write(model.resolve(write)),
        Op::Locked(write) => Op::Locked(model.resolve(write)),
        other => other.clone(),
    }
}

/// Runs one step (its task references resolved) on both sides; returns both answers.
fn step(model: &mut Model, real: &mut Real, op: &Op, now: i64) -> (Answer, Answer) {
    let content = format!("message {now}");
    match op {
        Op::Write(write) => {
            let got = {
                let ledger = real.team.as_mut().expect("open").ledger();
                real_write(ledger, write, now, model)
            };
            (got, model.write(write, now))
        }
        Op::List {
            selection,
            owner,
            limit,
        } => (
            real.list(selection, *owner, *limit),
            model.list(selection, *owner, *limit),
        ),
        Op::Send { caller, to } => {
            let (caller, to) = (KEYS[*caller], to.map(|t| KEYS[t]));
            let (got, id) = real.send(caller, to, &content);
            let expected = model.send(caller, to);
            if let (Some(id), Ok(Outcome::Sent(recipients))) = (id, &expected) {
                model.deliver(&id, caller, to.is_none(), &content, recipients);
            }
            (got, expected)
        }
        Op::Read { caller, keep } => (
            real.read(KEYS[*caller], *keep),
            model.read(KEYS[*caller], *keep),
        ),
        Op::Reopen => {
            real.reopen();
            (Ok(Outcome::Done), Ok(Outcome::Done))
        }
        Op::Locked(write) => {
            let path = real.ledger_path();
            let mut holder = Connection::open(&path).expect("open the ledger");
            let held = holder
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .expect("take the write lock");
            let mut impatient = Ledger::open(
                &path,
                BusyPolicy {
                    budget: Duration::ZERO,
                    trace: false,
                },
            )
            .expect("open beside the lock holder");
            let got = real_write(&mut impatient, write, now, model);
            drop(impatient);
            held.rollback().expect("release the write lock");
            (got, refuse("busy"))
        }
        Op::SendLockBroken { caller, to, broken } => {
            let (caller, to, broken) = (KEYS[*caller], to.map(|t| KEYS[t]), KEYS[*broken]);
            let broken_inbox = inbox_key(broken).expect("valid key");
            let expected = model.send(caller, to);
            let reaches_broken = matches!(&expected, Ok(Outcome::Sent(recipients))
            if recipients.iter().any(|r| {
                model.member(r).is_some_and(|m| m.inbox_key == broken_inbox)
            }));
            let _broken = BrokenLock::new(&real.inbox(broken));
            let (got, id) = real.send(caller, to, &content);
            if reaches_broken {
                // All or nothing: not one recipient gets a copy.
                return (got, refuse("storage"));
            }
            if let (Some(id), Ok(Outcome::Sent(recipients))) = (id, &expected) {
                model.deliver(&id, caller, to.is_none(), &content, recipients);
            }
            (got, expected)
        }
        Op::ReadLockBroken { caller, keep } => {
            let caller = KEYS[*caller];
            let expected = match model.member(caller) {
                Some(_) => refuse("storage"),
                None => refuse("not_a_member"),
            };
            let _broken = BrokenLock::new(&real.inbox(caller));
            (real.read(caller, *keep), expected)
        }
        Op::TornTail { key } => {
            let dir = real.inbox(KEYS[*key]);
            fs::create_dir_all(&dir).expect("inbox dir");
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(MESSAGES_FILE))
                .and_then(|mut file| file.write_all(b"{\"id\":\"torn-by-a-kill\",\"type\":\"mes"))
                .expect("tear the end of the inbox");
            (Ok(Outcome::Done), Ok(Outcome::Done))
        }
    }
}

fn caller() -> impl Strategy<Value = usize> {
    // Mostly the lead and the two members joined at the start, sometimes anyone.
    prop_oneof![3 => Just(0), 2 => Just(1), 2 => Just(3), 2 => 0..KEYS.len()]
}

fn task_id() -> impl Strategy<Value = u8> {
    any::<u8>()
}

fn dependencies() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(task_id(), 1..3)]
}

fn member_status() -> impl Strategy<Value = MemberStatus> {
    prop::sample::select(MemberStatus::ALL)
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        1 => (0..KEYS.len(), 0..NAMES.len()).prop_map(|(key, name)| Write::Join { key, name }),
        1 => (0..KEYS.len(), member_status()).prop_map(|(key, status)| Write::SetStatus { key, status }),
        6 => (caller(), dependencies()).prop_map(|(caller, deps)| Write::Create { caller, deps }),
        4 => (caller(), task_id()).prop_map(|(caller, task)| Write::Claim { caller, task }),
        4 => (caller(), task_id(), any::<bool>())
            .prop_map(|(caller, task, summary)| Write::Complete { caller, task, summary }),
        2 => (caller(), task_id()).prop_map(|(caller, task)| Write::Release { caller, task }),
        1 => (caller(), task_id()).prop_map(|(caller, task)| Write::Delete { caller, task }),
        2 => (caller(), task_id(), task_id())
            .prop_map(|(caller, task, on)| Write::Depend { caller, task, on }),
    ]
}

fn selection() -> impl Strategy<Value = Selection> {
    prop_oneof![
        Just(Selection::Open),
        Just(Selection::All),
        Just(Selection::Available),
        prop::sample::select(TaskStatus::ALL).prop_map(Selection::Status),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        14 => write().prop_map(Op::Write),
        2 => (selection(), prop::option::of(caller()), prop::option::of(0usize..4))
            .prop_map(|(selection, owner, limit)| Op::List { selection, owner, limit }),
        4 => (caller(), prop::option::of(0..KEYS.len())).prop_map(|(caller, to)| Op::Send { caller, to }),
        3 => (caller(), any::<bool>()).prop_map(|(caller, keep)| Op::Read { caller, keep }),
        1 => Just(Op::Reopen),
        1 => write().prop_map(Op::Locked),
        1 => (caller(), 0..KEYS.len())
            .prop_map(|(caller, to)| Op::SendLockBroken { caller, to: Some(to), broken: to }),
        1 => (caller(), 0..KEYS.len())
            .prop_map(|(caller, broken)| Op::SendLockBroken { caller, to: None, broken }),
        1 => (caller(), any::<bool>()).prop_map(|(caller, keep)| Op::ReadLockBroken { caller, keep }),
        1 => (0..KEYS.len()).prop_map(|key| Op::TornTail { key }),
    ]
}

/// Two members join and the lead creates a task first, so that most steps have someone to act
/// and something to act on.
fn with_members(ops: Vec<Op>) -> Vec<Op> {
    let mut all = vec![
        Op::Write(Write::Join { key: 1, name: 0 }),
        Op::Write(Write::Join { key: 3, name: 2 }),
        Op::Write(Write::Create {
            caller: 0,
            deps: Vec::new(),
        }),
    ];
    all.extend(ops);
    all
}

proptest! {
    #![proptest_config(ledger_history::model_config())]

    #[test]
    fn the_ledger_and_the_inboxes_behave_like_the_model(
        ops in prop::collection::vec(op(), 1..64).prop_map(with_members)
    ) {
        let mut model = Model::new();
        let mut real = Real::new();
        prop_assert_eq!(real.state(), model.state(), "the new team");
        for (index, op) in ops.iter().enumerate() {
            let now = T0 + 1000 * (index as i64 + 1);
            let op = resolve(&model, op);
            let (got, expected) = step(&mut model, &mut real, &op, now);
            prop_assert_eq!(got, expected, "step {} {:?}", index, op);
            prop_assert_eq!(real.state(), model.state(), "after step {} {:?}", index, op);
        }
    }
}
