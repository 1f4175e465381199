//! What a check is and what it returns: [`Check`], [`CheckResult`], [`CheckError`], [`Failure`],
//! and the assertion helpers that produce Expected/Actual pairs.
//!
//! A check is an async function from a [`Ctx`] to a [`CheckResult`]. `Ok(())` is a
//! pass. An `Err` says why not:
//!
//! - [`CheckError::Fail`]: the target misbehaved; carries a [`Failure`] with Expected and Actual.
//! - [`CheckError::Skip`]: the target cannot be asked this (a capability it did not declare).
//! - [`CheckError::Harness`]: the harness itself failed (a fake did not start, a temp file could
//!   not be written). The outcome is `error`, which blames the suite, not the target.
//!
//! `?` on any [`std::error::Error`] gives a harness error. When an error is the *target's* fault
//! (it closed the connection, sent invalid JSON), convert it with [`OrFail::or_fail`] instead.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::Ctx;

/// The result of a check: `Ok(())` passes.
pub type CheckResult = Result<(), CheckError>;

/// The boxed future a check returns.
pub type CheckFuture = Pin<Box<dyn Future<Output = CheckResult> + Send + 'static>>;

type CheckFn = dyn Fn(Ctx) -> CheckFuture + Send + Sync;

/// One check: the catalog ID it judges, a sentence on how, and the function.
#[derive(Clone)]
pub struct Check {
    id: String,
    how: String,
    run: Arc<CheckFn>,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check")
            .field("id", &self.id)
            .field("how", &self.how)
            .finish_non_exhaustive()
    }
}

impl Check {
    /// A check for scenario `id`. `how` says in a sentence or two how the scenario is checked
    /// (printed by `ski-conformance explain`). `f` is usually an `async fn(Ctx) -> CheckResult`.
    pub fn new<F, Fut>(id: impl Into<String>, how: impl Into<String>, f: F) -> Self
    where
        F: Fn(Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = CheckResult> + Send + 'static,
    {
        Self {
            id: id.into(),
            how: how.into(),
            run: Arc::new(move |ctx| Box::pin(f(ctx))),
        }
    }

    /// The catalog ID.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How the scenario is checked.
    pub fn how(&self) -> &str {
        &self.how
    }

    /// Starts the check with a context.
    pub fn start(&self, ctx: Ctx) -> CheckFuture {
        (self.run)(ctx)
    }
}

/// The outcome of one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The target behaved as the scenario says.
    Pass,
    /// The target did not.
    Fail,
    /// Not run: the target did not declare a required capability.
    Skip,
    /// Not run: the target refused a step the row needs before it can judge anything (a
    /// `session/new` that wants authentication first); says nothing about the row itself.
    Blocked,
    /// The harness failed; says nothing about the target.
    Error,
}

impl Outcome {
    /// The lower-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Skip => "skip",
            Outcome::Blocked => "blocked",
            Outcome::Error => "error",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A target's misbehaviour: what was expected and what happened instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The name of the assertion that failed; a baseline entry can excuse just this one.
    pub check: String,
    /// What the scenario requires, in words or as a value.
    pub expected: String,
    /// What the target did.
    pub actual: String,
    /// `file:line` of the assertion, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The failure is a wait that ran out: what the target owed had not come by its deadline.
    /// Contention can cause such a failure, so the runner re-runs it alone; a definite mismatch
    /// (the target answered, wrongly) it does not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deadline_passed: bool,
}

impl Failure {
    /// A failure of the assertion named `check`, expecting `expected`.
    pub fn new(check: impl Into<String>, expected: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            expected: expected.into(),
            actual: String::new(),
            location: None,
            deadline_passed: false,
        }
    }

    /// A failure whose assertion name is its expectation.
    pub fn expected(expected: impl Into<String>) -> Self {
        let expected = expected.into();
        Self::new(expected.clone(), expected)
    }

    /// Sets what actually happened.
    pub fn actual(mut self, actual: impl Into<String>) -> Self {
        self.actual = actual.into();
        self
    }

    /// Marks the failure as a wait that ran out its deadline (see [`Failure::deadline_passed`]).
    pub fn at_deadline(mut self) -> Self {
        self.deadline_passed = true;
        self
    }

    /// Sets where the assertion is.
    pub fn at(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\n  Expected: {}\n  Actual:   {}",
            self.check, self.expected, self.actual
        )?;
        if let Some(location) = &self.location {
            write!(f, "\n  At:       {location}")?;
        }
        Ok(())
    }
}

