//! The AOF task store checked against a model: proptest generates sequences of operations (tasks
//! created with a fixed or an allocated id, moved through the transition table, completion outcomes
//! resolved into their steps and applied, tasks read by id) and runs each one against the real
//! store (`tasks/<status>/<id>.md` and its companion directory under a temp dir, and the event log)
//! and against a plain sequential model written here. After every step the results must be
//! equal, and so must the whole observable state: every task as `list` returns it, every file and
//! directory under `tasks/`, and the event log.
//!
//! Failures are injected between and during steps, each with the model's "nothing or all"
//! expectation: the store opened again (nothing changes, stale temp files are swept); a
//! half-written temp file of a writer that died (nothing changes: no listing shows it, the next
//! open removes it); a transition that died before its last rename, after moving the file into
//! the new status directory, then its companion directory, then staging the new content, then
//! writing its event (nothing: every reader sees the old status, the next locked load moves the
//! file and the directory back, the next open removes the staged file; only the event, when it
//! was written, stays); a transition whose move fails (the error is reported and nothing
//! changes); a completion whose event log cannot be written (the error is reported and nothing
//! changes).
//!
//! 64 cases of up to 64 steps, or `PROPTEST_CASES`.

use crate::ledger_history;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Value, json};
use ski::aof::completion::{apply_steps, resolve_completion_transitions};
use ski::aof::data_dir::{DataDir, Journal};
use ski::aof::envelope::Outcome;
use ski::aof::error::AofError;
use ski::aof::event::kind;
use ski::aof::store::{COMPANION_DIRS, NewTask, StoreError};
use ski::aof::task::{Frontmatter, Lease, Priority, Routing, Task, TaskStatus, content_hash};
use ski::aof::task_id::TaskId;
use ski::aof::timestamp::Timestamp;
use ski_mocks::testing::tree;

const DATE: &str = "2026-02-09";
const T0: &str = "2026-02-09T08:00:00.000Z";
/// The sequence numbers a fixed id may have.
const FIXED_IDS: u32 = 12;
/// The sequence number of the task no operation ever creates.
const MISSING: u32 = 900;
/// No process has this id (Linux's `pid_max` is at most 2^22): a temp file named after it is a
/// dead writer's.
const DEAD_PID: i32 = i32::MAX;
const ACTOR: &str = "model";

/// One step. Generated task references and target statuses are resolved against the model before
/// the step ([`Model::task_ref`], [`Model::target`]), so that most name a task that exists and
/// many a move the table allows.
#[derive(Debug, Clone)]
enum Op {
    Create {
        fixed: Option<u32>,
        status: TaskStatus,
        lease: bool,
    },
    Transition {
        task: u8,
        to: u8,
    },
    /// A completion outcome: its steps resolved from the task's status and applied.
    Resolve {
        task: u8,
        outcome: Outcome,
        review_required: bool,
    },
    Read {
        task: u8,
    },
    /// The store is opened again.
    Reopen,
    /// A writer died after writing the start of a temp file.
    StaleTemp {
        status: TaskStatus,
        length: usize,
    },
    /// A transition died before its last rename, after `stage` of its steps (see
    /// [`CrashStage`]).
    CrashMidTransition {
        task: u8,
        to: u8,
        stage: CrashStage,
    },
    /// A transition whose move fails: a directory stands where the file goes.
    ObstructedRename {
        task: u8,
        to: u8,
    },
    /// A completion whose events cannot be written: the event log's lock cannot be taken.
    UnrecordedResolve {
        task: u8,
        outcome: Outcome,
        review_required: bool,
    },
}

/// How far a killed transition got: the steps before its last rename, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum CrashStage {
    /// The file, still with its old status, was moved into the new status directory.
    FileMoved,
    /// The companion directory followed it.
    CompanionMoved,
    /// The new content was staged under a temp name there.
    Staged,
    /// The `task.transitioned` event was written.
    Recorded,
}

/// What a step returned.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Done,
    Task(Box<Task>),
    Missing,
    /// The (from, to) steps a completion applied.
    Applied(Vec<(TaskStatus, TaskStatus)>),
    Error(&'static str),
}

