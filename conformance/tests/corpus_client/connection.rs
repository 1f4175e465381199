//! The corpus client's connection to its agent: the agent started through `transport::child`,
//! one request at a time, and every message that arrives while it waits handled in order
//! (requests answered, updates printed, noise ignored), each as the client's defect says.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use ski::acp::{
    RequestPermissionRequest, SessionNotification, SessionUpdate, client::choose, methods,
};
use ski::jsonrpc::{Message, RequestId, RpcError, VersionField, decode_params};
use ski::transport::child::{Child, ChildSpec, spawn};

use super::Defect;
use super::output;

/// The agent process and what the client knows of the conversation.
pub struct Connection {
    agent: Child,
    defect: Defect,
    next_id: i64,
    /// The session whose updates are printed, once known.
    session: Option<String>,
    /// Whether the last prompt was answered (its turn is over).
    turn_answered: bool,
}

impl Connection {
    /// Starts the agent `argv`.
    pub fn start(argv: &[String], defect: Defect) -> Result<Self, String> {
        let spec = ChildSpec::from_argv("agent", argv)
            .ok_or("--agent-cmd is empty")?
            .grace(Duration::from_secs(2));
        let agent = spawn(spec).map_err(|e| format!("cannot start the agent: {e}"))?;
        Ok(Self {
            agent,
            defect,
            next_id: 0,
            session: None,
            turn_answered: false,
        })
    }

    /// From now on the updates of `session` are printed.
    pub fn follow(&mut self, session: &str) {
        self.session = Some(session.to_owned());
    }

    /// Sends request `method` and handles what arrives until its answer: `Err` when the
    /// connection broke, `Ok(Err)` for an error answer.
    pub async fn call<P: Serialize, R: DeserializeOwned>(
        &mut self,
        method: &str,
        params: &P,
    ) -> Result<Result<R, RpcError>, String> {
        let id = RequestId::from(self.next_id);
        self.next_id += 1;
        let params = serde_json::to_value(params).map_err(|e| e.to_string())?;
        if method == methods::SESSION_PROMPT {
            self.turn_answered = false;
        }
        self.send(Message::request(id.clone(), method, Some(params)))
            .await?;
        loop {
            let Some(line) = self.next_line().await? else {
                return Err(format!(
                    "the agent ended its output before answering {method}"
                ));
            };
            let message = match ski::jsonrpc::decode(line.as_bytes(), VersionField::Required) {
                Ok(message) => message,
                Err(error) => {
                    eprintln!("corpus client: ignored a line that is no message ({error})");
                    continue;
                }
            };
            match message {
                Message::Response(response)
                    if response.id == id || self.defect == Defect::AnswersInOrder =>
                {
                    self.turn_answered = method == methods::SESSION_PROMPT;
                    return Ok(match response.result {
                        Ok(result) => Ok(serde_json::from_value(result)
                            .map_err(|e| format!("the answer to {method} does not decode: {e}"))?),
                        Err(error) => Err(error),
                    });
                }
                Message::Response(response) => {
                    eprintln!("corpus client: ignored an answer to id {}", response.id);
                }
                Message::Request(request) => {
                    let answer = answer(&request.method, request.params);
                    self.send(match answer {
                        Ok(result) => Message::success(request.id, result),
                        Err(error) => Message::error(request.id, error),
                    })
                    .await?;
                }
                Message::Notification(notification) => {
                    self.notified(&notification.method, notification.params)
                        .await?;
                }
            }
        }
    }

    /// Handles a notification of the agent.
    async fn notified(&mut self, method: &str, params: Option<Value>) -> Result<(), String> {
        if method == methods::SESSION_UPDATE {
            return self.update(params);
        }
        if self.defect == Defect::AnswersNotifications {
            let error = RpcError::method_not_found(method);
            return self.send(Message::error(RequestId::Null, error)).await;
        }
        Ok(())
    }

    /// Prints a `session/update` of the followed session, if it is valid and of a known kind.
    fn update(&mut self, params: Option<Value>) -> Result<(), String> {
        let Some(session) = self.session.clone() else {
            return Ok(());
        };
        if self.defect == Defect::FailsOnLateUpdates && self.turn_answered {
            return Err("a session/update arrived after its turn's result".to_owned());
        }
        if self.defect == Defect::PrintsInvalidUpdates {
            let params = params.unwrap_or(Value::Null);
            if params.get("sessionId").and_then(Value::as_str) == Some(session.as_str()) {
                output::raw_update(&session, &params["update"]);
            }
            return Ok(());
        }
        let notification: SessionNotification = match decode_params(params) {
            Ok(notification) => notification,
            Err(error) => {
                eprintln!(
                    "corpus client: left out an invalid update ({})",
                    error.message
                );
                return Ok(());
            }
        };
        if notification.session_id != session && self.defect != Defect::MixesSessions {
            return Ok(());
        }
        if let SessionUpdate::Unknown(raw) = &notification.update {
            if self.defect == Defect::RefusesUnknownKinds {
                return Err(format!("an update of an unknown kind: {raw}"));
            }
            return Ok(());
        }
        output::update(&session, &notification.update);
        Ok(())
    }

    async fn send(&mut self, message: Message) -> Result<(), String> {
        let line = message.to_line().map_err(|e| e.to_string())?;
        self.agent
            .send_line(&line)
            .await
            .map_err(|e| format!("cannot write to the agent: {e}"))
    }

    async fn next_line(&mut self) -> Result<Option<String>, String> {
        self.agent
            .next_line()
            .await
            .map_err(|e| format!("cannot read the agent: {e}"))
    }

    /// Ends the agent: closes its stdin, handles what it still writes until it exits, and ends
    /// its group once `grace` has passed.
    pub async fn end(mut self, grace: Duration) -> Result<(), String> {
        self.agent.close_stdin();
        let exited = self.agent.exited();
        let drained = async {
            while let Some(line) = self.next_line().await? {
                if let Ok(Message::Notification(n)) =
                    ski::jsonrpc::decode(line.as_bytes(), VersionField::Required)
                    && n.method == methods::SESSION_UPDATE
                {
                    self.update(n.params)?;
                }
            }
            Ok::<(), String>(())
        };
        let outcome = tokio::time::timeout(grace, async {
            let drained = drained.await;
            let _ = exited.await;
            drained
        })
        .await;
        if outcome.is_err() && self.defect == Defect::LeavesAgentRunning {
            eprintln!("corpus client: the agent did not exit; leaving it running");
            std::process::exit(0);
        }
        let _ = self.agent.shutdown().await;
        outcome.unwrap_or(Ok(()))
    }
}

/// The answer to an agent's request.
fn answer(method: &str, params: Option<Value>) -> Result<Value, RpcError> {
    if method != methods::SESSION_REQUEST_PERMISSION {
        return Err(RpcError::method_not_found(method));
    }
    let request: RequestPermissionRequest = decode_params(params)?;
    serde_json::to_value(choose(&request.options, true))
        .map_err(|e| RpcError::internal_error(e.to_string()))
}
