//! Validation results with field paths and kinds, and the field reader every AOF/1 schema uses.
//!
//! Schemas are checked on the JSON value rather than through serde so that every problem of a
//! message is reported at once, each with the dotted path of the field (`payload.tests.failed`),
//! a machine-readable kind and a message that names the limit.

use serde::Serialize;
use serde_json::{Map, Value};

use super::task_id::TaskId;
use super::timestamp::Timestamp;

/// The class of one validation problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    /// A required field is absent.
    Missing,
    /// The field has the wrong JSON type.
    InvalidType,
    /// A literal field (`protocol`) has another value.
    InvalidLiteral,
    /// The protocol version is not 1.
    UnsupportedVersion,
    /// A task id does not match `TASK-YYYY-MM-DD-NNN`.
    InvalidTaskId,
    /// A timestamp is not ISO 8601 UTC.
    InvalidDatetime,
    /// A value is outside its enumeration.
    InvalidEnum,
    /// A string is longer than its limit.
    TooLong,
    /// An array has more items than its limit.
    TooMany,
    /// A count is negative.
    Negative,
    /// A count is not an integer.
    NotInteger,
    /// Fields contradict each other.
    Inconsistent,
    /// A status update carries none of status, progress, blockers or notes.
    NoUpdateField,
    /// A string that must not be empty is empty.
    Empty,
    /// The input is not JSON.
    InvalidJson,
    /// A task file lacks its frontmatter or the frontmatter does not match the schema.
    InvalidTaskFile,
}

/// One validation problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Issue {
    /// Dotted path of the field, `""` for the whole value.
    pub path: String,
    /// The class of the problem.
    pub kind: IssueKind,
    /// What is wrong, naming the rule or limit.
    pub message: String,
}

impl Issue {
    /// Builds an issue.
    pub fn new(path: impl Into<String>, kind: IssueKind, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind,
            message: message.into(),
        }
    }
}

/// Joins a parent path and a field name.
pub fn join_path(parent: &str, field: &str) -> String {
    if parent.is_empty() {
        field.to_owned()
    } else {
        format!("{parent}.{field}")
    }
}

/// Reads the fields of one JSON object and collects the problems it finds.
pub struct Fields<'v, 'i> {
    object: Option<&'v Map<String, Value>>,
    path: String,
    issues: &'i mut Vec<Issue>,
}

impl<'v, 'i> Fields<'v, 'i> {
    /// Starts reading `value` found at `path`; a non-object is reported once.
    pub fn new(value: &'v Value, path: &str, issues: &'i mut Vec<Issue>) -> Self {
        let object = value.as_object();
        if object.is_none() {
            issues.push(Issue::new(
                path,
                IssueKind::InvalidType,
                "expected a JSON object",
            ));
        }
        Self {
            object,
            path: path.to_owned(),
            issues,
        }
    }

    /// Whether the value was an object.
    pub fn is_object(&self) -> bool {
        self.object.is_some()
    }

    /// The path of a field.
    pub fn path_of(&self, field: &str) -> String {
        join_path(&self.path, field)
    }

    /// Records an extra problem.
    pub fn push(&mut self, issue: Issue) {
        self.issues.push(issue);
    }