fn error_code(error: &StoreError) -> &'static str {
    match error {
        StoreError::Io { .. } => "io",
        StoreError::Parse { .. } => "parse",
        StoreError::Render { .. } => "render",
        StoreError::NotFound(_) => "not_found",
        StoreError::Exists(_) => "exists",
        StoreError::InvalidTransition { .. } => "invalid_transition",
        StoreError::IdsExhausted(_) => "ids_exhausted",
    }
}

fn aof_error_code(error: &AofError) -> &'static str {
    match error {
        AofError::Store(error) => error_code(error),
        AofError::Events(_) => "events",
        _ => "other",
    }
}

/// Everything observable after a step.
#[derive(Debug, PartialEq)]
struct State {
    tasks: Vec<Task>,
    invalid_files: usize,
    /// Every file and directory under `tasks/`.
    tree: Vec<String>,
    /// Type, task, from and to of every event, in id order; the ids run from 1.
    events: Vec<(u64, String, String, Value, Value)>,
}

/// The model's view of one task: its content, where its file lies and where its companion does.
#[derive(Debug, Clone)]
struct Entry {
    task: Task,
    file_in: TaskStatus,
    companion_in: TaskStatus,
}

impl Entry {
    fn settled(&self) -> bool {
        self.file_in == self.task.status() && self.companion_in == self.task.status()
    }
}

/// The transition table, as the AOF document draws it.
fn allowed(from: TaskStatus, to: TaskStatus) -> bool {
    use TaskStatus::*;
    matches!(
        (from, to),
        (Backlog, Ready | Blocked)
            | (Ready, InProgress | Blocked)
            | (InProgress, Review | Ready | Blocked)
            | (Blocked, Ready)
            | (Review, Done | InProgress | Blocked)
    )
}

/// The steps an outcome still needs from `current`.
fn outcome_steps(current: TaskStatus, outcome: Outcome, review_required: bool) -> Vec<TaskStatus> {
    use TaskStatus::*;
    if current == Done {
        return Vec::new();
    }
    let mapping = match outcome {
        Outcome::Done if review_required => vec![Review],
        Outcome::Done => vec![Review, Done],
        Outcome::Blocked => vec![Blocked],
        Outcome::NeedsReview | Outcome::Partial => vec![Review],
    };
    match mapping.iter().position(|s| *s == current) {
        Some(index) => mapping[index + 1..].to_vec(),
        None => mapping,
    }
}

fn at(step: usize) -> Timestamp {
    Timestamp::parse(T0)
        .expect("valid")
        .plus_ms(1000 * step as i64)
}

fn id(sequence: u32) -> TaskId {
    TaskId::from_parts(DATE, sequence).expect("valid id")
}

/// The sequential model.
#[derive(Debug, Default)]
struct Model {
    /// In creation order.
    entries: Vec<Entry>,
    /// Temp files of dead writers: status directory and name.
    temps: Vec<(TaskStatus, String)>,
    events: Vec<(u64, String, String, Value, Value)>,
}

impl Model {
    /// The task a generated reference names: mostly one created so far, one time in eight one
    /// that was never created.
    fn task_ref(&self, reference: u8) -> TaskId {
        let created = self.entries.len();
        if created == 0 || reference.is_multiple_of(8) {
            return id(MISSING);
        }
        self.entries[usize::from(reference / 8) % created]
            .task
            .id()
            .clone()
    }

    /// The status a generated target names for `task`: three times in four one the table allows
    /// from its status (when there is one), else any.
    fn target(&self, task: &TaskId, raw: u8) -> TaskStatus {
        let pick = usize::from(raw / 4);
        let successors: Vec<TaskStatus> = self
            .entries
            .iter()
            .find(|e| e.task.id() == task)
            .map(|e| {
                TaskStatus::ALL
                    .into_iter()
                    .filter(|to| allowed(e.task.status(), *to))
                    .collect()
            })
            .unwrap_or_default();
        if successors.is_empty() || raw.is_multiple_of(4) {
            TaskStatus::ALL[pick % TaskStatus::ALL.len()]
        } else {
            successors[pick % successors.len()]
        }
    }

