//! The client-side rows of the ACP suite: the target's client is started through its profile
//! commands (`client`, `client_two_turns`, `client_resume`, `client_drive`, `client_ws`) against
//! `ski-mock-agent` running a script the check writes, and judged from the mock's transcript
//! (every line both ways) and the client's JSON output and exit code, never by linking it.
//!
//! [`mock`] holds the shared machinery (scripts, transcripts, client runs) and [`control`] the
//! mock's control channel; the checks are grouped by what they exercise: [`tolerance`] (framing, ids, noise and
//! the process), [`permission`], [`fs`], [`terminal`], [`golden`] (updates echoed by
//! `client-echo-updates`), [`driver`] (the scripted driver of E-ACP-11) and [`reconnect`] (the
//! WebSocket client against a scripted peer of the runner).

pub mod control;
pub mod driver;
pub mod fs;
pub mod golden;
pub mod mock;
pub mod permission;
pub mod reconnect;
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
    ]
    .into_iter()
    .flatten()
    .collect()
}
