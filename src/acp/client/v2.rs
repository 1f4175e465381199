//! The client's side of ACP v2 (draft): `initialize` asking for a version (v2's params when it
//! asks for 2, read back in the form of the version the agent answered), the v2 session
//! requests, the prompt acknowledgement and `tool_call/cancel`; [`as_v2`] reads a followed
//! session's updates in v2's form.

use super::{Client, ClientError};
use crate::acp::methods::{self, v2 as rows};
use crate::acp::v2::{
    self, CancelToolCallRequest, NewSessionRequest, NewSessionResponse, PromptResponse,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
};
use crate::acp::{
    Empty, Extra, InitializeRequest, InitializeResponse, PromptRequest, SessionNotification,
};

/// What `initialize` settled on.
#[derive(Debug, Clone, PartialEq)]
pub enum Negotiated {
    /// The agent answered with protocol version 1.
    V1(Box<InitializeResponse>),
    /// The agent answered with protocol version 2.
    V2(Box<v2::InitializeResponse>),
}

impl Negotiated {
    /// The version the agent answered.
    pub fn protocol_version(&self) -> u16 {
        match self {
            Negotiated::V1(response) => response.protocol_version,
            Negotiated::V2(response) => response.protocol_version,
        }
    }
}

impl Client {
    /// `initialize` asking for `version`: 2 (or more) sends v2's params (`info`,
    /// `capabilities`), 1 v1's; the result is read as the generation of the version the agent
    /// answered (any version but 2 is read as v1).
    pub async fn initialize_as(&self, version: u16) -> Result<Negotiated, ClientError> {
        let config = &self.inner.config;
        let result: serde_json::Value = if version >= v2::PROTOCOL_VERSION {
            let request = v2::InitializeRequest {
                protocol_version: version,
                info: config.client_info.clone(),
                capabilities: v2::ClientCapabilities {
                    auth: None,
                    elicitation: config.capabilities().elicitation,
                    extra: Extra::new(),
                },
                extra: Extra::new(),
            };
            self.request(rows::INITIALIZE, &request).await?
        } else {
            let request = InitializeRequest {
                protocol_version: version,
                client_capabilities: Some(config.capabilities()),
                client_info: Some(config.client_info.clone()),
                extra: Extra::new(),
            };
            self.request(methods::INITIALIZE, &request).await?
        };
        let failed = |source| ClientError::Call {
            method: methods::INITIALIZE.to_owned(),
            source: crate::jsonrpc::CallError::Decode(source),
        };
        let answered = result
            .get("protocolVersion")
            .and_then(serde_json::Value::as_u64);
        if answered == Some(u64::from(v2::PROTOCOL_VERSION)) {
            self.inner.services.router.speak_v2();
            serde_json::from_value(result)
                .map(|response| Negotiated::V2(Box::new(response)))
                .map_err(failed)
        } else {
            serde_json::from_value(result)
                .map(|response| Negotiated::V1(Box::new(response)))
                .map_err(failed)
        }
    }

    /// `session/new` (v2).
    pub async fn new_session_v2(
        &self,
        request: &NewSessionRequest,
    ) -> Result<NewSessionResponse, ClientError> {
        let response: NewSessionResponse = self.request(rows::SESSION_NEW, request).await?;
        self.adopt_session(&response.session_id);
        Ok(response)
    }

    /// `session/prompt` (v2): answered once the agent accepted the prompt; the turn's end is
    /// the idle `state_update` on the session's updates.
    pub async fn prompt_v2(&self, request: &PromptRequest) -> Result<PromptResponse, ClientError> {
        self.adopt_session(&request.session_id);
        self.request(rows::SESSION_PROMPT, request).await
    }

    /// `session/set_config_option` (v2).
    pub async fn set_config_option_v2(
        &self,
        request: &SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, ClientError> {
        self.request(rows::SESSION_SET_CONFIG_OPTION, request).await
    }

    /// `tool_call/cancel` of one tool call.
    pub async fn cancel_tool_call(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Empty, ClientError> {
        let request = CancelToolCallRequest {
            session_id: session_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            extra: Extra::new(),
        };
        self.request(rows::TOOL_CALL_CANCEL, &request).await
    }
}

/// A followed session's update in v2's form; `None` for one that is no v2 update (a kind v2
/// does not have, or one missing what v2 requires, such as a chunk's `messageId`).
pub fn as_v2(notification: &SessionNotification) -> Option<v2::SessionUpdate> {
    let value = serde_json::to_value(&notification.update).ok()?;
    serde_json::from_value(value).ok()
}
