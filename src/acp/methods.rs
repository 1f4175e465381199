//! The ACP method table: every method name ski knows, which side handles it, how it is
//! specified, and whether it is a request or a notification.
//!
//! The stable and unstable rows follow the `x-method`/`x-side` annotations of the ACP v1 JSON
//! Schemas (stable `schema.json` and `schema.unstable.json`); the legacy and ski rows come from
//! real agents and the ski specification.

/// `initialize`.
pub const INITIALIZE: &str = "initialize";
/// `authenticate`.
pub const AUTHENTICATE: &str = "authenticate";
/// `logout`.
pub const LOGOUT: &str = "logout";
/// `session/new`.
pub const SESSION_NEW: &str = "session/new";
/// `session/load`.
pub const SESSION_LOAD: &str = "session/load";
/// `session/list`.
pub const SESSION_LIST: &str = "session/list";
/// `session/delete`.
pub const SESSION_DELETE: &str = "session/delete";
/// `session/resume`.
pub const SESSION_RESUME: &str = "session/resume";
/// `session/close`.
pub const SESSION_CLOSE: &str = "session/close";
/// `session/set_mode`.
pub const SESSION_SET_MODE: &str = "session/set_mode";
/// `session/set_config_option`.
pub const SESSION_SET_CONFIG_OPTION: &str = "session/set_config_option";
/// `session/prompt`.
pub const SESSION_PROMPT: &str = "session/prompt";
/// `session/cancel`.
pub const SESSION_CANCEL: &str = "session/cancel";
/// `session/request_permission`.
pub const SESSION_REQUEST_PERMISSION: &str = "session/request_permission";
/// `session/update`.
pub const SESSION_UPDATE: &str = "session/update";
/// `fs/read_text_file`.
pub const FS_READ_TEXT_FILE: &str = "fs/read_text_file";
/// `fs/write_text_file`.
pub const FS_WRITE_TEXT_FILE: &str = "fs/write_text_file";
/// `terminal/create`.
pub const TERMINAL_CREATE: &str = "terminal/create";
/// `terminal/output`.
pub const TERMINAL_OUTPUT: &str = "terminal/output";
/// `terminal/wait_for_exit`.
pub const TERMINAL_WAIT_FOR_EXIT: &str = "terminal/wait_for_exit";
/// `terminal/kill`.
pub const TERMINAL_KILL: &str = "terminal/kill";
/// `terminal/release`.
pub const TERMINAL_RELEASE: &str = "terminal/release";
/// `elicitation/create`.
pub const ELICITATION_CREATE: &str = "elicitation/create";
/// `elicitation/complete`.
pub const ELICITATION_COMPLETE: &str = "elicitation/complete";
/// `$/cancel_request`.
pub const CANCEL_REQUEST: &str = "$/cancel_request";
/// Unstable `session/fork`.
pub const SESSION_FORK: &str = "session/fork";
/// Unstable `session/archive`.
pub const SESSION_ARCHIVE: &str = "session/archive";
/// Unstable `session/unarchive`.
pub const SESSION_UNARCHIVE: &str = "session/unarchive";
/// Unstable `session/status`.
pub const SESSION_STATUS: &str = "session/status";
/// Unstable `session/set_title`.
pub const SESSION_SET_TITLE: &str = "session/set_title";
/// Unstable `auth/status`.
pub const AUTH_STATUS: &str = "auth/status";
/// Unstable `auth/status_update`.
pub const AUTH_STATUS_UPDATE: &str = "auth/status_update";
/// Unstable `providers/list`.
pub const PROVIDERS_LIST: &str = "providers/list";
/// Unstable `providers/set`.
pub const PROVIDERS_SET: &str = "providers/set";
/// Unstable `providers/disable`.
pub const PROVIDERS_DISABLE: &str = "providers/disable";
/// Unstable `mcp/message`.
pub const MCP_MESSAGE: &str = "mcp/message";
/// Unstable `proxy/initialize`.
pub const PROXY_INITIALIZE: &str = "proxy/initialize";
/// Unstable `proxy/successor`.
pub const PROXY_SUCCESSOR: &str = "proxy/successor";
/// Legacy `session/set_model`, removed from the schema but still used by real agents.
pub const SESSION_SET_MODEL: &str = "session/set_model";
/// ski extension `session/export`.
pub const SESSION_EXPORT: &str = "session/export";
/// ski extension `session/stop`.
pub const SESSION_STOP: &str = "session/stop";

