//! The names a profile may use, declared once: capabilities (generated from the catalogs'
//! `[capabilities]` tables) and settings (declared here per suite family, with kind, default
//! and meaning). Profiles and `--capability` flags are checked against them before anything
//! runs; checks read them through these constants, so a misspelt name does not compile.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::{CatalogSet, family, unknown_capability};
use crate::target::{SuiteTarget, Target};

/// A capability name a catalog declares (see `conformance/catalog/*.toml`, `[capabilities]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Capability(&'static str);

impl Capability {
    /// The name as profiles and catalogs write it (`agent-fs`).
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// One constant per capability the catalogs declare, named after it (`AGENT_FS` for
/// `agent-fs`), and [`capability::ALL`].
pub mod capability {
    use super::Capability;
    include!(concat!(env!("OUT_DIR"), "/capabilities.rs"));
}

/// What values a setting takes. A value with a `{placeholder}` is rendered per scenario, so
/// only its name is checked before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Any text (a template, a path, words).
    Text,
    /// The path of a file that exists (relative to where the runner starts).
    File,
    /// A whole number, at least 0.
    Number,
    /// A whole number, at least 1.
    Positive,
    /// One of these words; the first is the default.
    OneOf(&'static [&'static str]),
}

/// One setting a suite family reads from a profile section's `settings`.
#[derive(Debug)]
pub struct Setting {
    /// The key (`page_size`).
    pub name: &'static str,
    /// The values it takes.
    pub kind: Kind,
    /// What it changes.
    pub about: &'static str,
    /// A default that changed: what it was and what a profile written before should set. A
    /// section that does not set it is flagged when the run starts.
    pub changed: Option<&'static str>,
}

impl Setting {
    /// Whether `value` is one this setting takes (a template passes: it is rendered later).
    fn problem(&self, value: &str) -> Option<String> {
        if value.contains('{') {
            return None;
        }
        let number = value.trim().parse::<u64>();
        match self.kind {
            Kind::Text => None,
            Kind::File if std::path::Path::new(value).is_file() => None,
            Kind::File => Some("the path of an existing file".to_owned()),
            Kind::Number if number.is_ok() => None,
            Kind::Number => Some("a whole number".to_owned()),
            Kind::Positive if number.is_ok_and(|n| n > 0) => None,
            Kind::Positive => Some("a whole number above 0".to_owned()),
            Kind::OneOf(words) if words.contains(&value) => None,
            Kind::OneOf(words) => Some(
                words
                    .iter()
                    .map(|w| format!("{w:?}"))
                    .collect::<Vec<_>>()
                    .join(" or "),
            ),
        }
    }
}

macro_rules! settings {
    ($family:ident: $($constant:ident $name:literal $kind:expr, $about:literal $(, changed $changed:literal)?;)*) => {
        #[doc = concat!("The settings of the `", stringify!($family), "` suites.")]
        pub mod $family {
            use super::{Kind::*, Setting};
            $(
                #[doc = $about]
                pub const $constant: Setting = Setting {
                    name: $name,
                    kind: $kind,
                    about: $about,
                    changed: settings!(@changed $($changed)?),
                };
            )*
            /// Every setting of the family.
            pub const ALL: &[&Setting] = &[$(&$constant),*];
        }
    };
    (@changed $changed:literal) => { Some($changed) };
    (@changed) => { None };
}

settings! { acp:
    WS_ARGS "ws_args" Text, "Words added to an agent command to serve WebSocket instead.";
    HTTP_ARGS "http_args" Text, "Words added to an agent command to serve ACP's remote /acp endpoint instead (it prints http://HOST:PORT/acp).";
    HTTP_PROFILE "http_profile" OneOf(&["streamable", "websocket"]), "The profile rows that name no transport use on the remote endpoint (default: streamable when acp-http-streamable is declared, else websocket).";
    HTTP_CA "http_ca" File, "A PEM file of the certificate authorities an https:// remote endpoint's certificate is checked against (default: the platform's roots); a file that holds no certificate fails the rows that connect, as a harness error.";
    PAGE_SIZE "page_size" Positive, "The session/list page size of the `agent_paged` command (default 50).";
    REQUIRES_PROGRAMS "requires_programs" Text, "Programs that must be on PATH; rows that start the agent are skipped without them.";
    REQUIRES_FILES "requires_files" Text, "Files that must exist (an installed peer); rows are errors without them.";
    INSTALL_HINT "install_hint" Text, "How to install what is missing, added to those messages.";
    MOCK_AGENT "mock_agent" Text, "The ski-mock-agent the client commands are pointed at (default {bin_dir}/ski-mock-agent).";
    MAX_IN_FLIGHT_SENDS "max_in_flight_sends" Positive, "The send gate of client_drive when its stats lines do not report maxInFlightSends.";
    RECONNECT_BASE_DELAY_MS "reconnect_base_delay_ms" Number, "The first reconnect delay of client_ws, in milliseconds (default 200).";
}

