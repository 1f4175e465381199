//! The scenarios of the prompt-as-command vocabulary by name: what a `scenario` step and a
//! `run_scenario` prompt name.

/// A scenario of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Every stable `session/update` kind.
    SessionUpdates,
    /// Every content block kind.
    Content,
    /// Tool calls created and updated, with content, a diff and locations.
    ToolCalls,
    /// Every stable agent-to-client request.
    Callbacks,
    /// Elicitation requests only.
    Elicitations,
    /// Reports whether a `session/cancel` arrived.
    CancelStatus,
    /// Waits for `session/cancel`, then ends the turn `cancelled`.
    WaitForCancel,
    /// All of the above in order (except waiting for a cancel).
    Full,
}

impl Scenario {
    /// The canonical names.
    pub const NAMES: &'static [&'static str] = &[
        "session_updates",
        "content",
        "tool_calls",
        "callbacks",
        "elicitations",
        "cancel_status",
        "wait_for_cancel",
        "full",
    ];

    /// Parses a name or alias (case-insensitive, surrounding space ignored).
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "session_updates" | "session updates" | "updates" => Scenario::SessionUpdates,
            "content" => Scenario::Content,
            "tool_calls" | "tool calls" | "tools" => Scenario::ToolCalls,
            "callbacks" | "client_callbacks" | "client callbacks" => Scenario::Callbacks,
            "elicitations" | "elicitation" | "elicit" => Scenario::Elicitations,
            "cancel_status" | "cancel status" | "cancel" => Scenario::CancelStatus,
            "wait_for_cancel" | "wait for cancel" => Scenario::WaitForCancel,
            "full" | "all" => Scenario::Full,
            _ => return None,
        })
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::SessionUpdates => "session_updates",
            Scenario::Content => "content",
            Scenario::ToolCalls => "tool_calls",
            Scenario::Callbacks => "callbacks",
            Scenario::Elicitations => "elicitations",
            Scenario::CancelStatus => "cancel_status",
            Scenario::WaitForCancel => "wait_for_cancel",
            Scenario::Full => "full",
        }
    }
}
