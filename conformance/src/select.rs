//! Which scenarios a run covers: `--suite`, `--id` (globs), `--category` and `--shard i/n`.
//!
//! Sharding hashes each scenario's `suite/ID` with a fixed function (FNV-1a), so a scenario stays
//! in its shard when others are added or removed, and every scenario is in exactly one shard.

use std::fmt;
use std::str::FromStr;

use crate::catalog::{CatalogSet, Category, Scenario};

/// One part of a run split across machines: shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    /// Shard `index` of `count` (1 ≤ index ≤ count).
    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "shard {index}/{count} is invalid: use i/n with 1 <= i <= n"
            ));
        }
        Ok(Self { index, count })
    }

    /// Whether a scenario belongs to this shard.
    pub fn contains(&self, scenario: &Scenario) -> bool {
        shard_of(&scenario.suite, &scenario.id, self.count) == self.index
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("shard {s:?} must look like i/n, for example 1/3"))?;
        let parse = |v: &str| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("shard {s:?} must look like i/n, for example 1/3"))
        };
        Shard::new(parse(i)?, parse(n)?)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The 1-based shard of `suite/id` among `count` shards.
pub fn shard_of(suite: &str, id: &str, count: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in suite.bytes().chain(std::iter::once(b'/')).chain(id.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let count = u64::from(count.max(1));
    // The remainder is below `count`, which came from a u32.
    u32::try_from(hash % count).unwrap_or(0) + 1
}

/// A glob over scenario IDs (`WS-06*`, `AOF-057-0?`, `WS-0[12]*`), matched against the whole ID.
///
/// The syntax is [`globset`]'s: `*` any run of characters, `?` one character, `[...]` a class,
/// `{a,b}` alternatives, `\` escapes the next character. `*` and `?` also match `/`
/// (`literal_separator(false)`): IDs are not paths.
#[derive(Debug, Clone)]
pub struct Glob {
    pattern: String,
    matcher: globset::GlobMatcher,
}

impl Glob {
    /// A glob from its pattern; an invalid pattern (`WS-[0`) is an error that names it.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(false)
            .build()
            .map_err(|error| format!("invalid glob {pattern:?}: {}", glob_reason(&error)))?;
        Ok(Self {
            pattern: pattern.to_owned(),
            matcher: glob.compile_matcher(),
        })
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &str) -> bool {
        self.matcher.is_match(text)
    }
}

/// What is wrong with a glob, without globset's repetition of the pattern.
fn glob_reason(error: &globset::Error) -> String {
    error.kind().to_string()
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern
    }
}

impl Eq for Glob {}

impl FromStr for Glob {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pattern)
    }
}

/// The filters of one run; empty filters select everything.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Suites to run (`--suite`).
    pub suites: Vec<String>,
    /// ID globs (`--id`).
    pub ids: Vec<Glob>,
    /// Categories (`--category`).
    pub categories: Vec<Category>,
    /// The shard (`--shard`).
    pub shard: Option<Shard>,
}

impl Selection {
    /// Whether a scenario passes every filter.
    pub fn matches(&self, scenario: &Scenario) -> bool {
        (self.suites.is_empty() || self.suites.contains(&scenario.suite))
            && (self.ids.is_empty() || self.ids.iter().any(|g| g.matches(&scenario.id)))
            && (self.categories.is_empty() || self.categories.contains(&scenario.category))
            && self.shard.is_none_or(|s| s.contains(scenario))
    }

    /// The selected scenarios, in catalog order.
    pub fn apply<'a>(&self, catalogs: &'a CatalogSet) -> Vec<&'a Scenario> {
        catalogs.scenarios().filter(|s| self.matches(s)).collect()
    }

    /// Names of `--suite` values that no catalog declares.
    pub fn unknown_suites(&self, catalogs: &CatalogSet, registered: &[&str]) -> Vec<String> {
        self.suites
            .iter()
            .filter(|s| catalogs.suite(s).is_none() && !registered.contains(&s.as_str()))
            .cloned()
            .collect()
    }

    /// A one-line description for reports.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.suites.is_empty() {
            parts.push(format!("suite {}", self.suites.join(",")));
        }
        if !self.ids.is_empty() {
            let ids: Vec<String> = self.ids.iter().map(Glob::to_string).collect();
            parts.push(format!("id {}", ids.join(",")));
        }
        if !self.categories.is_empty() {
            let cats: Vec<&str> = self.categories.iter().map(|c| c.as_str()).collect();
            parts.push(format!("category {}", cats.join(",")));
        }
        if let Some(shard) = self.shard {
            parts.push(format!("shard {shard}"));
        }
        if parts.is_empty() {
            "everything".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_ids() {
        assert!(Glob::parse("WS-06*").unwrap().matches("WS-063b"));
        assert!(Glob::parse("WS-0?1").unwrap().matches("WS-011"));
        assert!(Glob::parse("*b").unwrap().matches("WS-063b"));
        assert!(Glob::parse("*-0*-*").unwrap().matches("AOF-057-01"));
        assert!(!Glob::parse("WS-06").unwrap().matches("WS-063b"));
        assert!(!Glob::parse("WS-0?1").unwrap().matches("WS-0111"));
        assert!(Glob::parse("WS-001").unwrap().matches("WS-001"));
        assert!(Glob::parse("WS-0[12]*").unwrap().matches("WS-021"));
        assert!(!Glob::parse("WS-0[12]*").unwrap().matches("WS-031"));
        assert!(Glob::parse("{WS,AOF}-0*").unwrap().matches("AOF-057-01"));
        assert!(
            Glob::parse("A*").unwrap().matches("A/B"),
            "`*` crosses `/`: IDs are not paths"
        );
    }

    #[test]
    fn invalid_globs_are_refused_with_the_pattern_and_the_reason() {
        for (pattern, reason) in [
            ("WS-[0", "unclosed character class"),
            ("{WS,AOF", "unclosed alternate group"),
        ] {
            let message = pattern.parse::<Glob>().unwrap_err();
            assert!(message.contains(&format!("{pattern:?}")), "{message}");
            assert!(message.contains(reason), "{message}");
        }
    }

    #[test]
    fn shards_parse_and_reject_nonsense() {
        assert_eq!("2/3".parse::<Shard>().unwrap(), Shard::new(2, 3).unwrap());
        for bad in ["0/3", "4/3", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn shard_assignment_is_fixed_per_id() {
        // The hash is part of the contract: CI shards must not move when the binary changes.
        assert_eq!(shard_of("acp", "WS-001", 1), 1);
        let first = shard_of("acp", "WS-001", 4);
        assert_eq!(shard_of("acp", "WS-001", 4), first);
        assert!((1..=4).contains(&first));
    }
}
