//! The ACP method table: every method ski knows described once (wire name, side, stability,
//! protocol generation, request or notification, params and result types, what the agent must
//! have advertised and whether it waits for `authenticate`); the name constants, [`METHODS`], the
//! typed payloads of [`message`](super::message) and the reference agent's handlers derive from it.
//!
//! The stable and unstable rows follow the `x-method`/`x-side` annotations of the ACP v1 JSON
//! Schemas (stable `schema.json` and `schema.unstable.json`); the legacy and ski rows come from
//! real agents and the ski specification.
//!
//! # The table
//!
//! `acp_method_table!` holds the rows and hands them to a macro that builds something from them:
//! `define_methods!` here (the name constants, [`METHODS`] and the [`typed`] method keys), and
//! `method_payloads!` in [`message`](super::message) ([`MethodParams`](super::MethodParams) and
//! [`MethodResult`](super::MethodResult)). A row reads
//!
//! ```text
//! CONSTANT = "wire/name" [side, stability, generation, kind, gate G, auth A] Key(Params => Result);
//! ```
//!
//! where `G` is `-` (always served), a [`Feature`] name or `AuthMethods` (see [`Gate`]); `A` is
//! `auth` (refused before `authenticate` when the agent requires it), `open` (never refused) or
//! `-` (not a request the agent serves); and the typed part is `Key(Params => Result)` for a
//! request, `Key(Params)` for a notification, or absent for a method ski has no types for. The
//! types are named as [`crate::acp`] exports them. ACP v2 (draft) methods go in as rows of a new
//! [`Generation`].

use super::agent::config::Feature;

/// Which side receives and handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent handles it (the client sends it).
    Agent,
    /// The client handles it (the agent sends it).
    Client,
    /// Either side may send it: a protocol-level method (`$/cancel_request`; `mcp/message`
    /// flows both ways).
    Both,
    /// A proxy in a proxy chain handles it.
    Proxy,
}

/// How a method is specified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stability {
    /// In the stable ACP schema.
    Stable,
    /// Only in the unstable ACP schema.
    Unstable,
    /// Removed from the schema but used by real agents.
    Legacy,
    /// A ski extension, in no ACP schema.
    ExtensionSki,
}

/// The ACP protocol generation a row belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Generation {
    /// ACP v1 (`protocolVersion` 1), with its unstable schema.
    V1,
    /// ACP v2 (`protocolVersion` 2), the draft of [`crate::acp::v2::GENERATION`].
    V2,
}

impl Generation {
    /// Every generation, oldest first.
    pub const ALL: [Generation; 2] = [Generation::V1, Generation::V2];

    /// The `protocolVersion` that names it.
    pub fn protocol_version(self) -> u16 {
        match self {
            Generation::V1 => 1,
            Generation::V2 => 2,
        }
    }

    /// The generation a `protocolVersion` names, if ski speaks it.
    pub fn from_protocol_version(version: u16) -> Option<Generation> {
        match version {
            1 => Some(Generation::V1),
            2 => Some(Generation::V2),
            _ => None,
        }
    }

    /// The rows of this generation.
    pub fn methods(self) -> &'static [Method] {
        match self {
            Generation::V1 => METHODS,
            Generation::V2 => v2::METHODS,
        }
    }

    /// This generation's row for `name`, if it has the method.
    pub fn lookup(self, name: &str) -> Option<&'static Method> {
        self.methods().iter().find(|method| method.name == name)
    }
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

/// What an agent must have advertised in its `initialize` result to serve a method; one it did
/// not advertise answers `-32601` (a notification is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// The capability of a reference agent [`Feature`] (see its variants for where each is
    /// advertised).
    Feature(Feature),
    /// At least one entry of `authMethods`.
    AuthMethods,
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
    /// The protocol generation.
    pub generation: Generation,
    /// Request or notification.
    pub kind: Kind,
    /// What must have been advertised for the agent to serve it.
    pub gate: Option<Gate>,
    /// Whether an agent that requires authentication refuses it before `authenticate`.
    pub needs_auth: bool,
}

