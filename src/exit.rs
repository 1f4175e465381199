//! Exit codes shared by every `ski` subcommand, and the error type that carries one.
//!
//! 0 ok, 2 invalid input, 3 configuration, 4 upstream failure, 5 internal error.
//!
//! An error is printed once, as one line: [`render`] joins it and its causes with `: `, leaving
//! out a cause the text already ends with (an error whose message includes its source, such as
//! thiserror's `#[error("cannot start: {0}")]`, would otherwise print that source twice).

use std::error::Error;
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

    /// Prints the error chain to stderr (`error: ...`, see [`render`]) and returns the matching
    /// exit code.
    pub fn report(&self) -> ExitCode {
        eprintln!("error: {self}");
        ExitCode::from(self.class.code())
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render(&self.error))
    }
}

/// A parse error of a text file (TOML, JSON) as one line: `line L, column C: MESSAGE`, where the
/// parser's `span` (byte offsets) falls in `text`; parsers' own multi-line renderings (a snippet
/// with a caret) do not fit the one-line `error: …` every program prints.
pub fn parse_error_line(message: &str, span: Option<std::ops::Range<usize>>, text: &str) -> String {
    let message = message.trim().replace('\n', " ");
    let Some(start) = span.map(|span| span.start.min(text.len())) else {
        return message;
    };
    let before = text.get(..start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column}: {message}")
}

/// An error and its causes as one line, `outer: cause: …`, each text once: a cause is left out
/// when the line so far already ends with it or holds it after a `: `.
pub fn render(error: &anyhow::Error) -> String {
    join_chain(error.chain())
}

/// [`render`] for any error and its [`Error::source`] chain.
pub fn render_error<'a>(error: &'a (dyn Error + 'static)) -> String {
    let source = |error: &&'a (dyn Error + 'static)| (*error).source();
    join_chain(std::iter::successors(Some(error), source))
}

fn join_chain<'a>(chain: impl Iterator<Item = &'a (dyn Error + 'static)>) -> String {
    let mut line = String::new();
    for cause in chain {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !text.is_empty() && !line.ends_with(&text) && !line.contains(&format!(": {text}"))
        {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// The result of a `ski` subcommand.
pub type CommandResult<T = ()> = Result<T, CommandError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Wrapped {
        #[error("cannot start x: {0}")]
        Includes(#[source] std::io::Error),
        #[error("cannot start x")]
        Omits(#[source] std::io::Error),
    }

    fn missing() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")
    }

    #[test]
    fn a_source_the_message_already_includes_is_printed_once() {
        let error = CommandError::upstream(Wrapped::Includes(missing()));
        assert_eq!(error.to_string(), "cannot start x: no such file");
        let error = anyhow::Error::new(Wrapped::Includes(missing())).context("echo");
        assert_eq!(render(&error), "echo: cannot start x: no such file");
        assert_eq!(
            render_error(&Wrapped::Includes(missing())),
            "cannot start x: no such file"
        );
    }

    #[test]
    fn a_source_the_message_leaves_out_is_appended() {
        let error = CommandError::configuration(Wrapped::Omits(missing()));
        assert_eq!(error.to_string(), "cannot start x: no such file");
        let error = anyhow::Error::new(missing()).context("reading the config");
        assert_eq!(render(&error), "reading the config: no such file");
        assert_eq!(error.to_string(), "reading the config");
    }

    #[test]
    fn parse_errors_name_their_line_and_column_on_one_line() {
        let text = "a = 1\n[team\n";
        assert_eq!(
            parse_error_line("unclosed table, expected `]`\n", Some(11..12), text),
            "line 2, column 6: unclosed table, expected `]`"
        );
        assert_eq!(parse_error_line("bad\nthing", None, text), "bad thing");
        assert_eq!(
            parse_error_line("past the end", Some(99..100), "x"),
            "line 1, column 2: past the end"
        );
    }
}
