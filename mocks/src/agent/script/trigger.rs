//! Rules and their triggers: a method arriving, a prompt matching a glob or a regex, a control
//! command, or a timer.

use std::time::Duration;

use globset::GlobBuilder;
use regex::Regex;
use serde::Deserialize;

use super::step::{Step, StepSpec};
pub use crate::agent::template::Captures;

/// A rule as written: one trigger key and the steps under `do`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// A note for the reader; not used.
    pub name: Option<String>,
    /// Trigger: a request or notification with this method arrived.
    pub method: Option<String>,
    /// Trigger: a prompt whose text matches this glob (`*` any text, `?` one character).
    pub prompt: Option<String>,
    /// Trigger: a prompt whose text matches this regular expression (searched, not anchored).
    pub prompt_regex: Option<String>,
    /// Trigger: the control command `{"cmd":"trigger","name":...}`.
    pub control: Option<String>,
    /// Trigger: this long after start.
    pub after_ms: Option<u64>,
    /// With `after_ms`: again every this many milliseconds.
    pub every_ms: Option<u64>,
    /// Fire at most once.
    pub once: Option<bool>,
    /// The steps.
    #[serde(rename = "do", default)]
    pub steps: Vec<StepSpec>,
}

/// How a prompt's text is matched.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// The pattern as written.
    pub source: String,
    /// The compiled expression (a glob is compiled to an anchored one).
    pub regex: Regex,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.regex.as_str() == other.regex.as_str()
    }
}

impl Matcher {
    /// A glob in [`globset`]'s syntax: `*` matches any text (newlines and `/` too), `?` one
    /// character, `[...]` one character of a class, `{a,b}` either alternative, `\` escapes;
    /// the whole trimmed prompt must match. Each `*`, `?` and class is a numbered capture, from
    /// the left. An invalid glob (`[a`) is an error naming it.
    pub fn glob(pattern: &str) -> Result<Self, String> {
        // globset parses the glob and decides what it means, but matches without captures. Its
        // regex (`Glob::regex`) is written for bytes: `(?-u)`, so `.` is one byte, and every
        // non-ASCII literal is spelled as its UTF-8 bytes `\xNN`. `with_captures` rewrites that
        // regex for text: each wildcard becomes a numbered group and the bytes become characters
        // again, so `?` stays one character and the captures are text.
        let glob = GlobBuilder::new(pattern)
            .literal_separator(false)
            .build()
            .map_err(|e| format!("bad glob {pattern:?}: {}", e.kind()))?;
        let expression = with_captures(glob.regex())
            .ok_or_else(|| format!("bad glob {pattern:?}: cannot translate {:?}", glob.regex()))?;
        let regex = Regex::new(&expression).map_err(|e| format!("bad glob {pattern:?}: {e}"))?;
        Ok(Self {
            source: pattern.to_owned(),
            regex,
        })
    }

    /// A regular expression, searched anywhere in the prompt text.
    pub fn regex(pattern: &str) -> Result<Self, String> {
        let regex = Regex::new(pattern).map_err(|e| format!("bad regex {pattern:?}: {e}"))?;
        Ok(Self {
            source: pattern.to_owned(),
            regex,
        })
    }

    /// The captures if `text` matches: index 0 is the whole match; named groups come as well.
    pub fn captures(&self, text: &str) -> Option<Captures> {
        let found = self.regex.captures(text)?;
        let numbered = found
            .iter()
            .map(|m| m.map(|m| m.as_str().to_owned()))
            .collect();
        let named = self
            .regex
            .capture_names()
            .flatten()
            .filter_map(|name| Some((name.to_owned(), found.name(name)?.as_str().to_owned())))
            .collect();
        Some(Captures { numbered, named })
    }
}

/// Rewrites a regex that globset built for bytes (`(?-u)^...$`) into one for text with a
/// numbered group around each wildcard: `.` (`?`), `.*` (`*`) and `[...]` (a class). globset
/// escapes every literal character, `]` in a class included, so an unescaped `.` or `[` is
/// always a wildcard; runs of `\xNN` escapes are the UTF-8 bytes of non-ASCII literals and are
/// turned back into characters. `None` for a regex not of that form.
fn with_captures(bytes_regex: &str) -> Option<String> {
    let body = bytes_regex.strip_prefix("(?-u)")?;
    let mut out = String::from("(?s)");
    let mut pending: Vec<u8> = Vec::new();
    let mut chars = body.chars().peekable();
    let mut class: Option<String> = None;
    while let Some(c) = chars.next() {
        let target = class.as_mut().unwrap_or(&mut out);
        if c == '\\' {
            let escaped = chars.next()?;
            if escaped == 'x' {
                let hex: String = [chars.next()?, chars.next()?].iter().collect();
                pending.push(u8::from_str_radix(&hex, 16).ok()?);
                continue;
            }
            flush(&mut pending, target)?;
            target.push('\\');
            target.push(escaped);
            continue;
        }
        flush(&mut pending, target)?;
        match (c, &mut class) {
            (']', Some(open)) => {
                open.push(']');
                out.push('(');
                out.push_str(open);
                out.push(')');
                class = None;
            }
            (c, Some(open)) => open.push(c),
            ('[', None) => class = Some(String::from("[")),
            ('.', None) if chars.peek() == Some(&'*') => {
                chars.next();
                out.push_str("(.*)");
            }
            ('.', None) => out.push_str("(.)"),
            (c, None) => out.push(c),
        }
    }
    if class.is_some() {
        return None;
    }
    flush(&mut pending, &mut out)?;
    Some(out)
}