    fn entry(&mut self, task: &TaskId) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| e.task.id() == task)
    }

    fn create(
        &mut self,
        fixed: Option<u32>,
        status: TaskStatus,
        lease: bool,
        now: Timestamp,
    ) -> Answer {
        let task_id = match fixed {
            Some(sequence) => {
                let task_id = id(sequence);
                if self.entries.iter().any(|e| e.task.id() == &task_id) {
                    return Answer::Error("exists");
                }
                task_id
            }
            None => {
                let highest = self.entries.iter().map(|e| e.task.id().sequence()).max();
                id(highest.unwrap_or(0) + 1)
            }
        };
        let task = new_task(&task_id, status, lease, now);
        self.entries.push(Entry {
            task: task.clone(),
            file_in: status,
            companion_in: status,
        });
        Answer::Task(Box::new(task))
    }

    /// A locked load: finishes any interrupted move.
    fn load(&mut self, task: &TaskId) -> Option<&mut Entry> {
        let entry = self.entry(task)?;
        entry.file_in = entry.task.status();
        entry.companion_in = entry.task.status();
        Some(entry)
    }

    fn transition(&mut self, task: &TaskId, to: TaskStatus, now: Timestamp) -> Answer {
        let Some(entry) = self.load(task) else {
            return Answer::Error("not_found");
        };
        if !allowed(entry.task.status(), to) {
            return Answer::Error("invalid_transition");
        }
        moved(&mut entry.task, to, now);
        entry.file_in = to;
        entry.companion_in = to;
        Answer::Task(Box::new(entry.task.clone()))
    }

    fn resolve(
        &mut self,
        task: &TaskId,
        outcome: Outcome,
        review_required: bool,
        now: Timestamp,
    ) -> Answer {
        let Some(entry) = self.load(task) else {
            return Answer::Missing;
        };
        let mut applied = Vec::new();
        for to in outcome_steps(entry.task.status(), outcome, review_required) {
            let from = entry.task.status();
            if from == to || !allowed(from, to) {
                continue;
            }
            moved(&mut entry.task, to, now);
            entry.file_in = to;
            entry.companion_in = to;
            applied.push((from, to));
        }
        for (from, to) in &applied {
            let event_id = self.events.len() as u64 + 1;
            self.events.push((
                event_id,
                kind::TASK_TRANSITIONED.to_owned(),
                task.to_string(),
                json!(from),
                json!(to),
            ));
        }
        Answer::Applied(applied)
    }

    fn read(&self, task: &TaskId) -> Answer {
        match self.entries.iter().find(|e| e.task.id() == task) {
            Some(entry) => Answer::Task(Box::new(entry.task.clone())),
            None => Answer::Missing,
        }
    }

    /// A completion whose first step's event cannot be written: nothing changes, and the error
    /// is reported when there was a step to take.
    fn unrecorded_resolve(
        &mut self,
        task: &TaskId,
        outcome: Outcome,
        review_required: bool,
    ) -> Answer {
        let Some(entry) = self.load(task) else {
            return Answer::Missing;
        };
        let from = entry.task.status();
        let would_move = outcome_steps(from, outcome, review_required)
            .into_iter()
            .any(|to| to != from && allowed(from, to));
        if would_move {
            Answer::Error("events")
        } else {
            Answer::Applied(Vec::new())
        }
    }

    /// The state a transition to `to` killed at `stage` leaves: the content unchanged, the file
    /// (and from [`CrashStage::CompanionMoved`] on the companion) in `to`'s directory, from
    /// [`CrashStage::Staged`] on the temp file `staged` there, and at [`CrashStage::Recorded`]
    /// the event. Only a settled task with an allowed move is crashed; returns its status, or
    /// `None`.
    fn crash(
        &mut self,
        task: &TaskId,
        to: TaskStatus,
        stage: CrashStage,
        staged: &str,
    ) -> Option<TaskStatus> {
        let entry = self.entry(task)?;
        let from = entry.task.status();
        if !entry.settled() || !allowed(from, to) {
            return None;
        }
        entry.file_in = to;
        if stage >= CrashStage::CompanionMoved {
            entry.companion_in = to;
        }
        if stage >= CrashStage::Staged {
            self.temps.push((to, staged.to_owned()));
        }
        if stage >= CrashStage::Recorded {
            let event_id = self.events.len() as u64 + 1;
            self.events.push((
                event_id,
                kind::TASK_TRANSITIONED.to_owned(),
                task.to_string(),
                json!(from),
                json!(to),
            ));
        }
        Some(from)
    }

    fn state(&self) -> State {
        let mut tasks: Vec<Task> = self.entries.iter().map(|e| e.task.clone()).collect();
        tasks.sort_by(|a, b| a.id().cmp(b.id()));
        let mut tree: Vec<String> = TaskStatus::ALL
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect();
        for entry in &self.entries {
            let task = entry.task.id();
            tree.push(format!("{}/{task}.md", entry.file_in.as_str()));
            let companion = format!("{}/{task}", entry.companion_in.as_str());
            for sub in COMPANION_DIRS {
                tree.push(format!("{companion}/{sub}"));
            }
            tree.push(companion);
        }
        for (status, name) in &self.temps {
            tree.push(format!("{}/{name}", status.as_str()));
        }
        tree.sort();
        State {
            tasks,
            invalid_files: 0,
            tree,
            events: self.events.clone(),
        }
    }
}

