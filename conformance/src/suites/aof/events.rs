//! The target's event log as the checks read it (`events`): the events an action logged, and
//! assertions on their types and payloads with readable Expected/Actual lines.

use serde_json::Value;

use super::adapter::Adapter;
use crate::{CheckError, Failure};

/// Events in log order.
#[derive(Debug, Clone, Default)]
pub struct Events(pub Vec<Value>);

/// The highest `eventId` of the log so far: the mark after which an action's events follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(u64);

impl Events {
    /// The whole log.
    pub async fn read(adapter: &Adapter) -> Result<Self, CheckError> {
        Ok(Self(adapter.events().await?))
    }

    /// A mark at the end of the log as it is now.
    pub async fn mark(adapter: &Adapter) -> Result<Mark, CheckError> {
        let log = Self::read(adapter).await?;
        Ok(Mark(log.0.iter().filter_map(event_id).max().unwrap_or(0)))
    }

    /// The events logged after `mark`.
    pub async fn since(adapter: &Adapter, mark: Mark) -> Result<Self, CheckError> {
        let log = Self::read(adapter).await?;
        Ok(Self(
            log.0
                .into_iter()
                .filter(|e| event_id(e).is_some_and(|id| id > mark.0))
                .collect(),
        ))
    }

    /// The events of type `kind`, in order.
    pub fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.0
            .iter()
            .filter(|e| e.get("type").and_then(Value::as_str) == Some(kind))
            .collect()
    }

    /// The events of type `kind` whose payload has every key of `fields` (an object) with the
    /// same value.
    pub fn matching(&self, kind: &str, fields: &Value) -> Vec<&Value> {
        self.of_type(kind)
            .into_iter()
            .filter(|e| payload_has(e, fields))
            .collect()
    }

    /// One line per event, `#id type {payload}`, for Actual lines.
    pub fn summary(&self) -> String {
        if self.0.is_empty() {
            return "no events".to_owned();
        }
        self.0
            .iter()
            .map(|e| {
                format!(
                    "#{} {} {}{}",
                    event_id(e).map_or_else(|| "?".to_owned(), |id| id.to_string()),
                    e.get("type").and_then(Value::as_str).unwrap_or("?"),
                    e.get("taskId")
                        .and_then(Value::as_str)
                        .map_or_else(String::new, |t| format!("{t} ")),
                    e.get("payload").unwrap_or(&Value::Null)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The first event of `kind` with `fields` in its payload; a failure listing the log when
    /// there is none.
    pub fn expect(&self, kind: &str, fields: Value) -> Result<&Value, CheckError> {
        self.matching(kind, &fields)
            .first()
            .copied()
            .ok_or_else(|| {
                let wanted = if fields.as_object().is_some_and(|m| !m.is_empty()) {
                    format!("a {kind} event with payload {fields}")
                } else {
                    format!("a {kind} event")
                };
                Failure::new(format!("{kind} is logged"), wanted)
                    .actual(self.summary())
                    .into()
            })
    }

    /// Exactly `count` events of `kind` with `fields` in their payload.
    pub fn expect_count(&self, kind: &str, fields: Value, count: usize) -> Result<(), CheckError> {
        let found = self.matching(kind, &fields).len();
        if found == count {
            return Ok(());
        }
        let with = if fields.as_object().is_some_and(|m| !m.is_empty()) {
            format!(" with payload {fields}")
        } else {
            String::new()
        };
        Err(Failure::new(
            format!("{count} {kind} event(s)"),
            format!("exactly {count} {kind} event(s){with}"),
        )
        .actual(format!("{found}; the events:\n{}", self.summary()))
        .into())
    }

    /// No event of `kind` at all.
    pub fn expect_none(&self, kind: &str) -> Result<(), CheckError> {
        self.expect_count(kind, Value::Object(Default::default()), 0)
    }

    /// Fails unless the log is empty; `what` names the action.
    pub fn expect_empty(&self, what: &str) -> Result<(), CheckError> {
        if self.0.is_empty() {
            return Ok(());
        }
        Err(Failure::new(
            format!("{what} logs nothing"),
            format!("no events logged by {what}"),
        )
        .actual(self.summary())
        .into())
    }

    /// Fails unless the types of the events, in order, are exactly `kinds`.
    pub fn expect_types(&self, kinds: &[&str]) -> Result<(), CheckError> {
        let actual: Vec<&str> = self
            .0
            .iter()
            .map(|e| e.get("type").and_then(Value::as_str).unwrap_or("?"))
            .collect();
        if actual == kinds {
            return Ok(());
        }
        Err(Failure::new(
            "the events logged",
            format!("events in order: {}", kinds.join(", ")),
        )
        .actual(self.summary())
        .into())
    }
}

/// An event's `eventId`.
pub fn event_id(event: &Value) -> Option<u64> {
    event.get("eventId").and_then(Value::as_u64)
}

/// Whether `event.payload` has every key of `fields` with an equal value.
pub fn payload_has(event: &Value, fields: &Value) -> bool {
    let Some(fields) = fields.as_object() else {
        return true;
    };
    let payload = event.get("payload");
    fields
        .iter()
        .all(|(key, value)| payload.and_then(|p| p.get(key)) == Some(value))
}

/// The payload string at `key` of an event (empty when absent).
pub fn payload_str<'a>(event: &'a Value, key: &str) -> &'a str {
    event
        .get("payload")
        .and_then(|p| p.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Events {
    /// The `task.transitioned` events of `task` as `(from, to)` pairs, in order.
    pub fn transitions_of(&self, task: &str) -> Vec<(String, String)> {
        self.of_type("task.transitioned")
            .into_iter()
            .filter(|e| e.get("taskId").and_then(Value::as_str) == Some(task))
            .map(|e| {
                (
                    payload_str(e, "from").to_owned(),
                    payload_str(e, "to").to_owned(),
                )
            })
            .collect()
    }

    /// Fails unless the `task.transitioned` events of `task` are exactly `steps`, in order.
    pub fn expect_transitions(&self, task: &str, steps: &[(&str, &str)]) -> Result<(), CheckError> {
        let actual = self.transitions_of(task);
        let wanted: Vec<(String, String)> = steps
            .iter()
            .map(|(from, to)| ((*from).to_owned(), (*to).to_owned()))
            .collect();
        if actual == wanted {
            return Ok(());
        }
        let show = |steps: &[(String, String)]| {
            if steps.is_empty() {
                "no task.transitioned event".to_owned()
            } else {
                steps
                    .iter()
                    .map(|(from, to)| format!("{from} → {to}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        Err(Failure::new(
            format!("the transitions of {task}"),
            format!("task.transitioned for {task}: {}", show(&wanted)),
        )
        .actual(format!(
            "{}; the events:\n{}",
            show(&actual),
            self.summary()
        ))
        .into())
    }

    /// The `task.transitioned` event of `task` into `to`, whose reason must contain `needle`.
    pub fn expect_reason(&self, task: &str, to: &str, needle: &str) -> Result<(), CheckError> {
        let event = self
            .of_type("task.transitioned")
            .into_iter()
            .find(|e| {
                e.get("taskId").and_then(Value::as_str) == Some(task) && payload_str(e, "to") == to
            })
            .ok_or_else(|| {
                CheckError::from(
                    Failure::new(
                        format!("{task} transitions to {to}"),
                        format!("a task.transitioned event of {task} to {to}"),
                    )
                    .actual(self.summary()),
                )
            })?;
        let reason = payload_str(event, "reason");
        if reason.contains(needle) {
            return Ok(());
        }
        Err(Failure::new(
            format!("the reason of {task} → {to} names {needle:?}"),
            format!("a transition reason containing {needle:?}"),
        )
        .actual(format!("reason: {reason:?}"))
        .into())
    }
}
