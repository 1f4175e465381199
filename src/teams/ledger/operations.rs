//! What the ledger does: members joining, tasks created, claimed, completed, deleted, released
//! and linked by dependencies (unblocking in the same transaction), the queries of `task list`,
//! counts, shutdown answers and the activity trail.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::Ledger;
use super::rows::{
    Counts, MEMBER_COLUMNS, Member, MemberStatus, NewTask, TASK_COLUMNS, Task, TaskFilter,
    TaskStatus, list_text, member_from_row, task_from_row,
};
use crate::teams::error::{TeamsError, TeamsResult};

fn get_task(tx: &Connection, id: &str) -> TeamsResult<Option<Task>> {
    Ok(tx
        .query_row(
            &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1"),
            [id],
            task_from_row,
        )
        .optional()?)
}

/// The refusal of any transition out of a completed or deleted task.
fn finished(status: TaskStatus) -> TeamsError {
    TeamsError::InvalidTransition(format!("Task is {status}"))
}

fn get_member(tx: &Connection, key: &str) -> TeamsResult<Option<Member>> {
    Ok(tx
        .query_row(
            &format!("SELECT {MEMBER_COLUMNS} FROM members WHERE sessionKey = ?1"),
            [key],
            member_from_row,
        )
        .optional()?)
}

fn require_member(tx: &Connection, key: &str) -> TeamsResult<Member> {
    get_member(tx, key)?.ok_or_else(|| TeamsError::NotAMember(key.to_owned()))
}

fn log(
    tx: &Connection,
    at: i64,
    actor: &str,
    action: &str,
    task: Option<&str>,
    detail: Option<&str>,
) -> TeamsResult<()> {
    tx.execute(
        "INSERT INTO activity (at, actor, action, taskId, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![at, actor, action, task, detail],
    )?;
    Ok(())
}

/// Removes `id` from the `blockedBy` of every task in `dependents`; returns those now unblocked.
fn unblock_dependents(
    tx: &Connection,
    id: &str,
    dependents: &[String],
) -> TeamsResult<Vec<String>> {
    let mut unblocked = Vec::new();
    for dependent in dependents {
        let Some(task) = get_task(tx, dependent)? else {
            continue;
        };
        if !task.blocked_by.iter().any(|b| b == id) {
            continue;
        }
        let rest: Vec<String> = task.blocked_by.into_iter().filter(|b| b != id).collect();
        tx.execute(
            "UPDATE tasks SET blockedBy = ?2 WHERE id = ?1",
            params![dependent, list_text(&rest)],
        )?;
        if rest.is_empty() && task.status == TaskStatus::Pending {
            unblocked.push(dependent.clone());
        }
    }
    Ok(unblocked)
}

