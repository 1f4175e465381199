//! The nine intercom tools, named once: [`ToolName`] is the list the tool listing, the dispatch
//! and the recorded `last_tool` read, with each tool's description and input schema.

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

/// One of the nine tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    CheckClearance,
    CheckDiff,
    AutoCheck,
    Transmit,
    Broadcast,
    Reboot,
    SwitchFreq,
    Standby,
    Ping,
}

impl ToolName {
    /// Every tool, in the order `tools/list` gives them.
    pub const ALL: [ToolName; 9] = [
        ToolName::CheckClearance,
        ToolName::CheckDiff,
        ToolName::AutoCheck,
        ToolName::Transmit,
        ToolName::Broadcast,
        ToolName::Reboot,
        ToolName::SwitchFreq,
        ToolName::Standby,
        ToolName::Ping,
    ];

    /// The tool's name in `tools/list` and `tools/call`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolName::CheckClearance => "check_clearance",
            ToolName::CheckDiff => "check_diff",
            ToolName::AutoCheck => "auto_check",
            ToolName::Transmit => "transmit",
            ToolName::Broadcast => "broadcast",
            ToolName::Reboot => "reboot",
            ToolName::SwitchFreq => "switch_freq",
            ToolName::Standby => "standby",
            ToolName::Ping => "ping",
        }
    }

    /// The tool called `name`, if any.
    pub fn from_name(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|tool| tool.as_str() == name)
    }

    /// What the tool does, as `tools/list` says it.
    pub const fn description(self) -> &'static str {
        match self {
            ToolName::CheckClearance => {
                "Ask the operator to approve a change; blocks until Accept or Reject is clicked in Slack."
            }
            ToolName::CheckDiff => {
                "Apply an approved change: writes the approved content to its file under the workspace."
            }
            ToolName::AutoCheck => {
                "Ask whether a tool call may run without the operator's approval."
            }
            ToolName::Transmit => {
                "Forward a prompt to the operator; blocks until Continue, Refine or Stop."
            }
            ToolName::Broadcast => "Post a status message in the session's Slack thread.",
            ToolName::Reboot => {
                "Recover the session's state after a restart: status, pending requests, progress."
            }
            ToolName::SwitchFreq => "Set the session's operational mode.",
            ToolName::Standby => {
                "Wait for the operator's instruction; blocks until Resume or Stop, or the timeout."
            }
            ToolName::Ping => {
                "Report liveness and progress; answers the operator's queued steering messages."
            }
        }
    }

    /// The JSON schema of the tool's arguments (an object schema).
    pub fn input_schema(self) -> Value {
        match self {
            ToolName::CheckClearance => json!({
                "type": "object",
                "properties": {
                    "title": { "type": "string" },
                    "description": { "type": "string" },
                    "diff": { "type": "string" },
                    "file_path": { "type": "string" },
                    "risk_level": { "type": "string", "enum": crate::intercom::vocab::RiskLevel::NAMES }
                },
                "required": ["title", "diff", "file_path"]
            }),
            ToolName::CheckDiff => json!({
                "type": "object",
                "properties": {
                    "request_id": { "type": "string" },
                    "force": { "type": "boolean" }
                },
                "required": ["request_id"]
            }),
            ToolName::AutoCheck => json!({
                "type": "object",
                "properties": {
                    "tool_name": { "type": "string" },
                    "context": { "type": "object" }
                },
                "required": ["tool_name"]
            }),
            ToolName::Transmit => json!({
                "type": "object",
                "properties": {
                    "prompt_text": { "type": "string" },
                    "prompt_type": { "type": "string", "enum": ["continuation", "clarification", "error_recovery", "resource_warning"] },
                    "elapsed_seconds": { "type": "integer", "minimum": 0 },
                    "actions_taken": { "type": "integer", "minimum": 0 }
                },
                "required": ["prompt_text"]
            }),
            ToolName::Broadcast => json!({
                "type": "object",
                "properties": {
                    "message": { "type": "string" },
                    "level": { "type": "string", "enum": super::args::Level::NAMES },
                    "thread_ts": { "type": "string" }
                },
                "required": ["message"]
            }),
            ToolName::Reboot => json!({
                "type": "object",
                "properties": { "session_id": { "type": "string" } }
            }),
            ToolName::SwitchFreq => json!({
                "type": "object",
                "properties": {
                    "mode": { "type": "string", "enum": crate::intercom::vocab::WorkMode::NAMES }
                },
                "required": ["mode"]
            }),
            ToolName::Standby => json!({
                "type": "object",
                "properties": {
                    "message": { "type": "string" },
                    "timeout_seconds": { "type": "integer", "minimum": 0 }
                }
            }),
            ToolName::Ping => json!({
                "type": "object",
                "properties": {
                    "status_message": { "type": "string" },
                    "progress_snapshot": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "label": { "type": "string" },
                                "status": { "type": "string", "enum": ["done", "in_progress", "pending"] }
                            },
                            "required": ["label", "status"]
                        }
                    }
                }
            }),
        }
    }

    /// The tool as `tools/list` gives it.
    pub fn tool(self) -> Tool {
        let schema = match self.input_schema() {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Tool::new(self.as_str(), self.description(), schema)
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_tool_and_no_other() {
        for tool in ToolName::ALL {
            assert_eq!(ToolName::from_name(tool.as_str()), Some(tool));
            assert_eq!(tool.input_schema()["type"], "object");
        }
        let mut names: Vec<_> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 9);
        assert_eq!(ToolName::from_name("Check_Clearance"), None);
        assert_eq!(ToolName::from_name(""), None);
    }
}
