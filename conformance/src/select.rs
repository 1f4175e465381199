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

/// A `*` / `?` glob over scenario IDs (`WS-06*`, `AOF-057-0?`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    /// A glob from its pattern.
    pub fn new(pattern: impl Into<String>) -> Self {
        Self(pattern.into())
    }

    /// Whether `text` matches the whole pattern.
    pub fn matches(&self, text: &str) -> bool {
        let pattern: Vec<char> = self.0.chars().collect();
        let text: Vec<char> = text.chars().collect();
        let (mut p, mut t) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
                p += 1;
                t += 1;
            } else if p < pattern.len() && pattern[p] == '*' {
                star = Some((p, t));
                p += 1;
            } else if let Some((sp, st)) = star {
                p = sp + 1;
                t = st + 1;
                star = Some((sp, st + 1));
            } else {
                return false;
            }
        }
        pattern[p..].iter().all(|&c| c == '*')
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
        assert!(Glob::new("WS-06*").matches("WS-063b"));
        assert!(Glob::new("WS-0?1").matches("WS-011"));
        assert!(Glob::new("*b").matches("WS-063b"));
        assert!(Glob::new("*-0*-*").matches("AOF-057-01"));
        assert!(!Glob::new("WS-06").matches("WS-063b"));
        assert!(!Glob::new("WS-0?1").matches("WS-0111"));
        assert!(Glob::new("WS-001").matches("WS-001"));
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