/// The body of a task created at `now`.
fn body(now: Timestamp) -> String {
    format!("  Written at {}.\n\n", now.to_iso())
}

/// What a task created at `now` with these settings is.
fn new_task(task_id: &TaskId, status: TaskStatus, lease: bool, now: Timestamp) -> Task {
    let body = body(now).trim().to_owned();
    Task {
        frontmatter: Frontmatter {
            schema_version: 1,
            id: task_id.clone(),
            project: "model".to_owned(),
            title: format!("Created at {}", now.to_iso()),
            status,
            priority: Priority::High,
            routing: Routing::default(),
            lease: lease.then(|| Lease {
                agent: "agent-a".to_owned(),
                acquired_at: now,
                expires_at: now.plus_ms(600_000),
                renew_count: 0,
            }),
            created_at: now,
            updated_at: now,
            last_transition_at: now,
            created_by: ACTOR.to_owned(),
            parent_id: None,
            depends_on: Vec::new(),
            content_hash: Some(content_hash(&body)),
            metadata: BTreeMap::new(),
            extra: BTreeMap::new(),
        },
        body,
    }
}

/// A task's content after a move to `to`: the timestamps, and no lease once it is done, ready or
/// back in the backlog.
fn moved(task: &mut Task, to: TaskStatus, now: Timestamp) {
    let front = &mut task.frontmatter;
    front.status = to;
    front.updated_at = now;
    front.last_transition_at = now;
    if matches!(
        to,
        TaskStatus::Done | TaskStatus::Ready | TaskStatus::Backlog
    ) {
        front.lease = None;
    }
}

/// The data dir under test.
struct Real {
    dir: tempfile::TempDir,
    data: DataDir,
}

