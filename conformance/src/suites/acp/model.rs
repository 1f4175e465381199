//! The fake model of an ACP target (`[suites.acp.model]`): for each agent a row starts, the
//! runner starts `ski-fake-model` in-process, scripted for the agent variant the row asked for,
//! writes the section's `files` (a provider in the agent's own config) and hands the agent its
//! URL and key through the section's `env` and the `{model_*}` placeholders.
//!
//! What each variant's script does:
//! - the plain agent: every model request is answered with text, so a turn ends `end_turn`;
//!   a prompt that asks the agent to use its tools ([`TOOLS_PROMPT`]) first gets a call of its
//!   `read` tool, so a client that offered no `fs` sees whether the agent calls `fs/*` anyway;
//! - `hold`: every request gets a slow stream (about 12 s of text in 60 pieces, shorter than a row waits for an answer), a turn
//!   that runs until it is cancelled mid-stream; [`wait_streaming`] waits until it has begun;
//! - `fs`: a call of the `read` tool on a file of the scenario, then text;
//! - `terminal`: a call of the `run` tool (a short command), then text.
//!
//! A scripted tool call is taken only by a model request that offers that tool: an agent's side
//! requests (Claude Code's and opencode's session title) offer none and get text.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use ski_mocks::model::{Config, FakeModel, Outcome, Script, Turn};

use super::agent::Variant;
use crate::check::CheckError;
use crate::context::Ctx;
use crate::target::{ModelTool, SuiteTarget};

/// What a plain prompt turn's model answers.
pub const ANSWER: &str = "Done.";

/// The prompt text after which the plain agent's model calls its `read` tool.
pub const TOOLS_PROMPT: &str = "use your tools";

/// The file the `read` tool is called on, in the scenario's temp dir (the agent's cwd).
pub const READ_FILE: &str = "ski-model-notes.txt";

/// What that file holds.
pub const READ_TEXT: &str = "notes kept for the conformance run\n";

/// The command the `run` tool is called with.
pub const RUN_COMMAND: &str = "echo ski-model-ran";

/// How a held turn's stream is paced: pieces and the wait before each (12 s in all, so an agent
/// that ignores a cancel still answers within the 20 s a row waits for the answer).
const HOLD_PIECES: usize = 60;
const HOLD_DELAY: Duration = Duration::from_millis(200);

/// How many requests of a held agent get a slow stream (its side requests take some).
const HOLD_TURNS: usize = 16;

