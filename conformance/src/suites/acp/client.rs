//! The client-side rows of the ACP suite: the target's client is started through its profile
//! commands (`client`, `client_two_turns`, `client_resume`, `client_drive`, `client_ws`,
//! `client_http`, `client_http_ws`) against
//! `ski-mock-agent` running a script the check writes, and judged from the mock's transcript
//! (every line both ways) and the client's JSON output and exit code, never by linking it.
//!
//! [`mock`] holds the shared machinery (scripts, transcripts, client runs) and [`control`] the
//! mock's control channel; the checks are grouped by what they exercise: [`tolerance`] (framing, ids, noise and
//! the process), [`permission`], [`fs`], [`terminal`], [`golden`] (updates echoed by
//! `client-echo-updates`), [`driver`] (the scripted driver of E-ACP-11), [`reconnect`] (the
//! WebSocket client against a scripted peer of the runner) and [`http`] (the client side of ACP's
//! remote transport RFD, `client_http` and `client_http_ws` against the runner's recording
//! [`front`]: the mock agent's `/acp` endpoint behind the runner's own HTTP [`relay`]).

pub mod control;
pub mod driver;
pub mod front;
pub mod fs;
pub mod golden;
pub mod http;
pub mod mock;
pub mod permission;
pub mod reconnect;
pub mod relay;
pub mod terminal;
pub mod tolerance;

use crate::check::Check;

/// Every client-side check.
pub fn checks() -> Vec<Check> {
    [
        tolerance::checks(),
        permission::checks(),
        fs::checks(),
        terminal::checks(),
        golden::checks(),
        driver::checks(),
        reconnect::checks(),
        http::checks(),
    ]
    .into_iter()
    .flatten()
    .collect()
}