settings! { aof:
    RUNS_DIR "runs_dir" Text, "Where the adapter keeps run artifacts, relative to the data dir unless absolute.";
}

settings! { intercom:
    READY "ready" OneOf(&["json", "line", "port"]), "How the server says it is ready: a JSON line with mcp_url, a line of text, or its port accepting.";
    READY_LINE "ready_line" Text, "With ready = \"line\": the text of the readiness line.";
    MCP_URL "mcp_url" Text, "The MCP endpoint when the server does not print it (ready other than json).";
    LOG_STREAM "log_stream" OneOf(&["stderr", "stdout"]), "Where the server writes its log.";
    STDIN "stdin" OneOf(&["open", "closed"]), "Whether the server's stdin stays open or is closed at start.";
    AGENT_IN_MCP_MODE "agent_in_mcp_mode" OneOf(&["false", "true"]), "MCP-mode configs carry the rendered agent_template and acp_template too.";
    MAX_LINE_LENGTH "max_line_length" Positive, "The build's own fixed line limit in bytes, instead of the one the harness sets.";
    APPROVAL "approval" OneOf(&["buttons", "reply"]), "How an approval is decided: Block Kit buttons, or a reply in the thread.";
    APPROVAL_MARKER "approval_marker" Text, "With approval = \"reply\": text that marks the approval request (default approve).";
    APPROVE_REPLY "approve_reply" Text, "With approval = \"reply\": the reply that approves.";
    REJECT_REPLY "reject_reply" Text, "With approval = \"reply\": the reply that rejects.";
    SLASH_COMMAND "slash_command" Text, "The server's slash command.";
    SLASH_COMMAND_ACP "slash_command_acp" Text, "The slash command in ACP mode, when it differs.";
    SLACK "slack" OneOf(&["base-url", "slack-hosts"]), "How the server reaches the fake Slack: a base URL it is given, or Slack's own host names.";
    SLACK_EXTRA_HOSTS "slack_extra_hosts" Text, "More host names the server resolves to the fake Slack (with slack = \"slack-hosts\").";
    CONFIG_TEMPLATE "config_template" Text, "The server's configuration file, a template.";
    WORKSPACE_TEMPLATE "workspace_template" Text, "The workspace mapping file, a template.";
    AGENT_TEMPLATE "agent_template" Text, "How the server starts an agent in the stream dialect, a template.";
    ACP_TEMPLATE "acp_template" Text, "How the server starts an ACP agent, a template.";
}

settings! { kiro:
    ENV_FILE "env_file" Text, "Where the bot reads its .env, when not the scenario's directory.";
    MOCK_AGENT "mock_agent" Text, "The ski-mock-agent the suite puts on PATH as kiro-cli.";
    GRACE_MS "grace_ms" Number, "How long the bot may take to end after a signal, in milliseconds.";
    STOP_REASON "stop_reason" OneOf(&["kept", "absent"]), "Whether turn_end carries the response's stopReason.";
}

settings! { teams:
    TASK_DESCRIPTION "task_description" OneOf(&["optional", "required"]), "Whether the implementation refuses a task without --description.",
        changed "the suite passed --description to every task create before; a build that refuses a task without one sets task_description = \"required\"";
    CYCLE_DETECTION "cycle_detection" OneOf(&["refuse-edge", "query"]), "How dependency cycles are found: the closing edge refused, or a `task cycles` query.";
}

/// The settings of a suite's family (`aof-ski` shares `aof`'s).
pub fn settings(suite: &str) -> &'static [&'static Setting] {
    match family(suite) {
        "acp" => acp::ALL,
        "aof" => aof::ALL,
        "intercom" => intercom::ALL,
        "kiro" => kiro::ALL,
        "teams" => teams::ALL,
        _ => &[],
    }
}

/// The nearest of `candidates` to `name`: at most a third of its letters apart.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// What a profile's check against the vocabulary found: problems stop the run (exit 2),
/// notes are printed and the run goes on.
#[derive(Debug, Default)]
pub struct Review {
    /// Unknown names and bad values.
    pub problems: Vec<String>,
    /// Settings whose default changed that the profile does not set.
    pub notes: Vec<String>,
}

/// Checks every suite section of `target` that names a known suite: its capabilities and its
/// settings. Sections of suites the catalogs do not know are left to the suite selection.
pub fn review(target: &Target, catalogs: &CatalogSet) -> Review {
    let mut review = Review::default();
    for (suite, section) in &target.suites {
        if catalogs.suite(suite).is_none() {
            continue;
        }
        review_section(&target.name, suite, section, catalogs, &mut review);
    }
    review
}

