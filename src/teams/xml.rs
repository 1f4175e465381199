//! The `<teammate-message>` block of context injection (E-TEAM-08): one element per message, in
//! arrival order, every attribute value escaped (`& < > " '`), the content escaped (`& < >`).

use super::mailbox::Message;

/// Escapes text for an attribute value in double quotes.
pub fn escape_attribute(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes element content.
pub fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// One `<teammate-message>` element; `teammate_id` is the sender's member name.
pub fn element(teammate_id: &str, message: &Message) -> String {
    let mut start = format!(
        "<teammate-message teammate_id=\"{}\" type=\"{}\"",
        escape_attribute(teammate_id),
        escape_attribute(message.kind.as_str())
    );
    let mut attribute = |name: &str, value: &str| {
        start.push_str(&format!(" {name}=\"{}\"", escape_attribute(value)));
    };
    if let Some(summary) = &message.summary {
        attribute("summary", summary);
    }
    if let Some(request_id) = &message.request_id {
        attribute("request_id", request_id);
    }
    if let Some(approve) = message.approve {
        attribute("approve", if approve { "true" } else { "false" });
    }
    if let Some(reason) = &message.reason {
        attribute("reason", reason);
    }
    format!(
        "{start}>\n{}\n</teammate-message>\n",
        escape_text(&message.content)
    )
}
