//! The sessions this client has: created (`session/new`, `session/fork`), loaded or resumed by
//! it, or prompted. The agent's file-system requests must name one of them; another id is
//! refused with `-32602`.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use crate::jsonrpc::RpcError;

/// The ids of the client's sessions.
#[derive(Debug, Default)]
pub(crate) struct KnownSessions {
    ids: Mutex<HashSet<String>>,
}

impl KnownSessions {
    /// Records a session of this client.
    pub(crate) fn adopt(&self, session_id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if !ids.contains(session_id) {
            ids.insert(session_id.to_owned());
        }
    }

    /// Fails unless `session_id` is a session of this client.
    pub(crate) fn check(&self, session_id: &str) -> Result<(), RpcError> {
        let ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if ids.contains(session_id) {
            Ok(())
        } else {
            Err(RpcError::invalid_params(format!(
                "unknown session {session_id}: this client did not create, load or prompt it"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::ErrorCode;

    #[test]
    fn only_adopted_sessions_pass() {
        let sessions = KnownSessions::default();
        let error = sessions.check("s1").expect_err("unknown");
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        let reason = error.data.as_ref().and_then(|data| data["reason"].as_str());
        assert!(
            reason.is_some_and(|reason| reason.contains("unknown session s1")),
            "{error:?}"
        );
        sessions.adopt("s1");
        sessions.adopt("s1");
        assert!(sessions.check("s1").is_ok());
        assert!(sessions.check("s2").is_err());
    }
}
