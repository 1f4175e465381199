//! Typed params and results chosen by method name: the bridge between a JSON-RPC message
//! (`method` plus raw `params`, or a raw `result` plus the method of the pending request) and
//! the ACP types.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::auth::{AuthStatus, AuthStatusRequest, AuthenticateRequest, AuthenticateResponse};
use super::auth::{LogoutRequest, LogoutResponse};
use super::config::{SetSessionConfigOptionRequest, SetSessionConfigOptionResponse};
use super::config::{SetSessionModeRequest, SetSessionModeResponse};
use super::config::{SetSessionModelRequest, SetSessionModelResponse};
use super::elicitation::CreateElicitationResponse;
use super::elicitation::{CompleteElicitationNotification, CreateElicitationRequest};
use super::extensions::{ExportSessionRequest, ExportSessionResponse};
use super::extensions::{StopSessionRequest, StopSessionResponse};
use super::fs::{ReadTextFileRequest, ReadTextFileResponse};
use super::fs::{WriteTextFileRequest, WriteTextFileResponse};
use super::initialize::{InitializeRequest, InitializeResponse};
use super::meta::Empty;
use super::methods;
use super::permission::{RequestPermissionRequest, RequestPermissionResponse};
use super::prompt::{CancelNotification, CancelRequestNotification, PromptRequest, PromptResponse};
use super::session::{CloseSessionRequest, CloseSessionResponse};
use super::session::{DeleteSessionRequest, DeleteSessionResponse};
use super::session::{ForkSessionRequest, ForkSessionResponse};
use super::session::{ListSessionsRequest, ListSessionsResponse};
use super::session::{LoadSessionRequest, LoadSessionResponse};
use super::session::{NewSessionRequest, NewSessionResponse};
use super::session::{ResumeSessionRequest, ResumeSessionResponse};
use super::session::{SessionIdRequest, SessionStatusResponse};
use super::session::{SetSessionTitleRequest, SetSessionTitleResponse};
use super::session_update::SessionNotification;
use super::terminal::{CreateTerminalRequest, CreateTerminalResponse};
use super::terminal::{KillTerminalRequest, KillTerminalResponse};
use super::terminal::{ReleaseTerminalRequest, ReleaseTerminalResponse};
use super::terminal::{TerminalOutputRequest, TerminalOutputResponse};
use super::terminal::{WaitForTerminalExitRequest, WaitForTerminalExitResponse};

/// Params or a result that do not fit the method they came with.
#[derive(Debug, thiserror::Error)]
#[error("invalid {part} for {method}: {source}")]
pub struct PayloadError {
    /// The method.
    pub method: String,
    /// `params` or `result`.
    pub part: &'static str,
    /// What serde found wrong.
    #[source]
    pub source: serde_json::Error,
}

fn decode<T: DeserializeOwned>(
    method: &str,
    part: &'static str,
    payload: Option<Value>,
) -> Result<T, PayloadError> {
    // Absent params read as an empty object, so `logout` without params decodes.
    let payload = payload.unwrap_or_else(|| Value::Object(Map::new()));
    serde_json::from_value(payload).map_err(|source| PayloadError {
        method: method.to_owned(),
        part,
        source,
    })
}