/// Why a check did not pass.
///
/// It deliberately does not implement [`std::error::Error`], so that `?` converts any error
/// into a harness error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// The target misbehaved.
    Fail(Box<Failure>),
    /// The check does not apply to this target; the text says why.
    Skip(String),
    /// The target does not declare a capability the check needs: a skip that coverage
    /// reports count by capability.
    Undeclared {
        /// The target's name.
        target: String,
        /// The capability.
        capability: String,
    },
    /// The target refused a step the check needs first (a session it will not open without
    /// authentication); the text says which and why. Never a failure.
    Blocked(String),
    /// The row's question cannot be put over the transport this target is reached on (a
    /// JSON-RPC answer the remote endpoint's Streamable HTTP profile gives as an HTTP status);
    /// the text says why. Not applicable, as a capability the target lacks is.
    NotApplicable(String),
    /// The harness failed; the text says how.
    Harness(String),
}

impl CheckError {
    /// A harness error from any displayable cause.
    pub fn harness(cause: impl fmt::Display) -> Self {
        CheckError::Harness(cause.to_string())
    }

    /// The outcome this error leads to.
    pub fn outcome(&self) -> Outcome {
        match self {
            CheckError::Fail(_) => Outcome::Fail,
            CheckError::Skip(_) | CheckError::Undeclared { .. } | CheckError::NotApplicable(_) => {
                Outcome::Skip
            }
            CheckError::Blocked(_) => Outcome::Blocked,
            CheckError::Harness(_) => Outcome::Error,
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Fail(failure) => write!(f, "fail: {failure}"),
            CheckError::Skip(reason) => write!(f, "skip: {reason}"),
            CheckError::Undeclared { target, capability } => {
                write!(f, "skip: {}", undeclared_text(target, capability))
            }
            CheckError::Blocked(reason) => write!(f, "blocked: {reason}"),
            CheckError::NotApplicable(reason) => write!(f, "skip (not applicable): {reason}"),
            CheckError::Harness(message) => write!(f, "error: {message}"),
        }
    }
}

/// The skip message of a capability the target does not declare.
pub fn undeclared_text(target: &str, capability: &str) -> String {
    format!("target {target} does not declare capability {capability:?}")
}

impl From<Failure> for CheckError {
    fn from(failure: Failure) -> Self {
        CheckError::Fail(Box::new(failure))
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for CheckError {
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        CheckError::Harness(message)
    }
}

/// Turns an `Err` or `None` into the outcome it stands for.
pub trait OrFail<T> {
    /// The target's fault: a failure expecting `expected`, with the error as Actual.
    fn or_fail(self, expected: impl Into<String>) -> Result<T, CheckError>;
    /// The harness's fault: an error with `context` before the cause.
    fn or_error(self, context: impl fmt::Display) -> Result<T, CheckError>;
}

impl<T, E: fmt::Display> OrFail<T> for Result<T, E> {
    fn or_fail(self, expected: impl Into<String>) -> Result<T, CheckError> {
        self.map_err(|e| Failure::expected(expected).actual(e.to_string()).into())
    }

    fn or_error(self, context: impl fmt::Display) -> Result<T, CheckError> {
        self.map_err(|e| CheckError::Harness(format!("{context}: {e}")))
    }
}

impl<T> OrFail<T> for Option<T> {
    fn or_fail(self, expected: impl Into<String>) -> Result<T, CheckError> {
        self.ok_or_else(|| Failure::expected(expected).actual("nothing").into())
    }

    fn or_error(self, context: impl fmt::Display) -> Result<T, CheckError> {
        self.ok_or_else(|| CheckError::Harness(context.to_string()))
    }
}

/// Formatting of values for Expected and Actual lines: JSON values as pretty JSON, everything
/// else with `Debug` (so strings show their quotes and whitespace).
///
/// The macros call `(&Shown(&value)).show()` with both traits in scope; method resolution picks
/// [`show::ViaJson`] for `serde_json::Value` and [`show::ViaDebug`] for the rest.
pub mod show {
    use std::fmt;

    /// A value to be shown.
    pub struct Shown<'a, T: ?Sized>(pub &'a T);

    /// Shows a JSON value as pretty JSON.
    pub trait ViaJson {
        /// The text.
        fn show(&self) -> String;
    }

    impl ViaJson for Shown<'_, serde_json::Value> {
        fn show(&self) -> String {
            serde_json::to_string_pretty(self.0).unwrap_or_else(|_| self.0.to_string())
        }
    }

    /// Shows any other value with `Debug`.
    pub trait ViaDebug {
        /// The text.
        fn show(&self) -> String;
    }

    impl<T: fmt::Debug + ?Sized> ViaDebug for &Shown<'_, T> {
        fn show(&self) -> String {
            format!("{:?}", self.0)
        }
    }
}

