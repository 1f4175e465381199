//! The filesystem task store: `tasks/<status>/<id>.md` plus a companion directory
//! `tasks/<status>/<id>/{inputs,work,outputs,subtasks}/` that moves with the file.
//!
//! Every write is atomic ([`crate::storage::atomic_file`]), and every change happens only together
//! with the caller's event (the `*_recorded` methods): the new file is staged under a temp name
//! readers skip, the event is written, and only then does one rename in one directory publish the
//! change. When anything before that rename fails, the store is left as it was and the error is
//! returned; once the rename happened, the change is done and reported so.
//!
//! A transition first moves the file (still with its old status) and the companion directory into
//! the new status directory, stages the new content there, records the event and then renames the
//! staged file over the moved one. Until then every reader sees the old status. A file's own
//! status says where it belongs: if a process dies in between, the next locked [`TaskStore::load`]
//! moves the file and its companion directory back, so a task is never lost or doubled.
//! Callers serialise work on one task with [`TaskStore::lock`], which holds across processes.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::task::{
    Frontmatter, Lease, Priority, Routing, Task, TaskFileError, TaskStatus, content_hash,
    is_valid_transition,
};
use super::task_id::TaskId;
use super::timestamp::Timestamp;
use crate::storage::atomic_file::{
    TEMP_PREFIX, create_dir_durable, is_temp_name, rename_durable, sweep_stale_temps, sync_dir,
    write_atomic,
};
use crate::storage::file_lock::FileLock;

/// The companion subdirectories created with every task.
pub const COMPANION_DIRS: [&str; 4] = ["inputs", "work", "outputs", "subtasks"];

/// Errors of the task store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("task store i/o failed at {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A task file does not parse.
    #[error("task file {path} is invalid")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: TaskFileError,
    },
    /// The frontmatter could not be rendered.
    #[error("task {id} could not be rendered")]
    Render {
        /// The task.
        id: TaskId,
        /// The cause.
        source: serde_norway::Error,
    },
    /// No such task.
    #[error("task {0} not found")]
    NotFound(TaskId),
    /// A task with this id exists already.
    #[error("task {0} already exists")]
    Exists(TaskId),
    /// The transition table forbids the move.
    #[error("invalid transition: {from} -> {to} for task {id}")]
    InvalidTransition {
        /// The task.
        id: TaskId,
        /// The current status.
        from: TaskStatus,
        /// The requested status.
        to: TaskStatus,
    },
    /// A day has no free sequence number left.
    #[error("no task id left for {0}: 999 tasks exist for that day")]
    IdsExhausted(String),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Publishes a staged file at `path` with one rename in one directory. The rename is the point
/// where the operation happens: once it succeeded the operation is done and is reported so, and
/// the directory's fsync after it is best effort (its failure cannot undo what readers already see).
fn publish(staged: &Path, path: &Path) -> io::Result<()> {
    fs::rename(staged, path)?;
    if let Some(dir) = path.parent() {
        let _ = sync_dir(dir);
    }
    Ok(())
}

/// Refuses to move a task file to `path` when anything is there already (a rename would replace
/// a file silently, or fail half-way on a directory).
fn refuse_occupied(path: &Path) -> Result<(), StoreError> {
    match fs::symlink_metadata(path) {
        Ok(_) => Err(StoreError::Io {
            path: path.to_owned(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "something else is where the task file goes",
            ),
        }),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// What a new task starts with.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// A fixed id; allocated from the creation date when `None`.
    pub id: Option<TaskId>,
    /// The title.
    pub title: String,
    /// The project.
    pub project: String,
    /// The first status (the original always uses `backlog`).
    pub status: TaskStatus,
    /// Who creates it.
    pub created_by: String,
    /// The priority.
    pub priority: Priority,
    /// Routing hints.
    pub routing: Routing,
    /// A lease to start with.
    pub lease: Option<Lease>,
    /// Metadata.
    pub metadata: BTreeMap<String, Value>,
    /// The parent task.
    pub parent_id: Option<TaskId>,
    /// The Markdown body.
    pub body: String,
}

impl NewTask {
    /// A backlog task with defaults.
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            id: None,
            title: title.into(),
            project: "default".into(),
            status: TaskStatus::Backlog,
            created_by: "ski".into(),
            priority: Priority::Normal,
            routing: Routing::default(),
            lease: None,
            metadata: BTreeMap::new(),
            parent_id: None,
            body: String::new(),
        }
    }
}