impl Real {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = DataDir::open(dir.path(), Path::new("runs")).expect("open the data dir");
        Self { dir, data }
    }

    fn reopen(&mut self) {
        self.data = DataDir::open(self.dir.path(), Path::new("runs")).expect("open again");
    }

    fn tasks_dir(&self) -> PathBuf {
        self.dir.path().join("tasks")
    }

    fn create(
        &self,
        fixed: Option<u32>,
        status: TaskStatus,
        lease: bool,
        now: Timestamp,
    ) -> Answer {
        let expected = new_task(&id(0), status, lease, now).frontmatter;
        let mut new = NewTask::new(expected.title);
        new.id = fixed.map(id);
        new.project = expected.project;
        new.status = status;
        new.created_by = expected.created_by;
        new.priority = expected.priority;
        new.lease = expected.lease;
        new.body = body(now);
        match self.data.store.create(new, now) {
            Ok(task) => Answer::Task(Box::new(task)),
            Err(error) => Answer::Error(error_code(&error)),
        }
    }

    fn transition(&self, task: &TaskId, to: TaskStatus, now: Timestamp) -> Answer {
        let store = &self.data.store;
        let _lock = store.lock(task).expect("lock");
        let mut loaded = match store.load(task) {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return Answer::Error("not_found"),
            Err(error) => return Answer::Error(error_code(&error)),
        };
        match store.transition(&mut loaded, to, now) {
            Ok(()) => Answer::Task(Box::new(loaded)),
            Err(error) => Answer::Error(error_code(&error)),
        }
    }

    fn resolve(
        &self,
        task: &TaskId,
        outcome: Outcome,
        review_required: bool,
        now: Timestamp,
    ) -> Answer {
        let store = &self.data.store;
        let _lock = store.lock(task).expect("lock");
        let mut loaded = match store.load(task) {
            Ok(Some(loaded)) => loaded,
            Ok(None) => return Answer::Missing,
            Err(error) => return Answer::Error(error_code(&error)),
        };
        let steps = resolve_completion_transitions(loaded.status(), outcome, review_required);
        let mut journal = Journal::new(&self.data.events, now);
        match apply_steps(
            &self.data,
            &mut journal,
            &mut loaded,
            &steps,
            "model",
            ACTOR,
            now,
        ) {
            Ok(applied) => Answer::Applied(applied.iter().map(|a| (a.from, a.to)).collect()),
            Err(error) => Answer::Error(aof_error_code(&error)),
        }
    }

    /// A locked load, as every writer starts: puts back what a killed transition left.
    fn settle(&self, task: &TaskId) {
        let store = &self.data.store;
        let _lock = store.lock(task).expect("lock");
        store.load(task).expect("load");
    }

    fn read(&self, task: &TaskId) -> Answer {
        match self.data.store.read(task) {
            Ok(Some(task)) => Answer::Task(Box::new(task)),
            Ok(None) => Answer::Missing,
            Err(error) => Answer::Error(error_code(&error)),
        }
    }

    fn state(&self) -> State {
        let (tasks, invalid) = self.data.store.list().expect("list");
        let events = self
            .data
            .events
            .read_all()
            .expect("read the event log")
            .into_iter()
            .map(|e| {
                (
                    e.event_id,
                    e.kind,
                    e.task_id.map(|t| t.to_string()).unwrap_or_default(),
                    e.payload.get("from").cloned().unwrap_or_default(),
                    e.payload.get("to").cloned().unwrap_or_default(),
                )
            })
            .collect();
        State {
            tasks,
            invalid_files: invalid.len(),
            tree: tree(&self.tasks_dir()),
            events,
        }
    }
}

/// Runs one step on both sides; returns both answers.
fn step(model: &mut Model, real: &mut Real, op: &Op, index: usize) -> (Answer, Answer) {
    let now = at(index + 1);
    match op {
        Op::Create {
            fixed,
            status,
            lease,
        } => (
            real.create(*fixed, *status, *lease, now),
            model.create(*fixed, *status, *lease, now),
        ),
        Op::Transition { task, to } => {
            let task = model.task_ref(*task);
            let to = &model.target(&task, *to);
            (
                real.transition(&task, *to, now),
                model.transition(&task, *to, now),
            )
        }
        Op::Resolve {
            task,
            outcome,
            review_required,
        } => {
            let task = model.task_ref(*task);
            (
                real.resolve(&task, *outcome, *review_required, now),
                model.resolve(&task, *outcome, *review_required, now),
            )
        }
        Op::Read { task } => {
            let task = model.task_ref(*task);
            (real.read(&task), model.read(&task))
        }
        Op::Reopen => {
            real.reopen();
            model.temps.clear();
            (Answer::Done, Answer::Done)
        }
        Op::StaleTemp { status, length } => {
            let name = format!(".tmp-{}.md.{DEAD_PID}.{index}", id(MISSING));
            let text = new_task(&id(MISSING), *status, false, now)
                .render()
                .expect("render");
            let cut = &text.as_bytes()[..(*length).min(text.len())];
            fs::write(real.tasks_dir().join(status.as_str()).join(&name), cut).expect("temp file");
            model.temps.push((*status, name));
            (Answer::Done, Answer::Done)
        }
        Op::CrashMidTransition { task, to, stage } => {
            let task = model.task_ref(*task);
            let to = model.target(&task, *to);
            let staged = format!(".tmp-{task}.md.{DEAD_PID}.{index}");
            if let Some(from) = model.crash(&task, to, *stage, &staged) {
                let data = &real.data;
                let store = &data.store;
                fs::rename(store.file_path(from, &task), store.file_path(to, &task))
                    .expect("move the file");
                let mut moved = store.read(&task).expect("read").expect("the moved task");
                if *stage >= CrashStage::CompanionMoved {
                    let companion = store.companion_dir(&moved);
                    moved.frontmatter.status = to;
                    fs::rename(companion, store.companion_dir(&moved)).expect("move the companion");
                }
                if *stage >= CrashStage::Staged {
                    moved.frontmatter.status = to;
                    let text = moved.render().expect("render");
                    fs::write(real.tasks_dir().join(to.as_str()).join(&staged), text)
                        .expect("stage the new content");
                }
                if *stage >= CrashStage::Recorded {
                    Journal::new(&data.events, now)
                        .emit(
                            kind::TASK_TRANSITIONED,
                            ACTOR,
                            Some(&task),
                            json!({ "from": from, "to": to, "reason": "model" }),
                        )
                        .expect("record the event");
                }
            }
            (Answer::Done, Answer::Done)
        }
        Op::ObstructedRename { task, to } => {
            let task = model.task_ref(*task);
            let to = model.target(&task, *to);
            real.settle(&task);
            let would_move = model
                .load(&task)
                .is_some_and(|e| allowed(e.task.status(), to));
            if !would_move {
                return (
                    real.transition(&task, to, now),
                    model.transition(&task, to, now),
                );
            }
            let obstacle = real.data.store.file_path(to, &task);
            fs::create_dir(&obstacle).expect("a directory where the file goes");
            let got = real.transition(&task, to, now);
            fs::remove_dir(&obstacle).expect("remove the obstacle");
            // Nothing moved: the error is what readers see.
            (got, Answer::Error("io"))
        }
        Op::UnrecordedResolve {
            task,
            outcome,
            review_required,
        } => {
            let task = model.task_ref(*task);
            let lock = real.dir.path().join("events/.lock");
            fs::create_dir_all(real.dir.path().join("events")).expect("events dir");
            let _ = fs::remove_file(&lock);
            fs::create_dir(&lock).expect("a directory where the event log's lock goes");
            let got = real.resolve(&task, *outcome, *review_required, now);
            fs::remove_dir(&lock).expect("the event log can be locked again");
            (
                got,
                model.unrecorded_resolve(&task, *outcome, *review_required),
            )
        }
    }
}