macro_rules! method_payloads {
    (
        requests { $( $rv:ident: $rm:path => $rp:ty, $rr:ty; )* }
        notifications { $( $nv:ident: $nm:path => $np:ty; )* }
    ) => {
        /// The typed params of a request or notification, chosen by method name.
        #[allow(clippy::large_enum_variant, reason = "decoded once per message and matched at once")]
        #[derive(Debug, Clone, PartialEq)]
        pub enum MethodParams {
            $( #[doc = concat!("Params of a `", stringify!($rv), "` request.")] $rv($rp), )*
            $( #[doc = concat!("Params of a `", stringify!($nv), "` notification.")] $nv($np), )*
            /// A method ski has no types for (extension methods among them), kept raw.
            Other {
                /// The method name.
                method: String,
                /// The params as sent.
                params: Option<Value>,
            },
        }

        impl MethodParams {
            /// Decodes `params` for `method`. A method ski has no types for gives `Other`.
            pub fn decode(method: &str, params: Option<Value>) -> Result<Self, PayloadError> {
                Ok(match method {
                    $( $rm => Self::$rv(decode(method, "params", params)?), )*
                    $( $nm => Self::$nv(decode(method, "params", params)?), )*
                    _ => Self::Other { method: method.to_owned(), params },
                })
            }

            /// The method name.
            pub fn method(&self) -> &str {
                match self {
                    $( Self::$rv(_) => $rm, )*
                    $( Self::$nv(_) => $nm, )*
                    Self::Other { method, .. } => method,
                }
            }

            /// The params as JSON; `None` only for `Other` without params.
            pub fn to_value(&self) -> Result<Option<Value>, serde_json::Error> {
                match self {
                    $( Self::$rv(params) => serde_json::to_value(params).map(Some), )*
                    $( Self::$nv(params) => serde_json::to_value(params).map(Some), )*
                    Self::Other { params, .. } => Ok(params.clone()),
                }
            }
        }

        /// The typed result of a request, chosen by the method of the request it answers.
        #[allow(clippy::large_enum_variant, reason = "decoded once per message and matched at once")]
        #[derive(Debug, Clone, PartialEq)]
        pub enum MethodResult {
            $( #[doc = concat!("Result of a `", stringify!($rv), "` request.")] $rv($rr), )*
            /// A method ski has no types for, kept raw.
            Other {
                /// The method name.
                method: String,
                /// The result as sent.
                result: Value,
            },
        }

        impl MethodResult {
            /// Decodes `result` as the answer to `method`.
            pub fn decode(method: &str, result: Value) -> Result<Self, PayloadError> {
                Ok(match method {
                    $( $rm => Self::$rv(decode(method, "result", Some(result))?), )*
                    _ => Self::Other { method: method.to_owned(), result },
                })
            }

            /// The method of the request this answers.
            pub fn method(&self) -> &str {
                match self {
                    $( Self::$rv(_) => $rm, )*
                    Self::Other { method, .. } => method,
                }
            }

            /// The result as JSON.
            pub fn to_value(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $( Self::$rv(result) => serde_json::to_value(result), )*
                    Self::Other { result, .. } => Ok(result.clone()),
                }
            }
        }
    };
}

method_payloads! {
    requests {
        Initialize: methods::INITIALIZE => InitializeRequest, InitializeResponse;
        Authenticate: methods::AUTHENTICATE => AuthenticateRequest, AuthenticateResponse;
        Logout: methods::LOGOUT => LogoutRequest, LogoutResponse;
        NewSession: methods::SESSION_NEW => NewSessionRequest, NewSessionResponse;
        LoadSession: methods::SESSION_LOAD => LoadSessionRequest, LoadSessionResponse;
        ListSessions: methods::SESSION_LIST => ListSessionsRequest, ListSessionsResponse;
        DeleteSession: methods::SESSION_DELETE => DeleteSessionRequest, DeleteSessionResponse;
        ResumeSession: methods::SESSION_RESUME => ResumeSessionRequest, ResumeSessionResponse;
        CloseSession: methods::SESSION_CLOSE => CloseSessionRequest, CloseSessionResponse;
        SetSessionMode: methods::SESSION_SET_MODE => SetSessionModeRequest, SetSessionModeResponse;
        SetSessionConfigOption: methods::SESSION_SET_CONFIG_OPTION => SetSessionConfigOptionRequest, SetSessionConfigOptionResponse;
        Prompt: methods::SESSION_PROMPT => PromptRequest, PromptResponse;
        RequestPermission: methods::SESSION_REQUEST_PERMISSION => RequestPermissionRequest, RequestPermissionResponse;
        ReadTextFile: methods::FS_READ_TEXT_FILE => ReadTextFileRequest, ReadTextFileResponse;
        WriteTextFile: methods::FS_WRITE_TEXT_FILE => WriteTextFileRequest, WriteTextFileResponse;
        CreateTerminal: methods::TERMINAL_CREATE => CreateTerminalRequest, CreateTerminalResponse;
        TerminalOutput: methods::TERMINAL_OUTPUT => TerminalOutputRequest, TerminalOutputResponse;
        WaitForTerminalExit: methods::TERMINAL_WAIT_FOR_EXIT => WaitForTerminalExitRequest, WaitForTerminalExitResponse;
        KillTerminal: methods::TERMINAL_KILL => KillTerminalRequest, KillTerminalResponse;
        ReleaseTerminal: methods::TERMINAL_RELEASE => ReleaseTerminalRequest, ReleaseTerminalResponse;
        CreateElicitation: methods::ELICITATION_CREATE => CreateElicitationRequest, CreateElicitationResponse;
        ForkSession: methods::SESSION_FORK => ForkSessionRequest, ForkSessionResponse;
        ArchiveSession: methods::SESSION_ARCHIVE => SessionIdRequest, Empty;
        UnarchiveSession: methods::SESSION_UNARCHIVE => SessionIdRequest, Empty;
        SessionStatus: methods::SESSION_STATUS => SessionIdRequest, SessionStatusResponse;
        SetSessionTitle: methods::SESSION_SET_TITLE => SetSessionTitleRequest, SetSessionTitleResponse;
        AuthStatus: methods::AUTH_STATUS => AuthStatusRequest, AuthStatus;
        SetSessionModel: methods::SESSION_SET_MODEL => SetSessionModelRequest, SetSessionModelResponse;
        ExportSession: methods::SESSION_EXPORT => ExportSessionRequest, ExportSessionResponse;
        StopSession: methods::SESSION_STOP => StopSessionRequest, StopSessionResponse;
    }
    notifications {
        Cancel: methods::SESSION_CANCEL => CancelNotification;
        SessionUpdate: methods::SESSION_UPDATE => SessionNotification;
        CompleteElicitation: methods::ELICITATION_COMPLETE => CompleteElicitationNotification;
        CancelRequest: methods::CANCEL_REQUEST => CancelRequestNotification;
        AuthStatusUpdate: methods::AUTH_STATUS_UPDATE => AuthStatus;
    }
}