/// The task store of one data dir.
#[derive(Debug, Clone)]
pub struct TaskStore {
    tasks_dir: PathBuf,
    locks_dir: PathBuf,
}

impl TaskStore {
    /// Opens (and lays out) the store under `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        let tasks_dir = data_dir.join("tasks");
        let locks_dir = data_dir.join("locks");
        for status in TaskStatus::ALL {
            let dir = tasks_dir.join(status.as_str());
            create_dir_durable(&dir).map_err(io_at(&dir))?;
            sweep_stale_temps(&dir);
        }
        create_dir_durable(&locks_dir).map_err(io_at(&locks_dir))?;
        Ok(Self {
            tasks_dir,
            locks_dir,
        })
    }

    /// Takes the exclusive lock of one task (blocking); held until the guard drops.
    pub fn lock(&self, id: &TaskId) -> Result<FileLock, StoreError> {
        let path = self.locks_dir.join(format!("{id}.lock"));
        FileLock::exclusive(&path).map_err(io_at(&path))
    }

    fn lock_store(&self) -> Result<FileLock, StoreError> {
        let path = self.locks_dir.join("store.lock");
        FileLock::exclusive(&path).map_err(io_at(&path))
    }

    /// The file of a task in a status directory.
    pub fn file_path(&self, status: TaskStatus, id: &TaskId) -> PathBuf {
        self.tasks_dir
            .join(status.as_str())
            .join(format!("{id}.md"))
    }

    /// The companion directory of a task.
    pub fn companion_dir(&self, task: &Task) -> PathBuf {
        self.tasks_dir
            .join(task.status().as_str())
            .join(task.id().as_str())
    }

    fn locate(&self, id: &TaskId) -> Vec<(TaskStatus, PathBuf)> {
        TaskStatus::ALL
            .into_iter()
            .map(|status| (status, self.file_path(status, id)))
            .filter(|(_, path)| path.is_file())
            .collect()
    }

    fn read_file(path: &Path) -> Result<Task, StoreError> {
        let text = fs::read_to_string(path).map_err(io_at(path))?;
        Task::parse(&text).map_err(|source| StoreError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// Reads a task without repairing anything (no lock needed).
    pub fn read(&self, id: &TaskId) -> Result<Option<Task>, StoreError> {
        let found = self.locate(id);
        let Some((_, path)) = found
            .iter()
            .find(|(status, path)| Self::read_file(path).is_ok_and(|task| task.status() == *status))
            .or(found.first())
        else {
            return Ok(None);
        };
        Self::read_file(path).map(Some)
    }

    /// Reads a task under its lock, putting its file and companion directory where the file's
    /// status says they belong when a process died in the middle of a transition.
    pub fn load(&self, id: &TaskId) -> Result<Option<Task>, StoreError> {
        let found = self.locate(id);
        let Some((dir_status, path)) = found.into_iter().next() else {
            return Ok(None);
        };
        let task = Self::read_file(&path)?;
        if task.status() != dir_status {
            let target = self.file_path(task.status(), id);
            rename_durable(&path, &target).map_err(io_at(&target))?;
        }
        self.settle_companion(&task)?;
        Ok(Some(task))
    }

    /// Moves the companion directory next to the task file when it was left behind.
    fn settle_companion(&self, task: &Task) -> Result<(), StoreError> {
        let wanted = self.companion_dir(task);
        if wanted.is_dir() {
            return Ok(());
        }
        for status in TaskStatus::ALL {
            let candidate = self
                .tasks_dir
                .join(status.as_str())
                .join(task.id().as_str());
            if status != task.status() && candidate.is_dir() {
                rename_durable(&candidate, &wanted).map_err(io_at(&wanted))?;
                break;
            }
        }
        Ok(())
    }

    /// Rewrites a task in its status directory; call with the task's lock held.
    pub fn save(&self, task: &Task) -> Result<(), StoreError> {
        self.save_recorded(task, |_| Ok::<(), StoreError>(()))
    }

    /// Rewrites a task only if `record` (the caller's event) succeeds: the new content is staged
    /// under a temp name, `record` runs, and only then is it renamed over the file. When `record`
    /// fails the file is as it was. Call with the task's lock held.
    pub fn save_recorded<E: From<StoreError>>(
        &self,
        task: &Task,
        record: impl FnOnce(&Task) -> Result<(), E>,
    ) -> Result<(), E> {
        let path = self.file_path(task.status(), task.id());
        let staged = self.staged_path(task.status(), task.id());
        write_atomic(&staged, self.render(task)?.as_bytes()).map_err(io_at(&path))?;
        if let Err(error) = record(task) {
            let _ = fs::remove_file(&staged);
            return Err(error);
        }
        publish(&staged, &path).map_err(|source| {
            let _ = fs::remove_file(&staged);
            StoreError::Io { path, source }.into()
        })
    }

    /// Moves a task to `to` (table-checked); call with the task's lock held.
    pub fn transition(
        &self,
        task: &mut Task,
        to: TaskStatus,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.transition_recorded(task, to, now, |_| Ok::<(), StoreError>(()))
    }

    /// Moves a task to `to` (table-checked) only if `record` (the caller's `task.transitioned`
    /// event, given the moved task) succeeds; call with the task's lock held.
    ///
    /// The file, still saying the old status, and the companion directory are renamed into `to`'s
    /// directory, the new content is staged there under a temp name, `record` runs, and only then
    /// is the staged file renamed over the moved one. Readers see the old status until that last
    /// rename. When a move, the staging or `record` fails, the moves are undone, `task` is left
    /// as it was and the error is returned; if undoing fails too, the file's old status still
    /// holds and the next [`TaskStore::load`] moves it back. A process killed before the last
    /// rename leaves the task in its old status (its file and directory are moved back by the
    /// next load, the temp file is swept by the next [`TaskStore::open`]) and, if it was killed
    /// after `record`, an event of a transition that did not happen.
    pub fn transition_recorded<E: From<StoreError>>(
        &self,
        task: &mut Task,
        to: TaskStatus,
        now: Timestamp,
        record: impl FnOnce(&Task) -> Result<(), E>,
    ) -> Result<(), E> {
        let from = task.status();
        if !is_valid_transition(from, to) {
            return Err(StoreError::InvalidTransition {
                id: task.id().clone(),
                from,
                to,
            }
            .into());
        }
        let mut moved = task.clone();
        let front = &mut moved.frontmatter;
        front.status = to;
        front.updated_at = now;
        front.last_transition_at = now;
        if matches!(
            to,
            TaskStatus::Done | TaskStatus::Ready | TaskStatus::Backlog
        ) {
            front.lease = None;
        }
        let text = self.render(&moved)?;
        let new_file = self.file_path(to, moved.id());
        let staged = self.staged_path(to, moved.id());
        let mut undo = Vec::new();
        let prepared = (|| {
            let old_file = self.file_path(from, task.id());
            refuse_occupied(&new_file)?;
            rename_durable(&old_file, &new_file).map_err(io_at(&new_file))?;
            undo.push((new_file.clone(), old_file));
            let old_dir = self.companion_dir(task);
            if old_dir.is_dir() {
                let new_dir = self.companion_dir(&moved);
                rename_durable(&old_dir, &new_dir).map_err(io_at(&new_dir))?;
                undo.push((new_dir, old_dir));
            }
            write_atomic(&staged, text.as_bytes()).map_err(io_at(&new_file))
        })();
        let recorded = prepared.map_err(E::from).and_then(|()| record(&moved));
        let published = recorded.and_then(|()| {
            publish(&staged, &new_file).map_err(|source| {
                StoreError::Io {
                    path: new_file.clone(),
                    source,
                }
                .into()
            })
        });
        if let Err(error) = published {
            let _ = fs::remove_file(&staged);
            for (moved_to, moved_from) in undo.into_iter().rev() {
                let _ = rename_durable(&moved_to, &moved_from);
            }
            return Err(error);
        }
        *task = moved;
        Ok(())
    }

    fn render(&self, task: &Task) -> Result<String, StoreError> {
        task.render().map_err(|source| StoreError::Render {
            id: task.id().clone(),
            source,
        })
    }

    /// Where a new content of a task's file is staged: a temp name in its status directory,
    /// which readers skip and [`TaskStore::open`] sweeps once this process is gone.
    fn staged_path(&self, status: TaskStatus, id: &TaskId) -> PathBuf {
        self.tasks_dir.join(status.as_str()).join(format!(
            "{TEMP_PREFIX}{id}.md.{}.staged",
            std::process::id()
        ))
    }

    /// Creates a task and its companion directories.
    pub fn create(&self, new: NewTask, now: Timestamp) -> Result<Task, StoreError> {
        self.create_recorded(new, now, |_| Ok::<(), StoreError>(()))
    }

    /// Creates a task only if `record` (the caller's `task.created` event) succeeds: the companion
    /// directories and the task file are staged first (the file under a temp name readers skip),
    /// then `record` runs, and only then is the file renamed into place. When `record` fails, the
    /// staged file and the directories this call made are removed and the store is as it was, so
    /// no task exists without its event. A process killed before `record` leaves a temp file
    /// (swept by the next [`TaskStore::open`]); killed after it, an event of a task that was not
    /// created, which a retry creates (and records) again.
    pub fn create_recorded<E: From<StoreError>>(
        &self,
        new: NewTask,
        now: Timestamp,
        record: impl FnOnce(&Task) -> Result<(), E>,
    ) -> Result<Task, E> {
        let _store_lock = self.lock_store()?;
        let id = match new.id {
            Some(id) => {
                if !self.locate(&id).is_empty() {
                    return Err(StoreError::Exists(id).into());
                }
                id
            }
            None => self.next_id(&now.date_string())?,
        };
        let body = new.body.trim().to_owned();
        let task = Task {
            frontmatter: Frontmatter {
                schema_version: 1,
                id: id.clone(),
                project: new.project,
                title: new.title,
                status: new.status,
                priority: new.priority,
                routing: new.routing,
                lease: new.lease,
                created_at: now,
                updated_at: now,
                last_transition_at: now,
                created_by: new.created_by,
                parent_id: new.parent_id,
                depends_on: Vec::new(),
                content_hash: Some(content_hash(&body)),
                metadata: new.metadata,
                extra: BTreeMap::new(),
            },
            body,
        };
        let _task_lock = self.lock(&id)?;
        let text = self.render(&task)?;
        let path = self.file_path(task.status(), &id);
        let staged = self.staged_path(task.status(), &id);
        let companion = self.companion_dir(&task);
        let made_companion = !companion.exists();
        let staging = (|| {
            for sub in COMPANION_DIRS {
                let dir = companion.join(sub);
                create_dir_durable(&dir).map_err(io_at(&dir))?;
            }
            write_atomic(&staged, text.as_bytes()).map_err(io_at(&path))
        })();
        let recorded = staging.map_err(E::from).and_then(|()| record(&task));
        let published = recorded.and_then(|()| {
            publish(&staged, &path).map_err(|source| {
                StoreError::Io {
                    path: path.clone(),
                    source,
                }
                .into()
            })
        });
        if let Err(error) = published {
            let _ = fs::remove_file(&staged);
            if made_companion {
                for sub in COMPANION_DIRS {
                    let _ = fs::remove_dir(companion.join(sub));
                }
                let _ = fs::remove_dir(&companion);
            }
            return Err(error);
        }
        Ok(task)
    }

    fn next_id(&self, date: &str) -> Result<TaskId, StoreError> {
        let prefix = format!("TASK-{date}-");
        let mut highest = 0;
        for status in TaskStatus::ALL {
            let dir = self.tasks_dir.join(status.as_str());
            for entry in fs::read_dir(&dir).map_err(io_at(&dir))? {
                let entry = entry.map_err(io_at(&dir))?;
                let name = entry.file_name();
                let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".md")) else {
                    continue;
                };
                if stem.starts_with(&prefix)
                    && let Ok(id) = TaskId::parse(stem)
                {
                    highest = highest.max(id.sequence());
                }
            }
        }
        TaskId::from_parts(date, highest + 1).map_err(|_| StoreError::IdsExhausted(date.to_owned()))
    }

    /// Every task, by id; files that do not parse are reported as errors in the second list.
    pub fn list(&self) -> Result<(Vec<Task>, Vec<StoreError>), StoreError> {
        let mut tasks = BTreeMap::new();
        let mut broken = Vec::new();
        for status in TaskStatus::ALL {
            let dir = self.tasks_dir.join(status.as_str());
            for entry in fs::read_dir(&dir).map_err(io_at(&dir))? {
                let entry = entry.map_err(io_at(&dir))?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if is_temp_name(name) || !name.ends_with(".md") {
                    continue;
                }
                match Self::read_file(&entry.path()) {
                    Ok(task) => {
                        tasks.insert(task.id().clone(), task);
                    }
                    Err(error) => broken.push(error),
                }
            }
        }
        Ok((tasks.into_values().collect(), broken))
    }

    /// The ids of tasks whose file lies in `status`'s directory.
    pub fn ids_in(&self, status: TaskStatus) -> Result<Vec<TaskId>, StoreError> {
        let dir = self.tasks_dir.join(status.as_str());
        let mut ids = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_at(&dir))? {
            let entry = entry.map_err(io_at(&dir))?;
            let name = entry.file_name();
            if let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".md"))
                .and_then(|stem| TaskId::parse(stem).ok())
            {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::parse("2026-02-09T21:00:00.000Z").expect("valid")
    }

    #[test]
    fn allocates_ids_per_day_and_moves_companions_with_transitions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = TaskStore::open(dir.path()).expect("open");
        let first = store.create(NewTask::new("a"), now()).expect("create");
        let second = store.create(NewTask::new("b"), now()).expect("create");
        assert_eq!(first.id().as_str(), "TASK-2026-02-09-001");
        assert_eq!(second.id().as_str(), "TASK-2026-02-09-002");
        let mut task = first;
        let _lock = store.lock(task.id()).expect("lock");
        store
            .transition(&mut task, TaskStatus::Ready, now())
            .expect("backlog -> ready");
        assert!(store.file_path(TaskStatus::Ready, task.id()).is_file());
        assert!(store.companion_dir(&task).join("inputs").is_dir());
        assert!(
            !dir.path()
                .join("tasks/backlog/TASK-2026-02-09-001")
                .exists()
        );
        let refused = store.transition(&mut task, TaskStatus::Done, now());
        assert!(matches!(refused, Err(StoreError::InvalidTransition { .. })));
    }

    #[test]
    fn load_finishes_a_transition_a_crash_interrupted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = TaskStore::open(dir.path()).expect("open");
        let mut task = store.create(NewTask::new("a"), now()).expect("create");
        // A file whose status disagrees with its directory (what a transition killed after an
        // in-place rewrite left in older versions): the file in backlog/ already says ready, and
        // the companion directory is still in backlog/. The file's status wins.
        task.frontmatter.status = TaskStatus::Ready;
        let old = store.file_path(TaskStatus::Backlog, task.id());
        std::fs::write(&old, task.render().expect("render")).expect("write");
        assert_eq!(store.read(task.id()).expect("read"), Some(task.clone()));
        let loaded = store.load(task.id()).expect("load").expect("exists");
        assert_eq!(loaded.status(), TaskStatus::Ready);
        assert!(!old.exists());
        assert!(store.file_path(TaskStatus::Ready, task.id()).is_file());
        assert!(store.companion_dir(&loaded).join("outputs").is_dir());
    }
}
