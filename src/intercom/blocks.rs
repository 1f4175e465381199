//! The Block Kit the server posts: approval, prompt and standby messages with their buttons, the
//! decision that replaces them, and the modal that asks for a reason. Buttons carry the request
//! id as their value; the thread they sit in names the session.
//!
//! What an agent wrote is shown literally: every agent text placed in a message's text or in a
//! block's text goes through [`escape`], so it cannot mention `@channel` or anyone, or hide a link
//! behind a label. Texts ski writes itself (the operator's `<@U…>` in a decision) are not escaped.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::store::NewApproval;

/// Action ids of the buttons.
pub mod action {
    pub const APPROVE_ACCEPT: &str = "approve_accept";
    pub const APPROVE_REJECT: &str = "approve_reject";
    pub const PROMPT_CONTINUE: &str = "prompt_continue";
    pub const PROMPT_REFINE: &str = "prompt_refine";
    pub const PROMPT_STOP: &str = "prompt_stop";
    pub const WAIT_RESUME: &str = "wait_resume";
    pub const WAIT_STOP: &str = "wait_stop";
    pub const STALL_TERMINATE: &str = "stall_terminate";
    pub const STALL_RESTART: &str = "stall_restart";
}

/// The modal's input: block id and action id.
pub const INSTRUCTION_BLOCK: &str = "instruction_block";
pub const INSTRUCTION_ACTION: &str = "instruction_text";

/// Slack's limit on a section's text; longer texts are cut.
const SECTION_LIMIT: usize = 2900;

/// `text` as Slack shows it literally: `&`, `<` and `>` become `&amp;`, `&lt;` and `&gt;`, as
/// Slack's formatting rules ask of text that is not meant as markup.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.contains(['&', '<', '>']) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            other => escaped.push(other),
        }
    }
    Cow::Owned(escaped)
}

/// `text` cut to `limit` bytes on a character boundary, never inside an escape such as `&amp;`.
fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(amp) = text[..end].rfind('&')
        && end - amp < "&amp;".len()
        && !text[amp..end].contains(';')
    {
        end = amp;
    }
    format!("{}…", &text[..end])
}

fn section(text: &str) -> Value {
    json!({ "type": "section", "text": { "type": "mrkdwn", "text": cut(text, SECTION_LIMIT) } })
}

fn button(action_id: &str, label: &str, value: &str, style: Option<&str>) -> Value {
    let mut button = json!({
        "type": "button",
        "action_id": action_id,
        "text": { "type": "plain_text", "text": label },
        "value": value,
    });
    if let Some(style) = style {
        button["style"] = json!(style);
    }
    button
}

/// The stall escalation with Terminate and Restart (the value is the session id).
pub fn stalled(session_id: &str, text: &str) -> Value {
    json!([
        section(text),
        { "type": "actions", "block_id": "stall_actions", "elements": [
            button(action::STALL_TERMINATE, "Terminate", session_id, Some("danger")),
            button(action::STALL_RESTART, "Restart", session_id, Some("primary")),
        ]},
    ])
}

/// The approval request with Accept and Reject; every text but the button values is the agent's,
/// escaped.
pub fn approval(
    request_id: &str,
    title: &str,
    file_path: &str,
    risk_level: &str,
    description: Option<&str>,
    diff: &str,
) -> Value {
    let mut summary = format!(
        "*Approval request* `{}`: {}\nFile: `{}` · risk: *{}*",
        escape(request_id),
        escape(title),
        escape(file_path),
        escape(risk_level)
    );
    if let Some(description) = description.filter(|d| !d.is_empty()) {
        summary.push('\n');
        summary.push_str(&escape(description));
    }
    json!([
        section(&summary),
        section(&format!("```{}```", cut(&escape(diff), SECTION_LIMIT - 10))),
        {
            "type": "actions",
            "block_id": format!("approval_{request_id}"),
            "elements": [
                button(action::APPROVE_ACCEPT, "Accept", request_id, Some("primary")),
                button(action::APPROVE_REJECT, "Reject", request_id, Some("danger")),
            ]
        }
    ])
}