impl Ledger {
    /// Adds a member; refuses a duplicate name, key or inbox key, and one past `max_members`.
    pub fn add_member(&mut self, member: &Member, max_members: usize) -> TeamsResult<Member> {
        self.write(|tx| {
            let count: i64 = tx.query_row("SELECT COUNT(*) FROM members", [], |r| r.get(0))?;
            if usize::try_from(count).unwrap_or(usize::MAX) >= max_members {
                return Err(TeamsError::MemberLimit(max_members));
            }
            if get_member(tx, &member.session_key)?.is_some() {
                return Err(TeamsError::MemberExists(format!(
                    "session key {:?} is already a member",
                    member.session_key
                )));
            }
            let name_taken: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM members WHERE name = ?1)",
                [&member.name],
                |r| r.get(0),
            )?;
            if name_taken {
                return Err(TeamsError::MemberExists(format!(
                    "member name {:?} is already taken",
                    member.name
                )));
            }
            let key_taken: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM members WHERE inboxKey = ?1)",
                [&member.inbox_key],
                |r| r.get(0),
            )?;
            if key_taken {
                return Err(TeamsError::MemberExists(format!(
                    "session key {:?} sanitises to inbox {:?}, which another member uses",
                    member.session_key, member.inbox_key
                )));
            }
            tx.execute(
                "INSERT INTO members (sessionKey, agentId, name, role, agentType, status, currentTask, joinedAt, lastActiveAt, inboxKey)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?7, ?8)",
                params![
                    member.session_key,
                    member.agent_id,
                    member.name,
                    member.role,
                    member.agent_type,
                    member.status,
                    member.joined_at,
                    member.inbox_key
                ],
            )?;
            log(tx, member.joined_at, &member.session_key, "join", None, Some(&member.name))?;
            Ok(member.clone())
        })
    }

    /// One member by session key.
    pub fn member(&mut self, key: &str) -> TeamsResult<Option<Member>> {
        self.read(|tx| get_member(tx, key))
    }

    /// Every member, in joining order.
    pub fn members(&mut self) -> TeamsResult<Vec<Member>> {
        self.read(|tx| {
            let mut statement = tx.prepare(&format!(
                "SELECT {MEMBER_COLUMNS} FROM members ORDER BY joinedAt, rowid"
            ))?;
            let rows = statement.query_map([], member_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// Sets a member's status.
    pub fn set_member_status(&mut self, key: &str, status: MemberStatus) -> TeamsResult<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE members SET status = ?2 WHERE sessionKey = ?1",
                params![key, status],
            )?;
            Ok(())
        })
    }

    /// Creates a task; every dependency must exist, and the task limit holds.
    pub fn create_task(
        &mut self,
        caller: &str,
        new: &NewTask,
        now: i64,
        max_tasks: usize,
    ) -> TeamsResult<Task> {
        self.write(|tx| {
            require_member(tx, caller)?;
            let count: i64 = tx.query_row(
                "SELECT COUNT(*) FROM tasks WHERE status != ?1",
                [TaskStatus::Deleted],
                |r| r.get(0),
            )?;
            if usize::try_from(count).unwrap_or(usize::MAX) >= max_tasks {
                return Err(TeamsError::TaskLimit(max_tasks));
            }
            let mut depends_on: Vec<String> = Vec::new();
            let mut blocked_by = Vec::new();
            for dep in &new.depends_on {
                if depends_on.contains(dep) {
                    continue;
                }
                match get_task(tx, dep)? {
                    Some(task) if task.status != TaskStatus::Deleted => {
                        if task.status != TaskStatus::Completed {
                            blocked_by.push(dep.clone());
                        }
                    }
                    _ => return Err(TeamsError::UnknownDependency(dep.clone())),
                }
                depends_on.push(dep.clone());
            }
            let seq: i64 = tx.query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM tasks", [], |r| r.get(0))?;
            let id = seq.to_string();
            tx.execute(
                "INSERT INTO tasks (id, seq, subject, description, activeForm, status, owner, dependsOn, blockedBy, blocks, metadata, createdAt)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9, ?10, ?11)",
                params![
                    id,
                    seq,
                    new.subject,
                    new.description,
                    new.active_form,
                    TaskStatus::Pending,
                    list_text(&depends_on),
                    list_text(&blocked_by),
                    list_text(&[]),
                    new.metadata.as_ref().map(Value::to_string),
                    now
                ],
            )?;
            for dep in &depends_on {
                add_block(tx, dep, &id)?;
            }
            log(tx, now, caller, "create", Some(&id), Some(&new.subject))?;
            get_task(tx, &id)?.ok_or_else(|| TeamsError::TaskNotFound(id.clone()))
        })
    }

    /// One task.
    pub fn task(&mut self, id: &str) -> TeamsResult<Task> {
        self.read(|tx| get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned())))
    }

    /// Claims a pending, unowned, unblocked task for `caller`: one conditional `UPDATE`.
    pub fn claim(&mut self, id: &str, caller: &str, now: i64) -> TeamsResult<Task> {
        self.write(|tx| {
            require_member(tx, caller)?;
            let changed = tx.execute(
                "UPDATE tasks SET status = ?4, owner = ?2, claimedAt = ?3
                 WHERE id = ?1 AND status = ?5 AND owner IS NULL AND json_array_length(blockedBy) = 0",
                params![id, caller, now, TaskStatus::InProgress, TaskStatus::Pending],
            )?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            if changed == 0 {
                if task.status.is_finished() {
                    return Err(finished(task.status));
                }
                match &task.owner {
                    // A re-claim by the holder is an idempotent success that keeps claimedAt.
                    Some(owner) if owner == caller => return Ok(task),
                    Some(owner) => return Err(TeamsError::AlreadyClaimed { owner: owner.clone() }),
                    None => {}
                }
                return Err(TeamsError::Blocked {
                    blocked_by: task.blocked_by.clone(),
                });
            }
            tx.execute(
                "UPDATE members SET status = ?4, currentTask = ?2, lastActiveAt = ?3 WHERE sessionKey = ?1",
                params![caller, id, now, MemberStatus::Working],
            )?;
            log(tx, now, caller, "claim", Some(id), None)?;
            Ok(task)
        })
    }

    /// Completes an in-progress task (its owner or the lead) and unblocks its dependents.
    pub fn complete(
        &mut self,
        id: &str,
        caller: &str,
        summary: Option<&str>,
        now: i64,
    ) -> TeamsResult<(Task, Vec<String>)> {
        self.write(|tx| {
            let member = require_member(tx, caller)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            match task.status {
                TaskStatus::InProgress => {}
                TaskStatus::Completed | TaskStatus::Deleted => return Err(finished(task.status)),
                TaskStatus::Pending => {
                    return Err(TeamsError::InvalidTransition(
                        "Task is pending: only an in_progress task can be completed".into(),
                    ));
                }
            }
            let owner = task.owner.clone().unwrap_or_default();
            if owner != caller && !member.is_lead() {
                return Err(TeamsError::NotOwner(id.to_owned()));
            }
            tx.execute(
                "UPDATE tasks SET status = ?4, completedAt = ?2, summary = ?3 WHERE id = ?1",
                params![id, now, summary, TaskStatus::Completed],
            )?;
            let unblocked = unblock_dependents(tx, id, &task.blocks)?;
            tx.execute(
                "UPDATE members SET status = ?4, currentTask = NULL, lastActiveAt = ?2 WHERE sessionKey = ?1 AND currentTask = ?3",
                params![owner, now, id, MemberStatus::Idle],
            )?;
            log(tx, now, caller, "complete", Some(id), summary)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            Ok((task, unblocked))
        })
    }

    /// Soft-deletes a pending or in-progress task (the lead only) and unblocks its dependents.
    pub fn delete(&mut self, id: &str, caller: &str, now: i64) -> TeamsResult<(Task, Vec<String>)> {
        self.write(|tx| {
            let member = require_member(tx, caller)?;
            if !member.is_lead() {
                return Err(TeamsError::NotLead("delete tasks".into()));
            }
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            if task.status.is_finished() {
                return Err(finished(task.status));
            }
            tx.execute(
                "UPDATE tasks SET status = ?3, deletedAt = ?2 WHERE id = ?1",
                params![id, now, TaskStatus::Deleted],
            )?;
            let unblocked = unblock_dependents(tx, id, &task.blocks)?;
            if let Some(owner) = &task.owner {
                tx.execute(
                    "UPDATE members SET status = ?3, currentTask = NULL WHERE sessionKey = ?1 AND currentTask = ?2",
                    params![owner, id, MemberStatus::Idle],
                )?;
            }
            log(tx, now, caller, "delete", Some(id), None)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            Ok((task, unblocked))
        })
    }

    /// Returns an in-progress task to pending (its owner or the lead): a crashed teammate's task
    /// becomes claimable again.
    pub fn release(&mut self, id: &str, caller: &str, now: i64) -> TeamsResult<Task> {
        self.write(|tx| {
            let member = require_member(tx, caller)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            if task.status != TaskStatus::InProgress {
                return Err(TeamsError::InvalidTransition(format!(
                    "Task is {}: only an in_progress task can be released",
                    task.status
                )));
            }
            let owner = task.owner.clone().unwrap_or_default();
            if owner != caller && !member.is_lead() {
                return Err(TeamsError::NotOwner(id.to_owned()));
            }
            tx.execute(
                "UPDATE tasks SET status = ?2, owner = NULL, claimedAt = NULL WHERE id = ?1",
                params![id, TaskStatus::Pending],
            )?;
            tx.execute(
                "UPDATE members SET status = ?3, currentTask = NULL WHERE sessionKey = ?1 AND currentTask = ?2",
                params![owner, id, MemberStatus::Idle],
            )?;
            log(tx, now, caller, "release", Some(id), Some(&owner))?;
            get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))
        })
    }

    /// Adds the edge "`id` waits for `dep`"; refuses an edge that would close a cycle.
    pub fn depend(&mut self, id: &str, dep: &str, caller: &str, now: i64) -> TeamsResult<Task> {
        self.write(|tx| {
            require_member(tx, caller)?;
            let task = get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))?;
            let target = match get_task(tx, dep)? {
                Some(t) if t.status != TaskStatus::Deleted => t,
                _ => return Err(TeamsError::UnknownDependency(dep.to_owned())),
            };
            if task.status != TaskStatus::Pending {
                return Err(TeamsError::InvalidTransition(format!(
                    "Task is {}: only a pending task can gain a dependency",
                    task.status
                )));
            }
            if task.depends_on.iter().any(|d| d == dep) {
                return Ok(task);
            }
            if let Some(path) = path_between(tx, dep, id)? {
                let mut cycle = vec![id.to_owned()];
                cycle.extend(path);
                return Err(TeamsError::DependencyCycle(cycle));
            }
            let mut depends_on = task.depends_on.clone();
            depends_on.push(dep.to_owned());
            let mut blocked_by = task.blocked_by.clone();
            if target.status != TaskStatus::Completed {
                blocked_by.push(dep.to_owned());
            }
            tx.execute(
                "UPDATE tasks SET dependsOn = ?2, blockedBy = ?3 WHERE id = ?1",
                params![id, list_text(&depends_on), list_text(&blocked_by)],
            )?;
            add_block(tx, dep, id)?;
            log(tx, now, caller, "depend", Some(id), Some(dep))?;
            get_task(tx, id)?.ok_or_else(|| TeamsError::TaskNotFound(id.to_owned()))
        })
    }

    /// Tasks matching `filter`, oldest first.
    pub fn list<'a>(&mut self, filter: &'a TaskFilter) -> TeamsResult<Vec<Task>> {
        self.read(|tx| {
            let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1 = 1");
            let mut values: Vec<&dyn rusqlite::ToSql> = Vec::new();
            let mut bind = |sql: &mut String, clause: &str, value: &'a dyn rusqlite::ToSql| {
                values.push(value);
                sql.push_str(&clause.replace('?', &format!("?{}", values.len())));
            };
            if filter.available {
                bind(&mut sql, " AND status = ?", &TaskStatus::Pending);
                sql.push_str(" AND owner IS NULL AND json_array_length(blockedBy) = 0");
            } else if let Some(status) = &filter.status {
                bind(&mut sql, " AND status = ?", status);
            } else if !filter.include_completed {
                bind(&mut sql, " AND status IN (?", &TaskStatus::Pending);
                bind(&mut sql, ", ?)", &TaskStatus::InProgress);
            }
            if let Some(owner) = &filter.owner {
                bind(&mut sql, " AND owner = ?", owner);
            }
            sql.push_str(" ORDER BY seq");
            if let Some(limit) = filter.limit {
                sql.push_str(&format!(" LIMIT {limit}"));
            }
            let mut statement = tx.prepare(&sql)?;
            let rows = statement.query_map(values.as_slice(), task_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    /// Task counts per status.
    pub fn counts(&mut self) -> TeamsResult<Counts> {
        self.read(|tx| {
            let mut counts = Counts::default();
            let mut statement = tx.prepare("SELECT status, COUNT(*) FROM tasks GROUP BY status")?;
            let rows = statement.query_map([], |r| {
                Ok((r.get::<_, TaskStatus>(0)?, r.get::<_, i64>(1)?))
            })?;
            for row in rows {
                let (status, n) = row?;
                *counts.of_mut(status) = n;
            }
            Ok(counts)
        })
    }

    /// Records one shutdown request per member in `keys`.
    pub fn record_shutdown_request(
        &mut self,
        request_id: &str,
        keys: &[String],
        now: i64,
    ) -> TeamsResult<()> {
        self.write(|tx| {
            for key in keys {
                tx.execute(
                    "INSERT OR REPLACE INTO shutdown_requests (requestId, sessionKey, status, createdAt) VALUES (?1, ?2, 'pending', ?3)",
                    params![request_id, key, now],
                )?;
            }
            Ok(())
        })
    }

    /// Records a member's answer; returns how many answers of the request are still pending, or
    /// `None` when the member was not asked.
    pub fn answer_shutdown(
        &mut self,
        request_id: &str,
        key: &str,
        approve: bool,
        reason: Option<&str>,
        now: i64,
    ) -> TeamsResult<Option<(i64, i64)>> {
        self.write(|tx| {
            let changed = tx.execute(
                "UPDATE shutdown_requests SET status = ?3, reason = ?4 WHERE requestId = ?1 AND sessionKey = ?2",
                params![request_id, key, if approve { "approved" } else { "rejected" }, reason],
            )?;
            if changed == 0 {
                return Ok(None);
            }
            if approve {
                tx.execute(
                    "UPDATE members SET status = ?2 WHERE sessionKey = ?1",
                    params![key, MemberStatus::Shutdown],
                )?;
            }
            log(tx, now, key, if approve { "approve_shutdown" } else { "reject_shutdown" }, None, reason)?;
            let pending: i64 = tx.query_row(
                "SELECT COUNT(*) FROM shutdown_requests WHERE requestId = ?1 AND status = 'pending'",
                [request_id],
                |r| r.get(0),
            )?;
            let rejected: i64 = tx.query_row(
                "SELECT COUNT(*) FROM shutdown_requests WHERE requestId = ?1 AND status = 'rejected'",
                [request_id],
                |r| r.get(0),
            )?;
            Ok(Some((pending, rejected)))
        })
    }

    /// The activity trail, oldest first.
    pub fn activity(&mut self, limit: usize) -> TeamsResult<Vec<Value>> {
        self.read(|tx| {
            let mut statement = tx.prepare(
                "SELECT seq, at, actor, action, taskId, detail FROM activity ORDER BY seq DESC LIMIT ?1",
            )?;
            let rows = statement.query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                Ok(serde_json::json!({
                    "seq": r.get::<_, i64>(0)?,
                    "at": r.get::<_, i64>(1)?,
                    "actor": r.get::<_, String>(2)?,
                    "action": r.get::<_, String>(3)?,
                    "taskId": r.get::<_, Option<String>>(4)?,
                    "detail": r.get::<_, Option<String>>(5)?,
                }))
            })?;
            let mut entries = rows.collect::<Result<Vec<_>, _>>()?;
            entries.reverse();
            Ok(entries)
        })
    }
}