/// A method the table has types for: the key under which a typed handler is installed.
pub trait TypedMethod: Send + Sync + 'static {
    /// The method's row.
    const ROW: &'static Method;
    /// The params type.
    type Params: serde::Serialize + serde::de::DeserializeOwned + Send + 'static;
}

/// A method the table has a result type for (a request).
pub trait TypedRequest: TypedMethod {
    /// The result type.
    type Result: serde::Serialize + serde::de::DeserializeOwned + Send + 'static;
}

/// The rows of the method table, handed to `$callback!` (see the module documentation).
macro_rules! acp_method_table {
    ($callback:ident) => {
        $callback! {
            v1 {
            INITIALIZE = "initialize" [Agent, Stable, V1, Request, gate -, auth open]
                Initialize(InitializeRequest => InitializeResponse);
            AUTHENTICATE = "authenticate" [Agent, Stable, V1, Request, gate AuthMethods, auth open]
                Authenticate(AuthenticateRequest => AuthenticateResponse);
            LOGOUT = "logout" [Agent, Stable, V1, Request, gate Logout, auth open]
                Logout(LogoutRequest => LogoutResponse);
            SESSION_NEW = "session/new" [Agent, Stable, V1, Request, gate -, auth auth]
                NewSession(NewSessionRequest => NewSessionResponse);
            SESSION_LOAD = "session/load" [Agent, Stable, V1, Request, gate LoadSession, auth auth]
                LoadSession(LoadSessionRequest => LoadSessionResponse);
            SESSION_LIST = "session/list" [Agent, Stable, V1, Request, gate List, auth auth]
                ListSessions(ListSessionsRequest => ListSessionsResponse);
            SESSION_DELETE = "session/delete" [Agent, Stable, V1, Request, gate Delete, auth auth]
                DeleteSession(DeleteSessionRequest => DeleteSessionResponse);
            SESSION_RESUME = "session/resume" [Agent, Stable, V1, Request, gate Resume, auth auth]
                ResumeSession(ResumeSessionRequest => ResumeSessionResponse);
            SESSION_CLOSE = "session/close" [Agent, Stable, V1, Request, gate Close, auth auth]
                CloseSession(CloseSessionRequest => CloseSessionResponse);
            SESSION_SET_MODE = "session/set_mode" [Agent, Stable, V1, Request, gate -, auth auth]
                SetSessionMode(SetSessionModeRequest => SetSessionModeResponse);
            SESSION_SET_CONFIG_OPTION = "session/set_config_option" [Agent, Stable, V1, Request, gate -, auth auth]
                SetSessionConfigOption(SetSessionConfigOptionRequest => SetSessionConfigOptionResponse);
            SESSION_PROMPT = "session/prompt" [Agent, Stable, V1, Request, gate -, auth auth]
                Prompt(PromptRequest => PromptResponse);
            SESSION_CANCEL = "session/cancel" [Agent, Stable, V1, Notification, gate -, auth -]
                Cancel(CancelNotification);
            SESSION_REQUEST_PERMISSION = "session/request_permission" [Client, Stable, V1, Request, gate -, auth -]
                RequestPermission(RequestPermissionRequest => RequestPermissionResponse);
            SESSION_UPDATE = "session/update" [Client, Stable, V1, Notification, gate -, auth -]
                SessionUpdate(SessionNotification);
            FS_READ_TEXT_FILE = "fs/read_text_file" [Client, Stable, V1, Request, gate -, auth -]
                ReadTextFile(ReadTextFileRequest => ReadTextFileResponse);
            FS_WRITE_TEXT_FILE = "fs/write_text_file" [Client, Stable, V1, Request, gate -, auth -]
                WriteTextFile(WriteTextFileRequest => WriteTextFileResponse);
            TERMINAL_CREATE = "terminal/create" [Client, Stable, V1, Request, gate -, auth -]
                CreateTerminal(CreateTerminalRequest => CreateTerminalResponse);
            TERMINAL_OUTPUT = "terminal/output" [Client, Stable, V1, Request, gate -, auth -]
                TerminalOutput(TerminalOutputRequest => TerminalOutputResponse);
            TERMINAL_WAIT_FOR_EXIT = "terminal/wait_for_exit" [Client, Stable, V1, Request, gate -, auth -]
                WaitForTerminalExit(WaitForTerminalExitRequest => WaitForTerminalExitResponse);
            TERMINAL_KILL = "terminal/kill" [Client, Stable, V1, Request, gate -, auth -]
                KillTerminal(KillTerminalRequest => KillTerminalResponse);
            TERMINAL_RELEASE = "terminal/release" [Client, Stable, V1, Request, gate -, auth -]
                ReleaseTerminal(ReleaseTerminalRequest => ReleaseTerminalResponse);
            ELICITATION_CREATE = "elicitation/create" [Client, Stable, V1, Request, gate -, auth -]
                CreateElicitation(CreateElicitationRequest => CreateElicitationResponse);
            ELICITATION_COMPLETE = "elicitation/complete" [Client, Stable, V1, Notification, gate -, auth -]
                CompleteElicitation(CompleteElicitationNotification);
            CANCEL_REQUEST = "$/cancel_request" [Both, Stable, V1, Notification, gate -, auth -]
                CancelRequest(CancelRequestNotification);
            SESSION_FORK = "session/fork" [Agent, Unstable, V1, Request, gate Fork, auth auth]
                ForkSession(ForkSessionRequest => ForkSessionResponse);
            SESSION_ARCHIVE = "session/archive" [Agent, Unstable, V1, Request, gate -, auth auth]
                ArchiveSession(SessionIdRequest => Empty);
            SESSION_UNARCHIVE = "session/unarchive" [Agent, Unstable, V1, Request, gate -, auth auth]
                UnarchiveSession(SessionIdRequest => Empty);
            SESSION_STATUS = "session/status" [Agent, Unstable, V1, Request, gate -, auth auth]
                SessionStatus(SessionIdRequest => SessionStatusResponse);
            SESSION_SET_TITLE = "session/set_title" [Agent, Unstable, V1, Request, gate -, auth auth]
                SetSessionTitle(SetSessionTitleRequest => SetSessionTitleResponse);
            AUTH_STATUS = "auth/status" [Agent, Unstable, V1, Request, gate -, auth open]
                AuthStatus(AuthStatusRequest => AuthStatus);
            AUTH_STATUS_UPDATE = "auth/status_update" [Client, Unstable, V1, Notification, gate -, auth -]
                AuthStatusUpdate(AuthStatus);
            PROVIDERS_LIST = "providers/list" [Agent, Unstable, V1, Request, gate -, auth auth];
            PROVIDERS_SET = "providers/set" [Agent, Unstable, V1, Request, gate -, auth auth];
            PROVIDERS_DISABLE = "providers/disable" [Agent, Unstable, V1, Request, gate -, auth auth];
            MCP_MESSAGE = "mcp/message" [Both, Unstable, V1, RequestOrNotification, gate -, auth -];
            PROXY_INITIALIZE = "proxy/initialize" [Proxy, Unstable, V1, Request, gate -, auth -];
            PROXY_SUCCESSOR = "proxy/successor" [Proxy, Unstable, V1, RequestOrNotification, gate -, auth -];
            SESSION_SET_MODEL = "session/set_model" [Agent, Legacy, V1, Request, gate SetModel, auth auth]
                SetSessionModel(SetSessionModelRequest => SetSessionModelResponse);
            SESSION_EXPORT = "session/export" [Agent, ExtensionSki, V1, Request, gate Export, auth auth]
                ExportSession(ExportSessionRequest => ExportSessionResponse);
            SESSION_STOP = "session/stop" [Agent, ExtensionSki, V1, RequestOrNotification, gate Stop, auth auth]
                StopSession(StopSessionRequest => StopSessionResponse);
            }
            v2 {
            INITIALIZE = "initialize" [Agent, Stable, V2, Request, gate -, auth open]
                Initialize(v2::InitializeRequest => v2::InitializeResponse);
            AUTH_LOGIN = "auth/login" [Agent, Stable, V2, Request, gate AuthMethods, auth open]
                Login(v2::LoginAuthRequest => Empty);
            AUTH_LOGOUT = "auth/logout" [Agent, Stable, V2, Request, gate AuthMethods, auth open]
                Logout(Empty => Empty);
            SESSION_NEW = "session/new" [Agent, Stable, V2, Request, gate -, auth auth]
                NewSession(v2::NewSessionRequest => v2::NewSessionResponse);
            SESSION_LIST = "session/list" [Agent, Stable, V2, Request, gate -, auth auth]
                ListSessions(ListSessionsRequest => ListSessionsResponse);
            SESSION_DELETE = "session/delete" [Agent, Stable, V2, Request, gate Delete, auth auth]
                DeleteSession(DeleteSessionRequest => DeleteSessionResponse);
            SESSION_RESUME = "session/resume" [Agent, Stable, V2, Request, gate -, auth auth]
                ResumeSession(v2::ResumeSessionRequest => v2::ResumeSessionResponse);
            SESSION_CLOSE = "session/close" [Agent, Stable, V2, Request, gate -, auth auth]
                CloseSession(CloseSessionRequest => CloseSessionResponse);
            TOOL_CALL_CANCEL = "tool_call/cancel" [Agent, Stable, V2, Request, gate -, auth auth]
                CancelToolCall(v2::CancelToolCallRequest => Empty);
            TERMINAL_CANCEL = "terminal/cancel" [Agent, Stable, V2, Request, gate -, auth auth]
                CancelTerminal(v2::CancelTerminalRequest => Empty);
            SESSION_SET_CONFIG_OPTION = "session/set_config_option" [Agent, Stable, V2, Request, gate -, auth auth]
                SetSessionConfigOption(v2::SetSessionConfigOptionRequest => v2::SetSessionConfigOptionResponse);
            SESSION_PROMPT = "session/prompt" [Agent, Stable, V2, Request, gate -, auth auth]
                Prompt(PromptRequest => v2::PromptResponse);
            SESSION_CANCEL = "session/cancel" [Agent, Stable, V2, Notification, gate -, auth -]
                Cancel(CancelNotification);
            SESSION_REQUEST_PERMISSION = "session/request_permission" [Client, Stable, V2, Request, gate -, auth -]
                RequestPermission(RequestPermissionRequest => RequestPermissionResponse);
            SESSION_UPDATE = "session/update" [Client, Stable, V2, Notification, gate -, auth -]
                SessionUpdate(v2::SessionNotification);
            ELICITATION_CREATE = "elicitation/create" [Client, Stable, V2, Request, gate -, auth -]
                CreateElicitation(CreateElicitationRequest => CreateElicitationResponse);
            ELICITATION_COMPLETE = "elicitation/complete" [Client, Stable, V2, Notification, gate -, auth -]
                CompleteElicitation(CompleteElicitationNotification);
            CANCEL_REQUEST = "$/cancel_request" [Both, Stable, V2, Notification, gate -, auth -]
                CancelRequest(CancelRequestNotification);
            }
        }
    };
}
pub(crate) use acp_method_table;

