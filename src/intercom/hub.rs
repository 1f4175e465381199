//! The server's shared state and the operations both sides use: sessions and their threads,
//! workspace-to-channel resolution, ending sessions, and the authorization guard.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::config::{Config, Mode, Workspace};
use super::driver::{AgentDriver, McpDriver};
use super::slack::Poster;
use super::store::{NewSession, Session, Store, StoreError};
use super::vocab::{SessionStatus, WorkMode};

/// Everything a handler needs.
pub struct Hub {
    pub mode: Mode,
    config: RwLock<Arc<Config>>,
    pub store: Store,
    pub poster: Poster,
    /// The MCP driver (its waits exist in both modes' MCP endpoint).
    pub mcp: Arc<McpDriver>,
    /// The driver that starts and answers agents in this mode.
    pub driver: Arc<dyn AgentDriver>,
    root_lock: tokio::sync::Mutex<()>,
    /// Held from the capacity check to the agent's registration, so the limit holds under
    /// concurrent `session-start`s.
    start_lock: tokio::sync::Mutex<()>,
}

/// Where a session's messages go, resolved when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub workspace: Option<Workspace>,
    pub channel_id: Option<String>,
}

impl Hub {
    /// Wraps the parts.
    pub fn new(
        mode: Mode,
        config: Config,
        store: Store,
        poster: Poster,
        mcp: Arc<McpDriver>,
        driver: Arc<dyn AgentDriver>,
    ) -> Hub {
        Hub {
            mode,
            config: RwLock::new(Arc::new(config)),
            store,
            poster,
            mcp,
            driver,
            root_lock: tokio::sync::Mutex::new(()),
            start_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The configuration in force (the workspace mapping may have been reloaded).
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Swaps in a new workspace mapping; sessions already started keep their channel.
    pub fn replace_workspaces(&self, workspaces: Vec<Workspace>) {
        let mut guard = self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = (**guard).clone();
        next.workspaces = workspaces;
        *guard = Arc::new(next);
    }

    /// The authorization guard: only users listed in `[slack] authorized_user_ids` may act.
    pub fn is_authorized(&self, user: &str) -> bool {
        let config = self.config();
        let authorized: HashSet<&str> = config
            .slack
            .authorized_user_ids
            .iter()
            .map(String::as_str)
            .collect();
        authorized.contains(user)
    }

    /// Resolves an MCP connection's query: `workspace_id` wins; a bare `channel_id` is used with
    /// a deprecation warning; an unknown workspace or neither leaves the session local-only.
    pub fn place(&self, workspace_id: Option<&str>, channel_id: Option<&str>) -> Placement {
        let config = self.config();
        let channel_id = channel_id.filter(|c| !c.is_empty());
        if let Some(channel) = channel_id {
            tracing::warn!(
                channel_id = channel,
                "the channel_id query parameter is deprecated; use workspace_id and a [[workspace]] entry"
            );
        }
        match workspace_id.filter(|w| !w.is_empty()) {
            Some(id) => match config.channel_for(id) {
                Some(workspace) => Placement {
                    workspace: Some(workspace.clone()),
                    channel_id: Some(workspace.channel_id.clone()),
                },
                None => {
                    tracing::warn!(
                        workspace_id = id,
                        "workspace_id not found in [[workspace]] config; session will run without Slack channel routing"
                    );
                    Placement {
                        workspace: None,
                        channel_id: None,
                    }
                }
            },
            None => {
                if channel_id.is_none() {
                    tracing::info!("no workspace_id or channel_id; session runs local-only");
                }
                Placement {
                    workspace: None,
                    channel_id: channel_id.map(str::to_string),
                }
            }
        }
    }

    /// Creates an active session and posts its thread root when it has a channel.
    pub async fn start_session(
        &self,
        protocol_mode: Mode,
        owner: &str,
        placement: &Placement,
        prompt: Option<&str>,
    ) -> Result<Session, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let workspace_root = placement
            .workspace
            .as_ref()
            .and_then(|w| w.path.as_ref())
            .map(|p| p.display().to_string());
        let session = self.store.create_session(&NewSession {
            id: &id,
            owner_user_id: owner,
            protocol_mode,
            mode: if placement.channel_id.is_some() {
                WorkMode::Remote
            } else {
                WorkMode::Local
            },
            workspace_id: placement.workspace.as_ref().map(|w| w.id.as_str()),
            workspace_root: workspace_root.as_deref(),
            channel_id: placement.channel_id.as_deref(),
            prompt,
        })?;
        tracing::info!(
            session_id = %session.id,
            protocol_mode = protocol_mode.as_str(),
            channel_id = ?session.channel_id,
            workspace_id = ?session.workspace_id,
            "session started"
        );
        let workspace = placement
            .workspace
            .as_ref()
            .map(|w| w.label.clone().unwrap_or_else(|| w.id.clone()))
            .unwrap_or_else(|| "direct connection".into());
        let text = format!(
            "🤖 Session `{}` started ({}) in `{workspace}`",
            session.short_id(),
            protocol_mode.as_str().to_uppercase()
        );
        self.post_in_session(&session.id, &text, None).await;
        Ok(self.store.session(&id)?.unwrap_or(session))
    }

    /// `session-start` in ACP mode: the session is placed in the command's channel (with the
    /// workspace mapped to it, whose path is the agent's directory), its thread root posted, and
    /// its agent spawned. Refused with nothing created when the concurrent-session limit is
    /// reached.
    pub async fn start_agent_session(
        &self,
        owner: &str,
        channel: &str,
        prompt: &str,
    ) -> Result<Session, String> {
        let _serial = self.start_lock.lock().await;
        self.driver.check_capacity().map_err(|e| e.to_string())?;
        let config = self.config();
        let workspace = config
            .workspaces
            .iter()
            .find(|w| w.channel_id == channel)
            .cloned();
        let placement = Placement {
            workspace: workspace.clone(),
            channel_id: Some(channel.to_string()),
        };
        let session = self
            .start_session(Mode::Acp, owner, &placement, Some(prompt))
            .await
            .map_err(|e| e.to_string())?;
        let start = super::driver::SessionStart {
            session_id: session.id.clone(),
            prompt: prompt.to_string(),
            workspace_path: workspace.and_then(|w| w.path),
        };
        if let Err(error) = self.driver.start_session(start).await {
            self.end_session(&session.id, SessionStatus::Interrupted, &error.to_string())
                .await;
            return Err(error.to_string());
        }
        Ok(session)
    }

    /// Posts in the session's thread; the first post is the thread root and its `ts` becomes
    /// the session's `thread_ts`, which never changes after. Answers the channel and `ts`, or
    /// `None` for a local-only session or a failed post (logged).
    pub async fn post_in_session(
        &self,
        session_id: &str,
        text: &str,
        blocks: Option<&Value>,
    ) -> Option<(String, String)> {
        let session = match self.store.session(session_id) {
            Ok(Some(session)) => session,
            Ok(None) => return None,
            Err(error) => {
                tracing::error!(%error, session_id, "cannot read the session");
                return None;
            }
        };
        let channel = session.channel_id.clone()?;
        if let Some(thread_ts) = &session.thread_ts {
            return self
                .post_logged(&channel, Some(thread_ts), text, blocks)
                .await;
        }
        // Only one root per session: the lock holds other first posts until the root is stored.
        let _root = self.root_lock.lock().await;
        if let Ok(Some(fresh)) = self.store.session(session_id)
            && let Some(thread_ts) = fresh.thread_ts
        {
            drop(_root);
            return self
                .post_logged(&channel, Some(&thread_ts), text, blocks)
                .await;
        }
        let (channel, ts) = self.post_logged(&channel, None, text, blocks).await?;
        match self.store.set_thread_ts(session_id, &ts) {
            Ok(Some(thread_ts)) => {
                tracing::info!(session_id, %thread_ts, "thread root recorded");
            }
            Ok(None) => {}
            Err(error) => tracing::error!(%error, session_id, "cannot record thread_ts"),
        }
        Some((channel, ts))
    }

    async fn post_logged(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
        blocks: Option<&Value>,
    ) -> Option<(String, String)> {
        match self.poster.post(channel, thread_ts, text, blocks).await {
            Ok(ts) => Some((channel.to_string(), ts)),
            Err(error) => {
                tracing::error!(%error, channel, "cannot post to slack");
                None
            }
        }
    }

    /// Ends a live session (`terminated` or `interrupted`): the agent's waits are answered and
    /// "Session ended" is posted in its thread. Answers false when it had already ended.
    pub async fn end_session(&self, session_id: &str, status: SessionStatus, reason: &str) -> bool {
        let ended = match self.store.end_session(session_id, status) {
            Ok(ended) => ended,
            Err(error) => {
                tracing::error!(%error, session_id, "cannot end the session");
                return false;
            }
        };
        if let Err(error) = self.driver.interrupt(session_id).await {
            tracing::warn!(%error, session_id, "interrupt failed");
        }
        if self.driver.protocol_mode() != Mode::Mcp {
            let _ = self.mcp.interrupt(session_id).await;
        }
        if ended {
            tracing::info!(
                session_id,
                status = status.as_str(),
                reason,
                "session ended"
            );
            let short = session_id.get(..8).unwrap_or(session_id);
            self.post_in_session(
                session_id,
                &format!("🏁 Session ended: `{short}` ({status}: {reason})"),
                None,
            )
            .await;
        }
        ended
    }
}