fn add_block(tx: &Connection, dep: &str, id: &str) -> TeamsResult<()> {
    let Some(task) = get_task(tx, dep)? else {
        return Err(TeamsError::UnknownDependency(dep.to_owned()));
    };
    let mut blocks = task.blocks;
    if !blocks.iter().any(|b| b == id) {
        blocks.push(id.to_owned());
    }
    tx.execute(
        "UPDATE tasks SET blocks = ?2 WHERE id = ?1",
        params![dep, list_text(&blocks)],
    )?;
    Ok(())
}

/// A path `from -> … -> to` along `dependsOn` edges, if one exists.
fn path_between(tx: &Connection, from: &str, to: &str) -> TeamsResult<Option<Vec<String>>> {
    let mut stack: Vec<Vec<String>> = vec![vec![from.to_owned()]];
    let mut seen = std::collections::HashSet::new();
    while let Some(path) = stack.pop() {
        let Some(last) = path.last().cloned() else {
            continue;
        };
        if last == to {
            return Ok(Some(path));
        }
        if !seen.insert(last.clone()) {
            continue;
        }
        if let Some(task) = get_task(tx, &last)? {
            for next in task.depends_on {
                let mut longer = path.clone();
                longer.push(next);
                stack.push(longer);
            }
        }
    }
    Ok(None)
}