/// The `gate` column as a value.
macro_rules! gate_of {
    (-) => {
        None
    };
    (AuthMethods) => {
        Some(Gate::AuthMethods)
    };
    ($feature:ident) => {
        Some(Gate::Feature(Feature::$feature))
    };
}

/// The `auth` column as a value.
macro_rules! needs_auth_of {
    (auth) => {
        true
    };
    (open) => {
        false
    };
    (-) => {
        false
    };
}

/// The name constants, a `METHODS` slice and the `typed` keys of one generation's rows, in the
/// module it is invoked in.
macro_rules! method_rows {
    ($(
        $konst:ident = $name:literal [$side:ident, $stability:ident, $generation:ident, $kind:ident,
            gate $gate:tt, auth $auth:tt]
            $( $key:ident($params:ty $(=> $result:ty)?) )?;
    )*) => {
        $(
            #[doc = concat!("`", $name, "` (", stringify!($stability), " ", stringify!($generation), ", handled by the ", stringify!($side), " side).")]
            pub const $konst: &str = $name;
        )*

        /// One [`Method`] per row, by the row's constant name.
        #[allow(non_upper_case_globals, reason = "named after the wire-name constants")]
        mod row {
            use super::*;
            $(
                pub(super) const $konst: Method = Method {
                    name: $name,
                    side: Side::$side,
                    stability: Stability::$stability,
                    generation: Generation::$generation,
                    kind: Kind::$kind,
                    gate: gate_of!($gate),
                    needs_auth: needs_auth_of!($auth),
                };
            )*
        }

        /// Every method of the generation, stable first.
        pub const METHODS: &[Method] = &[$(row::$konst),*];

        /// One key per method the table has types for, named as its
        /// [`MethodParams`](crate::acp::MethodParams) variant: `typed::Prompt` is `session/prompt`.
        pub mod typed {
            $($(
                #[doc = concat!("`", $name, "`.")]
                #[derive(Debug, Clone, Copy)]
                pub struct $key;
            )?)*
        }

        /// The [`TypedMethod`] and [`TypedRequest`] impls, where the payload types are in scope.
        mod typed_impls {
            #[allow(clippy::wildcard_imports, reason = "the rows name the types as acp exports them")]
            use crate::acp::*;
            use super::{Method, TypedMethod, TypedRequest, row, typed};
            $($(
                impl TypedMethod for typed::$key {
                    const ROW: &'static Method = &row::$konst;
                    type Params = $params;
                }
                $(
                    impl TypedRequest for typed::$key {
                        type Result = $result;
                    }
                )?
            )?)*
        }
    };
}

