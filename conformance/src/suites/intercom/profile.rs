//! The intercom profile's knobs for a build that is not the reference: how its readiness shows
//! (a JSON object, a log line, or its MCP port accepting connections), where its MCP endpoint is,
//! which stream it logs on, whether its stdin stays open, whether MCP-mode configs carry the
//! agent settings too, and a line limit of its own. Every knob defaults to what the reference
//! does, so a profile that sets none is judged as before.

use ski::transport::child::OutputStream;

use crate::vocabulary::{Setting, intercom};
use crate::{CheckError, Ctx};

/// How a started target says it is ready (`settings.ready`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `json` (the default): the first JSON object on stdout; in MCP mode it names `mcp_url`.
    Json,
    /// `line`: the first line of stdout or stderr containing `settings.ready_line`.
    Line(String),
    /// `port`: a TCP connection to `{mcp_port}` on 127.0.0.1 succeeds.
    Port,
}

/// What the target's stdin is once it started (`settings.stdin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdin {
    /// `open` (the default): a pipe the harness holds until the target ends.
    Open,
    /// `closed`: end of file at once.
    Closed,
}

/// How the operator decides an approval in the rows whose document says "approves" rather than
/// "clicks" (S043, S048): `settings.approval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `buttons` (the default): Accept and Reject buttons on the request; Reject opens a modal
    /// for the reason.
    Buttons,
    /// `reply`: the request is text, recognised by `approval_marker`, and the operator answers
    /// with a reply in its thread: `approve_reply`, or `reject_reply` with `{reason}`; `{bot}`
    /// is the bot's user id (a mention).
    Reply {
        marker: String,
        approve: String,
        reject: String,
    },
}

/// The knobs of one profile's `[suites.intercom.settings]`.
#[derive(Debug, Clone)]
pub struct Knobs {
    pub ready: Readiness,
    /// `mcp_url`: the MCP endpoint's template (`{mcp_port}` allowed), used when the readiness
    /// says no URL.
    pub mcp_url: Option<String>,
    /// `log_stream`: `stderr` (the default) or `stdout`.
    pub log_stream: OutputStream,
    pub stdin: Stdin,
    /// `agent_in_mcp_mode = "true"`: MCP-mode configs carry the rendered `agent_template` and
    /// `acp_template` too.
    pub agent_in_mcp_mode: bool,
    /// `max_line_length`: the build's own fixed line limit (bytes), instead of the one the
    /// harness sets through `{max_line_length}`.
    pub max_line_length: Option<usize>,
    pub decision: Decision,
}

impl Knobs {
    /// Reads the knobs; a value the harness does not know is the profile's error.
    pub fn read(ctx: &Ctx) -> Result<Knobs, CheckError> {
        let raw = |setting: &Setting| ctx.section().settings.get(setting.name).cloned();
        let bad = |name: &str, value: &str, allowed: &str| {
            CheckError::harness(format!("settings.{name} = {value:?}: expected {allowed}"))
        };
        let ready = match raw(&intercom::READY).as_deref() {
            None | Some("json") => Readiness::Json,
            Some("port") => Readiness::Port,
            Some("line") => {
                Readiness::Line(ctx.setting(&intercom::READY_LINE)?.ok_or_else(|| {
                    CheckError::harness("settings.ready = \"line\" needs settings.ready_line")
                })?)
            }
            Some(other) => return Err(bad("ready", other, "\"json\", \"line\" or \"port\"")),
        };
        let log_stream = match raw(&intercom::LOG_STREAM).as_deref() {
            None | Some("stderr") => OutputStream::Stderr,
            Some("stdout") => OutputStream::Stdout,
            Some(other) => return Err(bad("log_stream", other, "\"stderr\" or \"stdout\"")),
        };
        let stdin = match raw(&intercom::STDIN).as_deref() {
            None | Some("open") => Stdin::Open,
            Some("closed") => Stdin::Closed,
            Some(other) => return Err(bad("stdin", other, "\"open\" or \"closed\"")),
        };
        let agent_in_mcp_mode = match raw(&intercom::AGENT_IN_MCP_MODE).as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => return Err(bad("agent_in_mcp_mode", other, "\"true\" or \"false\"")),
        };
        let max_line_length = match raw(&intercom::MAX_LINE_LENGTH) {
            None => None,
            Some(text) => Some(
                text.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad("max_line_length", &text, "a positive number of bytes"))?,
            ),
        };
        let decision = match raw(&intercom::APPROVAL).as_deref() {
            None | Some("buttons") => Decision::Buttons,
            Some("reply") => Decision::Reply {
                marker: raw(&intercom::APPROVAL_MARKER).unwrap_or_else(|| "approve".into()),
                approve: raw(&intercom::APPROVE_REPLY).unwrap_or_else(|| "<@{bot}> approve".into()),
                reject: raw(&intercom::REJECT_REPLY)
                    .unwrap_or_else(|| "<@{bot}> reject {reason}".into()),
            },
            Some(other) => return Err(bad("approval", other, "\"buttons\" or \"reply\"")),
        };
        if ready != Readiness::Json && raw(&intercom::MCP_URL).is_none() {
            return Err(CheckError::harness(
                "settings.ready other than \"json\" needs settings.mcp_url (for example \"http://127.0.0.1:{mcp_port}/mcp\")",
            ));
        }
        Ok(Knobs {
            ready,
            mcp_url: raw(&intercom::MCP_URL),
            log_stream,
            stdin,
            agent_in_mcp_mode,
            max_line_length,
            decision,
        })
    }
}

/// The stall detector's placeholders (`{stall_enabled}`, `{inactivity_ms}`, `{inactivity_s}`,
/// `{escalation_ms}`, `{escalation_s}`, `{max_retries}`) for thresholds and retries, or for a
/// detector that is off (`None`): rendered in `acp_template` and in `config_template` alike, so
/// a build whose `[stall]` table is required in every config places it there.
pub fn stall_placeholders(stall: Option<(u64, u64, u32)>) -> Vec<(&'static str, String)> {
    let (enabled, inactivity, escalation, retries) = match stall {
        Some((inactivity, escalation, retries)) => ("true", inactivity, escalation, retries),
        None => ("false", 600_000, 600_000, 3),
    };
    vec![
        ("stall_enabled", enabled.to_string()),
        ("inactivity_ms", inactivity.to_string()),
        ("inactivity_s", seconds(inactivity).to_string()),
        ("escalation_ms", escalation.to_string()),
        ("escalation_s", seconds(escalation).to_string()),
        ("max_retries", retries.to_string()),
    ]
}

/// Whole seconds, rounded up, for a build that only takes seconds.
pub fn seconds(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// The time (ms) a target really has for a knob given as `ms`: rounded up to whole seconds
/// when the profile's `acp_template` or `config_template` places the knob's seconds counterpart (`{NAME_s}`).
pub fn in_force_ms(ctx: &Ctx, ms: u64, seconds_placeholder: &str) -> u64 {
    let placeholder = format!("{{{seconds_placeholder}}}");
    let settings = &ctx.section().settings;
    let uses_seconds = ["acp_template", "config_template"].iter().any(|name| {
        settings
            .get(*name)
            .is_some_and(|t| t.contains(&placeholder))
    });
    if uses_seconds { seconds(ms) * 1000 } else { ms }
}

#[cfg(test)]
mod tests {
    use super::seconds;

    #[test]
    fn seconds_round_up() {
        assert_eq!(
            vec![0, 1, 1, 1, 2, 600],
            [0, 1, 999, 1000, 1001, 600_000].map(seconds).to_vec()
        );
    }
}