/// Appends the pending UTF-8 bytes as an escaped literal; `None` if they are not UTF-8.
fn flush(pending: &mut Vec<u8>, out: &mut String) -> Option<()> {
    if !pending.is_empty() {
        let text = String::from_utf8(std::mem::take(pending)).ok()?;
        out.push_str(&regex::escape(&text));
    }
    Some(())
}

/// What makes a rule fire.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// A request or notification with this method.
    Method(String),
    /// A prompt (`session/prompt`, or `prompt/send` in the intercom dialect) whose text
    /// matches.
    Prompt {
        /// The pattern.
        matcher: Matcher,
        /// Whether the pattern is a glob (matched against the trimmed text).
        glob: bool,
    },
    /// A control command.
    Control(String),
    /// A timer from start.
    Timer {
        /// The first firing.
        after: Duration,
        /// The period after that, if any.
        every: Option<Duration>,
    },
}

/// A checked rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The trigger.
    pub trigger: Trigger,
    /// Whether it fires at most once.
    pub once: bool,
    /// The steps.
    pub steps: Vec<Step>,
    /// Where it is in the script, for messages.
    pub at: String,
}

impl Rule {
    /// Checks a rule spec; `at` names it in errors.
    pub fn from_spec(spec: &RuleSpec, at: &str) -> Result<Self, (String, String)> {
        let fail = |message: String| (at.to_owned(), message);
        let mut triggers = Vec::new();
        if let Some(method) = &spec.method {
            triggers.push(Trigger::Method(method.clone()));
        }
        if let Some(glob) = &spec.prompt {
            triggers.push(Trigger::Prompt {
                matcher: Matcher::glob(glob).map_err(fail)?,
                glob: true,
            });
        }
        if let Some(regex) = &spec.prompt_regex {
            triggers.push(Trigger::Prompt {
                matcher: Matcher::regex(regex).map_err(fail)?,
                glob: false,
            });
        }
        if let Some(name) = &spec.control {
            triggers.push(Trigger::Control(name.clone()));
        }
        if let Some(after) = spec.after_ms {
            triggers.push(Trigger::Timer {
                after: Duration::from_millis(after),
                every: spec.every_ms.map(Duration::from_millis),
            });
        } else if spec.every_ms.is_some() {
            return Err(fail("`every_ms` needs `after_ms`".to_owned()));
        }
        if spec.every_ms == Some(0) {
            return Err(fail("`every_ms` must be at least 1".to_owned()));
        }
        let trigger = match triggers.len() {
            1 => triggers.remove(0),
            0 => {
                return Err(fail(
                    "a rule needs one trigger: method, prompt, prompt_regex, control or after_ms"
                        .to_owned(),
                ));
            }
            _ => return Err(fail("a rule has exactly one trigger".to_owned())),
        };
        if spec.steps.is_empty() {
            return Err(fail("a rule needs at least one step under `do`".to_owned()));
        }
        let steps = spec
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| Step::from_spec(step, &format!("{at}.do[{index}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            trigger,
            once: spec.once.unwrap_or(false),
            steps,
            at: at.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_the_whole_text_and_capture_wildcards() {
        let matcher = Matcher::glob("say *!").unwrap();
        let captures = matcher.captures("say hello world!").unwrap();
        assert_eq!(captures.get("1"), Some("hello world"));
        assert!(matcher.captures("please say hi!").is_none());
        let literal = Matcher::glob("a.b").unwrap();
        assert!(literal.captures("a.b").is_some());
        assert!(literal.captures("axb").is_none());
    }

    #[test]
    fn glob_wildcards_are_characters_and_each_is_a_capture() {
        let matcher = Matcher::glob("? [ab]-* on *").unwrap();
        let captures = matcher.captures("é b-x/y on two\nlines").unwrap();
        assert_eq!(captures.get("0"), Some("é b-x/y on two\nlines"));
        assert_eq!(captures.get("1"), Some("é"));
        assert_eq!(captures.get("2"), Some("b"));
        assert_eq!(captures.get("3"), Some("x/y"));
        assert_eq!(captures.get("4"), Some("two\nlines"));
        assert!(matcher.captures("é c-x on y").is_none());
        assert!(matcher.captures("éé b-x on y").is_none());
        // Alternatives choose but do not capture; escaped and non-ASCII literals are themselves.
        let matcher = Matcher::glob("{hi,hello} ☃\\* *").unwrap();
        let captures = matcher.captures("hello ☃* there").unwrap();
        assert_eq!(captures.get("1"), Some("there"));
        assert!(matcher.captures("hello ☃x there").is_none());
        assert!(matcher.captures("hey ☃* there").is_none());
    }

    #[test]
    fn invalid_globs_are_errors_that_name_them() {
        for (pattern, reason) in [("say [a", "unclosed character class"), ("{a", "unclosed")] {
            let message = Matcher::glob(pattern).unwrap_err();
            assert!(message.contains(&format!("{pattern:?}")), "{message}");
            assert!(message.contains(reason), "{message}");
        }
    }

    #[test]
    fn regexes_search_and_capture_names() {
        let matcher = Matcher::regex(r"exit (?P<code>\d+)").unwrap();
        let captures = matcher.captures("please exit 3 now").unwrap();
        assert_eq!(captures.get("code"), Some("3"));
        assert_eq!(captures.get("1"), Some("3"));
        assert!(Matcher::regex("(").is_err());
    }
}