/// Which side receives and handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent handles it (the client sends it).
    Agent,
    /// The client handles it (the agent sends it).
    Client,
    /// Either side may send it (`$/cancel_request`; `mcp/message` flows both ways).
    Both,
    /// A proxy in a proxy chain handles it.
    Proxy,
}

/// How a method is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stability {
    /// In the stable ACP v1 schema.
    Stable,
    /// Only in the unstable ACP v1 schema.
    Unstable,
    /// Removed from the schema but used by real agents.
    Legacy,
    /// A ski extension, in no ACP schema.
    ExtensionSki,
}

/// Whether a method is called as a request, a notification, or either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Has an id and gets a response.
    Request,
    /// Has no id and gets no response.
    Notification,
    /// Defined in both forms (`session/stop`, `mcp/message`, `proxy/successor`).
    RequestOrNotification,
}

/// One row of the method table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Method {
    /// The wire method name.
    pub name: &'static str,
    /// Who handles it.
    pub side: Side,
    /// How it is specified.
    pub stability: Stability,
    /// Request or notification.
    pub kind: Kind,
}

const fn row(name: &'static str, side: Side, stability: Stability, kind: Kind) -> Method {
    Method {
        name,
        side,
        stability,
        kind,
    }
}

use Kind::{Notification, Request, RequestOrNotification};
use Side::{Agent, Both, Client, Proxy};
use Stability::{ExtensionSki, Legacy, Stable, Unstable};

/// Every method ski knows, stable first.
pub const METHODS: &[Method] = &[
    row(INITIALIZE, Agent, Stable, Request),
    row(AUTHENTICATE, Agent, Stable, Request),
    row(LOGOUT, Agent, Stable, Request),
    row(SESSION_NEW, Agent, Stable, Request),
    row(SESSION_LOAD, Agent, Stable, Request),
    row(SESSION_LIST, Agent, Stable, Request),
    row(SESSION_DELETE, Agent, Stable, Request),
    row(SESSION_RESUME, Agent, Stable, Request),
    row(SESSION_CLOSE, Agent, Stable, Request),
    row(SESSION_SET_MODE, Agent, Stable, Request),
    row(SESSION_SET_CONFIG_OPTION, Agent, Stable, Request),
    row(SESSION_PROMPT, Agent, Stable, Request),
    row(SESSION_CANCEL, Agent, Stable, Notification),
    row(SESSION_REQUEST_PERMISSION, Client, Stable, Request),
    row(SESSION_UPDATE, Client, Stable, Notification),
    row(FS_READ_TEXT_FILE, Client, Stable, Request),
    row(FS_WRITE_TEXT_FILE, Client, Stable, Request),
    row(TERMINAL_CREATE, Client, Stable, Request),
    row(TERMINAL_OUTPUT, Client, Stable, Request),
    row(TERMINAL_WAIT_FOR_EXIT, Client, Stable, Request),
    row(TERMINAL_KILL, Client, Stable, Request),
    row(TERMINAL_RELEASE, Client, Stable, Request),
    row(ELICITATION_CREATE, Client, Stable, Request),
    row(ELICITATION_COMPLETE, Client, Stable, Notification),
    row(CANCEL_REQUEST, Both, Stable, Notification),
    row(SESSION_FORK, Agent, Unstable, Request),
    row(SESSION_ARCHIVE, Agent, Unstable, Request),
    row(SESSION_UNARCHIVE, Agent, Unstable, Request),
    row(SESSION_STATUS, Agent, Unstable, Request),
    row(SESSION_SET_TITLE, Agent, Unstable, Request),
    row(AUTH_STATUS, Agent, Unstable, Request),
    row(AUTH_STATUS_UPDATE, Client, Unstable, Notification),
    row(PROVIDERS_LIST, Agent, Unstable, Request),
    row(PROVIDERS_SET, Agent, Unstable, Request),
    row(PROVIDERS_DISABLE, Agent, Unstable, Request),
    row(MCP_MESSAGE, Both, Unstable, RequestOrNotification),
    row(PROXY_INITIALIZE, Proxy, Unstable, Request),
    row(PROXY_SUCCESSOR, Proxy, Unstable, RequestOrNotification),
    row(SESSION_SET_MODEL, Agent, Legacy, Request),
    row(SESSION_EXPORT, Agent, ExtensionSki, Request),
    row(SESSION_STOP, Agent, ExtensionSki, RequestOrNotification),
];

