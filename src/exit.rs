//! Exit codes shared by every `ski` subcommand, and the error type that carries one.
//!
//! 0 ok, 2 invalid input, 3 configuration, 4 upstream failure, 5 internal error.

use std::fmt;
use std::process::ExitCode;

/// Why a command failed, which decides its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The input (arguments, a message, a file) was invalid: exit code 2.
    InvalidInput,
    /// The configuration was unusable: exit code 3.
    Configuration,
    /// A peer, child process or service failed: exit code 4.
    Upstream,
    /// A fault of ski itself: exit code 5.
    Internal,
}

impl FailureClass {
    /// The process exit code for this class.
    pub fn code(self) -> u8 {
        match self {
            FailureClass::InvalidInput => 2,
            FailureClass::Configuration => 3,
            FailureClass::Upstream => 4,
            FailureClass::Internal => 5,
        }
    }
}

/// A command failure: the error to print and the class that picks the exit code.
#[derive(Debug)]
pub struct CommandError {
    /// The exit-code class.
    pub class: FailureClass,
    /// What went wrong, with context; printed as `error: ...` on stderr.
    pub error: anyhow::Error,
}

impl CommandError {
    /// Wraps an error with its class.
    pub fn new(class: FailureClass, error: impl Into<anyhow::Error>) -> Self {
        Self {
            class,
            error: error.into(),
        }
    }

    /// An invalid-input failure (exit 2).
    pub fn invalid_input(error: impl Into<anyhow::Error>) -> Self {
        Self::new(FailureClass::InvalidInput, error)
    }

    /// A configuration failure (exit 3).
    pub fn configuration(error: impl Into<anyhow::Error>) -> Self {
        Self::new(FailureClass::Configuration, error)
    }

    /// An upstream failure (exit 4).
    pub fn upstream(error: impl Into<anyhow::Error>) -> Self {
        Self::new(FailureClass::Upstream, error)
    }

    /// An internal failure (exit 5).
    pub fn internal(error: impl Into<anyhow::Error>) -> Self {
        Self::new(FailureClass::Internal, error)
    }

    /// Prints the error chain to stderr and returns the matching exit code.
    pub fn report(&self) -> ExitCode {
        eprintln!("error: {:#}", self.error);
        ExitCode::from(self.class.code())
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

/// The result of a `ski` subcommand.
pub type CommandResult<T = ()> = Result<T, CommandError>;