fn status() -> impl Strategy<Value = TaskStatus> {
    prop::sample::select(TaskStatus::ALL.to_vec())
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop::sample::select(vec![
        Outcome::Done,
        Outcome::Blocked,
        Outcome::NeedsReview,
        Outcome::Partial,
    ])
}

fn crash_stage() -> impl Strategy<Value = CrashStage> {
    prop::sample::select(vec![
        CrashStage::FileMoved,
        CrashStage::CompanionMoved,
        CrashStage::Staged,
        CrashStage::Recorded,
    ])
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (prop::option::weighted(0.3, 1..=FIXED_IDS), status(), any::<bool>())
            .prop_map(|(fixed, status, lease)| Op::Create { fixed, status, lease }),
        6 => (any::<u8>(), any::<u8>()).prop_map(|(task, to)| Op::Transition { task, to }),
        3 => (any::<u8>(), outcome(), any::<bool>())
            .prop_map(|(task, outcome, review_required)| Op::Resolve { task, outcome, review_required }),
        1 => any::<u8>().prop_map(|task| Op::Read { task }),
        1 => Just(Op::Reopen),
        1 => (status(), 0usize..400).prop_map(|(status, length)| Op::StaleTemp { status, length }),
        2 => (any::<u8>(), any::<u8>(), crash_stage())
            .prop_map(|(task, to, stage)| Op::CrashMidTransition { task, to, stage }),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(task, to)| Op::ObstructedRename { task, to }),
        1 => (any::<u8>(), outcome(), any::<bool>())
            .prop_map(|(task, outcome, review_required)| Op::UnrecordedResolve { task, outcome, review_required }),
    ]
}

proptest! {
    #![proptest_config(ledger_history::model_config())]

    #[test]
    fn the_task_store_behaves_like_the_model(ops in prop::collection::vec(op(), 1..64)) {
        let mut model = Model::default();
        let mut real = Real::new();
        prop_assert_eq!(real.state(), model.state(), "the new store");
        for (index, op) in ops.iter().enumerate() {
            let (got, expected) = step(&mut model, &mut real, op, index);
            prop_assert_eq!(got, expected, "step {} {:?}", index, op);
            prop_assert_eq!(real.state(), model.state(), "after step {} {:?}", index, op);
        }
    }
}