/// The row for `name`, if ski knows the method.
pub fn lookup(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|method| method.name == name)
}

/// Whether `name` is an extension method: ACP reserves names starting with `_` for them. An
/// unknown extension request gets -32601; an unknown extension notification is ignored.
pub fn is_extension(name: &str) -> bool {
    name.starts_with('_')
}

/// The rows with the given stability.
pub fn with_stability(stability: Stability) -> impl Iterator<Item = &'static Method> {
    METHODS
        .iter()
        .filter(move |method| method.stability == stability)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn names_are_unique() {
        let mut seen = HashSet::new();
        for method in METHODS {
            assert!(
                seen.insert(method.name),
                "duplicate method row {}",
                method.name
            );
        }
    }

    #[test]
    fn stable_v1_has_twenty_five_methods() {
        // 13 agent-side, 11 client-side and 1 protocol method in schema-v1.21 / npm 2.4.0.
        let stable: Vec<_> = with_stability(Stability::Stable).collect();
        assert_eq!(stable.len(), 25);
        assert_eq!(stable.iter().filter(|m| m.side == Side::Agent).count(), 13);
        assert_eq!(stable.iter().filter(|m| m.side == Side::Client).count(), 11);
        assert_eq!(stable.iter().filter(|m| m.side == Side::Both).count(), 1);
    }

    /// The stable and unstable rows are exactly the methods of the official schema crate (built
    /// with every `unstable_*` feature), each on the side the crate puts it.
    #[test]
    fn table_matches_the_official_crate() {
        use agent_client_protocol_schema::v1 as official;

        fn names<T: serde::Serialize>(table: &T) -> HashSet<String> {
            let value = serde_json::to_value(table).unwrap();
            value
                .as_object()
                .unwrap()
                .values()
                .map(|name| name.as_str().unwrap().to_owned())
                .collect()
        }
        let agent = names(&official::AGENT_METHOD_NAMES);
        let client = names(&official::CLIENT_METHOD_NAMES);
        let protocol = names(&official::PROTOCOL_LEVEL_METHOD_NAMES);
        let proxy = names(&official::PROXY_METHOD_NAMES);

        let official_all: HashSet<&str> = agent
            .iter()
            .chain(&client)
            .chain(&protocol)
            .chain(&proxy)
            .map(String::as_str)
            .collect();
        let ours: HashSet<&str> = METHODS
            .iter()
            .filter(|m| matches!(m.stability, Stability::Stable | Stability::Unstable))
            .map(|m| m.name)
            .collect();
        assert_eq!(ours, official_all);

        for method in METHODS.iter().filter(|m| official_all.contains(m.name)) {
            let name = method.name;
            let expected =
                if protocol.contains(name) || (agent.contains(name) && client.contains(name)) {
                    Side::Both
                } else if agent.contains(name) {
                    Side::Agent
                } else if client.contains(name) {
                    Side::Client
                } else {
                    Side::Proxy
                };
            assert_eq!(method.side, expected, "{}", method.name);
        }
        for method in METHODS.iter().filter(|m| !official_all.contains(m.name)) {
            assert!(
                matches!(
                    method.stability,
                    Stability::Legacy | Stability::ExtensionSki
                ),
                "{}",
                method.name
            );
        }
    }

    #[test]
    fn lookup_and_extension_names() {
        assert_eq!(
            lookup(SESSION_CANCEL).map(|m| m.kind),
            Some(Kind::Notification)
        );
        assert_eq!(
            lookup("session/stop").map(|m| m.stability),
            Some(Stability::ExtensionSki)
        );
        assert!(lookup("_kiro.dev/metadata").is_none());
        assert!(is_extension("_kiro.dev/metadata"));
        assert!(!is_extension(CANCEL_REQUEST));
    }
}