/// The message asking the operator about `approval`: its text and its blocks ([`approval`]).
pub fn approval_request(approval: &NewApproval<'_>) -> (String, Value) {
    let text = format!(
        "📋 Approval request `{}`: {}",
        escape(approval.request_id),
        escape(approval.title)
    );
    let blocks = self::approval(
        approval.request_id,
        approval.title,
        approval.file_path,
        approval.risk_level.as_str(),
        approval.description,
        approval.diff,
    );
    (text, blocks)
}

/// The message forwarding an agent's prompt: its text and its blocks ([`prompt`]).
pub fn prompt_message(prompt_id: &str, prompt_type: &str, text: &str) -> (String, Value) {
    (
        format!("💬 Agent prompt: {}", escape(text)),
        prompt(prompt_id, prompt_type, text),
    )
}

/// A forwarded prompt with Continue, Refine and Stop; the agent's texts escaped.
pub fn prompt(prompt_id: &str, prompt_type: &str, text: &str) -> Value {
    json!([
        section(&format!(
            "*Agent prompt* ({}) `{}`\n{}",
            escape(prompt_type),
            escape(prompt_id),
            escape(text)
        )),
        {
            "type": "actions",
            "block_id": format!("prompt_{prompt_id}"),
            "elements": [
                button(action::PROMPT_CONTINUE, "Continue", prompt_id, Some("primary")),
                button(action::PROMPT_REFINE, "Refine", prompt_id, None),
                button(action::PROMPT_STOP, "Stop", prompt_id, Some("danger")),
            ]
        }
    ])
}

/// The message of an agent on standby: its text and its blocks ([`standby`]).
pub fn standby_message(session_id: &str, message: &str) -> (String, Value) {
    (
        format!("⏸️ {}", escape(message)),
        standby(session_id, message),
    )
}

/// An agent on standby with Resume and Stop; the agent's message escaped.
pub fn standby(session_id: &str, message: &str) -> Value {
    json!([
        section(&format!("*Agent on standby*\n{}", escape(message))),
        {
            "type": "actions",
            "block_id": format!("wait_{session_id}"),
            "elements": [
                button(action::WAIT_RESUME, "Resume", session_id, Some("primary")),
                button(action::WAIT_STOP, "Stop", session_id, Some("danger")),
            ]
        }
    ])
}

/// What replaces the buttons once decided.
pub fn decided(text: &str) -> Value {
    json!([section(text)])
}

/// The modal asking why; `callback_id` says what it answers, `private_metadata` the thread.
pub fn reason_modal(callback_id: &str, title: &str, label: &str, private_metadata: &str) -> Value {
    json!({
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": private_metadata,
        "title": { "type": "plain_text", "text": cut(title, 24) },
        "submit": { "type": "plain_text", "text": "Submit" },
        "close": { "type": "plain_text", "text": "Cancel" },
        "blocks": [{
            "type": "input",
            "block_id": INSTRUCTION_BLOCK,
            "label": { "type": "plain_text", "text": label },
            "element": {
                "type": "plain_text_input",
                "action_id": INSTRUCTION_ACTION,
                "multiline": true
            }
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_text_is_escaped_and_never_cut_inside_an_escape() {
        assert_eq!(
            escape("<!here> & <@U1|x>"),
            "&lt;!here&gt; &amp; &lt;@U1|x&gt;"
        );
        assert!(matches!(escape("plain"), Cow::Borrowed("plain")));
        let blocks = approval("r", "t", "f", "low", None, &"&".repeat(4000));
        let diff = blocks[1]["text"]["text"].as_str().expect("text");
        assert!(diff.trim_end_matches("…```").ends_with("&amp;"), "{diff}");
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        let text = "é".repeat(4000);
        let blocks = approval("req-001", "t", "f", "low", None, &text);
        let diff = blocks[1]["text"]["text"].as_str().expect("text");
        assert!(diff.len() < 3000);
        assert_eq!(blocks[2]["elements"][0]["value"], "req-001");
    }
}
