//! The error of a teams operation: a stable code (the adapter contract's `error.code`), the text
//! of the document where it names one, and the exit-code class of `ski::exit`.

use serde_json::{Map, Value};

use crate::exit::FailureClass;

/// Why a teams operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum TeamsError {
    /// A team name outside the pattern (E-TEAM-01).
    #[error(
        "invalid team name {0:?}: use 1-50 lowercase alphanumeric characters, '-' or '_', starting with a letter or digit"
    )]
    InvalidTeamName(String),
    /// A member name outside the pattern.
    #[error(
        "invalid member name {0:?}: use 1-64 alphanumeric characters, '-' or '_', starting with a letter or digit"
    )]
    InvalidMemberName(String),
    /// A session key that is empty, too long once sanitised, or otherwise unusable.
    #[error("invalid session key {key:?}: {reason}")]
    InvalidSessionKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `team create` of a name already taken.
    #[error("team {0:?} already exists")]
    TeamExists(String),
    /// Any command on a team that does not exist (nothing is created).
    #[error("team {0:?} does not exist")]
    TeamNotFound(String),
    /// The team is shut down or shutting down.
    #[error("team {0:?} is not active")]
    TeamInactive(String),
    /// A member name or sanitised inbox key already in use.
    #[error("{0}")]
    MemberExists(String),
    /// One member past the team's limit.
    #[error("member limit reached: a team has at most {0} members")]
    MemberLimit(usize),
    /// One team past the root's limit.
    #[error("team limit reached: at most {0} teams")]
    TeamLimit(usize),
    /// One task past the team's limit.
    #[error("task limit reached: a team has at most {0} tasks")]
    TaskLimit(usize),
    /// The caller is not a member of the team.
    #[error("{0:?} is not a member of this team")]
    NotAMember(String),
    /// Only the lead may do this.
    #[error("only the team lead may {0}")]
    NotLead(String),
    /// No task with this id.
    #[error("task {0:?} not found")]
    TaskNotFound(String),
    /// A dependency id that names no task.
    #[error("dependency {0:?} names no task")]
    UnknownDependency(String),
    /// Another member holds the task.
    #[error("Task already claimed by another agent")]
    AlreadyClaimed {
        /// The holder's session key.
        owner: String,
    },
    /// The task waits for other tasks.
    #[error("Task has unmet dependencies")]
    Blocked {
        /// The ids it waits for.
        blocked_by: Vec<String>,
    },
    /// A status change the document's diagram does not have.
    #[error("{0}")]
    InvalidTransition(String),
    /// Completing or releasing a task someone else holds.
    #[error("task {0:?} is held by another member")]
    NotOwner(String),
    /// An edge that would close a cycle.
    #[error("dependency cycle: {}", .0.join(" -> "))]
    DependencyCycle(Vec<String>),
    /// A direct message to a session key that is not a member.
    #[error("recipient {0:?} is not a member of this team")]
    UnknownRecipient(String),
    /// Message content over the byte limit.
    #[error("message of {bytes} bytes exceeds the size limit of {limit} bytes")]
    MessageTooLarge {
        /// The content's size in bytes.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// An inbox at its size bound.
    #[error("inbox of {0:?} is full; it must be read before more messages are accepted")]
    InboxFull(String),
    /// Anything else malformed in the input.
    #[error("{0}")]
    InvalidArgument(String),
    /// The busy budget ran out while the ledger stayed locked.
    #[error("ledger stayed locked for {waited_ms} ms over {attempts} retries")]
    Busy {
        /// Retries made.
        attempts: u32,
        /// Time spent waiting.
        waited_ms: u64,
    },
    /// The ledger file cannot be used (corrupt, not a database, written by a newer schema).
    #[error("ledger {path} cannot be used: {reason}")]
    LedgerUnusable {
        /// The file, relative to the root.
        path: String,
        /// Why.
        reason: String,
    },
    /// `team list` found teams whose config.json cannot be read (each with its cause); the
    /// others are listed.
    #[error("{}", unreadable_message(.0))]
    TeamsUnreadable(Vec<(String, String)>),
    /// The teams directory or a team's files cannot be used.
    #[error("{what}: {source}")]
    Storage {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// An unexpected SQLite failure.
    #[error("ledger failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

impl TeamsError {
    /// An i/o failure while doing `what`.
    pub fn storage(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Storage {
            what: what.into(),
            source,
        }
    }

    /// The stable code of the adapter contract.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidTeamName(_) => "invalid_team_name",
            Self::InvalidMemberName(_) | Self::InvalidArgument(_) => "invalid_argument",
            Self::InvalidSessionKey { .. } => "invalid_session_key",
            Self::TeamExists(_) => "team_exists",
            Self::TeamNotFound(_) => "team_not_found",
            Self::TeamInactive(_) => "team_inactive",
            Self::MemberExists(_) => "member_exists",
            Self::MemberLimit(_) => "member_limit",
            Self::TeamLimit(_) => "team_limit",
            Self::TaskLimit(_) => "task_limit",
            Self::NotAMember(_) => "not_a_member",
            Self::NotLead(_) => "not_lead",
            Self::TaskNotFound(_) => "task_not_found",
            Self::UnknownDependency(_) => "unknown_dependency",
            Self::AlreadyClaimed { .. } => "already_claimed",
            Self::Blocked { .. } => "blocked",
            Self::InvalidTransition(_) => "invalid_transition",
            Self::NotOwner(_) => "not_owner",
            Self::DependencyCycle(_) => "dependency_cycle",
            Self::UnknownRecipient(_) => "unknown_recipient",
            Self::MessageTooLarge { .. } => "message_too_large",
            Self::InboxFull(_) => "inbox_full",
            Self::Busy { .. } => "busy",
            Self::LedgerUnusable { .. } => "ledger_unusable",
            Self::TeamsUnreadable(_) => "team_unreadable",
            Self::Storage { .. } => "storage",
            Self::Sqlite(_) => "internal",
        }
    }

    /// The exit-code class: refused input 2, unusable storage 3, internal failure 5.
    pub fn class(&self) -> FailureClass {
        match self {
            Self::LedgerUnusable { .. } | Self::TeamsUnreadable(_) | Self::Storage { .. } => {
                FailureClass::Configuration
            }
            Self::Busy { .. } | Self::Sqlite(_) => FailureClass::Internal,
            _ => FailureClass::InvalidInput,
        }
    }

    /// The `error` object of a refusal: `code`, `message` and the details a row may judge.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("code".into(), Value::from(self.code()));
        object.insert("message".into(), Value::from(self.to_string()));
        match self {
            Self::Blocked { blocked_by } => {
                object.insert("blockedBy".into(), Value::from(blocked_by.clone()));
            }
            Self::AlreadyClaimed { owner } => {
                object.insert("owner".into(), Value::from(owner.clone()));
            }
            Self::DependencyCycle(cycle) => {
                object.insert("cycle".into(), Value::from(cycle.clone()));
            }
            Self::Busy { attempts, .. } => {
                object.insert("retries".into(), Value::from(*attempts));
            }
            Self::TeamsUnreadable(teams) => {
                let names: Vec<&str> = teams.iter().map(|(name, _)| name.as_str()).collect();
                object.insert("teams".into(), Value::from(names));
            }
            _ => {}
        }
        Value::Object(object)
    }
}

fn unreadable_message(teams: &[(String, String)]) -> String {
    let each: Vec<String> = teams
        .iter()
        .map(|(name, cause)| format!("team {name:?} cannot be read: {cause}"))
        .collect();
    each.join("; ")
}

/// The result of a teams operation.
pub type TeamsResult<T> = Result<T, TeamsError>;