/// Starts the fake model for an agent of `variant` when the target's section asks for one,
/// writes its files, and answers the placeholders that point the agent at it (none without a
/// model section).
pub async fn prepare(ctx: &Ctx, variant: Variant) -> Result<Vec<(String, String)>, CheckError> {
    let Some(setting) = ctx.section().model.clone() else {
        return Ok(Vec::new());
    };
    let script = script_for(ctx, variant, &setting.tools)?;
    let model = FakeModel::start(Config::with_script(script))
        .await
        .map_err(|e| CheckError::Harness(format!("the fake model did not start: {e}")))?;
    let vars = vec![
        ("model_openai_url".to_owned(), model.openai_base_url()),
        ("model_anthropic_url".to_owned(), model.anthropic_base_url()),
        (
            "model_key".to_owned(),
            model.api_keys().first().cloned().unwrap_or_default(),
        ),
    ];
    let name = if variant.is_empty() { "agent" } else { variant };
    ctx.keep_model(
        format!("the {name} variant ({} API)", setting.api),
        Arc::new(model),
    );
    let extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let home = ctx.render("{home}", &extra)?;
    for (path, content) in &setting.files {
        let path = ctx.render(path, &extra)?;
        let content = ctx.render(content, &extra)?;
        let path = Path::new(&home).join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                CheckError::Harness(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        std::fs::write(&path, content)
            .map_err(|e| CheckError::Harness(format!("cannot write {}: {e}", path.display())))?;
        ctx.note(format!(
            "wrote the agent's model configuration {}",
            path.display()
        ));
    }
    Ok(vars)
}

/// The script of `variant`.
fn script_for(
    ctx: &Ctx,
    variant: Variant,
    tools: &BTreeMap<String, ModelTool>,
) -> Result<Script, CheckError> {
    let mut script = Script::new(Vec::new());
    script.exhausted_text = ANSWER.to_owned();
    match variant {
        super::agent::HOLD => {
            let text = "still thinking ".repeat(HOLD_PIECES);
            // An agent that offers its tools (the section maps them) asks side questions
            // without them, a session's title say: those get the plain answer, and only the
            // turn's own requests are held.
            script.turns = (0..HOLD_TURNS)
                .map(|_| {
                    let held = Turn::text(text.clone()).paced(HOLD_PIECES, HOLD_DELAY);
                    if tools.is_empty() {
                        held
                    } else {
                        held.when_tools_offered()
                    }
                })
                .collect();
        }
        "fs" => {
            if let Some(call) = read_call(ctx, tools)? {
                script.turns.push(call);
            }
        }
        "terminal" => {
            if let Some(tool) = tools.get("run") {
                script.turns.push(
                    Turn::tool_call(&tool.name, arguments(tool, &[("command", RUN_COMMAND)]))
                        .when_tools_offered(),
                );
            }
        }
        _ => {
            if let Some(call) = read_call(ctx, tools)? {
                script.turns.push(call.when_user_says(TOOLS_PROMPT));
            }
        }
    }
    Ok(script)
}

/// A call of the `read` tool on [`READ_FILE`], written into the temp dir first; none when the
/// section maps no `read` tool.
fn read_call(ctx: &Ctx, tools: &BTreeMap<String, ModelTool>) -> Result<Option<Turn>, CheckError> {
    let Some(tool) = tools.get("read") else {
        return Ok(None);
    };
    let path = ctx.temp_dir().join(READ_FILE);
    std::fs::write(&path, READ_TEXT)
        .map_err(|e| CheckError::Harness(format!("cannot write {}: {e}", path.display())))?;
    let path = path.display().to_string();
    Ok(Some(
        Turn::tool_call(
            &tool.name,
            arguments(tool, &[("path", &path), ("content", READ_TEXT)]),
        )
        .when_tools_offered(),
    ))
}

/// The tool's arguments with `{path}`, `{content}` and `{command}` filled in.
fn arguments(tool: &ModelTool, values: &[(&str, &str)]) -> Value {
    let mut object = serde_json::Map::new();
    for (name, template) in &tool.arguments {
        let mut value = template.clone();
        for (key, text) in values {
            value = value.replace(&format!("{{{key}}}"), text);
        }
        object.insert(name.clone(), Value::String(value));
    }
    Value::Object(object)
}

/// Waits until the newest fake model of the scenario is streaming a scripted answer (a request
/// in progress that took one of the script's turns, not a side question answered plainly), so a
/// held turn is cancelled mid-stream; at once without a model. A model that was never asked
/// within the row's set-up allowance is left to the row's own judgement.
pub async fn wait_streaming(ctx: &Ctx) {
    let Some(model) = ctx.models().pop() else {
        return;
    };
    let waited = model
        .await_request(
            |r| r.outcome == Outcome::InProgress && r.turn.is_some(),
            ctx.setup_step(),
        )
        .await;
    match waited {
        Ok(request) => ctx.note(format!(
            "the fake model is streaming its answer to request {}: the turn is running",
            request.seq
        )),
        Err(_) => ctx.note("the fake model got no request in time: the turn is cancelled as is"),
    }
}

/// The section's environment with the model's variables added (their values still templates):
/// what discovery looks at to choose an auth method whose key the model section sets.
pub fn env_with_model(section: &SuiteTarget) -> BTreeMap<String, String> {
    let mut env = section.env.clone();
    if let Some(model) = &section.model {
        for (key, value) in &model.env {
            env.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    env
}

/// One sentence on the fake model of a section and how the agent is pointed at it; none
/// without a model section.
pub fn describe(section: &SuiteTarget) -> Option<String> {
    let model = section.model.as_ref()?;
    let mut how = Vec::new();
    if !model.env.is_empty() {
        how.push(format!(
            "environment {}",
            model.env.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    if !model.files.is_empty() {
        how.push(format!(
            "config {} in the agent's HOME",
            model.files.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    if how.is_empty() {
        how.push("the {model_*} placeholders of its command".to_owned());
    }
    let capabilities = model.capabilities();
    Some(format!(
        "started a fake model (ski-fake-model, {} API) for each agent and pointed the agent at it \
         through {}; declared {} with it",
        model.api,
        how.join(" and "),
        capabilities.into_iter().collect::<Vec<_>>().join(", ")
    ))
}