    /// The raw value of a field (`null` counts as absent).
    pub fn raw(&self, field: &str) -> Option<&'v Value> {
        self.object?.get(field).filter(|value| !value.is_null())
    }

    fn missing(&mut self, field: &str) {
        if self.object.is_some() {
            let path = self.path_of(field);
            self.issues.push(Issue::new(
                path,
                IssueKind::Missing,
                format!("required field {field} is missing"),
            ));
        }
    }

    fn wrong_type(&mut self, field: &str, expected: &str) {
        let path = self.path_of(field);
        self.issues.push(Issue::new(
            path,
            IssueKind::InvalidType,
            format!("{field} must be {expected}"),
        ));
    }

    /// An optional string of at most `max` characters (`None` means no limit).
    pub fn opt_str(&mut self, field: &str, max: Option<usize>) -> Option<String> {
        let value = self.raw(field)?;
        let Some(text) = value.as_str() else {
            self.wrong_type(field, "a string");
            return None;
        };
        if let Some(max) = max {
            let length = text.chars().count();
            if length > max {
                let path = self.path_of(field);
                self.issues.push(Issue::new(
                    path,
                    IssueKind::TooLong,
                    format!("{field} must be at most {max} characters, got {length}"),
                ));
                return None;
            }
        }
        Some(text.to_owned())
    }

    /// A required string of at most `max` characters.
    pub fn req_str(&mut self, field: &str, max: Option<usize>) -> Option<String> {
        if self.raw(field).is_none() {
            self.missing(field);
            return None;
        }
        self.opt_str(field, max)
    }

    /// An optional task id.
    pub fn opt_task_id(&mut self, field: &str) -> Option<TaskId> {
        let text = self.opt_str(field, None)?;
        match TaskId::parse(&text) {
            Ok(id) => Some(id),
            Err(_) => {
                let path = self.path_of(field);
                self.issues.push(Issue::new(
                    path,
                    IssueKind::InvalidTaskId,
                    format!("{field} must match TASK-YYYY-MM-DD-NNN pattern, got {text:?}"),
                ));
                None
            }
        }
    }

    /// A required task id.
    pub fn req_task_id(&mut self, field: &str) -> Option<TaskId> {
        if self.raw(field).is_none() {
            self.missing(field);
            return None;
        }
        self.opt_task_id(field)
    }

    /// An optional ISO 8601 UTC timestamp.
    pub fn opt_datetime(&mut self, field: &str) -> Option<Timestamp> {
        let text = self.opt_str(field, None)?;
        match Timestamp::parse(&text) {
            Ok(ts) => Some(ts),
            Err(_) => {
                let path = self.path_of(field);
                self.issues.push(Issue::new(
                    path,
                    IssueKind::InvalidDatetime,
                    format!(
                        "{field} must be ISO 8601 datetime in UTC (YYYY-MM-DDTHH:MM:SS.sssZ), got {text:?}"
                    ),
                ));
                None
            }
        }
    }

    /// A required ISO 8601 UTC timestamp.
    pub fn req_datetime(&mut self, field: &str) -> Option<Timestamp> {
        if self.raw(field).is_none() {
            self.missing(field);
            return None;
        }
        self.opt_datetime(field)
    }

    /// An optional array of strings with item and length limits.
    pub fn opt_str_array(
        &mut self,
        field: &str,
        max_items: usize,
        max_item_len: usize,
    ) -> Option<Vec<String>> {
        let value = self.raw(field)?;
        let Some(items) = value.as_array() else {
            self.wrong_type(field, "an array of strings");
            return None;
        };
        let path = self.path_of(field);
        let mut ok = true;
        if items.len() > max_items {
            self.issues.push(Issue::new(
                &path,
                IssueKind::TooMany,
                format!(
                    "{field} must have at most {max_items} items, got {}",
                    items.len()
                ),
            ));
            ok = false;
        }
        let mut out = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            match item.as_str() {
                Some(text) if text.chars().count() > max_item_len => {
                    self.issues.push(Issue::new(
                        item_path,
                        IssueKind::TooLong,
                        format!("{field} items must be at most {max_item_len} characters"),
                    ));
                    ok = false;
                }
                Some(text) => out.push(text.to_owned()),
                None => {
                    self.issues.push(Issue::new(
                        item_path,
                        IssueKind::InvalidType,
                        format!("{field} items must be strings"),
                    ));
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// An array of strings that defaults to `[]` when absent.
    pub fn str_array_or_empty(
        &mut self,
        field: &str,
        max_items: usize,
        max_item_len: usize,
    ) -> Vec<String> {
        self.opt_str_array(field, max_items, max_item_len)
            .unwrap_or_default()
    }

    /// An optional boolean.
    pub fn opt_bool(&mut self, field: &str) -> Option<bool> {
        let value = self.raw(field)?;
        match value.as_bool() {
            Some(flag) => Some(flag),
            None => {
                self.wrong_type(field, "a boolean");
                None
            }
        }
    }

    /// A required non-negative integer count.
    pub fn req_count(&mut self, field: &str) -> Option<u64> {
        let Some(value) = self.raw(field) else {
            self.missing(field);
            return None;
        };
        self.count_of(field, value)
    }

    /// An optional non-negative integer count.
    pub fn opt_count(&mut self, field: &str) -> Option<u64> {
        let value = self.raw(field)?;
        self.count_of(field, value)
    }

    fn count_of(&mut self, field: &str, value: &Value) -> Option<u64> {
        let path = self.path_of(field);
        let Some(number) = value.as_number() else {
            self.wrong_type(field, "a non-negative integer");
            return None;
        };
        if let Some(count) = number.as_u64() {
            return Some(count);
        }
        let negative =
            number.as_i64().is_some_and(|n| n < 0) || number.as_f64().is_some_and(|n| n < 0.0);
        if negative {
            self.issues.push(Issue::new(
                path,
                IssueKind::Negative,
                format!("{field}: counts must be non-negative"),
            ));
        } else {
            self.issues.push(Issue::new(
                path,
                IssueKind::NotInteger,
                format!("{field}: counts must be integers"),
            ));
        }
        None
    }

    /// A required value from a fixed set of strings.
    pub fn req_enum<T>(
        &mut self,
        field: &str,
        parse: impl Fn(&str) -> Option<T>,
        allowed: &str,
    ) -> Option<T> {
        if self.raw(field).is_none() {
            self.missing(field);
            return None;
        }
        self.opt_enum(field, parse, allowed)
    }

    /// An optional value from a fixed set of strings.
    pub fn opt_enum<T>(
        &mut self,
        field: &str,
        parse: impl Fn(&str) -> Option<T>,
        allowed: &str,
    ) -> Option<T> {
        let text = self.opt_str(field, None)?;
        match parse(&text) {
            Some(value) => Some(value),
            None => {
                let path = self.path_of(field);
                self.issues.push(Issue::new(
                    path,
                    IssueKind::InvalidEnum,
                    format!("{field} must be one of: {allowed}, got {text:?}"),
                ));
                None
            }
        }
    }

    /// A nested object, read with `read` at the field's path; required when `required`.
    pub fn nested<T>(
        &mut self,
        field: &str,
        required: bool,
        read: impl FnOnce(&Value, &str, &mut Vec<Issue>) -> Option<T>,
    ) -> Option<T> {
        let Some(value) = self.raw(field) else {
            if required {
                self.missing(field);
            }
            return None;
        };
        let path = self.path_of(field);
        read(value, &path, self.issues)
    }
}
