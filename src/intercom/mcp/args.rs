//! The tools' arguments as typed structs. Every field is an [`Arg`], which records whether the
//! call left it out, gave it with another JSON type, or gave it right, so each tool keeps its
//! answers: a required string left out or mistyped is refused (`invalid arguments: missing
//! field title`, `… title must be a string`), an optional one of another type counts as left
//! out, and fields no tool knows are ignored (the matrix asks no refusal of them).

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::{Map, Value};

use super::tools::ToolName;
use crate::intercom::vocab::{RiskLevel, WorkMode};

/// One argument as the call gave it.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Arg<T> {
    /// Not in the call.
    #[default]
    Missing,
    /// In the call, but not a `T`: the value given.
    Wrong(Value),
    /// In the call as a `T`.
    Given(T),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Arg<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(match T::deserialize(&value) {
            Ok(typed) => Arg::Given(typed),
            Err(_) => Arg::Wrong(value),
        })
    }
}

impl<T> Arg<T> {
    /// The value when given right; a mistyped one counts as left out.
    pub fn given(self) -> Option<T> {
        match self {
            Arg::Given(value) => Some(value),
            Arg::Missing | Arg::Wrong(_) => None,
        }
    }
}

impl Arg<String> {
    /// A required string.
    pub fn required(self, key: &str) -> Result<String, String> {
        match self {
            Arg::Given(value) => Ok(value),
            Arg::Wrong(_) => Err(format!("invalid arguments: {key} must be a string")),
            Arg::Missing => Err(format!("invalid arguments: missing field {key}")),
        }
    }
}

/// A value of a closed set: a string outside the set is refused, naming it; `absent` answers
/// for a value left out, and for one that is no string when `lenient`.
fn member<T>(arg: Arg<T>, key: &str, absent: Option<T>, lenient: bool) -> Result<T, String> {
    match (arg, absent) {
        (Arg::Given(value), _) => Ok(value),
        (Arg::Wrong(Value::String(text)), _) => Err(format!("invalid arguments: {key} {text:?}")),
        (Arg::Wrong(_), Some(absent)) if lenient => Ok(absent),
        (Arg::Wrong(_), _) => Err(format!("invalid arguments: {key} must be a string")),
        (Arg::Missing, Some(absent)) => Ok(absent),
        (Arg::Missing, None) => Err(format!("invalid arguments: missing field {key}")),
    }
}

/// `broadcast`'s level; another string, or none, is `info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Info,
    Success,
    Warning,
    Error,
}

