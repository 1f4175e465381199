//! The fuzz targets: each drives one real parser of the project as an outside input would and
//! asserts its invariants (an error is an error, never a panic; what decodes encodes and decodes
//! to the same value). A target returns a number naming the class of outcome it saw, which the
//! engine uses to keep inputs that reach a new class.

mod acp;
mod jsonrpc;
mod mock_script;
mod ndjson;
mod slack_params;
mod target_profile;

use std::path::Path;

use crate::rng::fnv1a;

/// One fuzz target.
pub struct Target {
    /// The name used on the command line and for the corpus and artifact directories.
    pub name: &'static str,
    /// One line on what it drives.
    pub about: &'static str,
    /// Runs one input; panics on a finding; returns the class of outcome.
    pub run: fn(&[u8]) -> u64,
    /// Seeds read from the repository at `root`.
    pub seeds: fn(&Path) -> Vec<Vec<u8>>,
    /// Words the mutator inserts (method names, keys).
    pub words: &'static [&'static [u8]],
}

/// Every target, in the order a campaign runs them.
pub const TARGETS: &[Target] = &[
    ndjson::TARGET,
    jsonrpc::TARGET,
    acp::TARGET,
    mock_script::TARGET,
    target_profile::TARGET,
    slack_params::TARGET,
];

/// The target named `name`.
pub fn find(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|target| target.name == name)
}

/// The class of an error message: its first words with digits and quoted parts dropped, so the
/// same error at another line or about another name is the same class.
pub(crate) fn message_class(tag: &str, message: &str) -> u64 {
    let mut coarse = String::new();
    let mut quote = None;
    for c in message.chars() {
        match quote {
            Some(open) if c == open => quote = None,
            Some(_) => {}
            None if matches!(c, '"' | '`' | '\'') => quote = Some(c),
            None if c.is_ascii_digit() => {}
            None => coarse.push(c),
        }
        if coarse.len() >= 28 {
            break;
        }
    }
    fnv1a(format!("{tag}:{coarse}").as_bytes())
}

/// Whether two JSON values are equal, floats within a relative 1e-14: serde_json reads a float
/// to the nearest value or one of its neighbours (its `float_roundtrip` feature is off), so a
/// float may move by an ulp or two each time a text is read again.
pub(crate) fn json_close(left: &serde_json::Value, right: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (left, right) {
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-14,
                _ => false,
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| json_close(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && json_close(va, vb))
        }
        _ => left == right,
    }
}

/// Text of an input: the input itself when it is UTF-8, else a lossy copy (the parsers under
/// test read `&str`; their callers read files and lines the same way).
pub(crate) fn text_of(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}