/// The v1 rows at the top of this module (the name constants, [`METHODS`] and the [`typed`]
/// keys), the v2 rows in [`v2`].
macro_rules! define_methods {
    (v1 { $($v1:tt)* } v2 { $($v2:tt)* }) => {
        method_rows! { $($v1)* }

        /// The rows of ACP v2 (draft): its name constants, `METHODS` and `typed` keys. A method
        /// v2 keeps under the same name has a row here too, with v2's types.
        pub mod v2 {
            #[allow(clippy::wildcard_imports, reason = "the rows' columns are the parent's types")]
            use super::*;
            method_rows! { $($v2)* }
        }
    };
}

acp_method_table!(define_methods);

/// The v1 row for `name`, if ski knows the method in v1 ([`Generation::lookup`] for another
/// generation).
pub fn lookup(name: &str) -> Option<&'static Method> {
    Generation::V1.lookup(name)
}

/// Whether `name` is an extension method: ACP reserves names starting with `_` for them. An
/// unknown extension request gets -32601; an unknown extension notification is ignored.
pub fn is_extension(name: &str) -> bool {
    name.starts_with('_')
}

/// The v1 rows with the given stability.
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
    fn names_are_unique_within_a_generation() {
        for generation in Generation::ALL {
            let mut seen = HashSet::new();
            for method in generation.methods() {
                assert!(
                    seen.insert(method.name),
                    "duplicate method row {}",
                    method.name
                );
            }
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

    /// Each reference agent feature gates the one method it names, and only agent-side rows
    /// carry a gate or wait for `authenticate`.
    #[test]
    fn gates_and_authentication_are_agent_columns() {
        for feature in Feature::ALL {
            let gated: Vec<&str> = METHODS
                .iter()
                .filter(|m| m.gate == Some(Gate::Feature(feature)))
                .map(|m| m.name)
                .collect();
            assert_eq!(gated.len(), 1, "{feature} gates {gated:?}");
        }
        assert_eq!(
            lookup(AUTHENTICATE).and_then(|m| m.gate),
            Some(Gate::AuthMethods)
        );
        for method in METHODS.iter().filter(|m| m.side != Side::Agent) {
            assert_eq!(method.gate, None, "{}", method.name);
            assert!(!method.needs_auth, "{}", method.name);
        }
        let open: Vec<&str> = METHODS
            .iter()
            .filter(|m| m.side == Side::Agent && m.kind != Kind::Notification && !m.needs_auth)
            .map(|m| m.name)
            .collect();
        assert_eq!(open, [INITIALIZE, AUTHENTICATE, LOGOUT, AUTH_STATUS]);
    }

    /// A typed row has a result type exactly when it can be called as a request, and its key
    /// names its own row.
    #[test]
    fn typed_rows_fit_their_kind() {
        use crate::acp::{MethodParams, MethodResult};

        for method in METHODS {
            let typed = !matches!(
                MethodParams::decode(method.name, Some(serde_json::Value::Null)),
                Ok(MethodParams::Other { .. })
            );
            let has_result = !matches!(
                MethodResult::decode(method.name, serde_json::Value::Null),
                Ok(MethodResult::Other { .. })
            );
            if typed {
                assert_eq!(
                    has_result,
                    method.kind != Kind::Notification,
                    "{}",
                    method.name
                );
            } else {
                assert!(!has_result, "{}", method.name);
            }
        }
        assert_eq!(<typed::Prompt as TypedMethod>::ROW.name, SESSION_PROMPT);
        assert_eq!(<typed::Cancel as TypedMethod>::ROW.kind, Kind::Notification);
        assert_eq!(
            <typed::StopSession as TypedMethod>::ROW.gate,
            Some(Gate::Feature(Feature::Stop))
        );
    }

    /// The v2 rows are the methods of the stable v2 schema of npm-sdk 2.4.0 (its `x-method` and
    /// `x-side` annotations), each name once, with the agent's session baseline ungated.
    #[test]
    fn v2_rows_are_the_v2_schema() {
        let expected = [
            ("initialize", Side::Agent),
            ("auth/login", Side::Agent),
            ("auth/logout", Side::Agent),
            ("session/new", Side::Agent),
            ("session/list", Side::Agent),
            ("session/delete", Side::Agent),
            ("session/resume", Side::Agent),
            ("session/close", Side::Agent),
            ("tool_call/cancel", Side::Agent),
            ("terminal/cancel", Side::Agent),
            ("session/set_config_option", Side::Agent),
            ("session/prompt", Side::Agent),
            ("session/cancel", Side::Agent),
            ("session/request_permission", Side::Client),
            ("session/update", Side::Client),
            ("elicitation/create", Side::Client),
            ("elicitation/complete", Side::Client),
            ("$/cancel_request", Side::Both),
        ];
        let rows: Vec<(&str, Side)> = v2::METHODS.iter().map(|m| (m.name, m.side)).collect();
        assert_eq!(rows, expected);
        for method in v2::METHODS {
            assert_eq!(method.generation, Generation::V2, "{}", method.name);
            assert_eq!(Generation::V2.lookup(method.name), Some(method));
        }
        for name in [
            SESSION_NEW,
            SESSION_LIST,
            SESSION_RESUME,
            SESSION_CLOSE,
            SESSION_PROMPT,
            SESSION_CANCEL,
            SESSION_UPDATE,
        ] {
            assert_eq!(Generation::V2.lookup(name).unwrap().gate, None, "{name}");
        }
        assert_eq!(
            Generation::V2.lookup(v2::AUTH_LOGIN).unwrap().gate,
            Some(Gate::AuthMethods)
        );
        // What v2 dropped has no v2 row.
        for gone in [
            SESSION_LOAD,
            SESSION_SET_MODE,
            AUTHENTICATE,
            FS_READ_TEXT_FILE,
            TERMINAL_CREATE,
        ] {
            assert!(Generation::V2.lookup(gone).is_none(), "{gone}");
        }
        assert_eq!(
            <v2::typed::Prompt as TypedMethod>::ROW.generation,
            Generation::V2
        );
        assert_eq!(Generation::from_protocol_version(2), Some(Generation::V2));
        assert_eq!(Generation::V1.protocol_version(), 1);
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