impl Level {
    /// The levels in the tool's schema.
    pub const NAMES: &'static [&'static str] = &["info", "success", "warning", "error"];

    /// The icon a post of this level starts with.
    pub fn icon(self) -> &'static str {
        match self {
            Level::Info => "ℹ️",
            Level::Success => "✅",
            Level::Warning => "⚠️",
            Level::Error => "❌",
        }
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct CheckClearanceArgs {
    title: Arg<String>,
    description: Arg<String>,
    diff: Arg<String>,
    file_path: Arg<String>,
    risk_level: Arg<RiskLevel>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct CheckDiffArgs {
    request_id: Arg<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct AutoCheckArgs {
    tool_name: Arg<String>,
    context: Arg<Map<String, Value>>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct TransmitArgs {
    prompt_text: Arg<String>,
    prompt_type: Arg<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct BroadcastArgs {
    message: Arg<String>,
    level: Arg<Level>,
    thread_ts: Arg<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct RebootArgs {
    session_id: Arg<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct SwitchFreqArgs {
    mode: Arg<WorkMode>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct StandbyArgs {
    message: Arg<String>,
    timeout_seconds: Arg<u64>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct PingArgs {
    progress_snapshot: Arg<Value>,
}

/// A tool call with its arguments checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    CheckClearance {
        title: String,
        description: Option<String>,
        diff: String,
        file_path: String,
        risk_level: RiskLevel,
    },
    CheckDiff {
        request_id: String,
    },
    AutoCheck {
        tool_name: String,
        context: Option<Map<String, Value>>,
    },
    Transmit {
        prompt_text: String,
        /// `continuation` when left out; another text is shown as given.
        prompt_type: String,
    },
    Broadcast {
        message: String,
        level: Level,
        thread_ts: Option<String>,
    },
    Reboot {
        session_id: Option<String>,
    },
    SwitchFreq {
        mode: WorkMode,
    },
    Standby {
        message: Option<String>,
        /// 0 (no timeout) when left out or not a whole number of seconds.
        timeout_seconds: u64,
    },
    Ping {
        /// Any JSON value, `null` included.
        progress_snapshot: Option<Value>,
    },
}

fn typed<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(args))
        .map_err(|error| format!("invalid arguments: {error}"))
}

impl Call {
    /// Checks `args` for `tool`; the error is the text the call is answered with.
    pub fn parse(tool: ToolName, args: Map<String, Value>) -> Result<Call, String> {
        Ok(match tool {
            ToolName::CheckClearance => {
                let args: CheckClearanceArgs = typed(args)?;
                Call::CheckClearance {
                    title: args.title.required("title")?,
                    diff: args.diff.required("diff")?,
                    file_path: args.file_path.required("file_path")?,
                    description: args.description.given(),
                    risk_level: member(args.risk_level, "risk_level", Some(RiskLevel::Low), true)?,
                }
            }
            ToolName::CheckDiff => {
                let args: CheckDiffArgs = typed(args)?;
                Call::CheckDiff {
                    request_id: args.request_id.required("request_id")?,
                }
            }
            ToolName::AutoCheck => {
                let args: AutoCheckArgs = typed(args)?;
                let tool_name = args.tool_name.required("tool_name")?;
                let context = match args.context {
                    Arg::Given(context) => Some(context),
                    Arg::Missing => None,
                    Arg::Wrong(_) => {
                        return Err("invalid arguments: context must be an object".into());
                    }
                };
                Call::AutoCheck { tool_name, context }
            }
            ToolName::Transmit => {
                let args: TransmitArgs = typed(args)?;
                Call::Transmit {
                    prompt_text: args.prompt_text.required("prompt_text")?,
                    prompt_type: args
                        .prompt_type
                        .given()
                        .unwrap_or_else(|| "continuation".into()),
                }
            }
            ToolName::Broadcast => {
                let args: BroadcastArgs = typed(args)?;
                Call::Broadcast {
                    message: args.message.required("message")?,
                    level: args.level.given().unwrap_or(Level::Info),
                    thread_ts: args.thread_ts.given(),
                }
            }
            ToolName::Reboot => {
                let args: RebootArgs = typed(args)?;
                Call::Reboot {
                    session_id: args.session_id.given(),
                }
            }
            ToolName::SwitchFreq => {
                let args: SwitchFreqArgs = typed(args)?;
                Call::SwitchFreq {
                    mode: member(args.mode, "mode", None, false)?,
                }
            }
            ToolName::Standby => {
                let args: StandbyArgs = typed(args)?;
                Call::Standby {
                    message: args.message.given(),
                    timeout_seconds: args.timeout_seconds.given().unwrap_or(0),
                }
            }
            ToolName::Ping => {
                let args: PingArgs = typed(args)?;
                Call::Ping {
                    progress_snapshot: match args.progress_snapshot {
                        Arg::Given(snapshot) => Some(snapshot),
                        Arg::Missing | Arg::Wrong(_) => None,
                    },
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(tool: ToolName, args: Value) -> Result<Call, String> {
        let Value::Object(args) = args else {
            panic!("arguments are an object")
        };
        Call::parse(tool, args)
    }

    fn refused(tool: ToolName, args: Value) -> String {
        parse(tool, args).expect_err("refused")
    }

    #[test]
    fn a_required_string_left_out_or_mistyped_is_refused_in_the_schema_order() {
        let clearance = ToolName::CheckClearance;
        assert_eq!(
            refused(clearance, json!({})),
            "invalid arguments: missing field title"
        );
        assert_eq!(
            refused(clearance, json!({ "title": 5, "diff": 1 })),
            "invalid arguments: title must be a string"
        );
        assert_eq!(
            refused(
                clearance,
                json!({ "title": "t", "diff": null, "file_path": 2 })
            ),
            "invalid arguments: diff must be a string"
        );
        assert_eq!(
            refused(clearance, json!({ "title": "t", "diff": "d" })),
            "invalid arguments: missing field file_path"
        );
        assert_eq!(
            refused(ToolName::CheckDiff, json!({ "request_id": ["r"] })),
            "invalid arguments: request_id must be a string"
        );
        assert_eq!(
            refused(ToolName::AutoCheck, json!({})),
            "invalid arguments: missing field tool_name"
        );
        assert_eq!(
            refused(ToolName::Transmit, json!({ "prompt_text": true })),
            "invalid arguments: prompt_text must be a string"
        );
        assert_eq!(
            refused(ToolName::Broadcast, json!({ "message": {} })),
            "invalid arguments: message must be a string"
        );
    }

    #[test]
    fn closed_sets_refuse_an_unknown_string_and_name_it() {
        let base = json!({ "title": "t", "diff": "d", "file_path": "f" });
        let with = |risk: Value| {
            let mut args = base.clone();
            args["risk_level"] = risk;
            args
        };
        assert_eq!(
            refused(ToolName::CheckClearance, with(json!("severe"))),
            "invalid arguments: risk_level \"severe\""
        );
        let risk = |args: Value| match parse(ToolName::CheckClearance, args) {
            Ok(Call::CheckClearance { risk_level, .. }) => risk_level,
            other => panic!("{other:?}"),
        };
        assert_eq!(risk(base.clone()), RiskLevel::Low);
        assert_eq!(risk(with(json!(3))), RiskLevel::Low, "no string: low");
        assert_eq!(risk(with(json!("critical"))), RiskLevel::Critical);
        assert_eq!(
            refused(ToolName::SwitchFreq, json!({ "mode": "away" })),
            "invalid arguments: mode \"away\""
        );
        assert_eq!(
            refused(ToolName::SwitchFreq, json!({ "mode": 1 })),
            "invalid arguments: mode must be a string"
        );
        assert_eq!(
            refused(ToolName::SwitchFreq, json!({})),
            "invalid arguments: missing field mode"
        );
        assert_eq!(
            parse(ToolName::SwitchFreq, json!({ "mode": "hybrid" })),
            Ok(Call::SwitchFreq {
                mode: WorkMode::Hybrid
            })
        );
    }

    #[test]
    fn optional_fields_of_another_type_count_as_left_out_and_extra_fields_are_ignored() {
        assert_eq!(
            parse(
                ToolName::CheckClearance,
                json!({ "title": "t", "diff": "d", "file_path": "f", "description": 4, "extra": 1 })
            ),
            Ok(Call::CheckClearance {
                title: "t".into(),
                description: None,
                diff: "d".into(),
                file_path: "f".into(),
                risk_level: RiskLevel::Low,
            })
        );
        assert_eq!(
            refused(
                ToolName::AutoCheck,
                json!({ "tool_name": "x", "context": null })
            ),
            "invalid arguments: context must be an object"
        );
        assert_eq!(
            parse(
                ToolName::Transmit,
                json!({ "prompt_text": "p", "prompt_type": "other" })
            ),
            Ok(Call::Transmit {
                prompt_text: "p".into(),
                prompt_type: "other".into()
            })
        );
        assert_eq!(
            parse(
                ToolName::Transmit,
                json!({ "prompt_text": "p", "prompt_type": 1 })
            ),
            Ok(Call::Transmit {
                prompt_text: "p".into(),
                prompt_type: "continuation".into()
            })
        );
        assert_eq!(
            parse(
                ToolName::Broadcast,
                json!({ "message": "m", "level": "loud" })
            ),
            Ok(Call::Broadcast {
                message: "m".into(),
                level: Level::Info,
                thread_ts: None
            })
        );
        for (timeout, expected) in [
            (json!(5), 5),
            (json!(-1), 0),
            (json!(2.5), 0),
            (json!("9"), 0),
        ] {
            assert_eq!(
                parse(ToolName::Standby, json!({ "timeout_seconds": timeout })),
                Ok(Call::Standby {
                    message: None,
                    timeout_seconds: expected
                })
            );
        }
        assert_eq!(
            parse(ToolName::Ping, json!({ "progress_snapshot": null })),
            Ok(Call::Ping {
                progress_snapshot: Some(Value::Null)
            })
        );
        assert_eq!(
            parse(ToolName::Ping, json!({})),
            Ok(Call::Ping {
                progress_snapshot: None
            })
        );
    }
}