/// Formats a value the way [`ensure_eq!`](crate::ensure_eq) does.
#[macro_export]
macro_rules! show {
    ($value:expr) => {{
        #[allow(unused_imports)]
        use $crate::check::show::{ViaDebug as _, ViaJson as _};
        (&$crate::check::show::Shown(&$value)).show()
    }};
}

/// Fails the check unless `cond` holds.
///
/// `ensure!(cond, "expectation")` or `ensure!(cond, "expectation", "actual {}", args...)`.
/// The expectation is also the assertion's name (for baselines).
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $expected:expr $(,)?) => {
        if !$cond {
            return ::std::result::Result::Err($crate::CheckError::from(
                $crate::Failure::expected($expected)
                    .actual(concat!("not the case: `", stringify!($cond), "`"))
                    .at(concat!(file!(), ":", line!())),
            ));
        }
    };
    ($cond:expr, $expected:expr, $($actual:tt)+) => {
        if !$cond {
            return ::std::result::Result::Err($crate::CheckError::from(
                $crate::Failure::expected($expected)
                    .actual(format!($($actual)+))
                    .at(concat!(file!(), ":", line!())),
            ));
        }
    };
}

/// Fails the check unless `expected == actual`; both are shown with [`show!`](crate::show).
///
/// `ensure_eq!(expected, actual, "what is compared")`; `what` may take format arguments and is
/// the assertion's name.
#[macro_export]
macro_rules! ensure_eq {
    ($expected:expr, $actual:expr, $($what:tt)+) => {{
        let expected = &$expected;
        let actual = &$actual;
        if !(*expected == *actual) {
            return ::std::result::Result::Err($crate::CheckError::from(
                $crate::Failure::new(format!($($what)+), $crate::show!(*expected))
                    .actual($crate::show!(*actual))
                    .at(concat!(file!(), ":", line!())),
            ));
        }
    }};
}

/// Returns a failure at once: `fail!("expectation", "actual {}", args...)`.
#[macro_export]
macro_rules! fail {
    ($expected:expr, $($actual:tt)+) => {
        return ::std::result::Result::Err($crate::CheckError::from(
            $crate::Failure::expected($expected)
                .actual(format!($($actual)+))
                .at(concat!(file!(), ":", line!())),
        ))
    };
}

/// Returns a skip at once: `skip!("reason {}", args...)`.
#[macro_export]
macro_rules! skip {
    ($($reason:tt)+) => {
        return ::std::result::Result::Err($crate::CheckError::Skip(format!($($reason)+)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare(a: u32, b: u32) -> CheckResult {
        ensure_eq!(a, b, "the answer");
        Ok(())
    }

    fn holds(v: bool) -> CheckResult {
        ensure!(v, "the flag is set", "flag was {v}");
        Ok(())
    }

    #[test]
    fn ensure_eq_reports_expected_actual_and_location() {
        assert_eq!(compare(1, 1), Ok(()));
        let CheckError::Fail(failure) = compare(42, 7).unwrap_err() else {
            panic!("expected a failure");
        };
        assert_eq!(failure.check, "the answer");
        assert_eq!(failure.expected, "42");
        assert_eq!(failure.actual, "7");
        assert!(failure.location.unwrap().contains("check.rs:"));
    }

    #[test]
    fn ensure_names_the_assertion_after_its_expectation() {
        let CheckError::Fail(failure) = holds(false).unwrap_err() else {
            panic!("expected a failure");
        };
        assert_eq!(failure.check, "the flag is set");
        assert_eq!(failure.actual, "flag was false");
    }

    #[test]
    fn json_values_show_as_pretty_json() {
        let value = serde_json::json!({"a": 1});
        assert_eq!(crate::show!(value), "{\n  \"a\": 1\n}");
        let borrowed = String::from("text");
        assert_eq!(crate::show!(Some(borrowed.as_str())), "Some(\"text\")");
    }

    #[test]
    fn question_mark_on_an_error_is_a_harness_error() {
        fn read() -> CheckResult {
            std::fs::read("/nonexistent/ski-file")?;
            Ok(())
        }
        assert_eq!(read().unwrap_err().outcome(), Outcome::Error);
        let none: Option<u8> = None;
        assert_eq!(
            none.or_fail("a value").unwrap_err().outcome(),
            Outcome::Fail
        );
    }
}