fn review_section(
    target: &str,
    suite: &str,
    section: &SuiteTarget,
    catalogs: &CatalogSet,
    review: &mut Review,
) {
    let vocabulary = catalogs.capabilities(suite);
    let known: BTreeSet<&String> = vocabulary.iter().collect();
    for name in section
        .capabilities
        .iter()
        .chain(&section.exclude_capabilities)
    {
        if !known.contains(name) {
            review.problems.push(format!(
                "[suites.{suite}]: {}",
                unknown_capability(name, &vocabulary)
            ));
        }
    }
    let declared: BTreeMap<&str, &Setting> = settings(suite).iter().map(|s| (s.name, *s)).collect();
    for (name, value) in &section.settings {
        match declared.get(name.as_str()) {
            None => {
                let near = nearest(name, declared.keys().copied());
                review.problems.push(match near {
                    Some(near) => format!(
                        "[suites.{suite}]: unknown setting {name:?} (did you mean {near:?}?)"
                    ),
                    None => format!(
                        "[suites.{suite}]: unknown setting {name:?} (the {} suites know: {})",
                        family(suite),
                        declared.keys().copied().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
            Some(setting) => {
                if let Some(expected) = setting.problem(value) {
                    review.problems.push(format!(
                        "[suites.{suite}]: settings.{name} = {value:?}: expected {expected}"
                    ));
                }
            }
        }
    }
    for setting in declared.values() {
        if let Some(changed) = setting.changed
            && !section.settings.contains_key(setting.name)
        {
            review.notes.push(format!(
                "target {target} [suites.{suite}] does not set {}, whose default changed: {changed}",
                setting.name
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> CatalogSet {
        crate::catalog::builtin().expect("the built-in catalogs")
    }

    #[test]
    fn every_capability_constant_is_declared_by_a_catalog_and_every_declared_one_has_a_constant() {
        let catalogs = builtin();
        let declared: BTreeSet<String> = catalogs
            .catalogs
            .iter()
            .flat_map(|c| c.capabilities.keys().cloned())
            .collect();
        let constants: BTreeSet<String> = capability::ALL
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        assert_eq!(constants, declared);
        assert_eq!(capability::AGENT_FS.name(), "agent-fs");
    }

    #[test]
    fn the_nearest_name_is_a_few_letters_away_or_none() {
        let names = ["stop_reason", "grace_ms", "env_file"];
        assert_eq!(nearest("stop_reasn", names), Some("stop_reason"));
        assert_eq!(nearest("grace", names), None);
        assert_eq!(nearest("env-file", names), Some("env_file"));
        assert_eq!(nearest("banana", names), None);
    }

    #[test]
    fn a_profile_with_a_misspelt_setting_a_bad_value_or_an_unknown_capability_is_refused() {
        let text = r#"
name = "demo"
[suites.kiro]
capabilities = ["kiro-check", "kiro-chek"]
settings = { stop_reasn = "absent", grace_ms = "soon", env_file = "{home}/.env" }
[suites.teams]
capabilities = ["teams-core"]
settings = { cycle_detection = "detect" }
"#;
        let target = Target::parse("demo.toml", text).expect("a profile");
        let review = review(&target, &builtin());
        let all = review.problems.join("\n");
        assert!(
            all.contains("unknown capability \"kiro-chek\" (did you mean \"kiro-check\"?)"),
            "{all}"
        );
        assert!(
            all.contains("unknown setting \"stop_reasn\" (did you mean \"stop_reason\"?)"),
            "{all}"
        );
        assert!(
            all.contains("settings.grace_ms = \"soon\": expected a whole number"),
            "{all}"
        );
        assert!(
            all.contains(
                "settings.cycle_detection = \"detect\": expected \"refuse-edge\" or \"query\""
            ),
            "{all}"
        );
        assert_eq!(review.problems.len(), 4, "{all}");
        assert!(
            review.notes.iter().any(|n| n.contains("task_description")),
            "{:?}",
            review.notes
        );
    }

    #[test]
    fn the_documented_capabilities_and_every_built_in_profile_pass() {
        let catalogs = builtin();
        assert!(catalogs.capabilities("acp").contains("agent-fs"));
        assert!(catalogs.capabilities("aof-ski").contains("aof-poll"));
        assert!(catalogs.capabilities("aof").contains("aof-ski-extensions"));
        for (name, _) in crate::target::BUILTIN {
            let name = name.trim_end_matches(".toml");
            let target = Target::load(name).expect("a built-in profile");
            let review = review(&target, &catalogs);
            assert!(review.problems.is_empty(), "{name}: {:?}", review.problems);
        }
    }
}
